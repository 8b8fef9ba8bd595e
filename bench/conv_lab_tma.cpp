// conv_lab's --tma and --sparse tables (conv_lab.cpp's header comment says what they time).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/conv_lab.h"
#include "bench/event_timing.h"
#include "graph/passes_sparsity.h"
#include "kernels/cuda/conv/space_to_depth.h"
#include "kernels/cuda/conv/tma_conv.h"
#include "kernels/cuda/conv/tma_sparse.h"
#include "kernels/cuda/conv/wgmma.h"
#include "kernels/cuda/conv/wgmma_sparse.h"
#include "kernels/cuda/cuda_check.h"

namespace conv_lab {
namespace {

// conv1's rearrangement from the NCHW fp32 input into x' (the --tma table's s2d rows): one row
// with the bandwidth of the fp32 read and the fp16 x' written.  y: x' of the batch.
void time_s2d_rearrangement(const std::string& name, const cnnrt::cuda::SpaceToDepthShape& shape,
                            int batch, int iters, void* y, cudaStream_t stream) {
  const size_t in_count = size_t(batch) * shape.in_c * shape.in_h * shape.in_w;
  std::vector<float> host(in_count);
  std::mt19937 rng(777);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  float* x[2];
  for (float*& p : x) {
    for (float& v : host) v = dist(rng);
    CNNRT_CUDA_CHECK(cudaMalloc(&p, in_count * sizeof(float)));
    CNNRT_CUDA_CHECK(cudaMemcpy(p, host.data(), in_count * sizeof(float), cudaMemcpyHostToDevice));
  }
  const double ms = median_event_ms(
      [&](int i) { cnnrt::cuda::space_to_depth_nchw_fp32(x[i % 2], y, shape, batch, stream); },
      iters, stream);
  const double bytes =
      double(in_count) * sizeof(float) + double(cnnrt::cuda::space_to_depth_bytes(shape, batch));
  std::printf(
      "%-16s %5d  %-58s %9.4f ms %8.1f GB/s (fp32 read + x' written)\n", name.c_str(), batch,
      ("space_to_depth_nchw_fp32 -> " + std::to_string(shape.out_c_stride()) + " ch").c_str(), ms,
      bytes / (ms * 1e-3) / 1e9);
  std::fflush(stdout);
  for (float* p : x) CNNRT_CUDA_CHECK(cudaFree(p));
}

// A pruned row's alternatives to the 64-byte rows (see the header comment): the conv on
// 128-byte rows over in_c rounded up to 64 (stored_in_c = the real channels: the map reads the
// rest as zeros, their weights are zero) and conv_fp16_wgmma's plan.
void time_pruned_alternatives(const Layer& l, const ConvShape& s, const std::vector<float>& w,
                              const std::vector<float>& b, int batch, void* const* x, void* y,
                              double flops, int iters, cudaStream_t stream) {
  using cnnrt::cuda::ConvFp16Tma;
  ConvShape padded = s;
  padded.in_c = (s.in_c + 63) / 64 * 64;
  padded.derive();
  const int taps = l.k * l.k;
  std::vector<float> w_padded(size_t(l.oc) * padded.in_c * taps, 0.f);
  for (int o = 0; o < l.oc; ++o)
    for (int c = 0; c < l.c; ++c)
      std::copy_n(&w[(size_t(o) * l.c + c) * taps], taps,
                  &w_padded[(size_t(o) * padded.in_c + c) * taps]);
  const ConvFp16Tma wide(padded, w_padded.data(), b.data(), l.c);
  const cnnrt::cuda::ConvFp16TmaPlan p = wide.plan(batch);
  const cnnrt::cuda::ConvFp16TmaInput in[2] = {wide.encode_input(x[0], batch),
                                               wide.encode_input(x[1], batch)};
  void* ws = nullptr;
  CNNRT_CUDA_CHECK(cudaMalloc(&ws, std::max<size_t>(p.workspace_bytes, 256)));
  double ms = median_event_ms(
      [&](int i) { wide.forward(p.variant, in[i % 2], nullptr, y, stream, ws); }, iters, stream);
  CNNRT_CUDA_CHECK(cudaFree(ws));
  print_row(l.name, batch,
            "conv_fp16_tma " + p.name + " (in_c padded to " + std::to_string(padded.in_c) + ")", ms,
            flops, "", p.estimated_us);
  if (!cnnrt::cuda::ConvFp16Wgmma::supports(s)) return;
  const cnnrt::cuda::ConvFp16Wgmma wgmma(s, w.data(), b.data());
  const auto wgmma_plan = wgmma.plan(batch);
  ms = median_event_ms([&](int i) { wgmma.forward(wgmma_plan, x[i % 2], y, batch, stream); }, iters,
                       stream);
  print_row(l.name, batch, "conv_fp16_wgmma " + wgmma_plan.name, ms, flops, "");
}

}  // namespace

// The --tma table (see the header comment).
void run_tma_lab(int iters, cudaStream_t stream) {
  using cnnrt::cuda::ConvFp16Tma;
  using cnnrt::cuda::ConvFp16TmaInput;
  using cnnrt::cuda::ConvFp16TmaPlan;
  if (!ConvFp16Tma::device_supported()) {
    std::printf("conv_fp16_tma: not available on this device/build\n");
    return;
  }
  std::mt19937 rng(24680);
  const std::vector<std::string>& tiles = ConvFp16Tma::tile_names();
  std::vector<Layer> layers(std::begin(kLayers), std::end(kLayers));
  layers.insert(layers.end(), std::begin(kPrunedLayers), std::end(kPrunedLayers));
  for (const Layer& l : layers) {
    const ConvShape original = make_shape(l);
    const int fan_in = l.c * l.k * l.k;
    std::vector<float> w, b;
    random_weights(l, rng, &w, &b);
    // conv1: conv_fp16_s2d's TMA form, as the entry runs it: the stride-1 conv over 64 channels
    // reading x' at its 48 (the map's zero fill supplies the rest; stored_in_c).
    ConvShape s = original;
    std::optional<cnnrt::cuda::SpaceToDepthConv> s2d;
    int stored_c = 0;  // x''s channel stride (0: the conv's in_c)
    if (!ConvFp16Tma::supports(s)) {
      s2d = cnnrt::cuda::space_to_depth_conv(original, 64);
      const std::optional<cnnrt::cuda::SpaceToDepthConv> narrow =
          cnnrt::cuda::space_to_depth_conv(original);
      if (!s2d || !narrow || !ConvFp16Tma::supports(s2d->transformed)) continue;
      s = s2d->transformed;
      w = cnnrt::cuda::space_to_depth_weights(*s2d, w.data());
      s2d->rearrange = narrow->rearrange;
      stored_c = narrow->rearrange.out_c_stride();
    }
    const std::string name = s2d ? "conv1 s2d+pool" : std::string(l.name);
    const ConvFp16Tma conv(s, w.data(), b.data(), stored_c);
    // conv1's staged form runs the unpooled conv on one tile; the BN = 64 tiles' speeds are
    // guesses, so every tile's unpooled conv gets a row too (model vs measured, conv alone).
    std::optional<ConvFp16Tma> conv_alone;
    ConvShape unpooled = s;
    unpooled.pool.reset();
    unpooled.derive();
    if (s2d) conv_alone.emplace(unpooled, w.data(), b.data(), stored_c);
    for (const int batch : {1, 64, 256}) {
      // in_c % 32 == 0 and out_c % 8 == 0: no padding channels on either side (the s2d form's
      // x' has its own stride, channels past the real ones zero as the rearrangement writes them).
      const int stride = stored_c > 0 ? stored_c : s.in_c;
      const int real_c = s2d ? s2d->rearrange.out_c() : s.in_c;
      const size_t out_count = size_t(batch) * s.out_h * s.out_w * l.oc;
      const InputPair inputs(size_t(batch) * s.in_h * s.in_w * stride, stride, real_c, rng);
      void* const* x = inputs.x;
      void* y;
      CNNRT_CUDA_CHECK(cudaMalloc(&y, out_count * 2));
      const double flops = 2.0 * batch * s.conv_h * s.conv_w * double(l.oc) * fan_in;
      if (s2d) time_s2d_rearrangement(name, s2d->rearrange, batch, iters, x[0], stream);
      std::vector<ConvFp16TmaPlan> plans;
      for (int t = 0; t < int(tiles.size()); ++t)
        if (ConvFp16Tma::supports(s, t)) plans.push_back(conv.plan(batch, t));
      if (s.pool) plans.push_back(conv.plan_staged(batch));
      const ConvFp16TmaPlan pick = conv.plan(batch);
      size_t ws_bytes = 256;
      for (const ConvFp16TmaPlan& p : plans) ws_bytes = std::max(ws_bytes, p.workspace_bytes);
      void* ws = nullptr;
      CNNRT_CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
      double best_ms = 0, pick_ms = 0;
      std::string best_name;
      const ConvFp16TmaInput input0 = conv.encode_input(x[0], batch);
      const ConvFp16TmaInput input1 = conv.encode_input(x[1], batch);
      for (const ConvFp16TmaPlan& p : plans) {
        const double ms = median_event_ms(
            [&](int i) {
              conv.forward(p.variant, i % 2 ? input1 : input0, nullptr, y, stream, ws);
            },
            iters, stream);
        const bool picked = p.variant == pick.variant;
        print_row(name.c_str(), batch, "conv_fp16_tma " + p.name, ms, flops, picked ? "*" : "",
                  p.estimated_us);
        if (best_name.empty() || ms < best_ms) best_ms = ms, best_name = p.name;
        if (picked) pick_ms = ms;
      }
      for (int t = 0; conv_alone && t < int(tiles.size()); ++t) {
        if (!ConvFp16Tma::supports(unpooled, t)) continue;
        const ConvFp16TmaPlan p = conv_alone->plan(batch, t);
        const ConvFp16TmaInput in0 = conv_alone->encode_input(x[0], batch);
        const ConvFp16TmaInput in1 = conv_alone->encode_input(x[1], batch);
        const double ms = median_event_ms(
            [&](int i) { conv_alone->forward(p.variant, i % 2 ? in1 : in0, nullptr, ws, stream); },
            iters, stream);
        print_row(name.c_str(), batch, "conv_fp16_tma " + p.name + " conv alone (staged's)", ms,
                  flops, "", p.estimated_us);
      }
      if (l.c % 64 == 32) time_pruned_alternatives(l, s, w, b, batch, x, y, flops, iters, stream);
      if (pick_ms > 0) {
        const bool fastest = pick_ms <= best_ms * 1.02;
        std::printf("%-16s %5d  model's pick %s (%.4f ms): %s; fastest measured %s (%.4f ms)",
                    name.c_str(), batch, pick.name.c_str(), pick_ms,
                    fastest ? "within 2% of the fastest" : "NOT the fastest", best_name.c_str(),
                    best_ms);
        if (!fastest)
          std::printf(", picking by the model costs %.0f%%", 100 * (pick_ms / best_ms - 1));
        std::printf("\n");
      }
      CNNRT_CUDA_CHECK(cudaFree(ws));
      CNNRT_CUDA_CHECK(cudaFree(y));
    }
  }
}

// The --sparse table (see the header comment).
void run_sparse_lab(int iters, cudaStream_t stream) {
  using cnnrt::cuda::ConvFp16Sparse24;
  using cnnrt::cuda::ConvFp16Sparse24Tma;
  using cnnrt::cuda::ConvFp16Tma;
  if (!ConvFp16Sparse24Tma::device_supported()) {
    std::printf("conv_fp16_sparse24_tma: not available on this device/build\n");
    return;
  }
  std::mt19937 rng(13579);
  const std::vector<std::string>& tiles = ConvFp16Sparse24Tma::tile_names();
  for (const Layer& l : kLayers) {
    const ConvShape s = make_shape(l);
    if (!ConvFp16Sparse24Tma::supports(s)) continue;  // conv1: 3 channels
    const int fan_in = l.c * l.k * l.k;
    std::vector<float> w, b;
    random_weights(l, rng, &w, &b);
    cnnrt::sparsity::prune_magnitude(w.data(), {l.oc, l.c, l.k * l.k});
    const ConvFp16Sparse24Tma sparse_tma(s, w.data(), b.data(), l.name);
    const ConvFp16Sparse24 sparse_wgmma(s, w.data(), b.data(), l.name);
    const ConvFp16Tma dense(s, w.data(), b.data());
    for (const int batch : {64, 256}) {
      const size_t out_count = size_t(batch) * s.out_h * s.out_w * l.oc;
      const InputPair inputs(size_t(batch) * l.h * l.w * l.c, l.c, l.c, rng);
      void* const* x = inputs.x;
      void* y;
      CNNRT_CUDA_CHECK(cudaMalloc(&y, out_count * 2));
      const double flops = 2.0 * batch * s.conv_h * s.conv_w * double(l.oc) * fan_in;
      const auto dense_plan = dense.plan(batch);
      const auto pick = sparse_tma.plan(batch);
      void* ws = nullptr;
      CNNRT_CUDA_CHECK(cudaMalloc(
          &ws, std::max<size_t>({256, dense_plan.workspace_bytes, pick.workspace_bytes})));
      const cnnrt::cuda::ConvFp16TmaInput d_in[2] = {dense.encode_input(x[0], batch),
                                                     dense.encode_input(x[1], batch)};
      const double dense_ms = median_event_ms(
          [&](int i) { dense.forward(dense_plan.variant, d_in[i % 2], nullptr, y, stream, ws); },
          iters, stream);
      print_row(l.name, batch, "conv_fp16_tma (dense) " + dense_plan.name, dense_ms, flops, "",
                dense_plan.estimated_us);
      const auto old_plan = sparse_wgmma.plan(batch);
      const double old_ms = median_event_ms(
          [&](int i) {
            sparse_wgmma.forward(old_plan.variant, x[i % 2], nullptr, y, batch, stream);
          },
          iters, stream);
      print_row(l.name, batch, "conv_fp16_sparse24_wgmma " + old_plan.name, old_ms, flops, "");
      const cnnrt::cuda::ConvFp16TmaInput s_in[2] = {sparse_tma.encode_input(x[0], batch),
                                                     sparse_tma.encode_input(x[1], batch)};
      for (int t = 0; t < int(tiles.size()); ++t) {
        const auto p = sparse_tma.plan(batch, t);
        const double ms = median_event_ms(
            [&](int i) { sparse_tma.forward(p.variant, s_in[i % 2], nullptr, y, stream, ws); },
            iters, stream);
        char label[160];
        std::snprintf(label, sizeof(label), "conv_fp16_sparse24_tma %s (%.2fx dense)",
                      p.name.c_str(), dense_ms / ms);
        print_row(l.name, batch, label, ms, flops, p.variant == pick.variant ? "*" : "",
                  p.estimated_us);
      }
      CNNRT_CUDA_CHECK(cudaFree(ws));
      CNNRT_CUDA_CHECK(cudaFree(y));
    }
  }
}

}  // namespace conv_lab
