// CPU kernel registry entries: one LayerKernel per op, each a thin wrapper over the reference
// kernels in kernels/cpu/ on NCHW fp32 activations.
//
// This backend exists to be obviously right (it is the oracle the CUDA engine is compared
// with end to end), so each wrapper only unpacks the node: per-sample shapes from
// node.input_shapes / output_shape, the batch from KernelArgs.  Weights are copied into the
// kernel at creation (prepack = copy), so the kernel never points into the graph.
// A fused conv runs its epilogue in the order the fusion passes promise: conv + bias (+ the fused
// residual, inputs[1]) → activation → max-pool; with a fused pool the pre-pool tensor lives in the
// kernel's workspace.  Every activation (relu, relu6, clip) is a clamp, so conv and linear apply
// activation_bounds(node) with one ref::clamp and need no per-activation code.
//
// Flatten, dropout, relu, relu6 and clip work both in place (output == input) and out of place.
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "kernels/cpu/reference.h"
#include "runtime/kernel.h"

namespace cnnrt {

namespace {

[[noreturn]] void node_error(const Node& node, const std::string& message) {
  ErrorSite site;
  site.layer = node.name;
  site.line = node.line;
  site.column = node.column;
  throw_error(site, message);
}

const Shape& input_shape(const Node& node, size_t index = 0) {
  if (node.input_shapes.size() <= index)
    node_error(node, "cpu kernel: input shape " + std::to_string(index) + " not inferred");
  return node.input_shapes[index];
}

// Copies a parameter's values, checking the element count; empty vector when absent and
// optional.
std::vector<float> copy_param(const Node& node, const char* role, int64_t expected_elements,
                              bool required) {
  const Param* param = node.find_param(role);
  if (param == nullptr || param->value.data.empty()) {
    if (required) node_error(node, std::string("cpu kernel: weight '") + role + "' is not loaded");
    return {};
  }
  if (static_cast<int64_t>(param->value.data.size()) != expected_elements)
    node_error(node, std::string("cpu kernel: weight '") + role + "' has " +
                         std::to_string(param->value.data.size()) + " values, expected " +
                         std::to_string(expected_elements));
  return {param->value.data.begin(), param->value.data.end()};
}

const float* in_ptr(const KernelArgs& args, size_t index = 0) {
  if (args.inputs.size() <= index || args.inputs[index] == nullptr)
    throw Error("cpu kernel: missing input " + std::to_string(index));
  return static_cast<const float*>(args.inputs[index]);
}

float* out_ptr(const KernelArgs& args) {
  if (args.output == nullptr || args.batch < 1) throw Error("cpu kernel: no output or batch < 1");
  return static_cast<float*>(args.output);
}

// The fused activation of a node with an epilogue (conv, linear, add, batchnorm), applied in
// place: every activation kind is a clamp [lo, hi] (graph/ir.h activation_bounds; ref::clamp lets
// NaN pass through like torch.clamp).  Nothing when the node has none.
class Epilogue {
 public:
  explicit Epilogue(const Node& node)
      : active_(node.activation != Activation::None), bounds_(activation_bounds(node)) {}
  void apply(float* values, int64_t count) const {
    if (active_) ref::clamp(values, count, bounds_.lo, bounds_.hi, values);
  }

 private:
  bool active_;
  ActivationBounds bounds_;
};

KernelPlan in_place_plan() {
  KernelPlan plan;
  plan.in_place = true;
  return plan;
}

// out-of-place copy / in-place no-op, shared by flatten and dropout.
class IdentityKernel : public LayerKernel {
 public:
  explicit IdentityKernel(const Node& node) : elements_(shape_elements(input_shape(node))) {}
  void run(const KernelArgs& args) override {
    const float* x = in_ptr(args);
    float* y = out_ptr(args);
    if (x != y) std::memcpy(y, x, sizeof(float) * elements_ * args.batch);
  }
  KernelPlan prepare(const PrepareInfo&) const override { return in_place_plan(); }

 private:
  int64_t elements_;
};

class ReluKernel : public LayerKernel {
 public:
  explicit ReluKernel(const Node& node) : elements_(shape_elements(input_shape(node))) {}
  void run(const KernelArgs& args) override {
    ref::relu(in_ptr(args), elements_ * args.batch, out_ptr(args));  // x == y allowed
  }
  KernelPlan prepare(const PrepareInfo&) const override { return in_place_plan(); }

 private:
  int64_t elements_;
};

// Standalone relu6 and clip: the clamp interval comes from the op (relu6: [0, 6]).
class ClampKernel : public LayerKernel {
 public:
  ClampKernel(const Node& node, float lo, float hi)
      : elements_(shape_elements(input_shape(node))), lo_(lo), hi_(hi) {}
  void run(const KernelArgs& args) override {
    ref::clamp(in_ptr(args), elements_ * args.batch, lo_, hi_, out_ptr(args));  // x == y allowed
  }
  KernelPlan prepare(const PrepareInfo&) const override { return in_place_plan(); }

