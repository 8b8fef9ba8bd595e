// CPU int8 registry entries: thin wrappers over the integer reference kernels
// (kernels/cpu/int8_ref.h) on int8 NCHW activations, each tensor at its calibrated scale.
//
// The factory does everything docs/QUANTIZATION.md puts on the host, once: it looks up the
// scale of every tensor the layer reads and writes (int8_tensor_scale: an Error naming the
// calibration file, the layer and the tensor when one is missing), quantises the weights per
// output channel, the bias to int32 and computes the fp32 multipliers.  run() only calls the
// reference kernel.  A conv or linear that writes the graph output dequantises in its epilogue
// (fp32 out): run() returns fp32, and rounding it to int8 first would only add error.  A fused
// max-pool runs on the requantised int8 values (exact: max commutes with the monotonic
// requantisation), the pre-pool tensor in the workspace.  Flatten and dropout are views: their
// output keeps the input's scale and they may run in place.
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "graph/tensor_type.h"
#include "kernels/cpu/int8_ref.h"
#include "kernels/cpu/reference.h"
#include "runtime/calibration.h"
#include "runtime/kernel.h"

namespace cnnrt {
namespace {

TensorType int8_nchw(float scale) { return {DType::I8, Layout::NCHW, 1, scale}; }

[[noreturn]] void layer_error(const KernelBuildContext& context, const std::string& message) {
  throw_error(node_site(context), message);
}

// [C, H, W] of input `index`.
struct Chw {
  int c = 0, h = 0, w = 0;
};
Chw chw_input(const KernelBuildContext& context, size_t index = 0) {
  const Node& node = context.node;
  if (node.input_shapes.size() <= index || node.input_shapes[index].size() != 3)
    layer_error(context, "cpu int8 kernel: input must be CHW");
  const Shape& s = node.input_shapes[index];
  return {static_cast<int>(s[0]), static_cast<int>(s[1]), static_cast<int>(s[2])};
}

int64_t input_elements(const KernelBuildContext& context, size_t index = 0) {
  if (context.node.input_shapes.size() <= index)
    layer_error(context, "cpu int8 kernel: input shape " + std::to_string(index) + " not inferred");
  return shape_elements(context.node.input_shapes[index]);
}

// A weight's values, the element count checked; empty when absent and optional.
std::vector<float> param_values(const KernelBuildContext& context, const char* role,
                                int64_t expected, bool required) {
  const Param* param = context.node.find_param(role);
  if (param == nullptr || param->value.data.empty()) {
    if (required) layer_error(context, std::string("weight '") + role + "' is not loaded");
    return {};
  }
  if (static_cast<int64_t>(param->value.data.size()) != expected)
    layer_error(context, std::string("weight '") + role + "' has " +
                             std::to_string(param->value.data.size()) + " values, expected " +
                             std::to_string(expected));
  return {param->value.data.begin(), param->value.data.end()};
}

// Conv and linear share the host-side preparation: scales, quantised weights, epilogue.
struct PreparedWeights {
  ref::Int8Layer layer;
  float input_scale = 0;
  bool float_output = false;
};
PreparedWeights prepare_weights(const KernelBuildContext& context, int out_channels,
                                int64_t per_channel) {
  const Node& node = context.node;
  PreparedWeights prepared;
  prepared.input_scale = int8_tensor_scale(context, node.inputs.at(0));
  prepared.float_output = node.name == context.graph.output;
  const float output_scale = prepared.float_output ? 0.0f : int8_tensor_scale(context, node.name);
  const std::vector<float> weight =
      param_values(context, "weight", out_channels * per_channel, true);
  const std::vector<float> bias = param_values(context, "bias", out_channels, false);
  try {
    prepared.layer = ref::prepare_int8_layer(weight.data(), bias.empty() ? nullptr : bias.data(),
                                             out_channels, per_channel, prepared.input_scale,
                                             output_scale, activation_bounds(node));
  } catch (const Error& error) {
    layer_error(context, error.what());
  }
  return prepared;
}

size_t prepared_bytes(const ref::Int8Layer& layer) {
  return layer.weight.size() + sizeof(int32_t) * layer.bias.size() +
         sizeof(float) * layer.multiplier.size();
}

class Int8ConvKernel final : public LayerKernel {
 public:
  explicit Int8ConvKernel(const KernelBuildContext& context)
      : attrs_(context.node.get<ConvAttrs>()), input_(chw_input(context)) {
    const Node& node = context.node;
    if (attrs_.groups < 1 || input_.c % attrs_.groups != 0)
      layer_error(context, "cpu int8 conv: input channels not divisible by groups");
    pool_ = node.fused_maxpool;
    conv_shape_ = pool_ ? node.pre_pool_shape : node.output_shape;
    const int oh = ref::conv_output_extent(input_.h, attrs_.kernel_h, attrs_.stride_h, attrs_.pad_h,
                                           attrs_.pad_bottom(), attrs_.dilation_h);
    const int ow = ref::conv_output_extent(input_.w, attrs_.kernel_w, attrs_.stride_w, attrs_.pad_w,
                                           attrs_.pad_right(), attrs_.dilation_w);
    if (conv_shape_ != Shape{attrs_.out_channels, oh, ow})
      layer_error(context, "cpu int8 conv: conv output shape " + shape_to_string(conv_shape_) +
                               " does not match the attributes");
    prepared_ = prepare_weights(
        context, attrs_.out_channels,
        static_cast<int64_t>(input_.c / attrs_.groups) * attrs_.kernel_h * attrs_.kernel_w);
  }
  std::vector<TensorType> input_types(size_t) const override {
    return {int8_nchw(prepared_.input_scale)};
  }
  TensorType output_type() const override {
    return prepared_.float_output ? fp32_nchw() : int8_nchw(prepared_.layer.output_scale);
  }
  KernelPlan prepare(const PrepareInfo& info) const override {
    KernelPlan plan;
    if (pool_) plan.workspace_bytes = element_bytes() * shape_elements(conv_shape_) * info.batch;
    return plan;
  }
  void run(const KernelArgs& args) override {
    const auto* x = static_cast<const int8_t*>(args.inputs.at(0));
    void* conv_out = pool_ ? args.workspace : args.output;
    if (conv_out == nullptr) throw Error("cpu int8 conv: no output or workspace");
    ref::conv2d_int8(x, args.batch, input_.c, input_.h, input_.w, attrs_, prepared_.layer,
                     conv_out);
    if (!pool_) return;
    const int c = static_cast<int>(conv_shape_[0]), h = static_cast<int>(conv_shape_[1]),
              w = static_cast<int>(conv_shape_[2]);
    if (prepared_.float_output)
      ref::maxpool2d(static_cast<const float*>(conv_out), args.batch, c, h, w, *pool_,
                     static_cast<float*>(args.output));
    else  // the pre-pool tensor is already at the output's scale: multiplier 1
      ref::maxpool2d_int8(static_cast<const int8_t*>(conv_out), args.batch, c, h, w, *pool_, 1.0f,
                          static_cast<int8_t*>(args.output));
  }
  size_t weight_bytes() const override { return prepared_bytes(prepared_.layer); }

