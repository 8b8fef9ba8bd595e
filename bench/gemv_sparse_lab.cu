// Sparse GEMV lab: the 2:4 mma.sp GEMV (kernels/cuda/linear_sparse24_mma.h) against the dense
// register GEMV on AlexNet's fc6 / fc7 / fc8 at batch 1, the L2 flushed before each timed launch
// (the network streams each weight from DRAM once), median of --iters.  Besides the kernel at
// every split, it times a probe that
// streams the same packed bytes with the same grid, warps and loads in flight but no staged x,
// no MMA and no epilogue: the gap between the two is what the kernel adds to the stream, the
// probe's own time what this grid can stream at all.  Usage: gemv_sparse_lab [--iters N]
#include <cuda_fp16.h>

#include <cstdio>
#include <random>
#include <vector>

#include "bench/event_timing.h"
#include "graph/passes_sparsity.h"
#include "kernels/cpu/sparse24.h"
#include "kernels/cuda/gemv_common.cuh"
#include "kernels/cuda/linear_fp16.h"
#include "kernels/cuda/linear_sparse24_mma.h"

using cnnrt::bench::median_event_ms;
namespace cc = cnnrt::cuda;

namespace {

constexpr int kWarps = 8;

// The kernel's loads alone: warp (tile, slice) streams its chunks two in flight and folds them
// into one word, written only if it matches a value it never does (so nothing is elided).
__global__ void __launch_bounds__(kWarps * 32, 2)
    stream_probe(const uint8_t* __restrict__ weight, int row_tiles, int chunks, int64_t tile_bytes,
                 int split, uint32_t* sink) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int slice = warp % split, tile = blockIdx.x * (kWarps / split) + warp / split;
  if (tile >= row_tiles) return;
  const int c_begin = slice * chunks / split, c_end = (slice + 1) * chunks / split;
  const uint8_t* tile_w = weight + int64_t(tile) * tile_bytes;
  uint32_t fold = 0;
  uint4 buf[2][cc::kSpMmaChunkSteps + 1];
  const uint64_t policy = cc::stream_l2_policy(false);  // the GEMV's loads, not evict-first
  auto load = [&](uint4(&b)[cc::kSpMmaChunkSteps + 1], int c) {
    const uint4* p =
        reinterpret_cast<const uint4*>(tile_w + cc::Sparse24MmaGeometry::step_offset(c, 0, lane));
#pragma unroll
    for (int s = 0; s <= cc::kSpMmaChunkSteps; ++s) b[s] = cc::load_streaming(p + s * 32, policy);
  };
  auto use = [&](const uint4(&b)[cc::kSpMmaChunkSteps + 1]) {
#pragma unroll
    for (int s = 0; s <= cc::kSpMmaChunkSteps; ++s) fold ^= b[s].x ^ b[s].y ^ b[s].z ^ b[s].w;
  };
  if (c_begin < c_end) load(buf[0], c_begin);
  if (c_begin + 1 < c_end) load(buf[1], c_begin + 1);
  for (int c = c_begin; c < c_end; c += 2) {
    use(buf[0]);
    if (c + 2 < c_end) load(buf[0], c + 2);
    if (c + 1 < c_end) {
      use(buf[1]);
      if (c + 3 < c_end) load(buf[1], c + 3);
    }
  }
  if (fold == 0x9e3779b9u) sink[blockIdx.x] = fold;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 200;
  cudaDeviceProp prop;
  if (const int status = cnnrt::bench::start_lab(argc, argv, "gemv_sparse_lab", &iters, &prop))
    return status;
  std::printf(
      "device: %s, %d SMs, L2 %d MB; batch 1, median of %d launches, L2 flushed before "
      "each\n",
      prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, iters);
  cudaStream_t stream;
  CNNRT_CUDA_CHECK(cudaStreamCreate(&stream));
  const size_t flush_bytes = size_t(4) * prop.l2CacheSize;
  void* flush = nullptr;
  CNNRT_CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
  uint32_t* sink = nullptr;
  CNNRT_CUDA_CHECK(cudaMalloc(&sink, 1 << 20));
  int flushes = 0;
  const auto flush_l2 = [&] {
    CNNRT_CUDA_CHECK(cudaMemsetAsync(flush, ++flushes & 0xff, flush_bytes, stream));
  };
  struct Case {
    const char* name;
    int rows, k;
    cnnrt::Shape flattened;
  };
  const Case cases[] = {{"fc6", 4096, 9216, cnnrt::Shape{256, 6, 6}},
                        {"fc7", 4096, 4096, cnnrt::Shape{}},
                        {"fc8", 1000, 4096, cnnrt::Shape{}}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-0.02f, 0.02f);
  for (const Case& c : cases) {
    std::vector<float> w(size_t(c.rows) * c.k), b(c.rows);
    for (float& v : w) v = dist(rng);
    for (float& v : b) v = dist(rng);
    const cc::GemmWeights dense(
        cc::pack_linear_weights(w.data(), b.data(), c.rows, c.k, c.flattened));
    cnnrt::sparsity::prune_magnitude(w.data(), cnnrt::sparsity::WeightShape{c.rows, c.k, 1});
    const cnnrt::sparse24::Compressed compressed =
        cnnrt::sparse24::compress(w.data(), cnnrt::sparsity::WeightShape{c.rows, c.k, 1}, c.name);
    const cc::Sparse24MmaWeights sparse(cc::pack_sparse24_mma(compressed, b.data(), c.flattened));
    const cc::Sparse24MmaGeometry& g = sparse.geometry();
    void *x = nullptr, *y = nullptr;
    CNNRT_CUDA_CHECK(cudaMalloc(&x, size_t(dense.cols_pad()) * sizeof(__half)));
    CNNRT_CUDA_CHECK(cudaMemset(x, 0x3c, size_t(dense.cols_pad()) * sizeof(__half)));
    CNNRT_CUDA_CHECK(cudaMalloc(&y, size_t(dense.rows_pad()) * sizeof(__half)));
    const double dense_bytes = double(dense.rows_pad()) * dense.cols_pad() * sizeof(__half);
    const double sparse_bytes = double(sparse.bytes());
    const double dense_ms = median_event_ms(
        [&](int) { cc::gemv_fp16(dense, true, x, y, 1, stream, 0); }, iters, stream, flush_l2);
    std::printf("%s %dx%d  dense GEMV            %8.4f ms  %5.2f TB/s (%.1f MB)\n", c.name, c.rows,
                c.k, dense_ms, dense_bytes / (dense_ms * 1e-3) / 1e12, dense_bytes / 1e6);
    const int pick = cc::sparse24_mma_choose_split(g, prop.multiProcessorCount);
    for (int split : {1, 2, 4, 8}) {
      if (split > g.chunks) continue;
      {
        const double ms = median_event_ms(
            [&](int) { cc::gemv_sparse24_mma_fp16(sparse, true, x, y, 1, stream, split); }, iters,
            stream, flush_l2);
        const int blocks = (g.row_tiles + kWarps / split - 1) / (kWarps / split);
        const double probe_ms = median_event_ms(
            [&](int) {
              stream_probe<<<blocks, kWarps * 32, 0, stream>>>(
                  static_cast<const uint8_t*>(sparse.weight()), g.row_tiles, g.chunks, g.tile_bytes,
                  split, sink);
              CNNRT_CUDA_CHECK_LAUNCH();
            },
            iters, stream, flush_l2);
        std::printf(
            "%s  mma.sp split %d%s %8.4f ms  %5.2f TB/s  %5.2fx dense | probe %8.4f "
            "ms %5.2f TB/s\n",
            c.name, split, split == pick ? "*" : " ", ms, sparse_bytes / (ms * 1e-3) / 1e12,
            dense_ms / ms, probe_ms, sparse_bytes / (probe_ms * 1e-3) / 1e12);
      }
    }
    CNNRT_CUDA_CHECK(cudaFree(x));
    CNNRT_CUDA_CHECK(cudaFree(y));
  }
  CNNRT_CUDA_CHECK(cudaFree(sink));
  CNNRT_CUDA_CHECK(cudaFree(flush));
  CNNRT_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}