 private:
  int64_t elements_;
  float lo_, hi_;
};

class ConvKernel : public LayerKernel {
 public:
  explicit ConvKernel(const Node& node) : attrs_(node.get<ConvAttrs>()), epilogue_(node) {
    const Shape& in = input_shape(node);
    if (in.size() != 3) node_error(node, "cpu conv: input must be CHW, got " + shape_to_string(in));
    c_ = static_cast<int>(in[0]);
    h_ = static_cast<int>(in[1]);
    w_ = static_cast<int>(in[2]);
    if (attrs_.groups < 1 || c_ % attrs_.groups != 0)
      node_error(node, "cpu conv: input channels not divisible by groups");
    weight_ = copy_param(node, "weight",
                         static_cast<int64_t>(attrs_.out_channels) * (c_ / attrs_.groups) *
                             attrs_.kernel_h * attrs_.kernel_w,
                         true);
    bias_ = copy_param(node, "bias", attrs_.out_channels, false);
    pool_ = node.fused_maxpool;
    residual_ = node.fused_residual;
    conv_shape_ = pool_ ? node.pre_pool_shape : node.output_shape;
    if (residual_ && (pool_ || input_shape(node, 1) != conv_shape_))
      node_error(node, "cpu conv: the fused residual " + shape_to_string(input_shape(node, 1)) +
                           " must have the conv's output shape, without a pool");
    if (conv_shape_.size() != 3 || conv_shape_[0] != attrs_.out_channels)
      node_error(node, "cpu conv: conv output shape " + shape_to_string(conv_shape_) +
                           " does not match out_channels");
  }

  void run(const KernelArgs& args) override {
    const float* x = in_ptr(args);
    float* y = out_ptr(args);
    float* conv_out = y;
    if (pool_) {
      if (args.workspace == nullptr) throw Error("cpu conv: fused max-pool needs a workspace");
      conv_out = static_cast<float*>(args.workspace);
    }
    ref::conv2d(x, args.batch, c_, h_, w_, weight_.data(), bias_.empty() ? nullptr : bias_.data(),
                attrs_, conv_out);
    const int64_t count = shape_elements(conv_shape_) * args.batch;
    if (residual_) ref::add(conv_out, in_ptr(args, 1), count, conv_out);
    epilogue_.apply(conv_out, count);
    if (pool_)
      ref::maxpool2d(conv_out, args.batch, static_cast<int>(conv_shape_[0]),
                     static_cast<int>(conv_shape_[1]), static_cast<int>(conv_shape_[2]), *pool_, y);
  }

  // With a fused pool the pre-pool tensor lives in the workspace.
  KernelPlan prepare(const PrepareInfo& info) const override {
    KernelPlan plan;
    if (pool_) plan.workspace_bytes = sizeof(float) * shape_elements(conv_shape_) * info.batch;
    return plan;
  }
  size_t weight_bytes() const override { return sizeof(float) * (weight_.size() + bias_.size()); }

 private:
  ConvAttrs attrs_;
  int c_ = 0, h_ = 0, w_ = 0;
  std::vector<float> weight_, bias_;
  Epilogue epilogue_;
  std::optional<PoolAttrs> pool_;
  bool residual_ = false;
  Shape conv_shape_;
};

class LinearKernel : public LayerKernel {
 public:
  explicit LinearKernel(const Node& node)
      : in_features_(static_cast<int>(shape_elements(input_shape(node)))),
        out_features_(node.get<LinearAttrs>().out_features),
        epilogue_(node) {
    weight_ = copy_param(node, "weight", static_cast<int64_t>(out_features_) * in_features_, true);
    bias_ = copy_param(node, "bias", out_features_, false);
  }
  void run(const KernelArgs& args) override {
    float* y = out_ptr(args);
    ref::linear(in_ptr(args), args.batch, in_features_, weight_.data(),
                bias_.empty() ? nullptr : bias_.data(), out_features_, y);
    epilogue_.apply(y, static_cast<int64_t>(out_features_) * args.batch);
  }
  size_t weight_bytes() const override { return sizeof(float) * (weight_.size() + bias_.size()); }

