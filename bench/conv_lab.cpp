// conv_lab: times every variant of the fp16 tensor-core convolution (kernels/cuda/conv/igemm.h)
// on AlexNet's five convolutions, each with the ReLU / MaxPool AlexNet fuses into it, at batch
// 1, 8, 64 and 256 (workspace variants -- unfused pool, split-K -- included), and, when cuDNN is
// available, cudnnConvolutionForward (fp16 NHWC, the fastest algorithm
// cudnnFindConvolutionForwardAlgorithmEx reports) on the same shapes -- conv ALONE, without
// bias/ReLU/pool, labelled so.
//
// Timing: 10 warm-up launches, then >= 50 launches each bracketed by CUDA events; the median is
// reported.  Inputs are random fp16 and two input buffers alternate so successive launches do
// not read an input the previous one left in L2.  TFLOP/s counts the conv's multiply-adds
// (2 * N * OH * OW * OC * C/groups * KH * KW) over real channels only, for every row (so the
// few-channel path is not credited with padding work).  "*" marks plan(batch, false)'s pick
// (fused variants only), "w" plan(batch)'s (workspace variants allowed: what a context plans);
// each row is one variant's time, the workspace variants' two kernels included.
//
// --wgmma times only the Hopper kernels instead: conv_fp16_wgmma (its plan) and every tile of
// the warp-specialised conv_fp16_wgmma_ws on AlexNet's plain convolutions (conv3, conv4) at
// batch 64 and 256 ("*" = the ws plan's pick).
//
// --tma times conv_fp16_tma (the default where in_c % 64 == 0: AlexNet conv2-conv5): every tile
// it serves (fused with the pool where the layer has one) and the staged pool form, at batch 1,
// 64 and 256, each row with the cost model's time next to the measured one (tma_conv.cu's
// model), "*" on the model's pick, and per layer and batch a line saying whether the pick was
// the fastest measured and what picking by the model cost; then channel-pruned AlexNet's conv2
// and conv3 (in_c 32 / 96: conv_fp16_tma's 64-byte k-tile rows), each with two more rows, the
// same conv on 128-byte rows with in_c padded to 64 / 128 by the map's zero fill, and
// conv_fp16_wgmma (what ran these layers before).  conv1 (3 channels) runs as
// conv_fp16_s2d's TMA form does: its space-to-depth rewrite at a 64-channel stride (57x57x64,
// 3x3, K = 576; the rows' TFLOP/s still count conv1's real 3 x 11 x 11 taps), plus one row for
// the rearrangement from NCHW fp32 into that stride (GB/s of fp32 read + fp16 written) and, since
// its staged pool form runs the conv unpooled and the BN = 64 tiles' speeds are guesses, the
// unpooled conv alone on every tile (model vs measured).
//
// --sparse times the 2:4 sparse convs on AlexNet conv2-conv5 (each with its ReLU / MaxPool) at
// batch 64 and 256, all on the same weights pruned 2:4 by magnitude: conv_fp16_sparse24_tma (every
// tile; a pooled layer runs staged: conv into a workspace, then maxpool_fp16), the cp.async
// conv_fp16_sparse24_wgmma (its plan, pool fused) and the dense conv_fp16_tma (its plan) as the
// bar; "*" marks the sparse TMA plan's pick and each row says its speed against the dense one.
//
// --sparse-s8 times the int8 2:4 conv_int8_sparse24_tma (every tile) against the dense
// conv_int8_tma (its plan) on AlexNet conv2-conv5 at batch 64 and 256, the same pruned weights
// quantised per channel for both; the pre-pool conv with its ReLU, int8 in and out (the pool pass
// after it is the same for both and not timed).  "*" marks the sparse plan's pick.
//
// --s8 times every tile of the dense conv_int8_tma on AlexNet conv2-conv5 at batch 64 and 256,
// each row checked to give the default tile's output to the byte; "*" marks the default.  On the
// pooled layers (conv2, conv5) it then times the pool's two forms: the staged one (the default
// tile's conv + maxpool_nhwc_s8) and the fused instance of every tile that fuses the pool, each
// fused output checked against the staged one to the byte, with the model's time; "*" marks
// plan(batch)'s pick (tma_s8.cu, "Fused or staged").
//
// --linear-s8 times every batch tile of the int8 TMA linear on AlexNet fc6-fc8 at batch 64, 128
// and 256, the L2 flushed before each launch, each output checked against the cost model's pick
// ("*") to the byte (conv_lab_linear_s8.cpp).
//
// Every igemm row carries its model time too (igemm_plan.cpp; the direct fallback has none):
// issue 9 asks that tile choice be "checked against measurements", which these columns are.
//
// Usage: conv_lab [--iters N] [--direct | --wgmma | --tma | --sparse | --sparse-s8 | --s8 |
//                 --linear-s8]
// (--direct also times the fallback)
#include "bench/conv_lab.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/event_timing.h"
#include "kernels/cuda/conv/igemm.h"
#include "kernels/cuda/conv/wgmma.h"
#include "kernels/cuda/conv/wgmma_ws.h"
#include "kernels/cuda/cuda_check.h"

