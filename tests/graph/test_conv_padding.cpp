// Conv padding forms (graph/ops.cpp): `p`, `[h, w]`, `[top, left, bottom, right]` and `same`
// (TensorFlow), checked against hand-computed pads and output sizes; `same` is resolved at shape
// inference from the input size and again after the passes; malformed lists are one Error
// naming file:line:col, the layer and the key.
#include <gtest/gtest.h>

#include "graph/model_loader.h"
#include "graph/ops.h"
#include "graph/passes.h"
#include "graph_test_util.h"

namespace cnnrt {
namespace {

using test::error_of;
using test::model_text;

const ConvAttrs& conv_of(const Graph& graph, const std::string& name = "c") {
  return graph.find(name)->get<ConvAttrs>();
}

Graph one_conv(const std::string& attrs, const std::string& shape = "[3, 8, 8]") {
  return parse_model(
      model_text("  - {name: c, op: conv, out_channels: 4, weight: w, " + attrs + "}\n", shape),
      "m.yaml");
}

TEST(ConvPadding, IntegerAndPairStaySymmetric) {
  const Graph a = one_conv("kernel: 3, padding: 1");
  EXPECT_EQ(conv_of(a).pad_h, 1);
  EXPECT_EQ(conv_of(a).pad_w, 1);
  EXPECT_TRUE(conv_of(a).symmetric_padding());
  EXPECT_FALSE(conv_of(a).pad_same);
  EXPECT_EQ(a.find("c")->output_shape, (Shape{4, 8, 8}));

  const Graph b = one_conv("kernel: [3, 5], padding: [0, 2]");
  EXPECT_EQ(conv_of(b).pad_h, 0);
  EXPECT_EQ(conv_of(b).pad_w, 2);
  EXPECT_EQ(conv_of(b).pad_bottom(), 0);
  EXPECT_EQ(conv_of(b).pad_right(), 2);
  EXPECT_EQ(b.find("c")->output_shape, (Shape{4, 6, 8}));
}

TEST(ConvPadding, FourEntriesAreTopLeftBottomRight) {
  // H: 8 + 0 + 2 - 3 + 1 = 8 rows; W: (8 + 1 + 3 - 3) / 2 + 1 = 5 columns.
  const Graph graph = one_conv("kernel: 3, stride: [1, 2], padding: [0, 1, 2, 3]");
  const ConvAttrs& a = conv_of(graph);
  EXPECT_EQ(a.pad_h, 0);
  EXPECT_EQ(a.pad_w, 1);
  EXPECT_EQ(a.pad_bottom(), 2);
  EXPECT_EQ(a.pad_right(), 3);
  EXPECT_EQ(a.pad_h_extra, 2);
  EXPECT_EQ(a.pad_w_extra, 2);
  EXPECT_FALSE(a.symmetric_padding());
  EXPECT_EQ(graph.find("c")->output_shape, (Shape{4, 8, 5}));
  // A bottom/right smaller than top/left is legal too (negative extra).
  const Graph smaller = one_conv("kernel: 2, padding: [2, 1, 0, 0]");
  EXPECT_EQ(conv_of(smaller).pad_h_extra, -2);
  EXPECT_EQ(conv_of(smaller).pad_bottom(), 0);
  EXPECT_EQ(smaller.find("c")->output_shape, (Shape{4, 9, 8}));
  // Four equal entries are the symmetric case: CUDA kernels keep serving it.
  EXPECT_TRUE(conv_of(one_conv("kernel: 3, padding: [1, 1, 1, 1]")).symmetric_padding());
}

TEST(ConvPadding, SameFollowsTensorFlow) {
  // 3x3 stride 2 on 8x8: out 4, total = 3*2 + 3 - 8 = 1 -> top/left 0, bottom/right 1.
  const Graph s2 = one_conv("kernel: 3, stride: 2, padding: same");
  EXPECT_TRUE(conv_of(s2).pad_same);
  EXPECT_EQ(conv_of(s2).pad_h, 0);
  EXPECT_EQ(conv_of(s2).pad_bottom(), 1);
  EXPECT_EQ(conv_of(s2).pad_w, 0);
  EXPECT_EQ(conv_of(s2).pad_right(), 1);
  EXPECT_EQ(s2.find("c")->output_shape, (Shape{4, 4, 4}));
  // 5x5 stride 2 on 9x8 (odd H): H out 5, total 4*2 + 5 - 9 = 4 -> 2/2; W out 4, total 6+5-8 = 3
  // -> 1/2.
  const Graph odd = one_conv("kernel: 5, stride: 2, padding: same", "[3, 9, 8]");
  EXPECT_EQ(conv_of(odd).pad_h, 2);
  EXPECT_EQ(conv_of(odd).pad_bottom(), 2);
  EXPECT_EQ(conv_of(odd).pad_w, 1);
  EXPECT_EQ(conv_of(odd).pad_right(), 2);
  EXPECT_EQ(odd.find("c")->output_shape, (Shape{4, 5, 4}));
  // Stride 1, odd kernel: symmetric (k-1)/2, the output keeps the input size.
  const Graph s1 = one_conv("kernel: 5, padding: same", "[3, 7, 6]");
  EXPECT_TRUE(conv_of(s1).symmetric_padding());
  EXPECT_EQ(conv_of(s1).pad_h, 2);
  EXPECT_EQ(s1.find("c")->output_shape, (Shape{4, 7, 6}));
  // Dilation 2, kernel 3 (span 5), stride 1: total 4 -> 2/2.
  const Graph dilated = one_conv("kernel: 3, dilation: 2, padding: same");
  EXPECT_EQ(conv_of(dilated).pad_h, 2);
  EXPECT_EQ(conv_of(dilated).pad_bottom(), 2);
  // Stride larger than the kernel: total clamps at 0 (1x1 stride 2 on 8: out 4, 6 + 1 - 8 < 0).
  const Graph no_pad = one_conv("kernel: 1, stride: 2, padding: same");
  EXPECT_EQ(conv_of(no_pad).pad_h, 0);
  EXPECT_EQ(conv_of(no_pad).pad_bottom(), 0);
  EXPECT_EQ(no_pad.find("c")->output_shape, (Shape{4, 4, 4}));
}

TEST(ConvPadding, ResolveSamePaddingMatchesTheFormula) {
  for (int in = 1; in <= 20; ++in)
    for (int kernel = 1; kernel <= 7; ++kernel)
      for (int stride = 1; stride <= 3; ++stride)
        for (int dilation = 1; dilation <= 2; ++dilation) {
          ConvAttrs a;
          a.kernel_h = a.kernel_w = kernel;
          a.stride_h = a.stride_w = stride;
          a.dilation_h = a.dilation_w = dilation;
          resolve_same_padding(a, in, in);
          const int expected_out = (in + stride - 1) / stride;
          EXPECT_EQ(conv_output_size(in, kernel, stride, a.pad_h, a.pad_bottom(), dilation),
                    expected_out)
              << "in " << in << " k " << kernel << " s " << stride << " d " << dilation;
          EXPECT_GE(a.pad_h, 0);
          EXPECT_TRUE(a.pad_h_extra == 0 || a.pad_h_extra == 1);
        }
}

TEST(ConvPadding, SameIsResolvedAgainAfterPasses) {
  // The loader resolves `same` for the YAML input; the passes re-run shape inference and must
  // reach the same pads (resolution is a function of the input size, not a one-off rewrite).
  Graph graph = parse_model(model_text("  - {name: c, op: conv, out_channels: 4, kernel: 3, "
                                       "stride: 2, padding: same, weight: w}\n"
                                       "  - {name: r, op: relu6}\n",
                                       "[3, 10, 7]"),
                            "m.yaml");
  bind_random_weights(graph, 3);
  run_default_passes(graph);
  ASSERT_EQ(graph.nodes.size(), 1u);
  const ConvAttrs& a = conv_of(graph);
  EXPECT_EQ(a.pad_h, 0);  // H: out 5, total 8 + 3 - 10 = 1
  EXPECT_EQ(a.pad_bottom(), 1);
  EXPECT_EQ(a.pad_w, 1);  // W: out 4, total 6 + 3 - 7 = 2
  EXPECT_EQ(a.pad_right(), 1);
  EXPECT_EQ(graph.nodes[0].output_shape, (Shape{4, 5, 4}));
}

TEST(ConvPaddingErrors, ThreeEntriesNameFileLineLayerAndForms) {
  const std::string msg = error_of([] { one_conv("kernel: 3, padding: [1, 1, 1]"); });
  EXPECT_CONTAINS(msg, "m.yaml:4:");
  EXPECT_CONTAINS(msg, "layer 'c'");
  EXPECT_CONTAINS(msg, "'padding' must be an integer, [h, w], [top, left, bottom, right] or same");
  EXPECT_CONTAINS(msg, "got a list of 3");
}

TEST(ConvPaddingErrors, NegativeEntriesAreRejected) {
  const std::string list = error_of([] { one_conv("kernel: 3, padding: [0, 1, -1, 0]"); });
  EXPECT_CONTAINS(list, "m.yaml:4:");
  EXPECT_CONTAINS(list, "layer 'c'");
  EXPECT_CONTAINS(list, "'padding' must be non-negative, got [0, 1, -1, 0]");
  EXPECT_CONTAINS(error_of([] { one_conv("kernel: 3, padding: -1"); }),
                  "'padding' must be non-negative, got -1");
  EXPECT_CONTAINS(error_of([] { one_conv("kernel: 3, padding: [-2, 0]"); }),
                  "'padding' must be non-negative, got [-2, 0]");
}

TEST(ConvPaddingErrors, OtherWordsAndTypesListTheForms) {
  EXPECT_CONTAINS(error_of([] { one_conv("kernel: 3, padding: valid"); }), "or same, got 'valid'");
  EXPECT_CONTAINS(error_of([] { one_conv("kernel: 3, padding: {a: 1}"); }), "or same, got a map");
  EXPECT_CONTAINS(error_of([] { one_conv("kernel: 3, padding: [1, x, 1, 1]"); }),
                  "'padding' must be an integer, got 'x'");
  // Pools keep PyTorch's forms only: `same` is a conv padding.
  EXPECT_CONTAINS(
      error_of([] {
        parse_model(model_text("  - {name: p, op: maxpool, kernel: 3, padding: same}\n"), "m.yaml");
      }),
      "'padding' must be an integer, got 'same'");
}

TEST(ConvPaddingErrors, KernelBiggerThanAsymmetricallyPaddedInput) {
  // 2 + 1 + 0 = 3 rows, kernel 5.
  const std::string msg =
      error_of([] { one_conv("kernel: 5, padding: [1, 2, 0, 2]", "[3, 2, 8]"); });
  EXPECT_CONTAINS(msg, "layer 'c'");
  EXPECT_CONTAINS(msg, "kernel 5 is bigger than the padded input height 3");
}

TEST(ConvPadding, FlopsCountTheAsymmetricOutput) {
  // out [4, 8, 5], 3 in channels, 3x3 kernel: 2 * 160 * 27 = 8640.
  const Graph graph = one_conv("kernel: 3, stride: [1, 2], padding: [0, 1, 2, 3]");
  EXPECT_DOUBLE_EQ(node_flops(*graph.find("c")), 2.0 * 4 * 8 * 5 * 27);
}

}  // namespace
}  // namespace cnnrt
