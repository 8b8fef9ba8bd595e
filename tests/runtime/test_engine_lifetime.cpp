// Lifetimes and threads on the CPU engine (issue 14):
//  - a context keeps what it uses alive: `engine.reset(); context->run(...)` must still work
//    (contexts share ownership of the engine; before that it was a heap-use-after-free);
//  - one Engine shared by 8 threads, each with its own context, 200 runs each: every output is
//    bit-identical to the single-threaded one, and contexts can be created and destroyed
//    concurrently.  TSan/ASan builds (scripts/sanitize.sh) run this too.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/model_loader.h"

namespace cnnrt {
namespace {

// Small enough for 1,600 runs in well under a second, with every kind of step: conv (+fused
// relu/pool), batchnorm folding, lrn, concat, linear, softmax.
const char kModel[] = R"(
name: lifetime
input: {shape: [3, 12, 10]}
layers:
  - {name: c1, op: conv, out_channels: 6, kernel: 3, padding: 1, weight: c1.w, bias: c1.b}
  - {name: bn, op: batchnorm, weight: bn.w, bias: bn.b, running_mean: bn.m, running_var: bn.v}
  - {name: r1, op: relu}
  - {name: p1, op: maxpool, kernel: 2}
  - {name: n1, op: lrn, size: 3}
  - {name: c2, op: conv, input: p1, out_channels: 4, kernel: 1, weight: c2.w}
  - {name: cat, op: concat, inputs: [n1, c2]}
  - {name: f, op: flatten}
  - {name: fc, op: linear, out_features: 7, weight: fc.w, bias: fc.b}
  - {name: s, op: softmax}
)";

std::shared_ptr<Engine> build_cpu_engine() {
  Graph graph = parse_model(kModel, "lifetime.yaml");
  bind_random_weights(graph, 7);
  BuildOptions options;
  options.device = Device::CPU;
  return Engine::build(graph, options);
}

std::vector<float> random_input(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> values(count);
  for (float& v : values) v = dist(rng);
  return values;
}

TEST(EngineLifetime, ContextOutlivesItsEngine) {
  auto engine = build_cpu_engine();
  const size_t in = 3 * 12 * 10, out = 7;
  auto context = engine->create_context(1);
  const std::vector<float> input = random_input(in, 1);
  std::vector<float> before(out), after(out);
  context->run(input.data(), before.data());
  engine.reset();  // the caller's last reference; the context must keep the engine alive
  context->run(input.data(), after.data());
  EXPECT_EQ(before, after);
  context.reset();
}

TEST(EngineLifetime, EightThreadsShareOneEngineBitIdentically) {
  const auto engine = build_cpu_engine();
  constexpr int kThreads = 8, kRuns = 200, kInputs = 4;
  const size_t in = 3 * 12 * 10, out = 7;
  std::vector<std::vector<float>> inputs, expected;
  {
    auto context = engine->create_context(1);
    for (int i = 0; i < kInputs; ++i) {
      inputs.push_back(random_input(in, 100 + i));
      expected.emplace_back(out);
      context->run(inputs[i].data(), expected[i].data());
    }
  }
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        auto context = engine->create_context(1);
        std::vector<float> output(out);
        for (int run = 0; run < kRuns; ++run) {
          const int which = (t + run) % kInputs;
          context->run(inputs[which].data(), output.data());
          if (std::memcmp(output.data(), expected[which].data(), out * sizeof(float)) != 0)
            ++mismatches;
          // Contexts come and go while the others run.
          if (run % 50 == 49) {
            engine->create_context(2).reset();
            context = engine->create_context(1);
          }
        }
      } catch (const std::exception&) {
        ++errors;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mismatches.load(), 0) << "of " << kThreads * kRuns << " runs";
}

}  // namespace
}  // namespace cnnrt