#ifdef CNNRT_WITH_CUDNN
#include <cudnn.h>
#define LAB_CUDNN_CHECK(call)                                                            \
  do {                                                                                   \
    cudnnStatus_t lab_status_ = (call);                                                  \
    if (lab_status_ != CUDNN_STATUS_SUCCESS)                                             \
      ::cnnrt::cuda::throw_cuda_error(#call, cudnnGetErrorString(lab_status_), __FILE__, \
                                      __LINE__);                                         \
  } while (0)
#endif

namespace {

using cnnrt::cuda::ConvFp16;
using cnnrt::cuda::ConvFp16Plan;
using cnnrt::cuda::ConvShape;
using cnnrt::cuda::padded_channels;

using namespace conv_lab;

#ifdef CNNRT_WITH_CUDNN
// cuDNN fp16 NHWC conv alone (real channel counts), fastest algorithm found by FindEx.
double time_cudnn(cudnnHandle_t handle, const Layer& l, const ConvShape& s, int batch, int iters,
                  cudaStream_t stream, std::string* algo_name) {
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  LAB_CUDNN_CHECK(cudnnCreateTensorDescriptor(&xd));
  LAB_CUDNN_CHECK(cudnnCreateTensorDescriptor(&yd));
  LAB_CUDNN_CHECK(cudnnCreateFilterDescriptor(&wd));
  LAB_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&cd));
  LAB_CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, batch, l.c, l.h, l.w));
  LAB_CUDNN_CHECK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, batch, l.oc,
                                             s.conv_h, s.conv_w));
  LAB_CUDNN_CHECK(
      cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC, l.oc, l.c, l.k, l.k));
  LAB_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(cd, l.pad, l.pad, l.stride, l.stride, 1, 1,
                                                  CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  LAB_CUDNN_CHECK(cudnnSetConvolutionMathType(cd, CUDNN_TENSOR_OP_MATH));
  const size_t x_bytes = size_t(batch) * l.h * l.w * l.c * 2;
  const size_t y_bytes = size_t(batch) * s.conv_h * s.conv_w * l.oc * 2;
  const size_t w_bytes = size_t(l.oc) * l.c * l.k * l.k * 2;
  const size_t ws_bytes = size_t(512) << 20;
  void *x[2], *y, *w, *ws;
  for (void*& p : x) CNNRT_CUDA_CHECK(cudaMalloc(&p, x_bytes));
  CNNRT_CUDA_CHECK(cudaMalloc(&y, y_bytes));
  CNNRT_CUDA_CHECK(cudaMalloc(&w, w_bytes));
  CNNRT_CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
  // Small non-zero values (0x2000 = fp16 ~0.0078) so no algorithm sees a special all-zero input.
  for (void* p : x) CNNRT_CUDA_CHECK(cudaMemset(p, 0x20, x_bytes));
  CNNRT_CUDA_CHECK(cudaMemset(w, 0x20, w_bytes));
  cudnnConvolutionFwdAlgoPerf_t perf[16];
  int found = 0;
  LAB_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(handle, xd, x[0], wd, w, cd, yd, y, 16,
                                                         &found, perf, ws, ws_bytes));
  int best = -1;
  for (int i = 0; i < found; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= ws_bytes) {
      best = i;
      break;
    }
  double ms = -1;
  if (best >= 0) {
    const cudnnConvolutionFwdAlgo_t algo = perf[best].algo;
    *algo_name = "cudnn conv alone (algo " + std::to_string(int(algo)) + ")";
    const float alpha = 1.f, beta = 0.f;
    ms = median_event_ms(
        [&](int i) {
          LAB_CUDNN_CHECK(cudnnConvolutionForward(handle, &alpha, xd, x[i % 2], wd, w, cd, algo, ws,
                                                  perf[best].memory, &beta, yd, y));
        },
        iters, stream);
  }
  for (void* p : x) CNNRT_CUDA_CHECK(cudaFree(p));
  CNNRT_CUDA_CHECK(cudaFree(y));
  CNNRT_CUDA_CHECK(cudaFree(w));
  CNNRT_CUDA_CHECK(cudaFree(ws));
  cudnnDestroyTensorDescriptor(xd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyFilterDescriptor(wd);
  cudnnDestroyConvolutionDescriptor(cd);
  return ms;
}
#endif

