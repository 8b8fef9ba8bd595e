// YAML model loading: every op parses into the right attributes, and every malformed model is an
// Error naming file:line, the layer and the key.
#include <gtest/gtest.h>

#include "graph/model_loader.h"
#include "graph/ops.h"
#include "graph_test_util.h"

namespace cnnrt {
namespace {

using test::error_of;
using test::model_text;

TEST(ModelLoader, ParsesEveryOpWithItsAttributes) {
  const Graph graph = load_model(test::data_path("all_ops.yaml"));
  ASSERT_EQ(graph.nodes.size(), 16u);
  EXPECT_EQ(graph.name, "all_ops");
  EXPECT_EQ(graph.output, "prob");  // default: the last layer
  EXPECT_TRUE(graph.input.mean.empty());

  const Node& conv = *graph.find("conv_a");
  EXPECT_EQ(conv.op, OpKind::Conv);
  EXPECT_EQ(conv.inputs, std::vector<std::string>{"input"});
  const ConvAttrs& c = conv.get<ConvAttrs>();
  EXPECT_EQ(c.out_channels, 6);
  EXPECT_EQ(c.kernel_h, 3);
  EXPECT_EQ(c.kernel_w, 5);
  EXPECT_EQ(c.stride_h, 1);
  EXPECT_EQ(c.stride_w, 2);
  EXPECT_EQ(c.pad_h, 1);
  EXPECT_EQ(c.pad_w, 2);
  EXPECT_EQ(c.groups, 2);
  ASSERT_EQ(conv.params.size(), 2u);
  EXPECT_EQ(conv.params[0].role, "weight");
  EXPECT_EQ(conv.params[0].key, "a.w");
  EXPECT_EQ(conv.params[0].value.shape, (Shape{6, 2, 3, 5}));
  EXPECT_TRUE(conv.params[0].value.data.empty());
  EXPECT_EQ(conv.params[1].key, "a.b");
  EXPECT_EQ(conv.line, 6);  // all_ops.yaml: comment, name, input, shape, layers, conv_a
  EXPECT_EQ(conv.column, 5);
  EXPECT_EQ(conv.source_layers, std::vector<std::string>{"conv_a"});

  const Node& bn = *graph.find("bn_a");
  EXPECT_FLOAT_EQ(bn.get<BatchNormAttrs>().eps, 0.001f);
  ASSERT_EQ(bn.params.size(), 4u);
  const char* roles[] = {"weight", "bias", "running_mean", "running_var"};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(bn.params[i].role, roles[i]);
  EXPECT_EQ(bn.params[3].key, "bn.v");
  EXPECT_EQ(bn.params[3].value.shape, (Shape{6}));

  const LRNAttrs& lrn = graph.find("lrn_a")->get<LRNAttrs>();
  EXPECT_EQ(lrn.size, 3);
  EXPECT_FLOAT_EQ(lrn.alpha, 0.0002f);
  EXPECT_FLOAT_EQ(lrn.beta, 0.5f);
  EXPECT_FLOAT_EQ(lrn.k, 2.0f);

  const Node& conv_b = *graph.find("conv_b");
  EXPECT_EQ(conv_b.inputs, std::vector<std::string>{"relu_a"});
  EXPECT_EQ(conv_b.params.size(), 1u);  // bias is optional
  EXPECT_EQ(graph.find("sum")->inputs, (std::vector<std::string>{"lrn_a", "conv_b"}));
  EXPECT_EQ(graph.find("cat")->inputs.size(), 3u);

  const PoolAttrs& maxp = graph.find("maxp")->get<PoolAttrs>();
  EXPECT_EQ(maxp.kernel_h, 3);
  EXPECT_EQ(maxp.stride_w, 2);
  EXPECT_EQ(maxp.pad_h, 1);
  EXPECT_TRUE(maxp.ceil_mode);
  const PoolAttrs& avgp = graph.find("avgp")->get<PoolAttrs>();
  EXPECT_EQ(avgp.kernel_w, 3);
  EXPECT_FALSE(avgp.count_include_pad);
  EXPECT_FALSE(avgp.ceil_mode);
  const AdaptivePoolAttrs& adapt = graph.find("adapt")->get<AdaptivePoolAttrs>();
  EXPECT_EQ(adapt.out_h, 3);
  EXPECT_EQ(adapt.out_w, 2);
  EXPECT_EQ(graph.find("flat")->op, OpKind::Flatten);
  EXPECT_FLOAT_EQ(graph.find("drop")->get<DropoutAttrs>().p, 0.25f);
  EXPECT_EQ(graph.find("fc")->get<LinearAttrs>().out_features, 7);
  EXPECT_EQ(graph.find("fc_relu6")->op, OpKind::Relu6);
  EXPECT_EQ(graph.find("fc_clip")->get<ClipAttrs>().min, -0.5f);
  EXPECT_EQ(graph.find("fc_clip")->get<ClipAttrs>().max, 4.0f);
  EXPECT_EQ(graph.find("prob")->op, OpKind::Softmax);
}

TEST(ModelLoader, DefaultsStrideToKernelAndResolvesFilesNextToTheYaml) {
  const Graph graph = load_model(test::data_path("alexnet.yaml"));
  const PoolAttrs& pool = graph.find("pool1")->get<PoolAttrs>();
  EXPECT_EQ(pool.stride_h, 2);
  const Graph other =
      parse_model(model_text("  - {name: p, op: maxpool, kernel: [3, 2]}\n"), "dir/sub/m.yaml");
  EXPECT_EQ(other.find("p")->get<PoolAttrs>().stride_h, 3);
  EXPECT_EQ(other.find("p")->get<PoolAttrs>().stride_w, 2);
  EXPECT_EQ(graph.weights_file, test::data_path("alexnet.safetensors"));
  EXPECT_EQ(graph.labels_file, test::data_path("imagenet_classes.txt"));
  EXPECT_EQ(graph.output, "fc8");
  ASSERT_EQ(graph.input.std.size(), 3u);
  EXPECT_FLOAT_EQ(graph.input.std[2], 0.225f);
}

// --- errors --------------------------------------------------------------------------------

TEST(ModelLoaderErrors, YamlSyntaxErrorKeepsLineAndColumn) {
  const std::string msg = error_of([] {
    parse_model("name: t\ninput: {shape: [3, 8, 8]}\nlayers:\n  - {name: a, op: relu\n", "m.yaml");
  });
  EXPECT_CONTAINS(msg, "m.yaml:");
  EXPECT_CONTAINS(msg, "YAML syntax error");
  EXPECT_TRUE(msg.rfind("m.yaml:4:", 0) == 0 || msg.rfind("m.yaml:5:", 0) == 0) << msg;
}

TEST(ModelLoaderErrors, MissingFile) {
  const std::string msg = error_of([] { load_model("/nonexistent/dir/model.yaml"); });
  EXPECT_CONTAINS(msg, "/nonexistent/dir/model.yaml");
  EXPECT_CONTAINS(msg, "cannot open");
}

TEST(ModelLoaderErrors, UnknownOpListsValidOps) {
  const std::string msg = error_of([] {
    parse_model(model_text("  - {name: a, op: relu}\n  - {name: b, op: convolution}\n"), "m.yaml");
  });
  EXPECT_CONTAINS(msg, "m.yaml:5:");
  EXPECT_CONTAINS(msg, "layer 'b'");
  EXPECT_CONTAINS(msg, "unknown op 'convolution'");
  EXPECT_CONTAINS(msg, "conv, relu, maxpool");
}

TEST(ModelLoaderErrors, UnknownAttributeKeyNamesKeyLayerAndLine) {
  const std::string msg = error_of([] {
    parse_model(model_text("  - {name: c1, op: conv, out_channels: 4, kernal: 3, weight: w}\n"),
                "m.yaml");
  });
  // "  - {name: c1, op: conv, out_channels: 4, " is 42 characters: the key is at column 43.
  EXPECT_CONTAINS(msg, "m.yaml:4:43: layer 'c1': unknown key 'kernal' for op conv");
  // A key valid for another op is still unknown here.
  const std::string pad = error_of([] {
    parse_model(model_text("  - {name: p, op: maxpool, kernel: 2, count_include_pad: false}\n"),
                "m.yaml");
  });
  EXPECT_CONTAINS(pad, "unknown key 'count_include_pad' for op maxpool");
}

TEST(ModelLoaderErrors, UnknownTopLevelAndInputKeys) {
  EXPECT_CONTAINS(error_of([] {
                    parse_model(
                        "name: t\ninput: {shape: [3, 8, 8]}\nlayer:\n  - {name: a, op: relu}\n",
                        "m.yaml");
                  }),
                  "m.yaml:3:1: unknown top-level key 'layer'");
  EXPECT_CONTAINS(error_of([] {
                    parse_model(model_text("  - {name: a, op: relu}\n", "[3, 8, 8], shap: 1"),
                                "m.yaml");
                  }),
                  "unknown key 'input.shap'");
  EXPECT_CONTAINS(
      error_of([] { parse_model("name: t\nlayers: [{name: a, op: relu}]\n", "m.yaml"); }),
      "missing required top-level key 'input'");
  EXPECT_CONTAINS(error_of([] {
                    parse_model(
                        "name: t\ninput: {shape: [3, 8, 8], mean: [0.5, 0.5]}\nlayers: "
                        "[{name: a, op: relu}]\n",
                        "m.yaml");
                  }),
                  "one number per channel (3)");
}

TEST(ModelLoaderErrors, WrongValueTypes) {
  struct Case {
    const char* layer;
    const char* expected;
  };
  const Case cases[] = {
      {"{name: c, op: conv, out_channels: 4, kernel: abc, weight: w}",
       "m.yaml:4:50: layer 'c': 'kernel' must be an integer"},
      {"{name: c, op: conv, out_channels: 3.5, kernel: 3, weight: w}",
       "layer 'c': 'out_channels' must be an integer, got '3.5'"},
      {"{name: c, op: conv, out_channels: 4, kernel: [3, 3, 3], weight: w}",
       "'kernel' must be an integer or [h, w]"},
      {"{name: c, op: conv, out_channels: 4, kernel: 3, weight: [a, b]}",
       "'weight' must be a non-empty string"},
      {"{name: p, op: maxpool, kernel: 3, ceil_mode: maybe}", "'ceil_mode' must be true or false"},
      {"{name: d, op: dropout, p: lots}", "'p' must be a number"},
      {"{name: d, op: dropout, p: 1.5}", "'p' must be in [0, 1)"},
      {"{name: r, op: relu, input: [a, b]}", "'input' must be a non-empty string"},
  };
  for (const Case& c : cases) {
    const std::string msg =
        error_of([&] { parse_model(model_text(std::string("  - ") + c.layer + "\n"), "m.yaml"); });
    EXPECT_CONTAINS(msg, c.expected) << c.layer;
  }
}

TEST(ModelLoaderErrors, NonPositiveSizes) {
  const char* layers[] = {
      "{name: c, op: conv, out_channels: 0, kernel: 3, weight: w}",
      "{name: c, op: conv, out_channels: 4, kernel: [3, -1], weight: w}",
      "{name: c, op: conv, out_channels: 4, kernel: 3, stride: 0, weight: w}",
      "{name: c, op: conv, out_channels: 4, kernel: 3, groups: 0, weight: w}",
      "{name: c, op: conv, out_channels: 4, kernel: 3, dilation: 0, weight: w}",
      "{name: c, op: conv, out_channels: 4, kernel: 3, padding: -1, weight: w}",
      "{name: a, op: adaptive_avgpool, output_size: 0}",
      "{name: l, op: lrn, size: -2}",
  };
  for (const char* layer : layers) {
    const std::string msg =
        error_of([&] { parse_model(model_text(std::string("  - ") + layer + "\n"), "m.yaml"); });
    EXPECT_CONTAINS(msg, "m.yaml:4:") << layer;
    EXPECT_TRUE(msg.find("must be positive") != std::string::npos ||
                msg.find("must be non-negative") != std::string::npos)
        << layer << ": " << msg;
  }
}

TEST(ModelLoaderErrors, MissingRequiredKeys) {
  EXPECT_CONTAINS(error_of([] {
                    parse_model(model_text("  - {name: c, op: conv, out_channels: 4, weight: w}\n"),
                                "m.yaml");
                  }),
                  "layer 'c': missing required key 'kernel'");
  EXPECT_CONTAINS(error_of([] {
                    parse_model(model_text("  - {name: c, op: conv, out_channels: 4, kernel: 1}\n"),
                                "m.yaml");
                  }),
                  "layer 'c': missing required key 'weight'");
  EXPECT_CONTAINS(error_of([] {
                    parse_model(model_text("  - {name: b, op: batchnorm, weight: a, bias: b, "
                                           "running_mean: m}\n"),
                                "m.yaml");
                  }),
                  "missing required key 'running_var'");
  EXPECT_CONTAINS(error_of([] { parse_model(model_text("  - {op: relu}\n"), "m.yaml"); }),
                  "m.yaml:4:5: layer is missing required key 'name'");
}

TEST(ModelLoaderErrors, DuplicateAndReservedLayerNames) {
  const std::string msg = error_of([] {
    parse_model(model_text("  - {name: a, op: relu}\n  - {name: b, op: relu}\n"
                           "  - {name: a, op: relu}\n"),
                "m.yaml");
  });
  EXPECT_CONTAINS(msg, "m.yaml:6:");
  EXPECT_CONTAINS(msg, "layer 'a': duplicate layer name");
  EXPECT_CONTAINS(
      error_of([] { parse_model(model_text("  - {name: input, op: relu}\n"), "m.yaml"); }),
      "reserved");
}

TEST(ModelLoaderErrors, InputsMustNameEarlierLayers) {
  const std::string unknown = error_of([] {
    parse_model(model_text("  - {name: a, op: relu}\n  - {name: b, op: relu, input: nope}\n"),
                "m.yaml");
  });
  EXPECT_CONTAINS(unknown, "m.yaml:5:");
  EXPECT_CONTAINS(unknown, "layer 'b': input 'nope' is not a known layer");
  const std::string later = error_of([] {
    parse_model(model_text("  - {name: a, op: relu, input: b}\n  - {name: b, op: relu}\n"),
                "m.yaml");
  });
  EXPECT_CONTAINS(later, "layer 'a': input 'b' refers to a later layer");
  const std::string self = error_of(
      [] { parse_model(model_text("  - {name: a, op: add, inputs: [input, a]}\n"), "m.yaml"); });
  EXPECT_CONTAINS(self, "input 'a'");
  EXPECT_CONTAINS(error_of([] {
                    parse_model(
                        model_text("  - {name: a, op: relu, input: input, inputs: [input]}\n"),
                        "m.yaml");
                  }),
                  "either 'input' or 'inputs'");
  EXPECT_CONTAINS(error_of([] {
                    parse_model(model_text("  - {name: a, op: relu}\n  - {name: s, op: add}\n"),
                                "m.yaml");
                  }),
                  "layer 's': add takes 2 input(s), got 1");
  EXPECT_CONTAINS(error_of([] {
                    parse_model(model_text("  - {name: s, op: concat, inputs: [input]}\n"),
                                "m.yaml");
                  }),
                  "concat takes at least 2 input(s), got 1");
  EXPECT_CONTAINS(error_of([] {
                    parse_model(
                        "name: t\ninput: {shape: [3, 8, 8]}\noutput: zz\nlayers:\n"
                        "  - {name: a, op: relu}\n",
                        "m.yaml");
                  }),
                  "m.yaml:3:9: output 'zz' is not a layer");
}

TEST(ModelLoaderErrors, ShapeErrorsNameTheLayer) {
  struct Case {
    const char* layers;
    const char* shape;
    const char* expected;
  };
  const Case cases[] = {
      {"  - {name: c, op: conv, out_channels: 4, kernel: 3, groups: 2, weight: w}\n", "[3, 8, 8]",
       "layer 'c': input channels 3 are not divisible by groups 2"},
      {"  - {name: c, op: conv, out_channels: 3, kernel: 3, groups: 3, weight: w}\n"
       "  - {name: d, op: conv, out_channels: 4, kernel: 1, groups: 3, weight: w2}\n",
       "[3, 8, 8]", "layer 'd': out_channels 4 is not divisible by groups 3"},
      {"  - {name: c, op: conv, out_channels: 4, kernel: 7, padding: 1, weight: w}\n", "[3, 4, 9]",
       "layer 'c': kernel 7 is bigger than the padded input height 6"},
      {"  - {name: p, op: maxpool, kernel: 3, padding: 2}\n", "[3, 8, 8]",
       "at most half the kernel"},
      {"  - {name: c, op: conv, out_channels: 4, kernel: 1, weight: w}\n"
       "  - {name: s, op: add, inputs: [input, c]}\n",
       "[3, 8, 8]", "layer 's': add needs equal shapes, got [3, 8, 8] ('input') and [4, 8, 8]"},
      {"  - {name: p, op: maxpool, kernel: 2}\n  - {name: s, op: concat, inputs: [input, p]}\n",
       "[3, 8, 8]", "layer 's': concat needs inputs that differ only in channels"},
      {"  - {name: f, op: linear, out_features: 4, weight: w}\n", "[3, 8, 8]",
       "layer 'f': linear expects a 1-D input [features], got [3, 8, 8]: add a flatten"},
      {"  - {name: f, op: flatten}\n  - {name: c, op: conv, out_channels: 4, kernel: 1, "
       "weight: w}\n",
       "[3, 8, 8]", "layer 'c': conv expects a [C, H, W] input, got [192]"},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of([&] { parse_model(model_text(c.layers, c.shape), "m.yaml"); });
    EXPECT_CONTAINS(msg, c.expected) << c.layers;
    EXPECT_CONTAINS(msg, "m.yaml:") << c.layers;
  }
}

// Every tensor's per-sample size must fit the kernels' int dimensions; beyond that a model is
// rejected at load time instead of overflowing later in size arithmetic or allocation.
TEST(ModelLoaderErrors, AbsurdTensorSizesAreRejectedAtLoad) {
  struct Case {
    const char* layers;
    const char* shape;
    const char* expected;
  };
  const Case cases[] = {
      // pad * 2 used to wrap around int and slip past the half-kernel check.
      {"  - {name: p, op: avgpool, kernel: 3, padding: 1500000000}\n", "[3, 9, 9]",
       "at most half the kernel"},
      {"  - {name: a, op: adaptive_avgpool, output_size: 2000000000}\n", "[3, 9, 9]",
       "layer 'a': output [3, 2000000000, 2000000000] is too large"},
      {"  - {name: c, op: conv, out_channels: 2147483647, kernel: 1, weight: w}\n", "[3, 9, 9]",
       "layer 'c': output [2147483647, 9, 9] is too large"},
      {"  - {name: f, op: flatten}\n  - {name: l, op: linear, out_features: 3, weight: w}\n",
       "[1, 1048576, 1048576]", "input [1, 1048576, 1048576] is too large"},
      // Reduced right away, but the input itself is still a tensor the kernels index.
      {"  - {name: c, op: conv, out_channels: 1, kernel: 64, stride: 64, weight: w}\n",
       "[1, 65536, 65536]", "input [1, 65536, 65536] is too large"},
      {"  - {name: f, op: flatten}\n"
       "  - {name: l, op: linear, out_features: 2000000000, weight: w}\n",
       "[3, 9, 9]", "layer 'l': tensor 'w': 'weight' of shape [2000000000, 243] is too large"},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of([&] { parse_model(model_text(c.layers, c.shape), "m.yaml"); });
    EXPECT_CONTAINS(msg, c.expected) << c.layers;
    EXPECT_CONTAINS(msg, "m.yaml:") << c.layers;
  }
}

TEST(BindWeights, MissingTensorNamesLayerAndKey) {
  Graph graph = parse_model(
      model_text("  - {name: c, op: conv, out_channels: 5, kernel: 3, weight: w, bias: b}\n"),
      "m.yaml");
  std::map<std::string, HostTensor> weights;
  weights["w"] = HostTensor{{5, 3, 3, 3}, HostVector<float>(135, 0.5f)};
  const std::string msg = error_of([&] { bind_weights(graph, weights, "w.safetensors"); });
  EXPECT_CONTAINS(msg, "w.safetensors: layer 'c': tensor 'b': missing from the weight file");
  EXPECT_CONTAINS(msg, "[5]");
  EXPECT_TRUE(graph.nodes[0].params[0].value.data.empty()) << "a failed bind must not half-bind";
}

TEST(BindWeights, ShapeMismatchNamesBothShapes) {
  Graph graph = parse_model(
      model_text("  - {name: c, op: conv, out_channels: 5, kernel: 3, weight: w, bias: b}\n"),
      "m.yaml");
  std::map<std::string, HostTensor> weights;
  weights["w"] = HostTensor{{5, 3, 3, 2}, HostVector<float>(90, 0.5f)};
  weights["b"] = HostTensor{{5}, HostVector<float>(5, 0.5f)};
  const std::string msg = error_of([&] { bind_weights(graph, weights, "w.safetensors"); });
  EXPECT_CONTAINS(msg, "layer 'c': tensor 'w': shape mismatch");
  EXPECT_CONTAINS(msg, "expected [5, 3, 3, 3], the file has [5, 3, 3, 2]");

  weights["w"] = HostTensor{{5, 3, 3, 3}, HostVector<float>(135, 0.25f)};
  weights["extra.num_batches_tracked"] = HostTensor{{}, {1.0f}};  // extra tensors are fine
  bind_weights(graph, weights, "w.safetensors");
  EXPECT_EQ(graph.nodes[0].params[0].value.data[134], 0.25f);
}

// Tensors are moved into the params; one key several layers name (tied weights) reaches each.
TEST(BindWeights, ATensorTwoLayersNameBindsBoth) {
  Graph graph = parse_model(
      model_text("  - {name: c1, op: conv, out_channels: 3, kernel: 1, weight: w, bias: b}\n"
                 "  - {name: c2, op: conv, out_channels: 3, kernel: 1, weight: w, bias: b}\n"),
      "m.yaml");
  std::map<std::string, HostTensor> weights;
  weights["w"] = HostTensor{{3, 3, 1, 1}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
  weights["b"] = HostTensor{{3}, {0.5f, -0.5f, 2}};
  bind_weights(graph, weights, "w.safetensors");  // a copy: `weights` stays whole
  for (const Node& node : graph.nodes) {
    ASSERT_EQ(node.params.size(), 2u) << node.name;
    EXPECT_EQ(node.params[0].value.data, weights["w"].data) << node.name;
    EXPECT_EQ(node.params[0].value.shape, weights["w"].shape) << node.name;
    EXPECT_EQ(node.params[1].value.data, weights["b"].data) << node.name;
  }
}

}  // namespace
}  // namespace cnnrt