 private:
  int in_features_, out_features_;
  Epilogue epilogue_;
  std::vector<float> weight_, bias_;
};

// Max and average pooling share shape unpacking.
class PoolKernel : public LayerKernel {
 public:
  PoolKernel(const Node& node, bool is_max) : attrs_(node.get<PoolAttrs>()), is_max_(is_max) {
    const Shape& in = input_shape(node);
    if (in.size() != 3) node_error(node, "cpu pool: input must be CHW, got " + shape_to_string(in));
    c_ = static_cast<int>(in[0]);
    h_ = static_cast<int>(in[1]);
    w_ = static_cast<int>(in[2]);
  }
  void run(const KernelArgs& args) override {
    if (is_max_)
      ref::maxpool2d(in_ptr(args), args.batch, c_, h_, w_, attrs_, out_ptr(args));
    else
      ref::avgpool2d(in_ptr(args), args.batch, c_, h_, w_, attrs_, out_ptr(args));
  }

 private:
  PoolAttrs attrs_;
  bool is_max_;
  int c_ = 0, h_ = 0, w_ = 0;
};

class AdaptiveAvgPoolKernel : public LayerKernel {
 public:
  explicit AdaptiveAvgPoolKernel(const Node& node) : attrs_(node.get<AdaptivePoolAttrs>()) {
    const Shape& in = input_shape(node);
    if (in.size() != 3)
      node_error(node, "cpu adaptive pool: input must be CHW, got " + shape_to_string(in));
    c_ = static_cast<int>(in[0]);
    h_ = static_cast<int>(in[1]);
    w_ = static_cast<int>(in[2]);
  }
  void run(const KernelArgs& args) override {
    ref::adaptive_avgpool2d(in_ptr(args), args.batch, c_, h_, w_, attrs_.out_h, attrs_.out_w,
                            out_ptr(args));
  }

 private:
  AdaptivePoolAttrs attrs_;
  int c_ = 0, h_ = 0, w_ = 0;
};

// Softmax and LRN run over axis 1 with everything after it as the inner (spatial) extent.
struct ChannelLayout {
  int channels = 0;
  int64_t spatial = 1;
};
ChannelLayout channel_layout(const Node& node, const Shape& shape) {
  if (shape.empty()) node_error(node, "cpu kernel: empty input shape");
  ChannelLayout layout;
  layout.channels = static_cast<int>(shape[0]);
  layout.spatial = shape_elements(shape) / shape[0];
  return layout;
}

class SoftmaxKernel : public LayerKernel {
 public:
  explicit SoftmaxKernel(const Node& node) : layout_(channel_layout(node, input_shape(node))) {}
  void run(const KernelArgs& args) override {
    ref::softmax(in_ptr(args), args.batch, layout_.channels, layout_.spatial, out_ptr(args));
  }

 private:
  ChannelLayout layout_;
};

class LRNKernel : public LayerKernel {
 public:
  explicit LRNKernel(const Node& node)
      : layout_(channel_layout(node, input_shape(node))), attrs_(node.get<LRNAttrs>()) {}
  void run(const KernelArgs& args) override {
    ref::lrn(in_ptr(args), args.batch, layout_.channels, layout_.spatial, attrs_, out_ptr(args));
  }

 private:
  ChannelLayout layout_;
  LRNAttrs attrs_;
};

class BatchNormKernel : public LayerKernel {
 public:
  explicit BatchNormKernel(const Node& node)
      : layout_(channel_layout(node, input_shape(node))),
        eps_(node.get<BatchNormAttrs>().eps),
        epilogue_(node) {
    const int64_t c = layout_.channels;
    gamma_ = copy_param(node, "weight", c, false);
    beta_ = copy_param(node, "bias", c, false);
    mean_ = copy_param(node, "running_mean", c, true);
    var_ = copy_param(node, "running_var", c, true);
    if (gamma_.empty()) gamma_.assign(c, 1.0f);  // affine=False in PyTorch terms
    if (beta_.empty()) beta_.assign(c, 0.0f);
  }
  void run(const KernelArgs& args) override {
    ref::batchnorm(in_ptr(args), args.batch, layout_.channels, layout_.spatial, gamma_.data(),
                   beta_.data(), mean_.data(), var_.data(), eps_, out_ptr(args));
    epilogue_.apply(out_ptr(args), layout_.channels * layout_.spatial * args.batch);
  }
  size_t weight_bytes() const override { return sizeof(float) * 4 * gamma_.size(); }

 private:
  ChannelLayout layout_;
  float eps_;
  Epilogue epilogue_;
  std::vector<float> gamma_, beta_, mean_, var_;
};

class AddKernel : public LayerKernel {
 public:
  explicit AddKernel(const Node& node)
      : elements_(shape_elements(input_shape(node, 0))), epilogue_(node) {
    if (shape_elements(input_shape(node, 1)) != elements_)
      node_error(node, "cpu add: inputs differ in size");
  }
  void run(const KernelArgs& args) override {
    ref::add(in_ptr(args, 0), in_ptr(args, 1), elements_ * args.batch, out_ptr(args));
    epilogue_.apply(out_ptr(args), elements_ * args.batch);
  }