// The --wgmma table (see the header comment).
void run_wgmma_lab(int iters, cudaStream_t stream) {
  using cnnrt::cuda::ConvFp16Wgmma;
  using cnnrt::cuda::ConvFp16WgmmaWs;
  if (!ConvFp16Wgmma::device_supported()) {
    std::printf("wgmma kernels: not available on this device/build\n");
    return;
  }
  std::mt19937 rng(54321);
  const int tiles[][2] = {{128, 128}, {128, 256}, {256, 128}};
  for (const Layer& l : kLayers) {
    if (l.pool) continue;
    const ConvShape s = make_shape(l);
    const int fan_in = l.c * l.k * l.k;
    std::vector<float> w, b;
    random_weights(l, rng, &w, &b);
    const ConvFp16Wgmma plain(s, w.data(), b.data());
    const ConvFp16WgmmaWs ws(s, w.data(), b.data());
    for (const int batch : {64, 256}) {
      const size_t out_count = size_t(batch) * s.out_h * s.out_w * l.oc;
      const InputPair inputs(size_t(batch) * l.h * l.w * l.c, l.c, l.c, rng);
      void* const* x = inputs.x;
      void* y;
      CNNRT_CUDA_CHECK(cudaMalloc(&y, out_count * 2));
      const double flops = 2.0 * batch * s.conv_h * s.conv_w * double(l.oc) * fan_in;
      const auto plain_plan = plain.plan(batch);
      double ms = median_event_ms(
          [&](int i) { plain.forward(plain_plan, x[i % 2], y, batch, stream); }, iters, stream);
      print_row(l.name, batch, "conv_fp16_wgmma " + plain_plan.name, ms, flops, "");
      const auto pick = ws.plan(batch);
      for (const auto& tile : tiles) {
        const auto plan = ws.plan_tile(batch, tile[0], tile[1]);
        if (!plan) continue;
        ms = median_event_ms([&](int i) { ws.forward(*plan, x[i % 2], y, batch, stream); }, iters,
                             stream);
        print_row(l.name, batch, "conv_fp16_wgmma_ws " + plan->name, ms, flops,
                  plan->variant == pick.variant ? "*" : "");
      }
      CNNRT_CUDA_CHECK(cudaFree(y));
    }
  }
}

