// Registry entries of the own fp16 tensor-core convolution (kernels/cuda/conv/igemm.h).
//
// conv_fp16_igemm is a thin adapter: supports() rebuilds the ConvShape the kernel would see from
// the (fused) node — input [C, H, W], conv attributes, the ReLU / MaxPool epilogue — and asks the
// kernel; the factory prepacks the weights once through the ConvFp16 constructor.  A node whose
// derived output disagrees with the graph's inferred shape is refused, so a mismatch between the
// kernel's and the graph's shape rules can never write outside the planned buffer.
//
// conv_fp16_s2d (higher priority) serves strided convs with few input channels (AlexNet conv1)
// as a space-to-depth rearrangement into the workspace followed by a stride-1 ConvFp16 over
// s·s·C channels (kernels/cuda/conv/space_to_depth.h): the vector implicit-GEMM path instead of the
// 2-byte "gather" path.  It accepts only shapes where that pays — stride >= 2, in_c <= 4,
// kernel >= stride (else the blocks carry pixels no tap reads) — and reuses the same epilogue,
// so ReLU and the fused MaxPool are unchanged.  On Hopper the inner conv takes the wgmma kernel
// once the batch fills the GPU (see ConvFp16S2dKernel).  As the first layer it also reads the
// NCHW fp32 graph input directly (input_types offers fp32 NCHW), so the engine needs no
// its separate input-conversion pass (the builder binds the fp32 type it accepts).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/conv/igemm.h"
#include "kernels/cuda/conv/wgmma.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/conv/space_to_depth.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::cuda {

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

namespace {

class ConvFp16Kernel final : public Fp16Kernel {
 public:
  ConvFp16Kernel(const ConvShape& shape, const float* weight, const float* bias)
      : conv_(shape, weight, bias) {}
  // The variant of ConvFp16's model for this batch (split-K at small batches needs a workspace).
  KernelPlan prepare(const PrepareInfo& info) const override {
    KernelPlan plan;
    const size_t index = conv_.chosen_variant(info.batch, /*with_workspace=*/true);
    plan.variant = static_cast<int>(index);
    plan.variant_name = conv_.variants(info.batch).at(index);
    plan.workspace_bytes = conv_.variant_workspace_bytes(index, info.batch);
    return plan;
  }
  void run(const KernelArgs& args) override {
    conv_.forward_variant(static_cast<size_t>(args.variant), args.inputs.at(0), args.output,
                          args.batch, static_cast<cudaStream_t>(args.stream), args.workspace);
  }
  size_t weight_bytes() const override { return conv_.weight_bytes(); }

 private:
  ConvFp16 conv_;
};

}  // namespace

ConvWeights conv_weights_of(const KernelBuildContext& context, const std::string& entry_name,
                            const std::optional<ConvShape>& shape) {
  const Node& node = context.node;
  ErrorSite site = node_site(context);
  if (!shape) throw_error(site, entry_name + " cannot express this conv");
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
  ConvWeights result;
  result.weight = weight->value.data.data();
  result.bias = bias != nullptr && !bias->value.data.empty() ? bias->value.data.data() : nullptr;
  return result;
}