 private:
  int64_t elements_;
  Epilogue epilogue_;
};

class ConcatKernel : public LayerKernel {
 public:
  explicit ConcatKernel(const Node& node) {
    for (size_t i = 0; i < node.input_shapes.size(); ++i) {
      const ChannelLayout layout = channel_layout(node, node.input_shapes[i]);
      if (i == 0) spatial_ = layout.spatial;
      if (layout.spatial != spatial_) node_error(node, "cpu concat: inputs differ in spatial size");
      channels_.push_back(layout.channels);
    }
    if (channels_.empty()) node_error(node, "cpu concat: no inputs");
  }
  void run(const KernelArgs& args) override {
    std::vector<const float*> inputs;
    for (size_t i = 0; i < channels_.size(); ++i) inputs.push_back(in_ptr(args, i));
    ref::concat_channels(inputs.data(), channels_.data(), static_cast<int>(channels_.size()),
                         args.batch, spatial_, out_ptr(args));
  }

 private:
  std::vector<int> channels_;
  int64_t spatial_ = 1;
};

// Window ops need CHW inputs; the rest take any per-sample shape.  A fused activation only
// where the kernel has an epilogue (conv, linear, add, batchnorm): the others refuse a node that
// carries one rather than drop it.
bool chw_shape(const Node& node) {
  return !node.input_shapes.empty() && node.input_shapes[0].size() == 3;
}
bool any_shape(const Node& node) {
  return !node.input_shapes.empty() && !node.input_shapes[0].empty();
}
bool has_chw_input(const Node& node) {
  return chw_shape(node) && node.activation == Activation::None;
}
bool has_input(const Node& node) { return any_shape(node) && node.activation == Activation::None; }

template <typename KernelType>
std::function<std::unique_ptr<LayerKernel>(const KernelBuildContext&)> factory() {
  return [](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
    return std::make_unique<KernelType>(context.node);
  };
}

void add_entry(KernelRegistry& registry, const char* name, OpKind op,
               std::function<bool(const Node&)> supports,
               std::function<std::unique_ptr<LayerKernel>(const KernelBuildContext&)> create,
               bool residual = false) {
  add_entries(registry, Device::CPU, Precision::FP32, 0,
              {{name, op, std::move(supports), std::move(create), residual}});
}

}  // namespace

void register_cpu_kernels(KernelRegistry& registry) {
  add_entry(registry, "cpu_ref_conv", OpKind::Conv, chw_shape, factory<ConvKernel>(),
            /*residual=*/true);
  add_entry(registry, "cpu_ref_relu", OpKind::Relu, has_input, factory<ReluKernel>());
  add_entry(registry, "cpu_ref_relu6", OpKind::Relu6, has_input, [](const KernelBuildContext& c) {
    return std::make_unique<ClampKernel>(c.node, 0, 6);
  });
  add_entry(registry, "cpu_ref_clip", OpKind::Clip, has_input, [](const KernelBuildContext& c) {
    const ClipAttrs& clip = c.node.get<ClipAttrs>();
    return std::make_unique<ClampKernel>(c.node, clip.min, clip.max);
  });
  add_entry(registry, "cpu_ref_maxpool", OpKind::MaxPool, has_chw_input,
            [](const KernelBuildContext& c) { return std::make_unique<PoolKernel>(c.node, true); });
  add_entry(
      registry, "cpu_ref_avgpool", OpKind::AvgPool, has_chw_input,
      [](const KernelBuildContext& c) { return std::make_unique<PoolKernel>(c.node, false); });
  add_entry(registry, "cpu_ref_adaptive_avgpool", OpKind::AdaptiveAvgPool, has_chw_input,
            factory<AdaptiveAvgPoolKernel>());
  add_entry(registry, "cpu_ref_linear", OpKind::Linear, any_shape, factory<LinearKernel>());
  add_entry(registry, "cpu_ref_flatten", OpKind::Flatten, has_input, factory<IdentityKernel>());
  add_entry(registry, "cpu_ref_dropout", OpKind::Dropout, has_input, factory<IdentityKernel>());
  add_entry(registry, "cpu_ref_softmax", OpKind::Softmax, has_input, factory<SoftmaxKernel>());
  add_entry(registry, "cpu_ref_batchnorm", OpKind::BatchNorm, any_shape,
            factory<BatchNormKernel>());
  add_entry(registry, "cpu_ref_add", OpKind::Add, any_shape, factory<AddKernel>());
  add_entry(registry, "cpu_ref_concat", OpKind::Concat, has_input, factory<ConcatKernel>());
  add_entry(registry, "cpu_ref_lrn", OpKind::LRN, has_input, factory<LRNKernel>());
}

}  // namespace cnnrt
