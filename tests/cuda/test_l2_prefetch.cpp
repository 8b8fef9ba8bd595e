// The L2 prefetch of weight streams (kernels/cuda/l2_prefetch.h) and its use by the CUDA
// context (a side branch of the forward's graph, forked after the heaviest activation traffic
// ahead of the first streamed weights and joined after the last step, its budget chosen by
// timing; runtime/cuda/cuda_context.h).
//
// The patterns' and the plan's arithmetic is checked without a GPU.  On a GPU: the kernel runs
// on streams whose length is not a multiple of its period; a model whose linears run as GEMVs
// gives the same bits with the prefetch (the timed default, and a fixed budget) and without it
// (CNNRT_L2_PREFETCH_MB=0), through run(), run_async() and a replay after a batch of other work,
// and describe() says what was chosen; a malformed knob is one clear error.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/model_loader.h"
#include "kernels/cuda/l2_prefetch.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/engine_impl.h"

namespace cnnrt {
namespace {

TEST(L2PrefetchPattern, BudgetsMapToAShareOfEveryPeriod) {
  const char* base = reinterpret_cast<const char*>(0x10000);
  // Nothing to prefetch: no budget, a budget under one line, an empty stream.
  EXPECT_EQ(cuda::l2_prefetch_pattern(base, 1 << 20, 0).prefetched_bytes(), 0u);
  EXPECT_EQ(cuda::l2_prefetch_pattern(base, 1 << 20, 100).prefetched_bytes(), 0u);
  EXPECT_EQ(cuda::l2_prefetch_pattern(base, 0, 1 << 20).prefetched_bytes(), 0u);
  EXPECT_EQ(cuda::l2_prefetch_pattern(base, 1 << 20, (1 << 20) / 100).prefetched_bytes(), 0u);
  // A budget that covers the stream takes all of it, a ragged tail included.
  for (size_t bytes : {size_t(1), size_t(4095), size_t(4097), size_t(75497472 + 130)})
    EXPECT_EQ(cuda::l2_prefetch_pattern(base, bytes, bytes).prefetched_bytes(), bytes) << bytes;
  // Shares: within one line per period (1/32) of the asked budget, never more than the stream.
  const size_t stream = 75497472 + 384;  // AlexNet fc6's fp16 matrix and a partial period
  for (double share : {0.05, 0.1, 0.25, 0.33, 0.5, 0.9}) {
    const size_t budget = size_t(share * stream);
    const cuda::L2PrefetchPattern p = cuda::l2_prefetch_pattern(base, stream, budget);
    EXPECT_EQ(p.prefix_bytes % 128, 0u);
    EXPECT_LE(p.prefix_bytes, p.block_bytes);
    EXPECT_NEAR(double(p.prefetched_bytes()) / stream, share, 1.0 / 64 + 1e-9) << share;
  }
  // The last period is clipped to the stream.
  const cuda::L2PrefetchPattern half = cuda::l2_prefetch_pattern(base, 4096 * 3 + 200, 6200);
  EXPECT_EQ(half.prefix_bytes, 2048u);
  EXPECT_EQ(half.prefetched_bytes(), 3 * 2048u + 200u);
}

TEST(L2PrefetchPlan, LaterStreamsWholeFirstThenAShareOfTheFirst) {
  const char* base = reinterpret_cast<const char*>(0x10000);
  // AlexNet int8's fc6 / fc7 / fc8 matrices (k_pad-byte rows) and an H100's 0.34 of L2.
  const std::vector<cuda::WeightStream> int8 = {{base, size_t(4096) * 9216},
                                                {base + (1 << 28), size_t(4096) * 4096},
                                                {base + (2 << 28), size_t(1000) * 4096}};
  const size_t budget = size_t(0.34 * 52428800);
  // fc7 whole (16.8 MB), the rest (1.0 MB) a share of fc8, nothing of fc6.
  const auto planned = cuda::l2_prefetch_plan(int8, budget);
  ASSERT_EQ(planned.size(), 2u);
  EXPECT_EQ(planned[0].stream_index, 1u);
  EXPECT_EQ(planned[0].pattern.prefetched_bytes(), int8[1].bytes);
  EXPECT_EQ(planned[1].stream_index, 2u);
  EXPECT_NEAR(double(planned[1].pattern.prefetched_bytes()), double(budget - int8[1].bytes),
              int8[2].bytes / 64.0);
  // fp16 (twice the bytes): fc7 does not fit, so it takes the whole budget as a share, and fc8
  // and fc6 get nothing.
  std::vector<cuda::WeightStream> fp16 = int8;
  for (cuda::WeightStream& stream : fp16) stream.bytes *= 2;
  const auto half = cuda::l2_prefetch_plan(fp16, budget);
  ASSERT_EQ(half.size(), 1u);
  EXPECT_EQ(half[0].stream_index, 1u);
  EXPECT_NEAR(double(half[0].pattern.prefetched_bytes()), double(budget), fp16[1].bytes / 64.0);
  // A budget past the later streams spends its rest on the first; one stream alone gets a share
  // of it; no budget or no streams, no patterns.
  const size_t more = int8[1].bytes + int8[2].bytes + 10000000;
  const auto rest = cuda::l2_prefetch_plan(int8, more);
  ASSERT_EQ(rest.size(), 3u);
  EXPECT_EQ(rest[1].pattern.prefetched_bytes(), int8[2].bytes);
  EXPECT_EQ(rest[2].stream_index, 0u);
  EXPECT_NEAR(double(rest[2].pattern.prefetched_bytes()), 10000000.0, int8[0].bytes / 64.0);
  const auto one = cuda::l2_prefetch_plan({int8[0]}, budget);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].stream_index, 0u);
  EXPECT_NEAR(double(one[0].pattern.prefetched_bytes()), double(budget), int8[0].bytes / 64.0);
  EXPECT_TRUE(cuda::l2_prefetch_plan(int8, 0).empty());
  EXPECT_TRUE(cuda::l2_prefetch_plan({}, budget).empty());
}

