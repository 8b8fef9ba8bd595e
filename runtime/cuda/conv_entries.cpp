// Registry entries of the CUDA conv family (kernels/cuda/conv/), except the Hopper wgmma ones
// (conv_wgmma_entries.cpp): conv_fp16_igemm, conv_fp16_s2d, and the comparison-only baselines
// cudnn_conv and im2col_cublas_conv.  Also the family's one node adapter (conv_shape_of) and
// one weight check (conv_weights_of), which every conv entry uses.
//
// Every entry is a thin adapter: supports() rebuilds the ConvShape the kernel would see from the
// (fused) node — input [C, H, W], conv attributes, the activation clamp, the fused MaxPool — and
// asks the kernel's shape rule; the factory prepacks the weights once; prepare() asks the
// kernel's plan for the context's batch once and hands its launch id back as the variant;
// run() launches that variant and nothing else.  A node whose extents disagree with the
// kernels' arithmetic (graph/ops.h's rules) is refused, so a kernel can never write outside
// the planned buffer.
//
// conv_fp16_s2d (higher priority) serves strided convs with few input channels (AlexNet conv1)
// as a space-to-depth rearrangement into the workspace followed by a stride-1 conv over s·s·C
// channels (kernels/cuda/conv/space_to_depth.h): the vector implicit-GEMM path instead of the
// 2-byte "gather" path.  It accepts only shapes where that pays — stride >= 2, in_c <= 4,
// kernel >= stride (else the blocks carry pixels no tap reads) — and reuses the same epilogue.
// On Hopper the inner conv takes the wgmma kernel once the batch fills the GPU.  As the first
// layer it reads the graph input (NCHW fp32) itself: input_types offers fp32 NCHW, and when the
// builder binds it, prepare() picks the rearrangement that converts as it gathers.
//
// The baselines are marked baseline, so the default heuristic never picks them; `cnnrt profile
// --compare` and explicit overrides do.  They take the fused node as it stands (ReLU, fused
// max-pool) and produce exactly its output; nodes they cannot express exactly (ReLU6 / Clip,
// asymmetric padding for cuDNN, groups for im2col) are refused.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/ops.h"
#include "kernels/cuda/conv/cudnn_conv.h"
#include "kernels/cuda/conv/igemm.h"
#include "kernels/cuda/conv/im2col_gemm.h"
#include "kernels/cuda/conv/space_to_depth.h"
#include "kernels/cuda/conv/wgmma.h"
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
    const ConvFp16Plan p = conv_.plan(info.batch);
    KernelPlan plan;
    plan.variant = p.variant;
    plan.variant_name = p.name;
    plan.workspace_bytes = p.workspace_bytes;
    return plan;
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

// The inner stride-1 conv runs on the Hopper wgmma kernel when it serves the transformed shape
// (conv1: 48 -> 64, 3x3, pool fused) on this device and its grid fills the SMs at the context's
// batch; otherwise — other devices, small batches — on ConvFp16, which is always built.
// variant = 4 * inner + 2 * (inner is a wgmma tiling) + (reads NCHW fp32), inner = the inner
// kernel's launch id.  Workspace: [rearranged input | the inner conv's own (split-K partials)].
class ConvFp16S2dKernel final : public Fp16Kernel {
 public:
  ConvFp16S2dKernel(const SpaceToDepthConv& conv, const std::vector<float>& weight,
                    const float* bias)
      : rearrange_(conv.rearrange), conv_(conv.transformed, weight.data(), bias) {
    if (ConvFp16Wgmma::supports(conv.transformed) && ConvFp16Wgmma::device_supported()) {
      wgmma_ = std::make_unique<ConvFp16Wgmma>(conv.transformed, weight.data(), bias);
      fallback_max_batch_ = fallback_max_batch([this](int b) { return wgmma_->plan(b).ctas; });
    }
  }
  // The rearrangement converts as it gathers: as the first layer it reads the graph input (NCHW
  // fp32) itself, so the builder inserts no conversion pass before it.
  std::vector<TensorType> input_types(size_t) const override { return {fp16_nhwc8(), fp32_nchw()}; }
  KernelPlan prepare(const PrepareInfo& info) const override {
    const bool reads_fp32 = !info.input_types.empty() && info.input_types[0] == fp32_nchw();
    KernelPlan plan;
    plan.workspace_bytes = rearranged_bytes(info.batch);
    int inner = 0;
    bool on_wgmma = false;
    if (wgmma_ && info.batch > fallback_max_batch_) {
      const ConvFp16WgmmaPlan p = wgmma_->plan(info.batch);
      inner = p.variant;
      on_wgmma = true;
      plan.variant_name = "s2d+" + p.name;
    } else {
      const ConvFp16Plan p = conv_.plan(info.batch);
      inner = p.variant;
      plan.variant_name = "s2d+" + p.name;
      plan.workspace_bytes += p.workspace_bytes;
    }
    if (reads_fp32) plan.variant_name += " (reads fp32 NCHW)";
    plan.variant = 4 * inner + (on_wgmma ? 2 : 0) + (reads_fp32 ? 1 : 0);
    return plan;
  }
  void run(const KernelArgs& args) override {
    const auto stream = static_cast<cudaStream_t>(args.stream);
    if (args.batch > 0 && args.workspace == nullptr)
      throw Error("conv_fp16_s2d: run without its workspace");
    uint8_t* rearranged = static_cast<uint8_t*>(args.workspace);
    // The graph input straight from NCHW fp32, or the backend layout; same x' either way.
    if (args.variant % 2 == 1)
      space_to_depth_nchw_fp32(static_cast<const float*>(args.inputs.at(0)), rearranged, rearrange_,
                               args.batch, stream);
    else
      space_to_depth_fp16(args.inputs.at(0), rearranged, rearrange_, args.batch, stream);
    const int inner = args.variant / 4;
    if ((args.variant / 2) % 2 == 1) {
      if (!wgmma_) throw Error("conv_fp16_s2d: wgmma variant without the wgmma kernel");
      wgmma_->forward(inner, rearranged, args.output, args.batch, stream);
      return;
    }
    // The inner conv's part follows the rearranged input; when that part is empty the pointer is
    // never read.
    conv_.forward(inner, rearranged, args.output, args.batch, stream,
                  rearranged + rearranged_bytes(args.batch));
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
  if (!conv)
    throw_error(node_site(context),
                "conv_fp16_s2d does not serve this conv (needs stride >= 2, in_c <= 4, "
                "groups 1, dilation 1, kernel >= stride)");
  return std::make_unique<ConvFp16S2dKernel>(*conv, space_to_depth_weights(*conv, weights.weight),
                                             weights.bias);
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

  // Beats conv_fp16_igemm's gather path wherever it applies.
  KernelEntry s2d = conv_entry("conv_fp16_s2d", 20, false);
  s2d.supports = [](const Node& node) { return s2d_conv_of(node).has_value(); };
  s2d.create = create_conv_fp16_s2d;
  add_residual_epilogue(s2d);
  registry.add(std::move(s2d));
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
