// Shape inference (PyTorch output-size rules, groups, ceil_mode, branches), parameter shapes,
// FLOP / parameter counts (AlexNet's published totals), deterministic weight init, describe.
#include <gtest/gtest.h>

#include <cmath>

#include "graph/model_loader.h"
#include "graph/ops.h"
#include "graph/passes.h"
#include "graph_test_util.h"

namespace cnnrt {
namespace {

using test::error_of;
using test::model_text;

TEST(PoolOutputSize, FollowsPyTorchRules) {
  // floor((in + 2p - d(k-1) - 1) / s) + 1, hand-computed.
  EXPECT_EQ(pool_output_size(55, 3, 2, 0, 1, false), 27);
  EXPECT_EQ(pool_output_size(224, 11, 4, 2, 1, false), 55);
  EXPECT_EQ(pool_output_size(6, 3, 2, 0, 1, false), 2);
  EXPECT_EQ(pool_output_size(6, 3, 2, 0, 1, true), 3);   // ceil adds a partial window
  EXPECT_EQ(pool_output_size(9, 3, 2, 0, 2, false), 3);  // dilation 2: span 5
  // ceil_mode: a window starting in the right padding is dropped.
  // in 7, k 2, s 2, p 1: ceil(7/2)+1 = 5, but window 4 would start at 8-1 = 7 >= in + left pad.
  EXPECT_EQ(pool_output_size(7, 2, 2, 1, 1, true), 4);
  EXPECT_EQ(pool_output_size(5, 3, 3, 1, 1, true), 2);
  EXPECT_EQ(pool_output_size(2, 5, 1, 0, 1, false), 0);  // kernel bigger than input
}

TEST(ShapeInference, EveryOpOfTheFixture) {
  const Graph graph = load_model(test::data_path("all_ops.yaml"));
  auto shape = [&](const char* name) { return graph.find(name)->output_shape; };
  // conv: H = (17 + 2 - 3)/1 + 1 = 17, W = (15 + 4 - 5)/2 + 1 = 8.
  EXPECT_EQ(shape("conv_a"), (Shape{6, 17, 8}));
  EXPECT_EQ(graph.find("conv_a")->pre_pool_shape, (Shape{6, 17, 8}));
  EXPECT_EQ(shape("bn_a"), (Shape{6, 17, 8}));
  EXPECT_EQ(shape("lrn_a"), (Shape{6, 17, 8}));
  EXPECT_EQ(shape("sum"), (Shape{6, 17, 8}));
  EXPECT_EQ(graph.find("sum")->input_shapes.size(), 2u);
  EXPECT_EQ(shape("cat"), (Shape{18, 17, 8}));
  // maxpool k3 s2 p1 ceil: H ceil(16/2)+1 = 9, W ceil(7/2)+1 = 5 (floor mode would give 4).
  EXPECT_EQ(shape("maxp"), (Shape{18, 9, 5}));
  EXPECT_EQ(shape("avgp"), (Shape{18, 4, 2}));
  EXPECT_EQ(shape("adapt"), (Shape{18, 3, 2}));
  EXPECT_EQ(shape("flat"), (Shape{108}));
  EXPECT_EQ(shape("drop"), (Shape{108}));
  EXPECT_EQ(shape("fc"), (Shape{7}));
  EXPECT_EQ(shape("fc_relu6"), (Shape{7}));
  EXPECT_EQ(shape("fc_clip"), (Shape{7}));
  EXPECT_EQ(shape("prob"), (Shape{7}));
  EXPECT_EQ(graph.find("fc")->params[0].value.shape, (Shape{7, 108}));
  EXPECT_EQ(graph.find("conv_b")->params[0].value.shape, (Shape{6, 6, 1, 1}));
}

TEST(ShapeInference, GroupedDilatedConvAndFlattenPassThrough) {
  const Graph graph = parse_model(
      model_text("  - {name: c, op: conv, out_channels: 9, kernel: 3, dilation: [2, 1], "
                 "padding: [0, 1], stride: [2, 3], groups: 3, weight: w}\n"
                 "  - {name: f, op: flatten}\n  - {name: g, op: flatten}\n",
                 "[6, 13, 11]"),
      "m.yaml");
  // H: (13 - 2*2 - 1)/2 + 1 = 5; W: (11 + 2 - 2 - 1)/3 + 1 = 4.
  EXPECT_EQ(graph.find("c")->output_shape, (Shape{9, 5, 4}));
  EXPECT_EQ(expected_param_shape(*graph.find("c"), "weight"), (Shape{9, 2, 3, 3}));
  EXPECT_EQ(graph.find("f")->output_shape, (Shape{180}));
  EXPECT_EQ(graph.find("g")->output_shape, (Shape{180}));
  EXPECT_EQ(node_param_count(*graph.find("c")), 9 * 2 * 3 * 3);
}

TEST(ShapeInference, InferShapesRejectsABrokenGraph) {
  Graph graph = load_model(test::data_path("alexnet.yaml"));
  graph.nodes[3].inputs = {"no_such_tensor"};
  EXPECT_CONTAINS(error_of([&] { infer_shapes(graph); }),
                  "layer 'conv2': input 'no_such_tensor' is not produced by an earlier layer");
}

TEST(Costs, AlexNetTotalsMatchTorchvision) {
  const Graph graph = load_model(test::data_path("alexnet.yaml"));
  int64_t params = 0;
  double flops = 0, mac_flops = 0;
  for (const Node& node : graph.nodes) {
    params += node_param_count(node);
    flops += node_flops(node);
    if (node.op == OpKind::Conv || node.op == OpKind::Linear) mac_flops += node_flops(node);
  }
  EXPECT_EQ(params, 61100840);  // sum(p.numel() for p in torchvision.models.alexnet().parameters())
  EXPECT_NEAR(mac_flops / 2, 0.7142e9, 0.001e9);  // 714.2 M multiply-adds
  EXPECT_NEAR(flops, 1.43e9, 0.005e9);            // + ~1.4 MFLOP of relu/pool
  EXPECT_EQ(graph.find("pool5")->output_shape, (Shape{256, 6, 6}));
  EXPECT_EQ(graph.find("flatten")->output_shape, (Shape{9216}));
  EXPECT_EQ(graph.find("fc8")->output_shape, (Shape{1000}));
  // conv1 by hand: 64*55*55 outputs, each 3*11*11 multiply-adds.
  EXPECT_DOUBLE_EQ(node_flops(*graph.find("conv1")), 2.0 * 64 * 55 * 55 * 3 * 11 * 11);
  EXPECT_DOUBLE_EQ(node_flops(*graph.find("relu1")), 64.0 * 55 * 55);
  EXPECT_DOUBLE_EQ(node_flops(*graph.find("pool1")), 64.0 * 27 * 27 * 9);
  EXPECT_DOUBLE_EQ(node_flops(*graph.find("drop6")), 0.0);
}

TEST(Costs, AdaptivePoolCountsOverlappingWindowsExactly) {
  // in 5 → out 3: windows [0,2), [1,4), [3,5) → 2 + 3 + 2 = 7 per axis.
  const Graph graph = parse_model(
      model_text("  - {name: a, op: adaptive_avgpool, output_size: [3, 1]}\n", "[2, 5, 4]"),
      "m.yaml");
  EXPECT_DOUBLE_EQ(node_flops(graph.nodes[0]), 2.0 * 7 * 4);
}

TEST(Describe, TableHasEveryLayerAndTotals) {
  Graph graph = load_model(test::data_path("alexnet.yaml"));
  const std::string before = describe_graph(graph);
  EXPECT_CONTAINS(before, "61,100,840 params");
  EXPECT_CONTAINS(before, "1.43");
  EXPECT_CONTAINS(before, "relu6");
  bind_random_weights(graph, 7);
  run_default_passes(graph);
  const std::string after = describe_graph(graph);
  EXPECT_CONTAINS(after, "conv+relu+maxpool");
  EXPECT_CONTAINS(after, "linear+relu");
  EXPECT_CONTAINS(after, "61,100,840 params");  // fusion changes no parameter
  EXPECT_EQ(after.find("relu6"), std::string::npos);
}

TEST(InitWeights, DeterministicKeyedAndInPyTorchRanges) {
  const Graph graph = load_model(test::data_path("all_ops.yaml"));
  const auto a = init_weights(graph, 42);
  const auto b = init_weights(graph, 42);
  const auto c = init_weights(graph, 43);
  ASSERT_EQ(a.size(), 9u);
  for (const auto& [key, tensor] : a) {
    EXPECT_EQ(tensor.data, b.at(key).data) << key;
    EXPECT_NE(tensor.data, c.at(key).data) << key;
  }
  auto check_range = [&](const std::string& key, double low, double high) {
    const HostVector<float>& values = a.at(key).data;
    float lowest = values[0], highest = values[0];
    for (float v : values) {
      lowest = std::min(lowest, v);
      highest = std::max(highest, v);
    }
    EXPECT_GE(lowest, low) << key;
    EXPECT_LT(highest, high) << key;
    // Spread over most of the range, not stuck at a constant (loose: few samples).
    EXPECT_GT(highest - lowest, 0.5 * (high - low)) << key;
  };
  const double conv_bound = 1.0 / std::sqrt(2.0 * 3 * 5);  // fan_in = 4/groups * 3 * 5
  check_range("a.w", -conv_bound, conv_bound);
  check_range("a.b", -conv_bound, conv_bound);
  check_range("fc.w", -1.0 / std::sqrt(108.0), 1.0 / std::sqrt(108.0));
  check_range("bn.w", 0.5, 1.5);
  check_range("bn.v", 0.5, 1.5);
  check_range("bn.m", -0.2, 0.2);
  check_range("bn.b", -0.2, 0.2);

  // Keyed by param key: the same key in another model gets the same values.
  const Graph other = parse_model(
      model_text(
          "  - {name: x, op: relu}\n  - {name: z, op: conv, out_channels: 6, kernel: [3, 5], "
          "stride: 7, groups: 2, weight: a.w}\n",
          "[4, 9, 9]"),
      "m.yaml");
  EXPECT_EQ(init_weights(other, 42).at("a.w").data, a.at("a.w").data);
}

}  // namespace
}  // namespace cnnrt
