// Graph passes: structure after fusion (names, source_layers, rewiring, preconditions that block
// fusion) and BN folding checked numerically against conv-then-batchnorm computed here.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "graph/model_loader.h"
#include "graph/ops.h"
#include "graph/passes.h"
#include "graph_test_util.h"

namespace cnnrt {
namespace {

using test::error_of;
using test::model_text;

std::vector<std::string> node_names(const Graph& graph) {
  std::vector<std::string> names;
  for (const Node& node : graph.nodes) names.push_back(node.name);
  return names;
}

using Names = std::vector<std::string>;

TEST(Passes, AlexNetFusesIntoNineNodes) {
  Graph graph = load_model(test::data_path("alexnet.yaml"));
  double flops_before = 0;
  for (const Node& node : graph.nodes) flops_before += node_flops(node);
  const double identity_pool_flops = node_flops(*graph.find("avgpool"));
  bind_random_weights(graph, 1);
  const PassStats stats = run_default_passes(graph);
  EXPECT_EQ(stats.dropouts_removed, 2);
  EXPECT_EQ(stats.identities_removed, 1);  // AdaptiveAvgPool2d(6) of a 6x6 map
  EXPECT_EQ(stats.batchnorms_folded, 0);
  EXPECT_EQ(stats.conv_activations_fused, 5);
  EXPECT_EQ(stats.conv_pools_fused, 3);
  EXPECT_EQ(stats.linear_activations_fused, 2);
  EXPECT_EQ(node_names(graph),
            (Names{"conv1", "conv2", "conv3", "conv4", "conv5", "flatten", "fc6", "fc7", "fc8"}));
  const Node& conv1 = *graph.find("conv1");
  EXPECT_EQ(conv1.activation, Activation::Relu);
  ASSERT_TRUE(conv1.fused_maxpool.has_value());
  EXPECT_EQ(conv1.fused_maxpool->kernel_h, 3);
  EXPECT_EQ(conv1.fused_maxpool->stride_w, 2);
  EXPECT_EQ(conv1.pre_pool_shape, (Shape{64, 55, 55}));
  EXPECT_EQ(conv1.output_shape, (Shape{64, 27, 27}));
  EXPECT_EQ(conv1.source_layers, (Names{"conv1", "relu1", "pool1"}));
  EXPECT_EQ(graph.find("conv2")->inputs, Names{"conv1"});
  const Node& conv3 = *graph.find("conv3");
  EXPECT_FALSE(conv3.fused_maxpool.has_value());
  EXPECT_EQ(conv3.source_layers, (Names{"conv3", "relu3"}));
  EXPECT_EQ(graph.find("conv5")->source_layers, (Names{"conv5", "relu5", "pool5"}));
  EXPECT_EQ(graph.find("flatten")->inputs, Names{"conv5"});  // identity avgpool bypassed
  EXPECT_EQ(graph.find("fc6")->inputs, Names{"flatten"});    // dropout bypassed
  EXPECT_EQ(graph.find("fc6")->activation, Activation::Relu);
  EXPECT_EQ(graph.find("fc7")->inputs, Names{"fc6"});
  EXPECT_EQ(graph.find("fc7")->source_layers, (Names{"fc7", "relu7"}));
  EXPECT_EQ(graph.find("fc8")->activation, Activation::None);
  EXPECT_EQ(graph.output, "fc8");
  // Fusion moves work into epilogues; it neither adds nor loses any.  Only the removed
  // identity pool's (pointless) work is gone.
  double flops_after = 0;
  for (const Node& node : graph.nodes) flops_after += node_flops(node);
  EXPECT_DOUBLE_EQ(flops_after, flops_before - identity_pool_flops);
}

TEST(Passes, GraphOutputIsNotFusedAway) {
  // conv is the output: conv → relu must not fuse (the user asked for the pre-relu tensor).
  Graph graph = parse_model(
      "name: t\ninput: {shape: [3, 8, 8]}\noutput: c\nlayers:\n"
      "  - {name: c, op: conv, out_channels: 4, kernel: 3, weight: w}\n"
      "  - {name: r, op: relu}\n",
      "m.yaml");
  bind_random_weights(graph, 1);
  EXPECT_EQ(run_default_passes(graph).conv_activations_fused, 0);
  EXPECT_EQ(node_names(graph), (Names{"c", "r"}));

  // relu is the output: conv → relu fuses but relu → maxpool does not; the pool and the graph
  // output are rewired to the fused node's name.
  graph = parse_model(
      "name: t\ninput: {shape: [3, 8, 8]}\noutput: r\nlayers:\n"
      "  - {name: c, op: conv, out_channels: 4, kernel: 3, weight: w}\n"
      "  - {name: r, op: relu}\n  - {name: p, op: maxpool, kernel: 2}\n",
      "m.yaml");
  bind_random_weights(graph, 1);
  const PassStats stats = run_default_passes(graph);
  EXPECT_EQ(stats.conv_activations_fused, 1);
  EXPECT_EQ(stats.conv_pools_fused, 0);
  EXPECT_EQ(node_names(graph), (Names{"c", "p"}));
  EXPECT_EQ(graph.output, "c");
  EXPECT_EQ(graph.find("p")->inputs, Names{"c"});
  EXPECT_FALSE(graph.find("c")->fused_maxpool.has_value());
  EXPECT_EQ(graph.find("c")->source_layers, (Names{"c", "r"}));
}

TEST(Passes, MultipleConsumersBlockFusion) {
  // c is read by r and by the add: c → r cannot fuse.
  Graph graph = parse_model(
      model_text("  - {name: c, op: conv, out_channels: 3, kernel: 3, padding: 1, weight: w}\n"
                 "  - {name: r, op: relu}\n"
                 "  - {name: s, op: add, inputs: [r, c]}\n"),
      "m.yaml");
  bind_random_weights(graph, 1);
  EXPECT_EQ(run_default_passes(graph).conv_activations_fused, 0);
  EXPECT_EQ(node_names(graph), (Names{"c", "r", "s"}));

  // r is read twice: conv → relu fuses (r is the chain's end), relu → pool does not; both
  // readers of r now read c.
  graph = parse_model(
      model_text("  - {name: c, op: conv, out_channels: 3, kernel: 3, padding: 1, weight: w}\n"
                 "  - {name: r, op: relu}\n"
                 "  - {name: p, op: maxpool, kernel: 3, stride: 1, padding: 1}\n"
                 "  - {name: s, op: add, inputs: [p, r]}\n"),
      "m.yaml");
  bind_random_weights(graph, 1);
  const PassStats stats = run_default_passes(graph);
  EXPECT_EQ(stats.conv_activations_fused, 1);
  EXPECT_EQ(stats.conv_pools_fused, 0);
  EXPECT_EQ(node_names(graph), (Names{"c", "p", "s"}));
  EXPECT_EQ(graph.find("p")->inputs, Names{"c"});
  EXPECT_EQ(graph.find("s")->inputs, (Names{"p", "c"}));
}

TEST(Passes, DropoutAtTheEdges) {
  // First layer (reads the graph input) and last layer (is the graph output).
  Graph graph = parse_model(model_text("  - {name: d1, op: dropout}\n  - {name: r, op: relu}\n"
                                       "  - {name: d2, op: dropout, p: 0.1}\n"),
                            "m.yaml");
  EXPECT_EQ(run_default_passes(graph).dropouts_removed, 2);
  EXPECT_EQ(node_names(graph), Names{"r"});
  EXPECT_EQ(graph.find("r")->inputs, Names{"input"});
  EXPECT_EQ(graph.output, "r");
}

TEST(Passes, LinearReluAndNoDoubleFusion) {
  Graph graph = parse_model(model_text("  - {name: f, op: flatten}\n"
                                       "  - {name: l, op: linear, out_features: 5, weight: w}\n"
                                       "  - {name: r1, op: relu}\n  - {name: r2, op: relu}\n",
                                       "[2, 3, 3]"),
                            "m.yaml");
  bind_random_weights(graph, 1);
  EXPECT_EQ(run_default_passes(graph).linear_activations_fused, 1);
  // A node with an epilogue takes no second one: r2 stays.
  EXPECT_EQ(node_names(graph), (Names{"f", "l", "r2"}));
  EXPECT_EQ(graph.find("r2")->inputs, Names{"l"});
  EXPECT_EQ(graph.output, "r2");
}

// --- batchnorm folding, numerically ---------------------------------------------------------

// Direct convolution on one CHW sample (test oracle; doubles).
std::vector<double> conv_chw(const std::vector<float>& x, const Shape& in, const Node& conv) {
  const ConvAttrs& a = conv.get<ConvAttrs>();
  const Shape& out = conv.pre_pool_shape;
  const HostVector<float>& w = conv.find_param("weight")->value.data;
  const Param* bias = conv.find_param("bias");
  const int64_t cin_g = in[0] / a.groups, cout_g = a.out_channels / a.groups;
  std::vector<double> y(static_cast<size_t>(shape_elements(out)));
  for (int64_t o = 0; o < out[0]; ++o)
    for (int64_t oh = 0; oh < out[1]; ++oh)
      for (int64_t ow = 0; ow < out[2]; ++ow) {
        double sum = bias ? bias->value.data[o] : 0.0;
        const int64_t group = o / cout_g;
        for (int64_t ci = 0; ci < cin_g; ++ci)
          for (int kh = 0; kh < a.kernel_h; ++kh)
            for (int kw = 0; kw < a.kernel_w; ++kw) {
              const int64_t ih = oh * a.stride_h - a.pad_h + kh * a.dilation_h;
              const int64_t iw = ow * a.stride_w - a.pad_w + kw * a.dilation_w;
              if (ih < 0 || ih >= in[1] || iw < 0 || iw >= in[2]) continue;
              sum +=
                  static_cast<double>(w[((o * cin_g + ci) * a.kernel_h + kh) * a.kernel_w + kw]) *
                  x[((group * cin_g + ci) * in[1] + ih) * in[2] + iw];
            }
        y[(o * out[1] + oh) * out[2] + ow] = sum;
      }
  return y;
}

void check_fold(const std::string& yaml, const Shape& input_shape, bool conv_has_bias) {
  Graph graph = parse_model(yaml, "m.yaml");
  bind_random_weights(graph, 11);
  const Node conv = *graph.find("c");
  const Node bn = *graph.find("bn");
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(shape_elements(input_shape)));
  for (float& v : x) v = dist(rng);

