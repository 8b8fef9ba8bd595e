// Registry entries of the CUDA conv family (kernels/cuda/conv/), except the Hopper wgmma and TMA
// ones (conv_wgmma_entries.cpp, conv_tma_entries.cpp), the space-to-depth ones
// (conv_s2d_entries.cpp) and depthwise (conv_residual_entries.cpp): conv_fp16_igemm and the
// comparison-only baselines cudnn_conv and im2col_cublas_conv.  Also the family's one node adapter
// (conv_shape_of) and one weight check (conv_weights_of), which every conv entry uses.
//
// Every entry is a thin adapter: supports() rebuilds the ConvShape the kernel would see from the
// (fused) node — input [C, H, W], conv attributes, the activation clamp, the fused MaxPool — and
// asks the kernel's shape rule; the factory prepacks the weights once; prepare() asks the
// kernel's plan for the context's batch once and hands its launch id back as the variant;
// run() launches that variant and nothing else.  A node whose extents disagree with the
// kernels' arithmetic (graph/ops.h's rules) is refused, so a kernel can never write outside
// the planned buffer.
//
// The baselines are marked baseline, so the default heuristic never picks them; `cnnrt profile
// --compare` and explicit overrides do.  They take the fused node as it stands (ReLU, fused
// max-pool) and produce exactly its output; nodes they cannot express exactly (ReLU6 / Clip,
// asymmetric padding for cuDNN, groups for im2col) are refused.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/ops.h"
#include "kernels/cuda/conv/cudnn_conv.h"
#include "kernels/cuda/conv/igemm.h"
#include "kernels/cuda/conv/im2col_gemm.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::cuda {

std::optional<ConvShape> conv_shape_of(const Node& node) {
  // A fused residual is a second input of the output's shape (graph/passes.h).
  if (node.op != OpKind::Conv || node.input_shapes.size() != (node.fused_residual ? 2u : 1u) ||
      node.input_shapes[0].size() != 3 || node.output_shape.size() != 3 ||
      !std::holds_alternative<ConvAttrs>(node.attrs) ||
      (node.fused_residual && node.input_shapes[1] != node.output_shape))
    return std::nullopt;
  ConvShape shape;
  shape.in_c = static_cast<int>(node.input_shapes[0][0]);
  shape.in_h = static_cast<int>(node.input_shapes[0][1]);
  shape.in_w = static_cast<int>(node.input_shapes[0][2]);
  shape.conv = node.get<ConvAttrs>();
  shape.out_c = shape.conv.out_channels;
  shape.activation = activation_bounds(node);
  shape.pool = node.fused_maxpool;
  shape.residual = node.fused_residual;
  if (!conv_shape_problem(shape).empty()) return std::nullopt;
  shape.derive();
  // The graph's extents must be the kernels' (graph/ops.h rules): the output, and the conv
  // output before a fused pool.
  if (Shape{shape.out_c, shape.out_h, shape.out_w} != node.output_shape) return std::nullopt;
  if (shape.pool && !node.pre_pool_shape.empty() &&
      Shape{shape.out_c, shape.conv_h, shape.conv_w} != node.pre_pool_shape)
    return std::nullopt;
  return shape;
}

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

KernelEntry conv_entry(const char* name, int priority, bool baseline) {
  KernelEntry entry;
  entry.name = name;
  entry.op = OpKind::Conv;
  entry.device = Device::CUDA;
  entry.precision = Precision::FP16;
  entry.priority = priority;
  entry.baseline = baseline;
  return entry;
}

// --- conv_fp16_igemm -----------------------------------------------------------------------------

class ConvFp16Kernel final : public Fp16Kernel {
 public:
  ConvFp16Kernel(const ConvShape& shape, const float* weight, const float* bias)
      : conv_(shape, weight, bias) {}
  // ConvFp16's model for this batch (split-K at small batches needs a workspace).
  KernelPlan prepare(const PrepareInfo& info) const override {
    return kernel_plan_of(conv_.plan(info.batch));
  }
  void run(const KernelArgs& args) override {
    conv_.forward(args.variant, args.inputs.at(0),
                  args.inputs.size() > 1 ? args.inputs[1] : nullptr, args.output, args.batch,
                  static_cast<cudaStream_t>(args.stream), args.workspace);
  }
  size_t weight_bytes() const override { return conv_.weight_bytes(); }