TEST(L2PrefetchKernel, RunsOnRaggedStreams) {
  if (!cuda::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  void* buffer = nullptr;
  const size_t bytes = 3 * 4096 + 1000;
  ASSERT_EQ(cudaMalloc(&buffer, bytes), cudaSuccess);
  for (size_t budget : {size_t(128), size_t(5000), bytes}) {
    cuda::l2_prefetch(cuda::l2_prefetch_pattern(buffer, bytes, budget), nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << budget;
  }
  cudaFree(buffer);
}

const char* const kGemvModel = R"(
name: gemv_head
input: {shape: [3, 23, 21]}
layers:
  - {name: conv1, op: conv, out_channels: 32, kernel: 3, stride: 2, padding: 1, weight: c1.w, bias: c1.b}
  - {name: relu1, op: relu}
  - {name: flatten, op: flatten}
  - {name: fc1, op: linear, out_features: 1000, weight: f1.w, bias: f1.b}
  - {name: relu2, op: relu}
  - {name: fc2, op: linear, out_features: 37, weight: f2.w, bias: f2.b}
)";

// kGemvModel built for CUDA with seeded random weights.
std::shared_ptr<Engine> gemv_engine() {
  Graph graph = parse_model(kGemvModel, "gemv_head.yaml");
  bind_random_weights(graph, 5);
  BuildOptions options;
  options.device = Device::CUDA;
  return Engine::build(graph, options);
}

// Sets an environment variable for one scope (the context reads it at creation).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
      had_ = true;
    }
    if (value != nullptr)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(L2PrefetchContext, SameBitsWithAndWithoutPrefetch) {
  if (!cuda::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const std::shared_ptr<Engine> engine = gemv_engine();
  // The default budget (fc2 and fc1 whole: 74 KB and 8.4 MB of halves; fc1 read evict-first),
  // and 1 MB (fc2 whole, a share of fc1).
  for (int batch : {1, 2, 8})
    for (const char* budget : {static_cast<const char*>(nullptr), "1"}) {
      SCOPED_TRACE(std::string("budget ") + (budget ? budget : "default"));
      std::unique_ptr<ExecutionContext> plain, prefetching;
      {
        ScopedEnv off("CNNRT_L2_PREFETCH_MB", "0");
        plain = engine->create_context(batch);
      }
      {
        ScopedEnv on("CNNRT_L2_PREFETCH_MB", budget);
        prefetching = engine->create_context(batch);
      }
      // What each decided (ExecutionContext::describe): nothing without a prefetch.  At 1 MB,
      // fc2 whole and a share of fc1, read evict-first; by default the timed choice, which may
      // be no prefetch (timing decides), among no prefetch and both GEMVs whole.
      EXPECT_EQ(plain->describe(), "");
      const std::string decided = prefetching->describe();
      if (budget != nullptr) {
        EXPECT_EQ(decided.rfind("L2 prefetch: fc2 0.1 MB (whole), fc1 ", 0), 0u) << decided;
        EXPECT_NE(decided.find("; read evict-first: fc1; from "), std::string::npos) << decided;
        EXPECT_NE(decided.find(" (CNNRT_L2_PREFETCH_MB)"), std::string::npos) << decided;
      } else {
        const bool none = decided.rfind("L2 prefetch: none (", 0) == 0;
        const bool both = decided.rfind(
                              "L2 prefetch: fc2 0.1 MB (whole), fc1 8.4 MB (whole); read "
                              "evict-first: fc1; from ",
                              0) == 0;
        EXPECT_TRUE(none || both) << decided;
        EXPECT_NE(decided.find("the fastest of budgets 0.0 MB "), std::string::npos) << decided;
      }
      std::vector<float> input(plain->input_count());
      std::mt19937 generator(batch);
      std::uniform_real_distribution<float> distribution(-1.0f, 1.0f);
      for (float& value : input) value = distribution(generator);
      std::vector<float> expected(plain->output_count()), got(plain->output_count(), -1.0f);
      plain->run(input.data(), expected.data());
      prefetching->run(input.data(), got.data());
      EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0) << batch;
      // After other work (a benchmark of the graph) and through run_async's bound graph.
      prefetching->benchmark(2, 5);
      float *device_in = nullptr, *device_out = nullptr;
      ASSERT_EQ(cudaMalloc(&device_in, input.size() * sizeof(float)), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&device_out, got.size() * sizeof(float)), cudaSuccess);
      ASSERT_EQ(
          cudaMemcpy(device_in, input.data(), input.size() * sizeof(float), cudaMemcpyHostToDevice),
          cudaSuccess);
      prefetching->run_async(device_in, device_out, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::fill(got.begin(), got.end(), -1.0f);
      ASSERT_EQ(
          cudaMemcpy(got.data(), device_out, got.size() * sizeof(float), cudaMemcpyDeviceToHost),
          cudaSuccess);
      EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0) << batch;
      cudaFree(device_in);
      cudaFree(device_out);
    }
}

