// Asynchronous submission rate (issue: "a C++ API for real applications"): back-to-back
// ExecutionContext::run_async calls on one stream, device-resident input and output, against
// the CUDA-graph replay rate of ExecutionContext::benchmark on the same context.  Prints both
// per batch, and the host time of Engine::build and of each create_context with the process's
// CUDA initialisation (cudaFree(0)) timed apart.  The buffers are reused, so every timed run
// replays the graph bound to them (the first, untimed, call captured it).  Not a test: log
// results in docs/PERFORMANCE.md.
//
//   async_rate MODEL [--batch 1,64] [--runs 500]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/model_loader.h"
#include "kernels/cuda/cuda_check.h"

namespace {

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: async_rate MODEL [--batch 1,64] [--runs 500]\n");
    return 2;
  }
  std::vector<int> batches = {1, 64};
  int runs = 500;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--runs") runs = std::atoi(argv[i + 1]);
    if (flag == "--batch") {
      batches.clear();
      std::string list = argv[i + 1];
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = list.find(',', at);
        batches.push_back(std::atoi(list.substr(at, comma - at).c_str()));
        at = comma == std::string::npos ? list.size() + 1 : comma + 1;
      }
    }
  }
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  };
  try {
    auto start = Clock::now();
    CNNRT_CUDA_CHECK(cudaFree(nullptr));  // the process's CUDA initialisation
    const double init_ms = ms_since(start);
    cnnrt::Graph graph = cnnrt::load_model(argv[1]);
    cnnrt::bind_random_weights(graph, 1);
    cnnrt::BuildOptions options;
    options.device = cnnrt::Device::CUDA;
    start = Clock::now();
    auto engine = cnnrt::Engine::build(std::move(graph), options);  // as Engine::load does
    const double build_ms = ms_since(start);
    std::printf("host ms: CUDA init %.1f, Engine::build %.1f (weights bound beforehand)\n", init_ms,
                build_ms);
    std::printf("%6s %12s %14s %14s %8s\n", "batch", "context ms", "replay ms", "async ms/run",
                "ratio");
    for (int batch : batches) {
      start = Clock::now();
      auto context = engine->create_context(batch);
      const double context_ms = ms_since(start);
      const double replay_ms = median_of(context->benchmark(20, 200));
      float *input = nullptr, *output = nullptr;
      CNNRT_CUDA_CHECK(cudaMalloc(&input, context->input_count() * sizeof(float)));
      CNNRT_CUDA_CHECK(cudaMalloc(&output, context->output_count() * sizeof(float)));
      // Never time on zeros: a fixed pseudo-random input in [-1, 1).
      std::vector<float> values(context->input_count());
      uint32_t state = 0x2545F491u;
      for (float& value : values) {
        state = state * 1664525u + 1013904223u;
        value = static_cast<float>(state >> 8) / 8388608.0f - 1.0f;
      }
      CNNRT_CUDA_CHECK(
          cudaMemcpy(input, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice));
      cudaStream_t stream = nullptr;
      CNNRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      cudaEvent_t start, stop;
      CNNRT_CUDA_CHECK(cudaEventCreate(&start));
      CNNRT_CUDA_CHECK(cudaEventCreate(&stop));
      for (int i = 0; i < 20; ++i) context->run_async(input, output, stream);
      std::vector<double> rates;
      for (int repeat = 0; repeat < 5; ++repeat) {
        CNNRT_CUDA_CHECK(cudaEventRecord(start, stream));
        for (int i = 0; i < runs; ++i) context->run_async(input, output, stream);
        CNNRT_CUDA_CHECK(cudaEventRecord(stop, stream));
        CNNRT_CUDA_CHECK(cudaEventSynchronize(stop));
        float ms = 0;
        CNNRT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        rates.push_back(ms / runs);
      }
      const double async_ms = median_of(rates);
      std::printf("%6d %12.1f %14.4f %14.4f %8.3f\n", batch, context_ms, replay_ms, async_ms,
                  replay_ms / async_ms);
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
      cudaStreamDestroy(stream);
      cudaFree(input);
      cudaFree(output);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return 1;
  }
  return 0;
}
