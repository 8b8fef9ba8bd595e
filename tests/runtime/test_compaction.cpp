// Channel compaction at build (graph/passes_compact.h) and per-layer 2:4 sparsity (docs/FORMAT.md).
// Compaction: a model with some output channels zeroed (biases non-zero, so the constants they
// carry must be folded) gives the same outputs compacted as uncompacted (rel L2 <= 1e-6 on the
// CPU) on an AlexNet-like chain and on a branchy model with a concat, its plan is sized for the
// compacted tensors and says what was removed; unsafe cases (a residual add, every channel zero, a
// non-zero constant into a padding conv) are left whole with the reason.  Sparsity: `sparsity:
// 2:4` in the YAML or a plan file runs the sparse kernel on a 2:4 weight with the dense engine's
// outputs, and is an error naming the layer on a weight that is not 2:4.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/model_loader.h"
#include "graph/passes_sparsity.h"
#include "random_test_util.h"

namespace cnnrt {
namespace {

const char* const kAlexLike = R"(
name: alexlike
input: {shape: [3, 19, 17]}
layers:
  - {name: conv1, op: conv, out_channels: 16, kernel: 3, padding: 1, weight: c1.w, bias: c1.b}
  - {name: relu1, op: relu}
  - {name: pool1, op: maxpool, kernel: 3, stride: 2}
  - {name: conv2, op: conv, out_channels: 24, kernel: 3, weight: c2.w, bias: c2.b}
  - {name: relu2, op: relu}
  - {name: conv3, op: conv, out_channels: 12, kernel: 3, padding: 1, weight: c3.w, bias: c3.b}
  - {name: relu3, op: relu}
  - {name: pool3, op: adaptive_avgpool, output_size: 2}
  - {name: flatten, op: flatten}
  - {name: fc1, op: linear, out_features: 20, weight: f1.w, bias: f1.b}
  - {name: relu4, op: relu}
  - {name: drop, op: dropout}
  - {name: fc2, op: linear, out_features: 7, weight: f2.w, bias: f2.b}
)";

const char* const kBranchy = R"(
name: branchy
input: {shape: [4, 11, 13]}
layers:
  - {name: stem, op: conv, out_channels: 12, kernel: 3, padding: 1, weight: s.w, bias: s.b}
  - {name: stem_relu, op: relu}
  - {name: a, op: conv, input: stem_relu, out_channels: 8, kernel: 1, weight: a.w, bias: a.b}
  - {name: a_relu, op: relu}
  - {name: b, op: conv, input: stem_relu, out_channels: 10, kernel: 3, padding: 1, weight: b.w, bias: b.b}
  - {name: b_relu, op: relu6}
  - {name: b_pool, op: maxpool, kernel: 3, stride: 1, padding: 1}
  - {name: cat, op: concat, inputs: [a_relu, b_pool]}
  - {name: mix, op: conv, out_channels: 6, kernel: 1, weight: m.w, bias: m.b}
  - {name: mix_relu, op: relu}
  - {name: flatten, op: flatten}
  - {name: fc, op: linear, out_features: 5, weight: f.w, bias: f.b}
)";

Graph random_model(const char* yaml, uint64_t seed) {
  Graph graph = parse_model(yaml, "compaction.yaml");
  bind_random_weights(graph, seed);
  return graph;
}

// Zeroes the weight rows `channels` of `layer`, setting their bias to `bias` (the constant the
// channel then carries before its activation).
void zero_channels(Graph& graph, const std::string& layer, const std::vector<int>& channels,
                   float bias) {
  Node* node = graph.find(layer);
  ASSERT_NE(node, nullptr) << layer;
  Param* weight = node->find_param("weight");
  const int64_t per_row = weight->value.elements() / weight->value.shape[0];
  for (int c : channels) {
    std::fill_n(weight->value.data.begin() + c * per_row, per_row, 0.0f);
    node->find_param("bias")->value.data[c] = bias;
  }
}

std::vector<float> run_cpu(const Graph& graph, const std::vector<float>& input, int batch,
                           const BuildOptions& options, ExecutionPlan* plan = nullptr) {
  const std::shared_ptr<Engine> engine = Engine::build(graph, options);
  if (plan != nullptr) *plan = engine->plan(batch);
  std::vector<float> output(static_cast<size_t>(batch) *
                            shape_elements(engine->model().output_shape));
  engine->create_context(batch)->run(input.data(), output.data());
  return output;
}

double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
    norm += want[i] * static_cast<double>(want[i]);
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

BuildOptions cpu(bool compact) {
  BuildOptions options;
  options.device = Device::CPU;
  options.compact_channels = compact;
  return options;
}

