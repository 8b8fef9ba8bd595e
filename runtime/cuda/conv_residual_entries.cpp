// The conv family's answer to a fused residual (graph/passes.h fuse_conv_residual: a conv node
// that also reads r and computes clamp(conv(x) + b + r)):
//  * conv_fp16_depthwise (kernels/cuda/conv/depthwise.h, registered here), conv_fp16_igemm and
//    conv_fp16_wgmma read r in their own write-out (native; KernelEntry::residual set where they
//    are registered);
//  * the others (conv_fp16_s2d, conv_fp16_wgmma_ws) have none: the registry only lets an entry
//    see such a node when it says it handles one, so add_residual_epilogue() wraps them — the
//    inner kernel runs the conv alone (bias, no clamp) into the output, then
//    kernels/cuda/conv/residual_epilogue.h adds r and clamps in place.  That is the memory
//    traffic of the unfused conv + add, never more; the plan names it ("... + residual add").
#include <memory>
#include <optional>
#include <string>

#include "kernels/cuda/conv/depthwise.h"
#include "kernels/cuda/conv/residual_epilogue.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::cuda {
namespace {

// --- conv_fp16_depthwise -----------------------------------------------------------------------

std::optional<ConvShape> depthwise_shape(const Node& node) {
  std::optional<ConvShape> shape = conv_shape_of(node);
  if (!shape || !DepthwiseConvFp16::supports(*shape)) return std::nullopt;
  return shape;
}

class DepthwiseKernel final : public Fp16Kernel {
 public:
  DepthwiseKernel(const ConvShape& shape, const float* weight, const float* bias)
      : conv_(shape, weight, bias) {}
  KernelPlan prepare(const PrepareInfo&) const override {
    KernelPlan plan;
    plan.variant_name = conv_.variant_name();
    return plan;
  }
  void run(const KernelArgs& args) override {
    conv_.forward(args.inputs.at(0), args.inputs.size() > 1 ? args.inputs[1] : nullptr, args.output,
                  args.batch, static_cast<cudaStream_t>(args.stream));
  }
  size_t weight_bytes() const override { return conv_.weight_bytes(); }

 private:
  DepthwiseConvFp16 conv_;
};

std::unique_ptr<LayerKernel> create_depthwise(const KernelBuildContext& context) {
  const std::optional<ConvShape> shape = depthwise_shape(context.node);
  const ConvWeights weights = conv_weights_of(context, "conv_fp16_depthwise", shape);
  return std::make_unique<DepthwiseKernel>(*shape, weights.weight, weights.bias);
}

// --- the unfused residual epilogue -------------------------------------------------------------

// The conv of a fused-residual node alone: input 0 only, no activation (it comes after the
// add).  Params are copied only when the kernel is created (supports() needs none).
Node conv_alone(const Node& node, bool with_params) {
  Node conv;
  conv.name = node.name;
  conv.op = node.op;
  conv.attrs = node.attrs;
  conv.inputs = {node.inputs.at(0)};
  conv.input_shapes = {node.input_shapes.at(0)};
  conv.output_shape = node.output_shape;
  conv.pre_pool_shape = node.pre_pool_shape;
  conv.fused_maxpool = node.fused_maxpool;
  conv.source_layers = node.source_layers;
  conv.precision_request = node.precision_request;
  conv.kernel_request = node.kernel_request;
  conv.line = node.line;
  conv.column = node.column;
  if (with_params) conv.params = node.params;
  return conv;
}

class ResidualAfterKernel final : public LayerKernel {
 public:
  ResidualAfterKernel(std::unique_ptr<LayerKernel> conv, const Node& node)
      : conv_(std::move(conv)), clamp_() {
    const ActivationBounds bounds = activation_bounds(node);
    clamp_.on = node.activation != Activation::None ? 1 : 0;
    clamp_.lo = bounds.lo;
    clamp_.hi = bounds.hi;
    const NhwcView view = nhwc_view(node.output_shape);
    pixels_ = view.pixels;
    channels_ = view.channels;
    channel_stride_ = view.channel_stride;
  }
  std::vector<TensorType> input_types(size_t index) const override {
    return index == 0 ? conv_->input_types(0) : std::vector<TensorType>{fp16_nhwc8()};
  }
  TensorType output_type() const override { return conv_->output_type(); }
  KernelPlan prepare(const PrepareInfo& info) const override {
    PrepareInfo conv_info;
    conv_info.batch = info.batch;
    if (!info.input_types.empty()) conv_info.input_types = {info.input_types[0]};
    KernelPlan plan = conv_->prepare(conv_info);
    plan.in_place = false;
    plan.variant_name += (plan.variant_name.empty() ? "" : " ") + std::string("+ residual add");
    return plan;
  }
  void run(const KernelArgs& args) override {
    KernelArgs conv_args = args;
    conv_args.inputs.resize(1);
    conv_->run(conv_args);
    residual_add_fp16(args.output, args.inputs.at(1), pixels_ * args.batch, channels_,
                      channel_stride_, clamp_, static_cast<cudaStream_t>(args.stream));
  }
  size_t weight_bytes() const override { return conv_->weight_bytes(); }

 private:
  std::unique_ptr<LayerKernel> conv_;
  EpilogueClamp clamp_;
  int64_t pixels_ = 0;
  int channels_ = 0, channel_stride_ = 0;
};

}  // namespace

void add_residual_epilogue(KernelEntry& entry) {
  auto supports = entry.supports;
  auto create = entry.create;
  entry.supports = [supports](const Node& node) {
    if (!node.fused_residual) return supports(node);
    if (node.inputs.size() != 2 || node.input_shapes.size() != 2 ||
        node.input_shapes[1] != node.output_shape || node.output_shape.size() != 3)
      return false;
    return supports(conv_alone(node, false));
  };
  entry.create = [create](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
    if (!context.node.fused_residual) return create(context);
    const Node conv = conv_alone(context.node, true);
    const KernelBuildContext inner{conv, context.graph, context.calibration};
    return std::make_unique<ResidualAfterKernel>(create(inner), context.node);
  };
  entry.residual = true;
}

void register_depthwise_conv_kernels(KernelRegistry& registry) {
  // Above every other conv entry: on a depthwise layer the implicit GEMM has K = k*k per group.
  EntryRow row{"conv_fp16_depthwise", OpKind::Conv,
               [](const Node& node) { return depthwise_shape(node).has_value(); }, create_depthwise,
               /*residual=*/true};
  add_entries(registry, Device::CUDA, Precision::FP16, 30, {row});
}

}  // namespace cnnrt::cuda