namespace {

std::unique_ptr<LayerKernel> create_conv_fp16(const KernelBuildContext& context) {
  const std::optional<ConvShape> shape = conv_shape_of(context.node);
  const ConvWeights weights = conv_weights_of(context, "conv_fp16_igemm", shape);
  return std::make_unique<ConvFp16Kernel>(*shape, weights.weight, weights.bias);
}

// --- conv_fp16_s2d ---------------------------------------------------------------------------

// The rewrite of `node` when conv_fp16_s2d should serve it, else nothing.  Why these limits:
// stride 1 gains nothing from the rearrangement; C > 4 already takes the vector path; kernel <
// stride would copy pixels no tap reads.  Every accepted shape keeps at least a quarter of the
// MMA work useful ((k/s)² / ceil(k/s)² >= 1/4 for k >= s) before channel padding, vs the gather
// path's ~8-10× lower per-MMA throughput.
std::optional<SpaceToDepthConv> s2d_conv_of(const Node& node) {
  const std::optional<ConvShape> shape = conv_shape_of(node);
  if (!shape) return std::nullopt;
  const ConvAttrs& a = shape->conv;
  if (a.stride_h != a.stride_w || a.stride_h < 2 || a.dilation_h != 1 || a.dilation_w != 1 ||
      a.groups != 1 || shape->in_c > 4 || a.kernel_h < a.stride_h || a.kernel_w < a.stride_w)
    return std::nullopt;
  std::optional<SpaceToDepthConv> conv = space_to_depth_conv(*shape);
  if (!conv || !ConvFp16::supports(conv->transformed)) return std::nullopt;
  return conv;
}

// The inner stride-1 conv runs on the Hopper wgmma kernel (kernels/cuda/conv/wgmma.h) when
// it serves the transformed shape (conv1: 48 -> 64, 3x3, pool fused) on this device and its grid
// fills the SMs (>= one CTA per SM, SM count read once here); otherwise — other devices, small
// batches — on ConvFp16, which is always built.  Same workspace layout either way.
class ConvFp16S2dKernel final : public Fp16Kernel {
 public:
  ConvFp16S2dKernel(const SpaceToDepthConv& conv, const std::vector<float>& weight,
                    const float* bias)
      : rearrange_(conv.rearrange), conv_(conv.transformed, weight.data(), bias) {
    if (ConvFp16Wgmma::supports(conv.transformed) && ConvFp16Wgmma::device_supported()) {
      wgmma_ = std::make_unique<ConvFp16Wgmma>(conv.transformed, weight.data(), bias);
      fallback_max_batch_ = fallback_max_batch([this](int b) { return wgmma_->ctas(b); });
    }
  }
  // The rearrangement converts as it gathers: as the first layer it reads the graph input (NCHW
  // fp32) itself, so the builder inserts no conversion pass before it.
  std::vector<TensorType> input_types(size_t) const override {
    return {fp16_nhwc8(), fp32_nchw()};
  }
  // variant = 2 * inner + reads_fp32, inner 0 = the wgmma conv, 1 + i = ConvFp16's variant i.
  KernelPlan prepare(const PrepareInfo& info) const override {
    const bool reads_fp32 = !info.input_types.empty() && info.input_types[0] == fp32_nchw();
    KernelPlan plan;
    plan.workspace_bytes = rearranged_bytes(info.batch);
    int inner = 0;
    if (wgmma_ && info.batch > fallback_max_batch_) {
      plan.variant_name = "s2d+" + wgmma_->variant(info.batch);
    } else {
      const size_t index = conv_.chosen_variant(info.batch, /*with_workspace=*/true);
      inner = 1 + static_cast<int>(index);
      plan.variant_name = "s2d+" + conv_.variants(info.batch).at(index);
      plan.workspace_bytes += conv_.variant_workspace_bytes(index, info.batch);
    }
    if (reads_fp32) plan.variant_name += " (reads fp32 NCHW)";
    plan.variant = 2 * inner + (reads_fp32 ? 1 : 0);
    return plan;
  }
  void run(const KernelArgs& args) override {
    const auto stream = static_cast<cudaStream_t>(args.stream);
    // Workspace: [rearranged input | the inner conv's own workspace (split-K partials)].
    uint8_t* rearranged = static_cast<uint8_t*>(args.workspace);
    // The graph input straight from NCHW fp32, or the backend layout; same x' either way.
    if (args.variant % 2 == 1)
      space_to_depth_nchw_fp32(static_cast<const float*>(args.inputs.at(0)), rearranged, rearrange_,
                               args.batch, stream);
    else
      space_to_depth_fp16(args.inputs.at(0), rearranged, rearrange_, args.batch, stream);
    const int inner = args.variant / 2;
    if (inner == 0) {
      wgmma_->forward(rearranged, args.output, args.batch, stream);
      return;
    }
    conv_.forward_variant(static_cast<size_t>(inner - 1), rearranged, args.output, args.batch,
                          stream, rearranged + rearranged_bytes(args.batch));
  }
  size_t weight_bytes() const override {
    return conv_.weight_bytes() + (wgmma_ ? wgmma_->weight_bytes() : 0);
  }

 private:
  size_t rearranged_bytes(int batch) const {
    return (space_to_depth_bytes(rearrange_, batch) + 255) / 256 * 256;
  }
  SpaceToDepthShape rearrange_;
  ConvFp16 conv_;
  std::unique_ptr<ConvFp16Wgmma> wgmma_;  // null: ConvFp16 at every batch
  int fallback_max_batch_ = std::numeric_limits<int>::max();
};

std::unique_ptr<LayerKernel> create_conv_fp16_s2d(const KernelBuildContext& context) {
  const std::optional<ConvShape> shape = conv_shape_of(context.node);
  const ConvWeights weights = conv_weights_of(context, "conv_fp16_s2d", shape);
  const std::optional<SpaceToDepthConv> conv = s2d_conv_of(context.node);
  if (!conv) {
    ErrorSite site;
    site.file = context.graph.source_file;
    site.line = context.node.line;
    site.column = context.node.column;
    site.layer = context.node.name;
    throw_error(site,
                "conv_fp16_s2d does not serve this conv (needs stride >= 2, in_c <= 4, "
                "groups 1, dilation 1, kernel >= stride)");
  }
  return std::make_unique<ConvFp16S2dKernel>(*conv, space_to_depth_weights(*conv, weights.weight),
                                             weights.bias);
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

  KernelEntry s2d;
  s2d.name = "conv_fp16_s2d";
  s2d.op = OpKind::Conv;
  s2d.device = Device::CUDA;
  s2d.precision = Precision::FP16;
  s2d.priority = 20;  // beats conv_fp16_igemm's gather path wherever it applies
  s2d.supports = [](const Node& node) { return s2d_conv_of(node).has_value(); };
  s2d.create = create_conv_fp16_s2d;
  registry.add(std::move(s2d));
  register_wgmma_conv_kernels(registry);
}

}  // namespace cnnrt::cuda