// Compacted vs uncompacted outputs; returns the compacted plan.
ExecutionPlan expect_same_outputs(const Graph& graph, int batch) {
  std::mt19937 rng(11);
  const std::vector<float> input =
      test::random_vector(static_cast<size_t>(batch) * shape_elements(graph.input.shape), rng);
  ExecutionPlan compacted_plan, dense_plan;
  const std::vector<float> want = run_cpu(graph, input, batch, cpu(false), &dense_plan);
  const std::vector<float> got = run_cpu(graph, input, batch, cpu(true), &compacted_plan);
  EXPECT_LE(rel_l2(got, want), 1e-6);
  EXPECT_TRUE(dense_plan.compacted.empty());
  return compacted_plan;
}

size_t tensor_bytes_in(const ExecutionPlan& plan, const std::string& name) {
  for (const ExecutionPlan::Tensor& tensor : plan.tensors)
    if (tensor.name == name) return tensor.bytes;
  ADD_FAILURE() << "no tensor " << name;
  return 0;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

TEST(Compaction, AlexNetLikeChainGivesTheUncompactedOutputs) {
  Graph graph = random_model(kAlexLike, 3);
  zero_channels(graph, "conv1", {0, 5, 6, 15}, 0.3f);  // constant 0.3 folded into conv2 (no pad)
  zero_channels(graph, "conv2", {1, 2, 20}, -0.2f);    // relu → 0: conv3 may pad
  zero_channels(graph, "conv3", {4, 11}, 0.7f);        // through pool + flatten into fc1
  zero_channels(graph, "fc1", {3, 19}, 0.4f);          // through relu + dropout into fc2
  const ExecutionPlan plan = expect_same_outputs(graph, 3);
  const std::string text = joined(plan.compacted);
  EXPECT_NE(text.find("conv1: 16 -> 12"), std::string::npos) << text;
  EXPECT_NE(text.find("conv2: 24 -> 21"), std::string::npos) << text;
  EXPECT_NE(text.find("conv3: 12 -> 10"), std::string::npos) << text;
  EXPECT_NE(text.find("fc1: 20 -> 18"), std::string::npos) << text;
  // The plan is sized for the compacted tensors: conv1 writes 12 of 16 channels, conv3 10 of 12.
  const ExecutionPlan dense = Engine::build(graph, cpu(false))->plan(3);
  EXPECT_LT(tensor_bytes_in(plan, "conv1"), tensor_bytes_in(dense, "conv1"));
  EXPECT_LT(tensor_bytes_in(plan, "conv3"), tensor_bytes_in(dense, "conv3"));
}

TEST(Compaction, BranchesIntoAConcatGiveTheUncompactedOutputs) {
  Graph graph = random_model(kBranchy, 5);
  zero_channels(graph, "a", {0, 7}, 0.5f);      // concat channels 0, 7
  zero_channels(graph, "b", {2, 3, 9}, 0.25f);  // relu6 + pool: concat channels 10, 11, 17
  zero_channels(graph, "mix", {1}, 1.5f);       // through flatten into fc
  const ExecutionPlan plan = expect_same_outputs(graph, 2);
  const std::string text = joined(plan.compacted);
  EXPECT_NE(text.find("a: 8 -> 6"), std::string::npos) << text;
  EXPECT_NE(text.find("b: 10 -> 7"), std::string::npos) << text;
  EXPECT_NE(text.find("mix: 6 -> 5"), std::string::npos) << text;
}

TEST(Compaction, UnsafeCasesAreKeptWithTheReason) {
  Graph graph = parse_model(R"(
name: unsafe
input: {shape: [4, 9, 9]}
layers:
  - {name: c1, op: conv, out_channels: 4, kernel: 3, padding: 1, weight: c1.w, bias: c1.b}
  - {name: c2, op: conv, out_channels: 4, kernel: 3, padding: 1, weight: c2.w, bias: c2.b}
  - {name: res, op: add, inputs: [c2, input]}
  - {name: c3, op: conv, out_channels: 6, kernel: 1, weight: c3.w, bias: c3.b}
  - {name: c4, op: conv, out_channels: 5, kernel: 3, padding: 1, weight: c4.w, bias: c4.b}
  - {name: c5, op: conv, out_channels: 3, kernel: 1, weight: c5.w, bias: c5.b}
)",
                            "unsafe.yaml");
  bind_random_weights(graph, 9);
  zero_channels(graph, "c1", {1}, 0.5f);              // non-zero constant into padding conv c2
  zero_channels(graph, "c2", {0}, 0.0f);              // into a residual add
  zero_channels(graph, "c4", {0, 1, 2, 3, 4}, 0.1f);  // every channel
  const ExecutionPlan plan = expect_same_outputs(graph, 2);
  const std::string text = joined(plan.compacted);
  EXPECT_NE(text.find("c1: 1 of 4 output channels are all zero, kept: their constant"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("which pads"), std::string::npos) << text;
  EXPECT_NE(text.find("every channel is zero"), std::string::npos) << text;
  EXPECT_EQ(text.find(" -> "), std::string::npos) << "nothing may be compacted here:\n" << text;
}

TEST(Sparsity, YamlAndPlanChooseTheSparseKernelOnA24Weight) {
  Graph graph = random_model(kAlexLike, 4);
  for (const char* layer : {"conv2", "conv3", "fc1"}) {
    Node* node = graph.find(layer);
    Param* weight = node->find_param("weight");
    sparsity::prune_magnitude(weight->value.data.data(), sparsity::weight_shape_of(*node));
  }
  Graph asked = graph;
  asked.find("conv2")->sparsity_request = "2:4";
  BuildOptions options = cpu(true);
  options.layer_choices["fc1"].sparsity = "2:4";
  options.layer_choices["conv3"].kernel = "cpu_sparse24_conv";
  const ExecutionPlan plan = Engine::build(asked, options)->plan(2);
  for (const PlannedStep& step : plan.steps) {
    const bool sparse = step.name == "conv2" || step.name == "conv3" || step.name == "fc1";
    EXPECT_EQ(step.sparse_2_4, sparse) << step.name << " ran " << step.kernel;
  }
  // By default a 2:4 model keeps its dense kernels; both give the same outputs.
  const ExecutionPlan dense = Engine::build(graph, cpu(true))->plan(2);
  for (const PlannedStep& step : dense.steps) EXPECT_FALSE(step.sparse_2_4) << step.name;
  std::mt19937 rng(2);
  const std::vector<float> input =
      test::random_vector(2 * static_cast<size_t>(shape_elements(graph.input.shape)), rng);
  EXPECT_LE(rel_l2(run_cpu(asked, input, 2, options), run_cpu(graph, input, 2, cpu(true))), 1e-6);
}

std::string build_error(const Graph& graph, const BuildOptions& options) {
  try {
    (void)Engine::build(graph, options);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(Sparsity, AWeightClaimed24ThatIsNotIsAnErrorNamingTheLayer) {
  Graph graph = random_model(kAlexLike, 4);  // dense random weights
  Graph asked = graph;
  asked.find("conv2")->sparsity_request = "2:4";
  std::string message = build_error(asked, cpu(true));
  EXPECT_NE(message.find("conv2"), std::string::npos) << message;
  EXPECT_NE(message.find("non-zeros"), std::string::npos) << message;

  BuildOptions options = cpu(true);
  options.layer_choices["fc1"] = LayerChoice{Precision::Auto, "", "plan.yaml:3:3", "2:4"};
  message = build_error(graph, options);
  EXPECT_NE(message.find("fc1"), std::string::npos) << message;
  EXPECT_NE(message.find("plan.yaml:3:3"), std::string::npos) << message;

  // A grouped conv cannot be 2:4 at all; `sparsity: dense` refuses a sparse kernel by name.
  EXPECT_THROW(parse_model(R"(
name: bad
input: {shape: [4, 5, 5]}
layers:
  - {name: pool, op: maxpool, kernel: 2, sparsity: "2:4"}
)",
                           "bad.yaml"),
               Error);
  for (Node& node : graph.nodes)
    if (node.op == OpKind::Conv || node.op == OpKind::Linear)
      sparsity::prune_magnitude(node.find_param("weight")->value.data.data(),
                                sparsity::weight_shape_of(node));
  options.layer_choices.clear();
  options.layer_choices["conv2"] =
      LayerChoice{Precision::Auto, "cpu_sparse24_conv", "p:1:1", "dense"};
  message = build_error(graph, options);
  EXPECT_NE(message.find("cpu_sparse24_conv"), std::string::npos) << message;
}

TEST(Sparsity, PlanFileReadsSparsityAndRejectsUnknownValues) {
  const std::string path = ::testing::TempDir() + "/sparsity_plan.yaml";
  {
    std::ofstream file(path);
    file << "layers:\n  fc1: {sparsity: \"2:4\"}\n  conv2: {sparsity: dense, precision: fp32}\n";
  }
  const auto choices = load_plan_file(path);
  EXPECT_EQ(choices.at("fc1").sparsity, "2:4");
  EXPECT_EQ(choices.at("conv2").sparsity, "dense");
  {
    std::ofstream file(path);
    file << "layers:\n  fc1: {sparsity: \"1:2\"}\n";
  }
  try {
    (void)load_plan_file(path);
    FAIL() << "sparsity 1:2 accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("unknown sparsity '1:2'"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace cnnrt