  // Reference: conv, then batchnorm with the original parameters.
  std::vector<double> expected = conv_chw(x, input_shape, conv);
  const int64_t channels = conv.pre_pool_shape[0];
  const int64_t spatial = conv.pre_pool_shape[1] * conv.pre_pool_shape[2];
  const float eps = bn.get<BatchNormAttrs>().eps;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < spatial; ++i) {
      double& v = expected[c * spatial + i];
      v = (v - bn.params[2].value.data[c]) / std::sqrt(bn.params[3].value.data[c] + double{eps}) *
              bn.params[0].value.data[c] +
          bn.params[1].value.data[c];
    }

  const PassStats stats = run_default_passes(graph);
  EXPECT_EQ(stats.batchnorms_folded, 1);
  ASSERT_EQ(graph.find("bn"), nullptr);
  const Node& folded = *graph.find("c");
  EXPECT_EQ(folded.source_layers, (Names{"c", "bn"}));
  ASSERT_EQ(folded.params.size(), 2u);
  EXPECT_EQ(folded.params[1].role, "bias");
  EXPECT_EQ(folded.params[1].key, conv_has_bias ? "c.b" : "bn.folded_bias");
  EXPECT_EQ(graph.find("after")->inputs, Names{"c"});

  const std::vector<double> actual = conv_chw(x, input_shape, folded);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)  // fp32 weights: abs 1e-5 + rel 1e-5
    EXPECT_NEAR(actual[i], expected[i], 1e-5 + 1e-5 * std::fabs(expected[i])) << i;
}

