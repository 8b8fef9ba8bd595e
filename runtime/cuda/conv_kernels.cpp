// Registry entry of the own fp16 tensor-core convolution (kernels/cuda/conv_fp16.h).
//
// The entry is a thin adapter: supports() rebuilds the ConvShape the kernel would see from the
// (fused) node — input [C, H, W], conv attributes, the ReLU / MaxPool epilogue — and asks the
// kernel; the factory prepacks the weights once through the ConvFp16 constructor.  A node whose
// derived output disagrees with the graph's inferred shape is refused, so a mismatch between the
// kernel's and the graph's shape rules can never write outside the planned buffer.
#include <memory>
#include <string>

#include "kernels/cuda/conv_fp16.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::cuda {
namespace {

// Empty optional when the node cannot be expressed as a ConvShape at all.
std::optional<ConvShape> conv_shape_of(const Node& node) {
  if (node.op != OpKind::Conv || node.input_shapes.size() != 1 ||
      node.input_shapes[0].size() != 3 || node.output_shape.size() != 3 ||
      !std::holds_alternative<ConvAttrs>(node.attrs))
    return std::nullopt;
  ConvShape shape;
  shape.in_c = static_cast<int>(node.input_shapes[0][0]);
  shape.in_h = static_cast<int>(node.input_shapes[0][1]);
  shape.in_w = static_cast<int>(node.input_shapes[0][2]);
  shape.conv = node.get<ConvAttrs>();
  shape.out_c = shape.conv.out_channels;
  shape.relu = node.activation == Activation::Relu;
  shape.pool = node.fused_maxpool;
  shape.derive();
  const Shape derived{shape.out_c, shape.out_h, shape.out_w};
  if (derived != node.output_shape) return std::nullopt;
  return shape;
}

class ConvFp16Kernel final : public LayerKernel {
 public:
  ConvFp16Kernel(const ConvShape& shape, const float* weight, const float* bias)
      : conv_(shape, weight, bias) {}
  void run(const KernelArgs& args) override {
    conv_.forward(args.inputs.at(0), args.output, args.batch,
                  static_cast<cudaStream_t>(args.stream));
  }
  size_t weight_bytes() const override { return conv_.weight_bytes(); }
  std::string variant() const override { return conv_.variant(); }

 private:
  ConvFp16 conv_;
};

std::unique_ptr<LayerKernel> create_conv_fp16(const KernelBuildContext& context) {
  const Node& node = context.node;
  const std::optional<ConvShape> shape = conv_shape_of(node);
  ErrorSite site;
  site.file = context.graph.source_file;
  site.line = node.line;
  site.column = node.column;
  site.layer = node.name;
  if (!shape) throw_error(site, "conv_fp16_igemm cannot express this conv");
  const Param* weight = node.find_param("weight");
  const int64_t weight_elements = static_cast<int64_t>(shape->out_c) *
                                  (shape->in_c / shape->conv.groups) * shape->conv.kernel_h *
                                  shape->conv.kernel_w;
  if (weight == nullptr || static_cast<int64_t>(weight->value.data.size()) != weight_elements) {
    site.tensor = weight != nullptr ? weight->key : "weight";
    throw_error(site, "conv weight is not bound or has " +
                          std::to_string(weight ? weight->value.data.size() : 0) +
                          " values, expected " + std::to_string(weight_elements));
  }
  const Param* bias = node.find_param("bias");
  if (bias != nullptr && !bias->value.data.empty() &&
      static_cast<int>(bias->value.data.size()) != shape->out_c) {
    site.tensor = bias->key;
    throw_error(site, "conv bias has " + std::to_string(bias->value.data.size()) +
                          " values, expected " + std::to_string(shape->out_c));
  }
  const float* bias_data =
      bias != nullptr && !bias->value.data.empty() ? bias->value.data.data() : nullptr;
  return std::make_unique<ConvFp16Kernel>(*shape, weight->value.data.data(), bias_data);
}

}  // namespace

void register_conv_kernels(KernelRegistry& registry) {
  KernelEntry entry;
  entry.name = "conv_fp16_igemm";
  entry.op = OpKind::Conv;
  entry.device = Device::CUDA;
  entry.precision = Precision::FP16;
  entry.priority = 10;
  entry.supports = [](const Node& node) {
    const std::optional<ConvShape> shape = conv_shape_of(node);
    return shape.has_value() && ConvFp16::supports(*shape);
  };
  entry.create = create_conv_fp16;
  registry.add(std::move(entry));
}

}  // namespace cnnrt::cuda
