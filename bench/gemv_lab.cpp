// GEMV lab: the batch-1/2 register GEMV (kernels/cuda/linear_fp16.h) on AlexNet's fc6 / fc7 / fc8
// shapes with every K split (0 = gemv_choose_split's pick, then 1/2/4/8 forced), L2 flushed
// before each timed launch (the network streams each weight from DRAM once), median of 200.
// What it answers: whether the split the host picks is the fastest one, and at what fraction
// of DRAM bandwidth each shape streams.  Usage: gemv_lab [--iters N]
#include <cuda_fp16.h>

#include <cstdio>
#include <random>
#include <vector>

#include "bench/event_timing.h"
#include "kernels/cuda/linear_fp16.h"

using cnnrt::bench::median_event_ms;

int main(int argc, char** argv) {
  int iters = 200;
  cudaDeviceProp prop;
  if (const int status = cnnrt::bench::start_lab(argc, argv, "gemv_lab", &iters, &prop))
    return status;
  std::printf("device: %s, %d SMs, L2 %d MB; median of %d launches, L2 flushed before each\n",
              prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, iters);
  cudaStream_t stream;
  CNNRT_CUDA_CHECK(cudaStreamCreate(&stream));
  const size_t flush_bytes = size_t(4) * prop.l2CacheSize;
  void* flush = nullptr;
  CNNRT_CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
  struct Shape {
    const char* name;
    int rows, k;
  };
  const Shape shapes[] = {{"fc6", 4096, 9216}, {"fc7", 4096, 4096}, {"fc8", 1000, 4096}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-0.02f, 0.02f);
  for (const Shape& s : shapes) {
    std::vector<float> w(size_t(s.rows) * s.k), b(s.rows);
    for (float& v : w) v = dist(rng);
    for (float& v : b) v = dist(rng);
    const cnnrt::cuda::GemmWeights weights(
        cnnrt::cuda::pack_linear_weights(w.data(), b.data(), s.rows, s.k, cnnrt::Shape{}));
    const double bytes = double(weights.rows_pad()) * weights.cols_pad() * sizeof(__half);
    void *x = nullptr, *y = nullptr;
    CNNRT_CUDA_CHECK(cudaMalloc(&x, size_t(2) * weights.cols_pad() * sizeof(__half)));
    CNNRT_CUDA_CHECK(cudaMemset(x, 0x3c, size_t(2) * weights.cols_pad() * sizeof(__half)));
    CNNRT_CUDA_CHECK(cudaMalloc(&y, size_t(2) * weights.rows_pad() * sizeof(__half)));
    for (int batch : {1, 2}) {
      const int pick = cnnrt::cuda::gemv_choose_split(weights.rows_pad(), weights.cols_pad(), batch,
                                                      prop.multiProcessorCount);
      for (int split : {1, 2, 4, 8}) {
        const double ms = median_event_ms(
            [&](int) { cnnrt::cuda::gemv_fp16(weights, true, x, y, batch, stream, split); }, iters,
            stream, [&] { CNNRT_CUDA_CHECK(cudaMemsetAsync(flush, split, flush_bytes, stream)); });
        std::printf("%-4s %5dx%-5d batch %d split %d%s  %8.4f ms  %6.2f TB/s\n", s.name, s.rows,
                    s.k, batch, split, split == pick ? " *" : "  ", ms, bytes / (ms * 1e-3) / 1e12);
      }
    }
    CNNRT_CUDA_CHECK(cudaFree(x));
    CNNRT_CUDA_CHECK(cudaFree(y));
  }
  CNNRT_CUDA_CHECK(cudaFree(flush));
  CNNRT_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}