 private:
  size_t element_bytes() const { return prepared_.float_output ? sizeof(float) : 1; }

  ConvAttrs attrs_;
  Chw input_;
  std::optional<PoolAttrs> pool_;
  Shape conv_shape_;
  PreparedWeights prepared_;
};

class Int8LinearKernel final : public LayerKernel {
 public:
  explicit Int8LinearKernel(const KernelBuildContext& context)
      : in_features_(static_cast<int>(input_elements(context))) {
    prepared_ =
        prepare_weights(context, context.node.get<LinearAttrs>().out_features, in_features_);
  }
  std::vector<TensorType> input_types(size_t) const override {
    return {int8_nchw(prepared_.input_scale)};
  }
  TensorType output_type() const override {
    return prepared_.float_output ? fp32_nchw() : int8_nchw(prepared_.layer.output_scale);
  }
  void run(const KernelArgs& args) override {
    ref::linear_int8(static_cast<const int8_t*>(args.inputs.at(0)), args.batch, in_features_,
                     prepared_.layer, args.output);
  }
  size_t weight_bytes() const override { return prepared_bytes(prepared_.layer); }

 private:
  int in_features_;
  PreparedWeights prepared_;
};

// The ops with one int8 input and one int8 output, each at its own scale.
class Int8UnaryKernel : public LayerKernel {
 public:
  explicit Int8UnaryKernel(const KernelBuildContext& context)
      : input_scale_(int8_tensor_scale(context, context.node.inputs.at(0))),
        output_scale_(int8_tensor_scale(context, context.node.name)) {}
  std::vector<TensorType> input_types(size_t) const override { return {int8_nchw(input_scale_)}; }
  TensorType output_type() const override { return int8_nchw(output_scale_); }