int run(int argc, char** argv) {
  int iters = 50;
  bool with_direct = false, wgmma_only = false, tma_only = false, sparse_only = false,
       sparse_s8_only = false, s8_only = false, linear_s8_only = false;
  int only_batch = 0;  // --batch N: the igemm lab at that batch alone
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iters") && i + 1 < argc)
      iters = std::max(50, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--direct"))
      with_direct = true;
    else if (!std::strcmp(argv[i], "--wgmma"))
      wgmma_only = true;
    else if (!std::strcmp(argv[i], "--tma"))
      tma_only = true;
    else if (!std::strcmp(argv[i], "--sparse"))
      sparse_only = true;
    else if (!std::strcmp(argv[i], "--sparse-s8"))
      sparse_s8_only = true;
    else if (!std::strcmp(argv[i], "--s8"))
      s8_only = true;
    else if (!std::strcmp(argv[i], "--linear-s8"))
      linear_s8_only = true;
    else if (!std::strcmp(argv[i], "--batch") && i + 1 < argc && std::atoi(argv[i + 1]) > 0)
      only_batch = std::atoi(argv[++i]);
    else {
      std::fprintf(
          stderr,
          "usage: conv_lab [--iters N>=50] [--batch N] [--direct | --wgmma | --tma | --sparse | "
          "--sparse-s8 | --s8 | --linear-s8]\n");
      return 2;
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "conv_lab: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop;
  CNNRT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs; median of %d launches after warm-up\n", prop.name,
              prop.multiProcessorCount, iters);
  cudaStream_t stream;
  CNNRT_CUDA_CHECK(cudaStreamCreate(&stream));
  if (wgmma_only || tma_only || sparse_only || sparse_s8_only || s8_only || linear_s8_only) {
    if (wgmma_only) run_wgmma_lab(iters, stream);
    if (tma_only) run_tma_lab(iters, stream);
    if (sparse_only) run_sparse_lab(iters, stream);
    if (sparse_s8_only) run_sparse_s8_lab(iters, stream);
    if (s8_only) run_s8_lab(iters, stream);
    if (linear_s8_only) run_linear_s8_lab(iters, stream);
    CNNRT_CUDA_CHECK(cudaStreamDestroy(stream));
    return 0;
  }
#ifdef CNNRT_WITH_CUDNN
  cudnnHandle_t handle;
  LAB_CUDNN_CHECK(cudnnCreate(&handle));
  LAB_CUDNN_CHECK(cudnnSetStream(handle, stream));
#endif
  std::mt19937 rng(12345);
  std::vector<int> batches = {1, 8, 64, 256};
  if (only_batch > 0) batches = {only_batch};
  for (const Layer& l : kLayers) {
    const ConvShape s = make_shape(l);
    std::vector<float> w, b;
    random_weights(l, rng, &w, &b);
    const ConvFp16 conv(s, w.data(), b.data());
    for (const int batch : batches) {
      const int cs = padded_channels(l.c);
      const size_t out_count = size_t(batch) * s.out_h * s.out_w * padded_channels(l.oc);
      const InputPair inputs(size_t(batch) * l.h * l.w * cs, cs, l.c, rng);
      void* const* x = inputs.x;
      void* y;
      CNNRT_CUDA_CHECK(cudaMalloc(&y, out_count * 2));
      const double flops = 2.0 * batch * s.conv_h * s.conv_w * double(l.oc) * l.c * l.k * l.k;
      const std::vector<ConvFp16Plan> variants = conv.variants(batch);
      const int chosen = conv.plan(batch, /*with_workspace=*/false).variant;
      const int chosen_ws = conv.plan(batch).variant;
      size_t ws_bytes = 256;
      for (const ConvFp16Plan& v : variants) ws_bytes = std::max(ws_bytes, v.workspace_bytes);
      void* ws = nullptr;
      CNNRT_CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
      for (size_t v = 0; v < variants.size(); ++v) {
        const bool is_direct = v + 1 == variants.size();
        if (is_direct && variants.size() > 1 && !with_direct) continue;
        const ConvFp16Plan& run = variants[v];
        const double ms = median_event_ms(
            [&](int i) { conv.forward(run, x[i % 2], y, batch, stream, ws); }, iters, stream);
        const bool fused_pick = run.variant == chosen, ws_pick = run.variant == chosen_ws;
        const char* mark = fused_pick ? (ws_pick ? "*w" : "*") : (ws_pick ? "w" : "");
        print_row(l.name, batch, run.name, ms, flops, mark, run.estimated_us);
      }
      CNNRT_CUDA_CHECK(cudaFree(ws));
#ifdef CNNRT_WITH_CUDNN
      std::string algo;
      const double ms = time_cudnn(handle, l, s, batch, iters, stream, &algo);
      if (ms > 0) print_row(l.name, batch, algo, ms, flops, "");
#endif
      CNNRT_CUDA_CHECK(cudaFree(y));
    }
  }
#ifdef CNNRT_WITH_CUDNN
  cudnnDestroy(handle);
#endif
  CNNRT_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
