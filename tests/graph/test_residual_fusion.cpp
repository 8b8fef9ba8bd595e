// fuse_conv_residual: which conv absorbs a residual add (and the activation after it), the node
// it leaves (inputs, shapes, source layers, FLOPs) and every precondition that must block it
// (graph/passes.cpp lists them).  The numerics of the fused node are the kernels' business
// (tests/harness conv rows with a residual; tests/runtime fused == unfused on a ResNet block).
#include <gtest/gtest.h>

#include "graph/model_loader.h"
#include "graph/ops.h"
#include "graph/passes.h"

namespace cnnrt {
namespace {

using Names = std::vector<std::string>;

Names node_names(const Graph& graph) {
  Names names;
  for (const Node& node : graph.nodes) names.push_back(node.name);
  return names;
}

double total_flops(const Graph& graph) {
  double flops = 0;
  for (const Node& node : graph.nodes) flops += node_flops(node);
  return flops;
}

Graph load(const std::string& layers, const std::string& extra = "") {
  Graph graph =
      parse_model("name: t\ninput: {shape: [8, 9, 9]}\n" + extra + "layers:\n" + layers, "m.yaml");
  bind_random_weights(graph, 3);
  return graph;
}

// A ResNet basic block: conv-bn-relu, conv-bn, add(shortcut), relu.
const char* kBasicBlock =
    "  - {name: stem, op: conv, out_channels: 8, kernel: 1, weight: s.w}\n"
    "  - {name: c1, op: conv, out_channels: 8, kernel: 3, padding: 1, weight: c1.w}\n"
    "  - {name: bn1, op: batchnorm, weight: b1.w, bias: b1.b, running_mean: b1.m, running_var: "
    "b1.v}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, out_channels: 8, kernel: 3, padding: 1, weight: c2.w}\n"
    "  - {name: bn2, op: batchnorm, weight: b2.w, bias: b2.b, running_mean: b2.m, running_var: "
    "b2.v}\n"
    "  - {name: sum, op: add, inputs: [bn2, stem]}\n"
    "  - {name: out, op: relu}\n";

TEST(ResidualFusion, BasicBlockEndsInOneConv) {
  Graph graph = load(kBasicBlock);
  const double flops_before = total_flops(graph);
  const double bn_flops = node_flops(*graph.find("bn1")) + node_flops(*graph.find("bn2"));
  const PassStats stats = run_default_passes(graph);
  EXPECT_EQ(stats.conv_residuals_fused, 1);
  EXPECT_EQ(node_names(graph), (Names{"stem", "c1", "c2"}));
  const Node& c2 = *graph.find("c2");
  EXPECT_TRUE(c2.fused_residual);
  EXPECT_EQ(c2.inputs, (Names{"c1", "stem"}));
  EXPECT_EQ(c2.input_shapes.size(), 2u);
  EXPECT_EQ(c2.input_shapes[1], c2.output_shape);
  EXPECT_EQ(c2.activation, Activation::Relu);
  EXPECT_EQ(c2.source_layers, (Names{"c2", "bn2", "sum", "out"}));
  EXPECT_EQ(graph.output, "c2");
  // The add's element of work moves into the conv's epilogue; only BN folding removes work.
  EXPECT_DOUBLE_EQ(total_flops(graph), flops_before - bn_flops);
}

TEST(ResidualFusion, LaterOfTwoConvsAbsorbsTheAdd) {
  // A downsample block: both operands are convs; the later one in node order reads the other.
  Graph graph = load(
      "  - {name: main, op: conv, out_channels: 16, kernel: 3, stride: 2, padding: 1, weight: m}\n"
      "  - {name: short, op: conv, input: input, out_channels: 16, kernel: 1, stride: 2, weight: "
      "s}\n"
      "  - {name: sum, op: add, inputs: [main, short]}\n"
      "  - {name: act, op: relu6}\n");
  EXPECT_EQ(run_default_passes(graph).conv_residuals_fused, 1);
  EXPECT_EQ(node_names(graph), (Names{"main", "short"}));
  EXPECT_EQ(graph.find("short")->inputs, (Names{"input", "main"}));
  EXPECT_EQ(graph.find("short")->activation, Activation::Relu6);
  EXPECT_EQ(graph.output, "short");
}

TEST(ResidualFusion, ReadersOfTheSumAreRewired) {
  // MobileNetV2 / EfficientNet: project conv + add with the block input, no activation; the sum
  // feeds the next block and is read twice.
  Graph graph = load(
      "  - {name: a, op: conv, out_channels: 8, kernel: 1, weight: a}\n"
      "  - {name: p, op: conv, out_channels: 8, kernel: 1, weight: p}\n"
      "  - {name: sum, op: add, inputs: [a, p]}\n"
      "  - {name: n1, op: conv, out_channels: 8, kernel: 1, weight: n1}\n"
      "  - {name: sum2, op: add, inputs: [n1, sum]}\n");
  EXPECT_EQ(run_default_passes(graph).conv_residuals_fused, 2);
  EXPECT_EQ(node_names(graph), (Names{"a", "p", "n1"}));
  EXPECT_EQ(graph.find("p")->inputs, (Names{"a", "a"}));  // y = conv(a) + a
  EXPECT_EQ(graph.find("n1")->inputs, (Names{"p", "p"}));
  EXPECT_EQ(graph.find("n1")->activation, Activation::None);
}

// Each of these must leave the add alone.
struct Blocked {
  const char* why;
  const char* layers;
  const char* extra;
};

TEST(ResidualFusion, PreconditionsBlockIt) {
  const Blocked cases[] = {
      {"conv output read twice",
       "  - {name: c, op: conv, out_channels: 8, kernel: 1, weight: w}\n"
       "  - {name: r, op: relu, input: c}\n"
       "  - {name: sum, op: add, inputs: [c, input]}\n"
       "  - {name: cat, op: concat, inputs: [sum, r]}\n",
       ""},
      {"conv already has an activation",
       "  - {name: c, op: conv, out_channels: 8, kernel: 1, weight: w}\n"
       "  - {name: r, op: relu}\n"
       "  - {name: sum, op: add, inputs: [r, input]}\n",
       ""},
      {"conv has a fused pool",
       "  - {name: c, op: conv, out_channels: 8, kernel: 1, weight: w}\n"
       "  - {name: r, op: relu}\n"
       "  - {name: p, op: maxpool, kernel: 3, stride: 1, padding: 1}\n"
       "  - {name: sum, op: add, inputs: [p, input]}\n",
       ""},
      {"conv output is the graph output",
       "  - {name: c, op: conv, out_channels: 8, kernel: 1, weight: w}\n"
       "  - {name: sum, op: add, inputs: [c, input]}\n",
       "output: c\n"},
      {"residual produced after the conv",
       "  - {name: c, op: conv, out_channels: 8, kernel: 1, weight: w}\n"
       "  - {name: later, op: relu6, input: input}\n"
       "  - {name: sum, op: add, inputs: [c, later]}\n",
       ""},
      {"add of a tensor with itself",
       "  - {name: c, op: conv, out_channels: 8, kernel: 1, weight: w}\n"
       "  - {name: sum, op: add, inputs: [c, c]}\n",
       ""},
      {"conv names its kernel",
       "  - {name: c, op: conv, out_channels: 8, kernel: 1, weight: w, impl: cpu_ref_conv}\n"
       "  - {name: sum, op: add, inputs: [c, input]}\n",
       ""},
      {"add names its kernel",
       "  - {name: c, op: conv, out_channels: 8, kernel: 1, weight: w}\n"
       "  - {name: sum, op: add, inputs: [c, input], impl: cpu_ref_add}\n",
       ""},
      {"add asks for int8",
       "  - {name: c, op: conv, out_channels: 8, kernel: 1, weight: w}\n"
       "  - {name: sum, op: add, inputs: [c, input], precision: int8}\n",
       ""},
  };
  for (const Blocked& blocked : cases) {
    SCOPED_TRACE(blocked.why);
    Graph graph = load(blocked.layers, blocked.extra);
    const size_t nodes_before = graph.nodes.size();
    const PassStats stats = run_default_passes(graph);
    EXPECT_EQ(stats.conv_residuals_fused, 0);
    EXPECT_NE(graph.find("sum"), nullptr);
    EXPECT_FALSE(graph.find("c") != nullptr && graph.find("c")->fused_residual);
    EXPECT_LE(graph.nodes.size(), nodes_before);
  }
}

TEST(ResidualFusion, ActivationStaysWhenTheSumIsTheOutputOrReadTwice) {
  Graph graph = load(
      "  - {name: c, op: conv, out_channels: 8, kernel: 1, weight: w}\n"
      "  - {name: sum, op: add, inputs: [c, input]}\n"
      "  - {name: r, op: relu}\n"
      "  - {name: cat, op: concat, inputs: [sum, r]}\n");
  EXPECT_EQ(run_default_passes(graph).conv_residuals_fused, 1);
  EXPECT_EQ(node_names(graph), (Names{"c", "r", "cat"}));
  EXPECT_EQ(graph.find("c")->activation, Activation::None);
  EXPECT_EQ(graph.find("r")->inputs, Names{"c"});
  EXPECT_EQ(graph.find("cat")->inputs, (Names{"c", "r"}));
}

TEST(ResidualFusion, OptionTurnsItOff) {
  Graph graph = load(kBasicBlock);
  PassOptions options;
  options.fuse_residual = false;
  EXPECT_EQ(run_default_passes(graph, options).conv_residuals_fused, 0);
  EXPECT_NE(graph.find("sum"), nullptr);
}

}  // namespace
}  // namespace cnnrt