TEST(FoldBatchNorm, OneByOneConvWithBias) {
  check_fold(model_text("  - {name: c, op: conv, out_channels: 5, kernel: 1, weight: c.w, "
                        "bias: c.b}\n"
                        "  - {name: bn, op: batchnorm, eps: 0.001, weight: bn.w, bias: bn.b, "
                        "running_mean: bn.m, running_var: bn.v}\n"
                        "  - {name: after, op: softmax}\n",
                        "[3, 4, 5]"),
             {3, 4, 5}, true);
}

TEST(FoldBatchNorm, GroupedStridedConvWithoutBias) {
  check_fold(model_text("  - {name: c, op: conv, out_channels: 6, kernel: 3, stride: 2, "
                        "padding: 1, groups: 2, weight: c.w}\n"
                        "  - {name: bn, op: batchnorm, weight: bn.w, bias: bn.b, "
                        "running_mean: bn.m, running_var: bn.v}\n"
                        "  - {name: after, op: maxpool, kernel: 2}\n",
                        "[4, 7, 9]"),
             {4, 7, 9}, false);
}

TEST(FoldBatchNorm, BlockedBySecondConsumerAndNeedsWeights) {
  Graph graph =
      parse_model(model_text("  - {name: c, op: conv, out_channels: 3, kernel: 1, weight: c.w}\n"
                             "  - {name: bn, op: batchnorm, weight: a, bias: b, running_mean: m, "
                             "running_var: v}\n"
                             "  - {name: s, op: add, inputs: [bn, c]}\n"),
                  "m.yaml");
  bind_random_weights(graph, 3);
  EXPECT_EQ(run_default_passes(graph).batchnorms_folded, 0);
  EXPECT_EQ(node_names(graph), (Names{"c", "bn", "s"}));

  Graph unbound =
      parse_model(model_text("  - {name: c, op: conv, out_channels: 3, kernel: 1, weight: c.w}\n"
                             "  - {name: bn, op: batchnorm, weight: a, bias: b, running_mean: m, "
                             "running_var: v}\n"),
                  "m.yaml");
  EXPECT_CONTAINS(error_of([&] { fold_batchnorm(unbound); }), "needs bound weights");
}

}  // namespace
}  // namespace cnnrt