 protected:
  const int8_t* in(const KernelArgs& args) const {
    return static_cast<const int8_t*>(args.inputs.at(0));
  }
  int8_t* out(const KernelArgs& args) const { return static_cast<int8_t*>(args.output); }
  float multiplier() const { return ref::requant_multiplier(input_scale_, output_scale_); }

  float input_scale_, output_scale_;
};

class Int8PoolKernel final : public Int8UnaryKernel {
 public:
  Int8PoolKernel(const KernelBuildContext& context, bool is_max)
      : Int8UnaryKernel(context),
        attrs_(context.node.get<PoolAttrs>()),
        input_(chw_input(context)),
        is_max_(is_max),
        multiplier_(multiplier()) {}
  void run(const KernelArgs& args) override {
    if (is_max_)
      ref::maxpool2d_int8(in(args), args.batch, input_.c, input_.h, input_.w, attrs_, multiplier_,
                          out(args));
    else
      ref::avgpool2d_int8(in(args), args.batch, input_.c, input_.h, input_.w, attrs_, input_scale_,
                          output_scale_, out(args));
  }

 private:
  PoolAttrs attrs_;
  Chw input_;
  bool is_max_;
  float multiplier_;
};

class Int8AdaptiveAvgPoolKernel final : public Int8UnaryKernel {
 public:
  explicit Int8AdaptiveAvgPoolKernel(const KernelBuildContext& context)
      : Int8UnaryKernel(context),
        attrs_(context.node.get<AdaptivePoolAttrs>()),
        input_(chw_input(context)) {}
  void run(const KernelArgs& args) override {
    ref::adaptive_avgpool2d_int8(in(args), args.batch, input_.c, input_.h, input_.w, attrs_.out_h,
                                 attrs_.out_w, input_scale_, output_scale_, out(args));
  }

 private:
  AdaptivePoolAttrs attrs_;
  Chw input_;
};

class Int8ReluKernel final : public Int8UnaryKernel {
 public:
  explicit Int8ReluKernel(const KernelBuildContext& context)
      : Int8UnaryKernel(context),
        elements_(input_elements(context)),
        multiplier_(multiplier()),
        bounds_(ref::int8_bounds(activation_bounds_of_relu(), output_scale_)) {}
  KernelPlan prepare(const PrepareInfo&) const override {
    KernelPlan plan;
    plan.in_place = input_scale_ == output_scale_;  // same bytes, same type
    return plan;
  }
  void run(const KernelArgs& args) override {
    ref::activation_int8(in(args), elements_ * args.batch, multiplier_, bounds_, out(args));
  }

