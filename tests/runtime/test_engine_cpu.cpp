// Engine-level tests on the CPU backend: fused == unfused on random graphs, the AlexNet memory
// plan totals, run() allocates nothing, and option errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <sstream>

#include "allocation_counter.h"
#include "cnnrt/cnnrt.h"
#include "graph/model_loader.h"
#include "random_test_util.h"
#include "runtime/engine_impl.h"
#include "runtime/memory_planner.h"

namespace cnnrt {
namespace {

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

std::vector<float> run_engine(const Graph& graph, bool fuse, const std::vector<float>& input,
                              int batch) {
  BuildOptions options;
  options.device = Device::CPU;
  options.fuse = fuse;
  auto engine = Engine::build(graph, options);
  auto context = engine->create_context(batch);
  int64_t out_elements = batch;
  for (int64_t d : engine->model().output_shape) out_elements *= d;
  std::vector<float> output(out_elements, std::nanf(""));
  context->run(input.data(), output.data());
  return output;
}

// A random sequential CNN built from blocks that the passes rewrite: conv (+bn) + relu
// (+maxpool), then flatten, dropout, linear + relu, linear.
std::string random_cnn_yaml(std::mt19937& rng, int& channels, int& size) {
  std::uniform_int_distribution<int> pick(0, 1000);
  channels = 1 + pick(rng) % 5;
  size = 9 + pick(rng) % 12;
  std::ostringstream y;
  y << "name: random_cnn\ninput: {shape: [" << channels << ", " << size << ", " << size
    << "]}\nlayers:\n";
  int h = size;
  const int blocks = 1 + pick(rng) % 3;
  for (int b = 0; b < blocks; ++b) {
    const int out = 2 + pick(rng) % 7, kernel = 1 + 2 * (pick(rng) % 2);
    y << "  - {name: conv" << b << ", op: conv, out_channels: " << out << ", kernel: " << kernel
      << ", padding: " << kernel / 2 << ", weight: c" << b << ".w, bias: c" << b << ".b}\n";
    if (pick(rng) % 2)
      y << "  - {name: bn" << b << ", op: batchnorm, weight: bn" << b << ".w, bias: bn" << b
        << ".b, running_mean: bn" << b << ".m, running_var: bn" << b << ".v}\n";
    y << "  - {name: relu" << b << ", op: relu}\n";
    if (h >= 4 && pick(rng) % 2) {
      y << "  - {name: pool" << b << ", op: maxpool, kernel: 3, stride: 2}\n";
      h = (h - 3) / 2 + 1;
    }
  }
  y << "  - {name: flat, op: flatten}\n  - {name: drop, op: dropout}\n"
    << "  - {name: fc1, op: linear, out_features: 11, weight: f1.w, bias: f1.b}\n"
    << "  - {name: fc1_relu, op: relu}\n"
    << "  - {name: fc2, op: linear, out_features: 5, weight: f2.w, bias: f2.b}\n";
  return y.str();
}

TEST(EngineCpu, FusedEqualsUnfusedOnRandomGraphs) {
  std::mt19937 rng(std::random_device{}());
  for (int trial = 0; trial < 12; ++trial) {
    int channels = 0, size = 0;
    const std::string yaml = random_cnn_yaml(rng, channels, size);
    SCOPED_TRACE(yaml);
    Graph graph = parse_model(yaml, "random.yaml");
    bind_random_weights(graph, rng());
    const int batch = 1 + static_cast<int>(rng() % 3);
    const auto input = test::random_vector(size_t(batch) * channels * size * size, rng);
    const auto fused = run_engine(graph, true, input, batch);
    const auto unfused = run_engine(graph, false, input, batch);
    ASSERT_EQ(fused.size(), unfused.size());
    for (float v : fused) ASSERT_TRUE(std::isfinite(v));
    // Folding BN changes rounding order only: fp32 storage, double accumulation.
    EXPECT_LE(rel_l2(fused, unfused), 1e-5);
  }
}

// Residual blocks (graph/passes.h fuse_conv_residual): a ResNet basic block with a downsampling
// shortcut conv, and an MBConv block (expand, depthwise, project + add, no activation).
TEST(EngineCpu, ResidualBlocksFusedEqualUnfused) {
  Graph graph = parse_model(
      "name: t\ninput: {shape: [6, 11, 13]}\nlayers:\n"
      "  - {name: c1, op: conv, out_channels: 8, kernel: 3, stride: 2, padding: 1, weight: a}\n"
      "  - {name: b1, op: batchnorm, weight: b1w, bias: b1b, running_mean: b1m, running_var: "
      "b1v}\n"
      "  - {name: r1, op: relu}\n"
      "  - {name: c2, op: conv, out_channels: 8, kernel: 3, padding: 1, weight: b}\n"
      "  - {name: sc, op: conv, input: input, out_channels: 8, kernel: 1, stride: 2, weight: c}\n"
      "  - {name: sum, op: add, inputs: [c2, sc]}\n"
      "  - {name: r2, op: relu}\n"
      "  - {name: ex, op: conv, out_channels: 24, kernel: 1, weight: d, bias: db}\n"
      "  - {name: ex_act, op: relu6}\n"
      "  - {name: dw, op: conv, out_channels: 24, kernel: 3, padding: same, groups: 24, weight: "
      "e}\n"
      "  - {name: dw_act, op: relu6}\n"
      "  - {name: pr, op: conv, out_channels: 8, kernel: 1, weight: f, bias: fb}\n"
      "  - {name: sum2, op: add, inputs: [pr, r2]}\n",
      "t.yaml");
  bind_random_weights(graph, 5);
  std::mt19937 rng(11);
  const int batch = 2;
  const auto input = test::random_vector(size_t(batch) * 6 * 11 * 13, rng);
  BuildOptions options;
  options.device = Device::CPU;
  auto fused_residuals = [&](const BuildOptions& build) {
    int fused = 0;
    // Held: a range-for over a member of the temporary engine would read freed memory.
    const auto engine = Engine::build(graph, build);
    for (const Node& node : engine->impl().graph->nodes) fused += node.fused_residual ? 1 : 0;
    return fused;
  };
  EXPECT_EQ(fused_residuals(options), 2);
  // Off on request.  (Builds where int8 layers are possible turn it off by themselves:
  // test_engine_int8.cpp's residual add keeps its int8 kernel.)
  BuildOptions off = options;
  off.fuse_residual = false;
  EXPECT_EQ(fused_residuals(off), 0);
  const auto with = run_engine(graph, true, input, batch);
  const auto without = run_engine(graph, false, input, batch);
  ASSERT_EQ(with.size(), without.size());
  for (float v : with) ASSERT_TRUE(std::isfinite(v));
  EXPECT_LE(rel_l2(with, without), 1e-5);
}

TEST(EngineCpu, AlexNetPlanIsWithinFivePercentOfTheLowerBound) {
  Graph graph = load_model(std::string(CNNRT_SOURCE_DIR) + "/models/alexnet.yaml");
  bind_random_weights(graph, 7);
  BuildOptions options;
  options.device = Device::CPU;
  auto engine = Engine::build(graph, options);
  for (int batch : {1, 64}) {
    const MemoryPlan plan = prepare_context(engine->impl(), batch).memory;
    SCOPED_TRACE("batch " + std::to_string(batch) + "\n" + plan.to_table());
    EXPECT_GE(plan.arena_bytes, plan.lower_bound_bytes);
    EXPECT_LE(double(plan.arena_bytes), 1.05 * double(plan.lower_bound_bytes));
    EXPECT_LT(plan.arena_bytes, plan.naive_bytes);
  }
}

// The calibration collector's contexts (prepare_context keep_all_tensors): every tensor lives to
// the last step in a region of its own (none in place, none sharing), so each can be read after
// the forward; and the CPU context reads each back exactly as an ordinary one computes it.
TEST(EngineCpu, KeepAllTensorsPlansNoSharingAndReadsEveryTensor) {
  Graph graph = parse_model(
      "name: k\ninput: {shape: [3, 11, 9]}\nlayers:\n"
      "  - {name: c1, op: conv, out_channels: 8, kernel: 3, padding: 1, weight: a, bias: b}\n"
      "  - {name: r1, op: relu, impl: cpu_ref_relu}\n"
      "  - {name: p1, op: maxpool, kernel: 2}\n"
      "  - {name: f, op: flatten}\n  - {name: fc, op: linear, out_features: 5, weight: d}\n",
      "k.yaml");
  bind_random_weights(graph, 5);
  BuildOptions options;
  options.device = Device::CPU;
  const auto engine = Engine::build(graph, options);
  const EngineImpl& impl = engine->impl();
  const int batch = 3;
  const MemoryPlan shared = prepare_context(impl, batch).memory;
  const MemoryPlan kept = prepare_context(impl, batch, true).memory;
  EXPECT_GT(kept.arena_bytes, shared.arena_bytes);  // the ordinary plan reuses memory here
  const int last = static_cast<int>(impl.steps.size()) - 1;
  for (const PlannedTensor& a : kept.tensors) {
    if (a.name.find(".workspace") != std::string::npos) continue;
    EXPECT_EQ(a.last_step, last) << a.name;
    EXPECT_TRUE(a.aliases.empty()) << a.name;
    for (const PlannedTensor& b : kept.tensors)
      if (&a != &b && b.name.find(".workspace") == std::string::npos)
        EXPECT_TRUE(a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset)
            << a.name << " overlaps " << b.name;
  }

  std::mt19937 rng(9);
  const auto input = test::random_vector(size_t(batch) * 3 * 11 * 9, rng, -1.0f, 1.0f);
  const auto context = impl.backend->create_context(engine->shared_impl(), batch, {true});
  std::vector<float> out(context->output_count());
  context->run(input.data(), out.data());
  EXPECT_EQ(context->read_tensor("fc"), out);  // the graph output, read back
  // relu's own output equals max(0, conv's): both still there after the whole forward.
  const std::vector<float> conv = context->read_tensor("c1");
  const std::vector<float> relu = context->read_tensor("r1");
  ASSERT_EQ(conv.size(), relu.size());
  ASSERT_EQ(conv.size(), size_t(batch) * 8 * 11 * 9);
  for (size_t i = 0; i < conv.size(); ++i) ASSERT_EQ(relu[i], std::max(0.0f, conv[i])) << i;
}

TEST(EngineCpu, RunAllocatesNothingAndRepeats) {
  Graph graph = parse_model(
      "name: t\ninput: {shape: [3, 17, 13]}\nlayers:\n"
      "  - {name: c1, op: conv, out_channels: 8, kernel: 3, padding: 1, weight: a, bias: b}\n"
      "  - {name: r1, op: relu}\n  - {name: p1, op: maxpool, kernel: 2}\n"
      "  - {name: c2, op: conv, out_channels: 6, kernel: 3, weight: c}\n"
      "  - {name: r2, op: relu}\n  - {name: g, op: adaptive_avgpool, output_size: 2}\n"
      "  - {name: f, op: flatten}\n  - {name: fc, op: linear, out_features: 4, weight: d, bias: "
      "e}\n"
      "  - {name: s, op: softmax}\n",
      "t.yaml");
  bind_random_weights(graph, 3);
  BuildOptions options;
  options.device = Device::CPU;
  auto engine = Engine::build(graph, options);
  auto context = engine->create_context(2);
  EXPECT_EQ(context->describe(), "") << "a CPU context decides nothing beyond its plan";
  std::mt19937 rng(std::random_device{}());
  const auto input = test::random_vector(2 * 3 * 17 * 13, rng);
  std::vector<float> first(2 * 4), second(2 * 4);
  context->run(input.data(), first.data());
  const long before = test::heap_allocations();
  context->run(input.data(), second.data());
  EXPECT_EQ(test::heap_allocations() - before, 0) << "run() allocated on the heap";
  EXPECT_EQ(first, second);
  for (int n = 0; n < 2; ++n) {
    double sum = 0;
    for (int k = 0; k < 4; ++k) sum += first[n * 4 + k];
    EXPECT_NEAR(sum, 1.0, 1e-5);  // softmax rows
  }
}

TEST(EngineCpu, RejectsBadOptions) {
  Graph graph = parse_model(
      "name: t\ninput: {shape: [1, 4, 4]}\nlayers:\n  - {name: r, op: relu}\n", "t.yaml");
  BuildOptions options;
  options.device = Device::CPU;
  auto engine = Engine::build(graph, options);
  EXPECT_THROW(engine->create_context(0), Error);
  EXPECT_THROW(engine->create_context(-3), Error);
  options.precision = Precision::FP16;
  EXPECT_THROW(Engine::build(graph, options), Error);
  options.precision = Precision::FP32;
  options.layer_choices["nope"].kernel = "cpu_ref_relu";
  EXPECT_THROW(Engine::build(graph, options), Error);
  options.layer_choices.clear();
  options.layer_choices["r"].kernel = "no_such_kernel";
  EXPECT_THROW(Engine::build(graph, options), Error);
  EXPECT_THROW(parse_device("tpu"), Error);
  EXPECT_THROW(parse_precision("fp8"), Error);
}

// A batch whose activations cannot exist must be a cnnrt::Error naming the batch, not a
// std::bad_alloc or a wrapped-around byte count.
TEST(EngineCpu, AbsurdBatchIsAnErrorNotBadAlloc) {
  Graph graph = parse_model(
      "name: t\ninput: {shape: [64, 1024, 1024]}\nlayers:\n  - {name: r, op: relu}\n", "t.yaml");
  BuildOptions options;
  options.device = Device::CPU;
  auto engine = Engine::build(graph, options);
  for (int batch : {1 << 20, std::numeric_limits<int>::max()}) {
    try {
      engine->create_context(batch);
      FAIL() << "expected an error for batch " << batch;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("batch " + std::to_string(batch)), std::string::npos)
          << e.what();
    } catch (const std::exception& e) {
      FAIL() << "batch " << batch << " threw a non-cnnrt exception: " << e.what();
    }
  }
}

TEST(EngineCpu, UnboundWeightsAreAnErrorNamingTheTensor) {
  Graph graph = parse_model(
      "name: t\ninput: {shape: [1, 4, 4]}\nlayers:\n"
      "  - {name: c, op: conv, out_channels: 2, kernel: 1, weight: conv.w}\n",
      "t.yaml");
  BuildOptions options;
  options.device = Device::CPU;
  try {
    Engine::build(graph, options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("conv.w"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cnnrt