namespace cnnrt {
namespace {

TEST(Passes, IdentityPoolsAreRemovedOthersKept) {
  Graph graph = parse_model(
      "name: t\ninput: {shape: [4, 6, 6]}\nlayers:\n"
      "  - {name: same, op: adaptive_avgpool, output_size: 6}\n"
      "  - {name: one, op: maxpool, kernel: 1, stride: 1}\n"
      "  - {name: smaller, op: adaptive_avgpool, output_size: [5, 6]}\n"
      "  - {name: last, op: adaptive_avgpool, output_size: [5, 6]}\n",
      "t.yaml");
  const PassStats stats = drop_identity_ops(graph);
  EXPECT_EQ(stats.identities_removed, 3);  // same, one, and `last` (5x6 → 5x6)
  ASSERT_EQ(graph.nodes.size(), 1u);
  EXPECT_EQ(graph.nodes[0].name, "smaller");
  EXPECT_EQ(graph.nodes[0].inputs, std::vector<std::string>{"input"});
  EXPECT_EQ(graph.output, "smaller");  // the removed output's reader chain is rewired
}

TEST(Passes, IdentityThatIsTheOnlyNodeStays) {
  Graph graph = parse_model(
      "name: t\ninput: {shape: [4, 6, 6]}\nlayers:\n"
      "  - {name: same, op: adaptive_avgpool, output_size: 6}\n",
      "t.yaml");
  EXPECT_EQ(drop_identity_ops(graph).identities_removed, 0);
  EXPECT_EQ(graph.nodes.size(), 1u);
}

}  // namespace
}  // namespace cnnrt
