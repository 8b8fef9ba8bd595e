// The graph IR: nodes in topological order, named tensors, per-sample shapes, attributes.
//
// One small attribute struct per op (no giant union struct, no if/else parse chain: graph/ops.cpp
// holds a table from op name to parser / shape inference / FLOP count).  Tensors are named after
// the node that produces them; the graph input tensor is named "input".  Shapes are per sample
// (CHW for feature maps, {F} after flatten/linear): the batch is chosen when a context is made.
// Weights live on the node that uses them (host fp32), so passes such as BN folding rewrite
// them in place and the builder prepacks them per backend.  Nothing here knows about CUDA.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "graph/host_vector.h"

namespace cnnrt {

using Shape = std::vector<int64_t>;

int64_t shape_elements(const Shape& shape);       // product of dims (1 for an empty shape)
std::string shape_to_string(const Shape& shape);  // "[3, 224, 224]"

// A host tensor of fp32 values (weights are converted from fp16 on load).
struct HostTensor {
  Shape shape;
  // Not zeroed by resize(): a reader fills it whole (the weight loader on the host's cores).
  HostVector<float> data;

  HostTensor() = default;
  HostTensor(Shape shape_, HostVector<float> data_)
      : shape(std::move(shape_)), data(std::move(data_)) {}
  // A copy of a large tensor is made on the host's cores: builds copy the model (an engine
  // owns its graph), and one core took ~0.1 s for AlexNet's 244 MB, mostly first-touching
  // the new pages.
  HostTensor(const HostTensor& other);
  HostTensor& operator=(const HostTensor& other);
  HostTensor(HostTensor&&) noexcept = default;
  HostTensor& operator=(HostTensor&&) noexcept = default;

  int64_t elements() const { return shape_elements(shape); }
};

enum class OpKind {
  Conv,
  Relu,
  Relu6,
  Clip,
  MaxPool,
  AvgPool,
  AdaptiveAvgPool,
  Linear,
  Flatten,
  Dropout,
  Softmax,
  BatchNorm,
  Add,
  Concat,
  LRN,
};

const char* op_name(OpKind op);  // "conv", "relu", ... (the YAML spelling)

struct ConvAttrs {
  int out_channels = 0;
  int kernel_h = 1, kernel_w = 1;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;  // top, left
  // Asymmetric padding (TF "SAME", ONNX pads): bottom = pad_h + pad_h_extra, right = pad_w +
  // pad_w_extra.  0 (symmetric) unless the model says otherwise; a kernel that assumes
  // symmetric padding must refuse a node where either is non-zero.
  int pad_h_extra = 0, pad_w_extra = 0;
  int dilation_h = 1, dilation_w = 1;
  int groups = 1;
  // `padding: same` (TensorFlow): the four pads depend on the input size, so shape inference
  // (re)computes pad_h/pad_w/pad_*_extra from the input every time it runs; see
  // resolve_same_padding in graph/ops.h.
  bool pad_same = false;
  int pad_bottom() const { return pad_h + pad_h_extra; }
  int pad_right() const { return pad_w + pad_w_extra; }
  bool symmetric_padding() const { return pad_h_extra == 0 && pad_w_extra == 0; }
};

// MaxPool and AvgPool (PyTorch semantics; stride defaults to kernel).
struct PoolAttrs {
  int kernel_h = 1, kernel_w = 1;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;  // avgpool only
};

struct AdaptivePoolAttrs {
  int out_h = 1, out_w = 1;
};

// clamp(x, min, max); an absent bound is infinite (ONNX Clip may give only one).
struct ClipAttrs {
  float min = -std::numeric_limits<float>::infinity();
  float max = std::numeric_limits<float>::infinity();
};

struct LinearAttrs {
  int out_features = 0;
};

struct DropoutAttrs {
  float p = 0.5f;
};

struct SoftmaxAttrs {};  // over the channel / feature axis (axis 1 of NC.. tensors)

struct BatchNormAttrs {
  float eps = 1e-5f;
};

struct ConcatAttrs {};  // along channels (axis 1)

// PyTorch LocalResponseNorm: b_c = a_c / (k + alpha/size * sum_{c' in window} a_c'^2)^beta
struct LRNAttrs {
  int size = 5;
  float alpha = 1e-4f;
  float beta = 0.75f;
  float k = 1.0f;
};

struct EmptyAttrs {};  // relu, relu6, flatten, add

using Attrs =
    std::variant<EmptyAttrs, ConvAttrs, PoolAttrs, AdaptivePoolAttrs, LinearAttrs, DropoutAttrs,
                 SoftmaxAttrs, BatchNormAttrs, ConcatAttrs, LRNAttrs, ClipAttrs>;

// The activation a node applies in its epilogue (fused by the passes).  Every kind is a clamp,
// so a kernel implements all of them with one min/max pair (activation_bounds below):
//   None [-inf, inf], Relu [0, inf], Relu6 [0, 6], Clip [clip_min, clip_max].
enum class Activation { None, Relu, Relu6, Clip };

// A weight bound to a node: its role ("weight", "bias", "running_mean", ...), the key it has in
// the weight file (PyTorch state_dict name), and its values once loaded.
struct Param {
  std::string role;
  std::string key;
  HostTensor value;
};

struct Node {
  std::string name;  // unique; also the name of the output tensor
  OpKind op = OpKind::Relu;
  Attrs attrs;
  std::vector<std::string> inputs;  // tensor names ("input" = graph input)
  std::vector<Param> params;        // in the op's role order (see ops.h)