 private:
  ConvFp16 conv_;
};

std::unique_ptr<LayerKernel> create_conv_fp16(const KernelBuildContext& context) {
  const std::optional<ConvShape> shape = conv_shape_of(context.node);
  const ConvWeights weights = conv_weights_of(context, "conv_fp16_igemm", shape);
  return std::make_unique<ConvFp16Kernel>(*shape, weights.weight, weights.bias);
}

// --- baselines ---------------------------------------------------------------------------------

class Im2colKernel final : public Fp16Kernel {
 public:
  Im2colKernel(const ConvShape& shape, const float* weight, const float* bias)
      : conv_(shape, weight, bias) {}
  KernelPlan prepare(const PrepareInfo& info) const override {
    KernelPlan plan;
    plan.workspace_bytes = conv_.workspace_bytes(info.batch);
    plan.state = conv_.plan(info.batch);
    return plan;
  }
  void run(const KernelArgs& args) override {
    conv_.forward(args.inputs.at(0), args.output, args.batch, args.workspace, args.state,
                  static_cast<cudaStream_t>(args.stream));
  }
  size_t weight_bytes() const override { return conv_.weight_bytes(); }

 private:
  Im2colGemmConv conv_;
};

#ifdef CNNRT_WITH_CUDNN
// variant = cuDNN's algorithm, chosen by its heuristic once per context.
class CudnnKernel final : public Fp16Kernel {
 public:
  CudnnKernel(const ConvShape& shape, const float* weight, const float* bias)
      : conv_(shape, weight, bias) {}
  KernelPlan prepare(const PrepareInfo& info) const override {
    const CudnnConvPlan p = conv_.plan(info.batch);
    KernelPlan plan;
    plan.variant = p.algo;
    plan.variant_name = "algo " + std::to_string(p.algo);
    plan.workspace_bytes = p.workspace_bytes;
    return plan;
  }
  void run(const KernelArgs& args) override {
    conv_.forward(args.variant, args.inputs.at(0), args.output, args.batch, args.workspace,
                  static_cast<cudaStream_t>(args.stream));
  }
  size_t weight_bytes() const override { return conv_.weight_bytes(); }

 private:
  CudnnConv conv_;
};
#endif

template <typename Kernel, typename Conv>
void add_baseline(KernelRegistry& registry, const char* name) {
  KernelEntry entry = conv_entry(name, 0, /*baseline=*/true);
  entry.supports = [](const Node& node) {
    const std::optional<ConvShape> shape = conv_shape_of(node);
    return shape.has_value() && Conv::supports(*shape);
  };
  entry.create = [name](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
    const std::optional<ConvShape> shape = conv_shape_of(context.node);
    if (shape && !Conv::supports(*shape))
      throw_error(node_site(context), std::string(name) + " cannot run this node");
    const ConvWeights weights = conv_weights_of(context, name, shape);
    try {
      return std::make_unique<Kernel>(*shape, weights.weight, weights.bias);
    } catch (const Error& error) {
      throw_error(node_site(context), error.what());
    }
  };
  registry.add(std::move(entry));
}

}  // namespace

void register_conv_kernels(KernelRegistry& registry) {
  KernelEntry igemm = conv_entry("conv_fp16_igemm", 10, false);
  igemm.supports = [](const Node& node) {
    const std::optional<ConvShape> shape = conv_shape_of(node);
    return shape.has_value() && ConvFp16::supports(*shape);
  };
  igemm.create = create_conv_fp16;
  igemm.residual = true;  // native: every igemm path (fused, split-K finish, direct) adds r
  registry.add(std::move(igemm));

  register_s2d_conv_kernels(registry);
  register_wgmma_conv_kernels(registry);
  register_tma_conv_kernels(registry);
  register_depthwise_conv_kernels(registry);
}

void register_conv_baseline_kernels(KernelRegistry& registry) {
#ifdef CNNRT_WITH_CUDNN
  add_baseline<CudnnKernel, CudnnConv>(registry, "cudnn_conv");
#endif
  add_baseline<Im2colKernel, Im2colGemmConv>(registry, "im2col_cublas_conv");
}

}  // namespace cnnrt::cuda
