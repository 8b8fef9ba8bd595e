// conv_lab's --s8 and --sparse-s8 tables (conv_lab.cpp's header comment says what they time):
// --s8, every tile of the dense conv_int8_tma, each checked to give
// the default tile's output to the byte, and on pooled layers the fused-pool tiles against the
// staged form (conv + maxpool_nhwc_s8); --sparse-s8, the int8 2:4 conv_int8_sparse24_tma (every
// tile) against the dense conv_int8_tma (its plan) on the same pruned, quantised weights.  Both are
// the pre-pool conv alone with its ReLU (a pooled layer's maxpool_nhwc_s8 pass after it is the same
// for both and not timed), int8 NHWC/16 in and out.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/conv_lab.h"
#include "bench/event_timing.h"
#include "graph/passes_sparsity.h"
#include "kernels/cpu/int8_ref.h"
#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/conv/tma_s8.h"
#include "kernels/cuda/conv/tma_sparse_s8.h"
#include "kernels/cuda/cuda_check.h"

namespace conv_lab {
namespace {

// The layer as the int8 entries describe it (NHWC/16, K over the channel stride, int8 out).
cnnrt::cuda::S8Conv s8conv_of(const Layer& l, const ConvShape& s, const cnnrt::ref::Int8Layer& q) {
  cnnrt::cuda::S8Conv c;
  c.in_c = l.c;
  c.in_h = l.h;
  c.in_w = l.w;
  c.in_stride = cnnrt::cuda::padded16(l.c);
  c.out_c = l.oc;
  c.out_h = s.conv_h;
  c.out_w = s.conv_w;
  c.out_stride = cnnrt::cuda::padded16(l.oc);
  c.kh = c.kw = l.k;
  c.stride_h = c.stride_w = l.stride;
  c.pad_h = c.pad_w = l.pad;
  c.k_total = l.k * l.k * c.in_stride;
  c.k_pad = (c.k_total + 63) / 64 * 64;
  c.lo = q.int_bounds.lo;
  c.hi = q.int_bounds.hi;
  return c;
}

// The dense rows [out_c][k_pad] of a quantised layer: k = (r·kw + s)·in_stride + c, zeros
// elsewhere.
std::vector<int8_t> dense_rows(const Layer& l, const cnnrt::cuda::S8Conv& conv,
                               const cnnrt::ref::Int8Layer& q) {
  const int taps = l.k * l.k;
  std::vector<int8_t> rows(size_t(l.oc) * conv.k_pad, 0);
  for (int o = 0; o < l.oc; ++o)
    for (int c = 0; c < l.c; ++c)
      for (int t = 0; t < taps; ++t)
        rows[size_t(o) * conv.k_pad + t * conv.in_stride + c] =
            q.weight[(size_t(o) * l.c + c) * taps + t];
  return rows;
}

// Two random int8 NHWC/16 inputs of `batch` images (padding channels zero), on the device.
void random_inputs(const Layer& l, const cnnrt::cuda::S8Conv& conv, int batch, std::mt19937& rng,
                   void* (&x)[2]) {
  const size_t in_bytes = size_t(batch) * l.h * l.w * conv.in_stride;
  std::vector<int8_t> host(in_bytes, 0);
  std::uniform_int_distribution<int> v(-127, 127);
  for (void*& p : x) {
    for (size_t i = 0; i < in_bytes; ++i)
      host[i] = int(i % conv.in_stride) < l.c ? int8_t(v(rng)) : int8_t(0);
    p = to_device(host.data(), in_bytes);
  }
}

// The layer's dense rows, bias and multipliers on the device, pointed at by the returned S8Conv
// (free_device_layer releases them).
cnnrt::cuda::S8Conv upload_layer(const Layer& l, const ConvShape& s,
                                 const cnnrt::ref::Int8Layer& q) {
  cnnrt::cuda::S8Conv conv = s8conv_of(l, s, q);
  const std::vector<int8_t> rows = dense_rows(l, conv, q);
  conv.weight = static_cast<const int8_t*>(to_device(rows.data(), rows.size()));
  conv.bias =
      static_cast<const int32_t*>(to_device(q.bias.data(), q.bias.size() * sizeof(int32_t)));
  conv.multiplier = static_cast<const float*>(
      to_device(q.multiplier.data(), q.multiplier.size() * sizeof(float)));
  return conv;
}

// A pooled layer at `batch`: the fused-pool instance of every tile that runs the pool fused and
// the staged form (the default tile's conv into a pre-pool buffer, then maxpool_nhwc_s8: what the
// entry runs when staged), each with the cost model's time (tma_s8.cu, "Fused or staged"); every
// fused output is checked against the staged one to the byte.  "*" marks plan(batch)'s pick.
void time_pool_forms(const Layer& l, const ConvShape& s, const cnnrt::cuda::S8Conv& conv, int batch,
                     void* const (&x)[2], double flops, int iters, cudaStream_t stream) {
  using cnnrt::cuda::ConvS8Tma;
  using cnnrt::cuda::ConvS8TmaPlan;
  const cnnrt::cuda::NhwcPool pool{l.oc, s.conv_h, s.conv_w, s.out_h, s.out_w, 3, 3, 2, 2, 0, 0};
  const ConvS8Tma kernel(conv, 0, pool);
  const size_t pre_bytes = size_t(batch) * s.conv_h * s.conv_w * conv.out_stride;
  const size_t out_bytes = size_t(batch) * s.out_h * s.out_w * conv.out_stride;
  void *pre = nullptr, *y = nullptr;
  CNNRT_CUDA_CHECK(cudaMalloc(&pre, pre_bytes));
  CNNRT_CUDA_CHECK(cudaMalloc(&y, out_bytes));
  const cnnrt::cuda::ConvS8TmaInput in[2] = {kernel.encode_input(x[0], batch),
                                             kernel.encode_input(x[1], batch)};
  auto run = [&](const ConvS8TmaPlan& p, int i) {
    if (p.fused_pool) {
      kernel.forward(p.variant, in[i % 2], y, stream);
    } else {
      kernel.forward(p.variant, in[i % 2], pre, stream);
      cnnrt::cuda::maxpool_nhwc_s8(pool, pre, y, batch, stream);
    }
  };
  std::vector<int8_t> expected(out_bytes), got(out_bytes);
  const ConvS8TmaPlan pick = kernel.plan(batch);
  std::vector<ConvS8TmaPlan> plans = {kernel.plan_staged(batch)};
  for (int t = 0; t < int(ConvS8Tma::tile_names().size()); ++t)
    if (ConvS8Tma::tile_fuses_pool(conv, pool, t)) plans.push_back(kernel.plan(batch, t));
  for (const ConvS8TmaPlan& p : plans) {
    CNNRT_CUDA_CHECK(cudaMemsetAsync(y, 0x5a, out_bytes, stream));
    run(p, 0);
    CNNRT_CUDA_CHECK(cudaMemcpyAsync((&p == &plans[0] ? expected : got).data(), y, out_bytes,
                                     cudaMemcpyDeviceToHost, stream));
    CNNRT_CUDA_CHECK(cudaStreamSynchronize(stream));
    const bool same = &p == &plans[0] || got == expected;
    const double ms = median_event_ms([&](int i) { run(p, i); }, iters, stream);
    char label[160];
    std::snprintf(label, sizeof(label), "conv_int8_tma %s%s (%s)", p.name.c_str(),
                  p.fused_pool ? "" : " + maxpool_nhwc_s8", same ? "= staged bytes" : "MISMATCH");
    print_row(l.name, batch, label, ms, flops, p.variant == pick.variant ? "*" : "",
              p.estimated_us);
  }
  CNNRT_CUDA_CHECK(cudaFree(pre));
  CNNRT_CUDA_CHECK(cudaFree(y));
}

}  // namespace

void run_s8_lab(int iters, cudaStream_t stream) {
  using cnnrt::cuda::ConvS8Tma;
  if (!ConvS8Tma::device_supported()) {
    std::printf("conv_int8_tma: not available on this device/build\n");
    return;
  }
  std::mt19937 rng(13579);
  const std::vector<std::string>& tiles = ConvS8Tma::tile_names();
  for (const Layer& l : kLayers) {
    const ConvShape s = make_shape(l);
    std::vector<float> w, b;
    random_weights(l, rng, &w, &b);
    const cnnrt::ref::Int8Layer q =
        cnnrt::ref::prepare_int8_layer(w.data(), b.data(), l.oc, int64_t(l.c) * l.k * l.k, 0.02f,
                                       0.05f, cnnrt::cuda::kReluActivation);
    if (!cnnrt::cuda::tma_s8_serves(s8conv_of(l, s, q))) continue;  // conv1: 3 channels
    const cnnrt::cuda::S8Conv conv = upload_layer(l, s, q);
    const ConvS8Tma kernel(conv);
    // The same tiles on 64-byte rows too, one 64-byte block of K per k-tile: against the
    // default's 128-byte rows (twice the stages of half the bytes) or, where the channel stride
    // is 64 mod 128, its paired blocks (half the mbarrier round trips; run 43).
    std::optional<ConvS8Tma> rows64;
    rows64.emplace(conv, 64);
    for (const int batch : {64, 256}) {
      const size_t out_bytes = size_t(batch) * s.conv_h * s.conv_w * conv.out_stride;
      void* x[2];
      random_inputs(l, conv, batch, rng, x);
      void* y = nullptr;
      CNNRT_CUDA_CHECK(cudaMalloc(&y, out_bytes));
      const double flops = 2.0 * batch * s.conv_h * s.conv_w * double(l.oc) * l.c * l.k * l.k;
      // The default tile's output of x[0]: every tile must give it to the byte (int32 sums are
      // exact and order-free; the epilogue is one function of the sum).
      const auto pick = kernel.plan(batch);
      std::vector<int8_t> expected(out_bytes), got(out_bytes);
      CNNRT_CUDA_CHECK(cudaMemsetAsync(y, 0x5a, out_bytes, stream));
      kernel.forward(pick.variant, x[0], y, batch, stream);
      CNNRT_CUDA_CHECK(
          cudaMemcpyAsync(expected.data(), y, out_bytes, cudaMemcpyDeviceToHost, stream));
      CNNRT_CUDA_CHECK(cudaStreamSynchronize(stream));
      // Every tile of `k`: its output of x[0] against the default's, then its time.
      auto time_tiles = [&](const ConvS8Tma& k) {
        const cnnrt::cuda::ConvS8TmaInput in[2] = {k.encode_input(x[0], batch),
                                                   k.encode_input(x[1], batch)};
        for (int t = 0; t < int(tiles.size()); ++t) {
          const auto p = k.plan(batch, t);
          CNNRT_CUDA_CHECK(cudaMemsetAsync(y, 0x5a, out_bytes, stream));
          k.forward(p.variant, in[0], y, stream);
          CNNRT_CUDA_CHECK(
              cudaMemcpyAsync(got.data(), y, out_bytes, cudaMemcpyDeviceToHost, stream));
          CNNRT_CUDA_CHECK(cudaStreamSynchronize(stream));
          const bool same = got == expected;
          const double ms = median_event_ms(
              [&](int i) { k.forward(p.variant, in[i % 2], y, stream); }, iters, stream);
          char label[160];
          std::snprintf(label, sizeof(label), "conv_int8_tma %s, %d CTAs (%s)", p.name.c_str(),
                        p.ctas, same ? "= default's bytes" : "MISMATCH");
          print_row(l.name, batch, label, ms, flops,
                    &k == &kernel && p.variant == pick.variant ? "*" : "");
        }
      };
      time_tiles(kernel);
      if (rows64) time_tiles(*rows64);
      if (l.pool) time_pool_forms(l, s, conv, batch, x, flops, iters, stream);
      CNNRT_CUDA_CHECK(cudaFree(y));
      for (void* p : x) CNNRT_CUDA_CHECK(cudaFree(p));
    }
    free_device_layer(conv);
  }
}

void run_sparse_s8_lab(int iters, cudaStream_t stream) {
  using cnnrt::cuda::ConvS8Sparse24Tma;
  using cnnrt::cuda::ConvS8Tma;
  if (!ConvS8Sparse24Tma::device_supported()) {
    std::printf("conv_int8_sparse24_tma: not available on this device/build\n");
    return;
  }
  std::mt19937 rng(24680);
  const std::vector<std::string>& tiles = ConvS8Sparse24Tma::tile_names();
  for (const Layer& l : kLayers) {
    const ConvShape s = make_shape(l);
    const int taps = l.k * l.k;
    std::vector<float> w, b;
    random_weights(l, rng, &w, &b);
    cnnrt::sparsity::prune_magnitude(w.data(), {l.oc, l.c, taps});
    const cnnrt::ref::Int8Layer q = cnnrt::ref::prepare_int8_layer(
        w.data(), b.data(), l.oc, int64_t(l.c) * taps, 0.02f, 0.05f, cnnrt::cuda::kReluActivation);
    if (!ConvS8Sparse24Tma::supports(s8conv_of(l, s, q))) continue;  // conv1: 3 channels
    const cnnrt::cuda::S8Conv conv = upload_layer(l, s, q);
    const ConvS8Tma dense(conv);
    const ConvS8Sparse24Tma sparse(conv, q.weight.data(), q.bias.data(), q.multiplier.data(),
                                   l.name);
    for (const int batch : {64, 256}) {
      const size_t out_bytes = size_t(batch) * s.conv_h * s.conv_w * conv.out_stride;
      void* x[2];
      random_inputs(l, conv, batch, rng, x);
      void* y = nullptr;
      CNNRT_CUDA_CHECK(cudaMalloc(&y, out_bytes));
      const double flops = 2.0 * batch * s.conv_h * s.conv_w * double(l.oc) * l.c * taps;
      const auto dense_plan = dense.plan(batch);
      const cnnrt::cuda::ConvS8TmaInput d_in[2] = {dense.encode_input(x[0], batch),
                                                   dense.encode_input(x[1], batch)};
      const double dense_ms = median_event_ms(
          [&](int i) { dense.forward(dense_plan.variant, d_in[i % 2], y, stream); }, iters, stream);
      print_row(l.name, batch, "conv_int8_tma (dense) " + dense_plan.name, dense_ms, flops, "");
      const auto pick = sparse.plan(batch);
      const cnnrt::cuda::ConvS8TmaInput s_in[2] = {sparse.encode_input(x[0], batch),
                                                   sparse.encode_input(x[1], batch)};
      for (int t = 0; t < int(tiles.size()); ++t) {
        const auto p = sparse.plan(batch, t);
        const double ms = median_event_ms(
            [&](int i) { sparse.forward(p.variant, s_in[i % 2], y, stream); }, iters, stream);
        char label[160];
        std::snprintf(label, sizeof(label), "conv_int8_sparse24_tma %s (%.2fx dense)",
                      p.name.c_str(), dense_ms / ms);
        print_row(l.name, batch, label, ms, flops, p.variant == pick.variant ? "*" : "");
      }
      CNNRT_CUDA_CHECK(cudaFree(y));
      for (void* p : x) CNNRT_CUDA_CHECK(cudaFree(p));
    }
    free_device_layer(conv);
  }
}

}  // namespace conv_lab