 private:
  static ActivationBounds activation_bounds_of_relu() {
    return {0.0f, std::numeric_limits<float>::infinity()};
  }
  int64_t elements_;
  float multiplier_;
  ref::Int8Bounds bounds_;
};

class Int8AddKernel final : public LayerKernel {
 public:
  explicit Int8AddKernel(const KernelBuildContext& context)
      : elements_(input_elements(context, 0)),
        scale_a_(int8_tensor_scale(context, context.node.inputs.at(0))),
        scale_b_(int8_tensor_scale(context, context.node.inputs.at(1))),
        output_scale_(int8_tensor_scale(context, context.node.name)),
        multiplier_a_(ref::requant_multiplier(scale_a_, output_scale_)),
        multiplier_b_(ref::requant_multiplier(scale_b_, output_scale_)),
        activation_(context.node.activation != Activation::None),
        bounds_(ref::int8_bounds(activation_bounds(context.node), output_scale_)) {
    if (input_elements(context, 1) != elements_)
      layer_error(context, "cpu int8 add: inputs differ in size");
  }
  std::vector<TensorType> input_types(size_t index) const override {
    return {int8_nchw(index == 0 ? scale_a_ : scale_b_)};
  }
  TensorType output_type() const override { return int8_nchw(output_scale_); }
  void run(const KernelArgs& args) override {
    ref::add_int8(static_cast<const int8_t*>(args.inputs.at(0)), multiplier_a_,
                  static_cast<const int8_t*>(args.inputs.at(1)), multiplier_b_,
                  elements_ * args.batch, static_cast<int8_t*>(args.output));
    // A fused activation is a clamp in the integer domain (exact: docs/QUANTIZATION.md).
    if (activation_)
      ref::activation_int8(static_cast<const int8_t*>(args.output), elements_ * args.batch, 1.0f,
                           bounds_, static_cast<int8_t*>(args.output));
  }

 private:
  int64_t elements_;
  float scale_a_, scale_b_, output_scale_, multiplier_a_, multiplier_b_;
  bool activation_;
  ref::Int8Bounds bounds_;
};

class Int8ConcatKernel final : public LayerKernel {
 public:
  explicit Int8ConcatKernel(const KernelBuildContext& context)
      : output_scale_(int8_tensor_scale(context, context.node.name)) {
    const Node& node = context.node;
    if (node.input_shapes.empty() || node.input_shapes.size() != node.inputs.size())
      layer_error(context, "cpu int8 concat: input shapes not inferred");
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const Shape& shape = node.input_shapes[i];
      if (shape.empty()) layer_error(context, "cpu int8 concat: empty input shape");
      const int64_t spatial = shape_elements(shape) / shape[0];
      if (i == 0) spatial_ = spatial;
      if (spatial != spatial_)
        layer_error(context, "cpu int8 concat: inputs differ in spatial size");
      channels_.push_back(static_cast<int>(shape[0]));
      scales_.push_back(int8_tensor_scale(context, node.inputs[i]));
      multipliers_.push_back(ref::requant_multiplier(scales_.back(), output_scale_));
    }
  }
  std::vector<TensorType> input_types(size_t index) const override {
    return {int8_nchw(scales_.at(index))};
  }
  TensorType output_type() const override { return int8_nchw(output_scale_); }
  void run(const KernelArgs& args) override {
    std::vector<const int8_t*> inputs;
    for (size_t i = 0; i < channels_.size(); ++i)
      inputs.push_back(static_cast<const int8_t*>(args.inputs.at(i)));
    ref::concat_channels_int8(inputs.data(), channels_.data(), multipliers_.data(),
                              static_cast<int>(channels_.size()), args.batch, spatial_,
                              static_cast<int8_t*>(args.output));
  }

