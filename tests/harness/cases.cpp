// The harness's case tables: ONE per op (max- and average pooling share one table of window
// geometries).  Every kernel of an op runs every row its supports() accepts (harness.h).
//
// What the rows cover, and why: odd channel counts (1, 3, 7, 13, 130: a partial last group of 8,
// one more than a multiple of 64/128) and prime H, W (no tile divides them); stride 2 and 3,
// padding 0, asymmetric padding, dilation 2; grouped and depthwise convs; 1x1, 1x7, 7x7, 11x11
// kernels; batch 1, 3 and 33 (batch strides, the fp16 linear's GEMV/GEMM switch at 8, grids
// that fill the GPU); fused activations (relu, relu6, clip — each a clamp) and a fused
// max-pool; vectors as well as maps for the ops that take both; AlexNet's own layers.  Large
// rows only where a kernel path needs them (AlexNet at batch 1, one conv at batch 33 whose grid
// fills an H100 so the wgmma kernels leave their small-batch fallback): the CPU reference runs
// for every row.
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include "case_builders.h"
#include "graph/ops.h"
#include "harness.h"

namespace cnnrt::harness {
namespace {

// The row builders every table shares, and the conv table (case_builders.h, conv_cases.cpp).
using cases::Act;
using cases::conv_cases;
using cases::join_dims;
using cases::kClip;
using cases::kClipPositive;
using cases::kNone;
using cases::kRelu;
using cases::kRelu6;
using cases::make_case;
using cases::node_of;

// --- linear ------------------------------------------------------------------------------------

// in -> out; `flattened` [C, H, W] puts a flatten before the linear (its input is that map
// flattened, which the CUDA linears read in (h, w, c) order).
OpCase linear_case(int in, int out, bool bias, const Act& act, int batch, Shape flattened = {},
                   const char* tag = "") {
  Node node = node_of(OpKind::Linear, {{in}}, LinearAttrs{out});
  act.apply(node);
  node.params.push_back(Param{"weight", "test.weight", {}});
  if (bias) node.params.push_back(Param{"bias", "test.bias", {}});
  std::string name = std::string(tag) + (*tag ? "_" : "") + "in" + std::to_string(in) + "_out" +
                     std::to_string(out);
  if (!flattened.empty()) name += "_from" + join_dims(flattened);
  if (!bias) name += "_nobias";
  name += act.suffix();
  OpCase c = make_case(name, node, batch);
  if (!flattened.empty()) {
    Node flatten = node_of(OpKind::Flatten, {flattened});
    flatten.name = "flatten";
    flatten.output_shape = {shape_elements(flattened)};
    c.graph.nodes.insert(c.graph.nodes.begin(), flatten);
    c.graph.nodes.back().inputs = {"flatten"};
    c.flattened_source = flattened;
  }
  return c;
}

std::vector<OpCase> linear_cases() {
  std::vector<OpCase> cases;
  // 16 and 33: two and five passes of the fp16 GEMV, the cuBLASLt path of the default entry.
  for (int batch : {1, 3, 16, 33}) {
    cases.push_back(linear_case(100, 37, true, kNone, batch));
    cases.push_back(linear_case(100, 37, false, kRelu, batch));
    cases.push_back(linear_case(259, 130, true, kRelu, batch));
    cases.push_back(linear_case(13 * 3 * 5, 29, true, kRelu, batch, {13, 3, 5}));  // C % 8 != 0
    cases.push_back(linear_case(64 * 3 * 3, 37, true, kNone, batch, {64, 3, 3}));  // a view
  }
  cases.push_back(linear_case(13, 1, true, kRelu, 3));
  cases.push_back(linear_case(1, 9, true, kNone, 33));
  cases.push_back(linear_case(3 * 1 * 7, 8, false, kNone, 3, {3, 1, 7}));
  cases.push_back(linear_case(100, 37, true, kRelu6, 3));
  cases.push_back(linear_case(100, 37, true, kClip, 3));
  // Either side of the fp16 linear's GEMV/cuBLASLt switch (kGemvMaxBatch = 8).
  cases.push_back(linear_case(300, 45, true, kRelu, 8));
  cases.push_back(linear_case(300, 45, true, kRelu, 9));
  // The int8 TMA linear's other batch tiles: 128 (batch 65-128) and two of 256 (batch > 256).
  cases.push_back(linear_case(259, 130, true, kRelu, 70));
  cases.push_back(linear_case(300, 45, true, kNone, 300));
  for (int batch : {1, 16})
    cases.push_back(linear_case(9216, 4096, true, kRelu, batch, {256, 6, 6}, "alexnet_fc6"));
  cases.push_back(linear_case(4096, 4096, true, kRelu, 3, {}, "alexnet_fc7"));
  cases.push_back(linear_case(4096, 1000, true, kNone, 33, {}, "alexnet_fc8"));
  return cases;
}

// --- pools -------------------------------------------------------------------------------------

struct PoolRow {
  int c, h, w, kh, kw, sh, sw, ph, pw;
  bool ceil;
  int batch;
};

// Window geometries shared by max- and average pooling.
const PoolRow kPoolRows[] = {
    {1, 7, 9, 3, 3, 2, 2, 0, 0, false, 3},     {3, 13, 13, 3, 3, 2, 2, 1, 1, true, 1},
    {7, 11, 5, 3, 3, 2, 2, 1, 1, true, 33},    {13, 9, 9, 2, 2, 2, 2, 0, 0, true, 3},
    {64, 27, 27, 3, 3, 2, 2, 0, 0, false, 3},  {13, 15, 7, 3, 2, 1, 2, 1, 0, false, 1},
    {130, 11, 13, 3, 3, 3, 3, 1, 1, false, 1}, {3, 17, 19, 1, 7, 1, 1, 0, 3, false, 3},
    {5, 23, 29, 7, 7, 3, 3, 3, 3, true, 3},    {1, 2, 2, 2, 2, 2, 2, 0, 0, true, 33},
    {256, 13, 13, 3, 3, 2, 2, 0, 0, false, 1},  // AlexNet pool5
};

std::vector<OpCase> pool_cases(OpKind op) {
  std::vector<OpCase> cases;
  for (const PoolRow& r : kPoolRows)
    for (bool include_pad : {true, false}) {
      if (op == OpKind::MaxPool && !include_pad) continue;  // a divisor rule of avg only
      if (!include_pad && r.ph == 0 && r.pw == 0 && !r.ceil) continue;  // nothing to exclude
      PoolAttrs a;
      a.kernel_h = r.kh;
      a.kernel_w = r.kw;
      a.stride_h = r.sh;
      a.stride_w = r.sw;
      a.pad_h = r.ph;
      a.pad_w = r.pw;
      a.ceil_mode = r.ceil;
      a.count_include_pad = include_pad;
      std::string name =
          "c" + std::to_string(r.c) + "_h" + std::to_string(r.h) + "_w" + std::to_string(r.w) +
          "_k" + std::to_string(r.kh) + "x" + std::to_string(r.kw) + "_s" + std::to_string(r.sh) +
          "x" + std::to_string(r.sw) + "_p" + std::to_string(r.ph) + "x" + std::to_string(r.pw) +
          (r.ceil ? "_ceil" : "") + (include_pad ? "" : "_excludepad");
      // Strictly negative inputs to max-pool: padding read as 0 would show.
      const float hi = op == OpKind::MaxPool ? -0.125f : 1.0f;
      cases.push_back(make_case(name, node_of(op, {{r.c, r.h, r.w}}, a), r.batch, -2.0f, hi));
    }
  return cases;
}

std::vector<OpCase> adaptive_pool_cases() {
  struct Row {
    int c, h, w, oh, ow, batch;
  };
  const Row rows[] = {{13, 13, 13, 6, 6, 3},
                      {3, 7, 5, 3, 4, 1},
                      {64, 5, 5, 6, 6, 33},
                      {1, 9, 11, 1, 1, 3},
                      {130, 13, 13, 6, 6, 1},
                      {256, 6, 6, 6, 6, 3},
                      {7, 17, 19, 5, 7, 3},
                      // Global pools (the fp16 global-average kernel): two chunk blocks with a
                      // partial one, a 1-pixel map.
                      {300, 7, 7, 1, 1, 3},
                      {40, 1, 1, 1, 1, 2}};
  std::vector<OpCase> cases;
  for (const Row& r : rows)
    cases.push_back(make_case(
        "c" + std::to_string(r.c) + "_h" + std::to_string(r.h) + "_w" + std::to_string(r.w) +
            "_to" + std::to_string(r.oh) + "x" + std::to_string(r.ow),
        node_of(OpKind::AdaptiveAvgPool, {{r.c, r.h, r.w}}, AdaptivePoolAttrs{r.oh, r.ow}),
        r.batch));
  return cases;
}

// --- one-input ops over maps and vectors -------------------------------------------------------

struct ShapeRow {
  Shape shape;
  int batch;
  Act act = kNone;
};

std::vector<OpCase> shape_cases(OpKind op, const std::vector<ShapeRow>& rows, Attrs attrs,
                                float lo = -1.0f, float hi = 1.0f) {
  std::vector<OpCase> cases;
  for (const ShapeRow& r : rows) {
    Node node = node_of(op, {r.shape}, attrs);
    r.act.apply(node);
    if (op == OpKind::BatchNorm)
      for (const char* role : {"weight", "bias", "running_mean", "running_var"})
        node.params.push_back(Param{role, std::string("test.") + role, {}});
    cases.push_back(
        make_case("shape" + join_dims(r.shape) + r.act.suffix(), node, r.batch, lo, hi));
  }
  return cases;
}

std::vector<OpCase> relu_cases() {
  return shape_cases(OpKind::Relu,
                     {{{7, 5, 3}, 3},
                      {{64, 3, 3}, 33},
                      {{37}, 1},
                      {{1, 9, 9}, 3},
                      {{130, 7, 11}, 1},
                      {{4096}, 33}},
                     EmptyAttrs{});
}

// Standalone relu6 and clip (values drawn wide enough to cross both bounds).
std::vector<OpCase> clamp_cases(OpKind op) {
  ClipAttrs clip;
  clip.min = -0.5f;
  clip.max = 2.0f;
  const Attrs attrs = op == OpKind::Clip ? Attrs{clip} : Attrs{EmptyAttrs{}};
  return shape_cases(op, {{{7, 5, 3}, 3}, {{37}, 1}, {{130, 7, 11}, 1}, {{4096}, 33}}, attrs, -9.0f,
                     9.0f);
}

std::vector<OpCase> dropout_cases() {
  return shape_cases(OpKind::Dropout, {{{13, 3, 5}, 3}, {{37}, 33}, {{130, 1, 1}, 1}},
                     DropoutAttrs{0.5f});
}

std::vector<OpCase> flatten_cases() {
  return shape_cases(OpKind::Flatten,
                     {{{13, 3, 5}, 3},
                      {{3, 7, 7}, 1},
                      {{64, 3, 3}, 33},
                      {{1, 5, 3}, 3},
                      {{256, 6, 6}, 3},
                      {{37}, 3}},
                     EmptyAttrs{});
}

std::vector<OpCase> softmax_cases() {
  // A wide input range so the max subtraction matters.
  return shape_cases(OpKind::Softmax,
                     {{{1000}, 1},
                      {{1000}, 33},
                      {{37}, 3},
                      {{1}, 3},
                      {{13, 3, 5}, 3},
                      {{64, 1, 3}, 1},
                      {{130, 7, 1}, 3}},
                     SoftmaxAttrs{}, -8.0f, 8.0f);
}

std::vector<OpCase> batchnorm_cases() {
  return shape_cases(OpKind::BatchNorm,
                     {{{13, 5, 7}, 3},
                      {{13, 5, 7}, 3, kRelu},
                      {{64, 3, 3}, 33, kRelu},
                      {{37}, 3},
                      {{3, 9, 1}, 1},
                      {{130, 5, 3}, 1, kRelu6},
                      {{7, 11, 13}, 3, kClip}},
                     BatchNormAttrs{1e-5f}, -2.0f, 2.0f);
}

std::vector<OpCase> lrn_cases() {
  std::vector<OpCase> cases;
  for (int size : {5, 2, 3}) {
    LRNAttrs a;
    a.size = size;
    a.alpha = 1e-2f;  // larger than AlexNet's 1e-4 so the normalisation is visible
    a.beta = 0.75f;
    a.k = 2.0f;
    for (OpCase& c : shape_cases(OpKind::LRN,
                                 {{{13, 5, 7}, 3},
                                  {{64, 3, 3}, 1},
                                  {{1, 3, 3}, 3},
                                  {{7, 1, 1}, 33},
                                  {{130, 3, 5}, 1},
                                  {{29}, 3}},
                                 a, -4.0f, 4.0f)) {
      c.name = "size" + std::to_string(size) + "_" + c.name;
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

// --- two and more inputs -----------------------------------------------------------------------

std::vector<OpCase> add_cases() {
  const ShapeRow rows[] = {{{13, 5, 7}, 3},         {{1, 3, 3}, 33},         {{100}, 3, kRelu},
                           {{8, 11, 13}, 3, kRelu}, {{130, 7, 5}, 1, kClip}, {{37}, 1, kRelu6}};
  std::vector<OpCase> cases;
  for (const ShapeRow& r : rows) {
    Node node = node_of(OpKind::Add, {r.shape, r.shape});
    r.act.apply(node);
    cases.push_back(make_case("shape" + join_dims(r.shape) + r.act.suffix(), node, r.batch));
  }
  return cases;
}

std::vector<OpCase> concat_cases() {
  struct Row {
    std::vector<int> channels;
    Shape spatial;  // {H, W} for maps, {} for vectors
    int batch;
  };
  const Row rows[] = {{{3, 13, 1}, {5, 3}, 3},   {{8, 16}, {5, 3}, 33}, {{7, 64}, {3, 7}, 1},
                      {{64, 64, 3}, {5, 3}, 3},  {{130, 1}, {3, 5}, 1}, {{37, 11}, {}, 3},
                      {{5, 11, 16}, {15, 13}, 1}};
  std::vector<OpCase> cases;
  for (const Row& r : rows) {
    std::vector<Shape> inputs;
    std::string name = "ch";
    for (int c : r.channels) {
      Shape shape{c};
      shape.insert(shape.end(), r.spatial.begin(), r.spatial.end());
      inputs.push_back(shape);
      name += "_" + std::to_string(c);
    }
    name += r.spatial.empty() ? "_vectors" : "_hw" + join_dims(r.spatial);
    cases.push_back(make_case(name, node_of(OpKind::Concat, inputs, ConcatAttrs{}), r.batch));
  }
  return cases;
}

std::vector<OpCase> build_cases(OpKind op) {
  switch (op) {
    case OpKind::Conv:
      return conv_cases();
    case OpKind::Linear:
      return linear_cases();
    case OpKind::MaxPool:
    case OpKind::AvgPool:
      return pool_cases(op);
    case OpKind::AdaptiveAvgPool:
      return adaptive_pool_cases();
    case OpKind::Relu:
      return relu_cases();
    case OpKind::Relu6:
    case OpKind::Clip:
      return clamp_cases(op);
    case OpKind::Dropout:
      return dropout_cases();
    case OpKind::Flatten:
      return flatten_cases();
    case OpKind::Softmax:
      return softmax_cases();
    case OpKind::BatchNorm:
      return batchnorm_cases();
    case OpKind::LRN:
      return lrn_cases();
    case OpKind::Add:
      return add_cases();
    case OpKind::Concat:
      return concat_cases();
  }
  return {};
}

}  // namespace

const std::vector<OpKind>& tested_ops() {
  static const std::vector<OpKind> ops = {
      OpKind::Conv, OpKind::Linear,  OpKind::MaxPool, OpKind::AvgPool, OpKind::AdaptiveAvgPool,
      OpKind::Relu, OpKind::Dropout, OpKind::Flatten, OpKind::Softmax, OpKind::BatchNorm,
      OpKind::LRN,  OpKind::Add,     OpKind::Concat,  OpKind::Relu6,   OpKind::Clip};
  return ops;
}

const std::vector<OpCase>& op_cases(OpKind op) {
  static std::map<OpKind, std::vector<OpCase>> tables;
  auto found = tables.find(op);
  if (found != tables.end()) return found->second;
  std::vector<OpCase> cases = build_cases(op);
  std::set<std::string> names;
  for (const OpCase& c : cases)
    if (!names.insert(c.name).second)
      throw std::logic_error(std::string("harness: two ") + op_name(op) + " cases named " + c.name);
  return tables.emplace(op, std::move(cases)).first->second;
}

}  // namespace cnnrt::harness
