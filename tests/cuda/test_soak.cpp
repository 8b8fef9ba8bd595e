// Lifetimes, threads and a soak on the GPU (issue 14, items 3 and 7).  Skips without a device.
//  - GpuThreads: one CUDA engine shared by 8 threads, each with its own context, 200 runs each,
//    every output bit-identical to the single-threaded one (always on with a GPU).
//  - GpuLifetime.ContextOutlivesItsEngine: `engine.reset(); context->run()` works (contexts
//    share ownership of their engine, docs/RELIABILITY.md), as on the CPU.
//  - GpuSoak (only with CNNRT_SOAK=1; about a minute on an H100/H200): 10,000 runs of one
//    AlexNet context and 1,000 context creations and destructions, device memory flat
//    (cudaMemGetInfo before and after) and outputs unchanged.  Run on the GPU machine:
//      CNNRT_SOAK=1 build-gpu/bin/cnnrt_gpu_tests --gtest_filter='Gpu*'
//    and record the printed numbers in docs/RELIABILITY.md.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/model_loader.h"
#include "runtime/cuda/device_info.h"

namespace cnnrt {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!cuda::cuda_device_present()) GTEST_SKIP() << "no CUDA device"

std::shared_ptr<Engine> alexnet_on_cuda() {
  Graph graph = load_model(std::string(CNNRT_SOURCE_DIR) + "/models/alexnet.yaml");
  bind_random_weights(graph, 3);
  BuildOptions options;
  options.device = Device::CUDA;
  return Engine::build(graph, options);
}

std::vector<float> random_input(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> values(count);
  for (float& v : values) v = dist(rng);
  return values;
}

size_t free_device_bytes() {
  size_t free_bytes = 0, total = 0;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  return free_bytes;
}

struct Sizes {
  size_t in, out;
};
Sizes sizes_of(const Engine& engine) {
  size_t in = 1, out = 1;
  for (int64_t d : engine.model().input_shape) in *= static_cast<size_t>(d);
  for (int64_t d : engine.model().output_shape) out *= static_cast<size_t>(d);
  return {in, out};
}

TEST(GpuThreads, EightThreadsShareOneEngineBitIdentically) {
  SKIP_WITHOUT_GPU();
  const auto engine = alexnet_on_cuda();
  const Sizes size = sizes_of(*engine);
  constexpr int kThreads = 8, kRuns = 200, kInputs = 4;
  std::vector<std::vector<float>> inputs, expected;
  {
    auto context = engine->create_context(1);
    for (int i = 0; i < kInputs; ++i) {
      inputs.push_back(random_input(size.in, 10 + i));
      expected.emplace_back(size.out);
      context->run(inputs[i].data(), expected[i].data());
    }
  }
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        auto context = engine->create_context(1);
        std::vector<float> output(size.out);
        for (int run = 0; run < kRuns; ++run) {
          const int which = (t + run) % kInputs;
          context->run(inputs[which].data(), output.data());
          if (std::memcmp(output.data(), expected[which].data(), size.out * sizeof(float)) != 0)
            ++mismatches;
        }
      } catch (const std::exception& error) {
        ++errors;
        ADD_FAILURE() << error.what();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mismatches.load(), 0) << "of " << kThreads * kRuns << " runs";
}

TEST(GpuLifetime, ContextOutlivesItsEngine) {
  SKIP_WITHOUT_GPU();
  auto engine = alexnet_on_cuda();
  const Sizes size = sizes_of(*engine);
  auto context = engine->create_context(1);
  const std::vector<float> input = random_input(size.in, 1);
  std::vector<float> before(size.out), after(size.out);
  context->run(input.data(), before.data());
  engine.reset();
  context->run(input.data(), after.data());
  EXPECT_EQ(before, after);
}

bool soak_enabled() {
  const char* flag = std::getenv("CNNRT_SOAK");
  return flag != nullptr && std::string(flag) == "1";
}

TEST(GpuSoak, TenThousandRunsOfOneContextKeepMemoryFlat) {
  SKIP_WITHOUT_GPU();
  if (!soak_enabled()) GTEST_SKIP() << "set CNNRT_SOAK=1 to run the soak";
  const auto engine = alexnet_on_cuda();
  const Sizes size = sizes_of(*engine);
  auto context = engine->create_context(1);
  const std::vector<float> input = random_input(size.in, 5);
  std::vector<float> first(size.out), output(size.out);
  context->run(input.data(), first.data());  // lazy allocations happen here, not below
  const size_t before = free_device_bytes();
  int changed = 0;
  for (int run = 0; run < 10000; ++run) {
    context->run(input.data(), output.data());
    if (std::memcmp(output.data(), first.data(), size.out * sizeof(float)) != 0) ++changed;
  }
  const size_t after = free_device_bytes();
  std::printf("soak: 10000 runs, free device memory %zu -> %zu bytes (%+lld)\n", before, after,
              static_cast<long long>(after) - static_cast<long long>(before));
  RecordProperty("free_before", std::to_string(before));
  RecordProperty("free_after", std::to_string(after));
  EXPECT_EQ(changed, 0) << "runs whose output differed from the first";
  EXPECT_EQ(after, before) << "run() must not allocate device memory";
}

TEST(GpuSoak, ThousandContextCreationsKeepMemoryFlat) {
  SKIP_WITHOUT_GPU();
  if (!soak_enabled()) GTEST_SKIP() << "set CNNRT_SOAK=1 to run the soak";
  const auto engine = alexnet_on_cuda();
  const Sizes size = sizes_of(*engine);
  const std::vector<float> input = random_input(size.in, 6);
  std::vector<float> first(size.out), output(size.out);
  engine->create_context(1)->run(input.data(), first.data());  // first-use allocations
  const size_t before = free_device_bytes();
  int changed = 0;
  for (int i = 0; i < 1000; ++i) {
    auto context = engine->create_context(1 + i % 4);  // a few batch sizes, as a server would
    if (i % 4 == 0) {
      context->run(input.data(), output.data());
      if (std::memcmp(output.data(), first.data(), size.out * sizeof(float)) != 0) ++changed;
    }
  }
  const size_t after = free_device_bytes();
  std::printf("soak: 1000 contexts, free device memory %zu -> %zu bytes (%+lld)\n", before, after,
              static_cast<long long>(after) - static_cast<long long>(before));
  RecordProperty("free_before", std::to_string(before));
  RecordProperty("free_after", std::to_string(after));
  EXPECT_EQ(changed, 0);
  // The driver may keep a little for its own bookkeeping (graph exec caches); a leak of one
  // arena per context would be ≥ 1000 × several MiB.
  EXPECT_LE(before - std::min(before, after), size_t{4} << 20) << "device memory leaked";
}

}  // namespace
}  // namespace cnnrt