// A context made for measuring (the automatic plan's, ContextOptions::timed_choices off) times
// nothing and takes the largest budget: here both GEMVs whole.
TEST(L2PrefetchContext, UntimedContextsTakeTheLargestBudget) {
  if (!cuda::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const std::shared_ptr<Engine> engine = gemv_engine();
  const auto context = engine->impl().backend->create_context(
      engine->shared_impl(), 1, {/*keep_all_tensors=*/false, /*timed_choices=*/false});
  // The fork: after the step with the most activation bytes before fc1 (conv1 or the flatten).
  const std::string decided = context->describe();
  EXPECT_EQ(decided.rfind("L2 prefetch: fc2 0.1 MB (whole), fc1 8.4 MB (whole); read evict-first: "
                          "fc1; from ",
                          0),
            0u)
      << decided;
  const bool after_conv1 = decided.find("; from flatten (") != std::string::npos;
  const bool after_flatten = decided.find("; from fc1 (") != std::string::npos;
  EXPECT_TRUE(after_conv1 || after_flatten) << decided;
  EXPECT_NE(decided.find(" (untimed: the largest budget)"), std::string::npos) << decided;
}

TEST(L2PrefetchContext, MalformedKnobIsOneClearError) {
  if (!cuda::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  const std::shared_ptr<Engine> engine = gemv_engine();
  for (const char* bad : {"abc", "-1", "12x", "nan"}) {
    ScopedEnv knob("CNNRT_L2_PREFETCH_MB", bad);
    try {
      engine->create_context(1);
      ADD_FAILURE() << "no error for '" << bad << "'";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("CNNRT_L2_PREFETCH_MB"), std::string::npos)
          << error.what();
    }
  }
}

}  // namespace
}  // namespace cnnrt