 private:
  float output_scale_;
  int64_t spatial_ = 1;
  std::vector<int> channels_;
  std::vector<float> scales_, multipliers_;
};

// Flatten and dropout: the bytes pass through and keep the input's scale.
class Int8ViewKernel final : public LayerKernel {
 public:
  explicit Int8ViewKernel(const KernelBuildContext& context)
      : bytes_(input_elements(context)),
        scale_(int8_tensor_scale(context, context.node.inputs.at(0))) {}
  std::vector<TensorType> input_types(size_t) const override { return {int8_nchw(scale_)}; }
  TensorType output_type() const override { return int8_nchw(scale_); }
  KernelPlan prepare(const PrepareInfo&) const override {
    KernelPlan plan;
    plan.in_place = true;
    return plan;
  }
  void run(const KernelArgs& args) override {
    if (args.inputs.at(0) != args.output)
      std::memcpy(args.output, args.inputs.at(0), static_cast<size_t>(bytes_ * args.batch));
  }

 private:
  int64_t bytes_;
  float scale_;
};

// --- which nodes the entries take --------------------------------------------------------------

bool has_chw_input(const Node& node) {
  return !node.input_shapes.empty() && node.input_shapes[0].size() == 3;
}
bool has_input(const Node& node) {
  return !node.input_shapes.empty() && !node.input_shapes[0].empty();
}
// K within the int32 accumulator's budget (docs/QUANTIZATION.md, "Overflow").
bool conv_fits_int32(const Node& node) {
  if (!has_chw_input(node)) return false;
  const ConvAttrs& a = node.get<ConvAttrs>();
  if (a.groups < 1) return false;
  return node.input_shapes[0][0] / a.groups * a.kernel_h * a.kernel_w <= ref::kMaxInt8Reduction;
}
bool linear_fits_int32(const Node& node) {
  return has_input(node) && shape_elements(node.input_shapes[0]) <= ref::kMaxInt8Reduction;
}

template <typename KernelType>
std::function<std::unique_ptr<LayerKernel>(const KernelBuildContext&)> factory() {
  return [](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
    return std::make_unique<KernelType>(context);
  };
}

void add_entry(KernelRegistry& registry, const char* name, OpKind op,
               std::function<bool(const Node&)> supports,
               std::function<std::unique_ptr<LayerKernel>(const KernelBuildContext&)> create) {
  add_entries(registry, Device::CPU, Precision::INT8, 0,
              {{name, op, std::move(supports), std::move(create)}});
}

}  // namespace

void register_cpu_int8_kernels(KernelRegistry& registry) {
  add_entry(registry, "cpu_int8_conv", OpKind::Conv, conv_fits_int32, factory<Int8ConvKernel>());
  add_entry(registry, "cpu_int8_linear", OpKind::Linear, linear_fits_int32,
            factory<Int8LinearKernel>());
  add_entry(registry, "cpu_int8_maxpool", OpKind::MaxPool, has_chw_input,
            [](const KernelBuildContext& c) { return std::make_unique<Int8PoolKernel>(c, true); });
  add_entry(registry, "cpu_int8_avgpool", OpKind::AvgPool, has_chw_input,
            [](const KernelBuildContext& c) { return std::make_unique<Int8PoolKernel>(c, false); });
  add_entry(registry, "cpu_int8_adaptive_avgpool", OpKind::AdaptiveAvgPool, has_chw_input,
            factory<Int8AdaptiveAvgPoolKernel>());
  add_entry(registry, "cpu_int8_relu", OpKind::Relu, has_input, factory<Int8ReluKernel>());
  add_entry(registry, "cpu_int8_add", OpKind::Add, has_input, factory<Int8AddKernel>());
  add_entry(registry, "cpu_int8_concat", OpKind::Concat, has_input, factory<Int8ConcatKernel>());
  add_entry(registry, "cpu_int8_flatten", OpKind::Flatten, has_input, factory<Int8ViewKernel>());
  add_entry(registry, "cpu_int8_dropout", OpKind::Dropout, has_input, factory<Int8ViewKernel>());
}

}  // namespace cnnrt