  // Filled by shape inference.
  std::vector<Shape> input_shapes;  // per sample
  Shape output_shape;               // per sample

  // Filled by fusion passes: the epilogue this node runs after its main op.
  Activation activation = Activation::None;
  float clip_min = 0, clip_max = 0;        // Activation::Clip only
  std::optional<PoolAttrs> fused_maxpool;  // conv only: max-pool applied after the activation
  // conv only (fuse_conv_residual): inputs[1] is a tensor of the output's shape added after the
  // bias and before the activation: y = clamp(conv(x) + b + inputs[1]).  Never with a pool.
  bool fused_residual = false;
  Shape pre_pool_shape;                    // conv output before fused_maxpool (per sample)
  std::vector<std::string> source_layers;  // YAML layers this node covers, itself first

  // Per-layer choices written in the model (`precision:`, `impl:` a registry kernel name); ""
  // when absent.  A plan
  // file given at build time overrides them (runtime/builder.cpp).
  std::string precision_request, kernel_request;
  // 2:4 structured sparsity (docs/SPARSITY.md), orthogonal to precision: the model's or plan's
  // `sparsity:` ("" | "2:4" | "dense"), and whether the weight has 2:4 structure (set by
  // mark_2_4_weights, graph/passes_sparsity.h: only then are sparse kernels offered).
  std::string sparsity_request;
  bool weight_2_4 = false;

  // Where it was declared (for error messages).
  int line = 0, column = 0;

  template <typename T>
  const T& get() const {
    return std::get<T>(attrs);
  }
  template <typename T>
  T& get() {
    return std::get<T>(attrs);
  }
  const Param* find_param(const std::string& role) const;
  Param* find_param(const std::string& role);
};

// The clamp interval of a node's fused activation (see Activation).
struct ActivationBounds {
  float lo, hi;
};
ActivationBounds activation_bounds(const Node& node);
const char* activation_name(Activation activation);  // "none", "relu", "relu6", "clip"

struct InputSpec {
  Shape shape;                   // per sample, CHW
  std::vector<float> mean, std;  // per channel; empty = no normalisation
};

struct Graph {
  std::string name;
  std::string source_file;  // the YAML path, for messages
  InputSpec input;
  std::string weights_file;  // as written in the YAML, resolved relative to it ("" if none)
  std::string labels_file;   // likewise
  std::vector<Node> nodes;   // topological order
  std::string output;        // name of the output tensor (default: last node)

  const Node* find(const std::string& name) const;
  Node* find(const std::string& name);
  // Names of the nodes that read `tensor`.
  std::vector<std::string> consumers(const std::string& tensor) const;
};

}  // namespace cnnrt
