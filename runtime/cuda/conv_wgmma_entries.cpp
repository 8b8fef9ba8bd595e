// Registry entries of the Hopper wgmma convolutions: "conv_fp16_wgmma"
// (kernels/cuda/conv/wgmma.h) and its warp-specialised form "conv_fp16_wgmma_ws"
// (kernels/cuda/conv/wgmma_ws.h).
//
// One thin adapter serves both, like conv_fp16_igemm's (runtime/cuda/conv_entries.cpp):
// supports() rebuilds the ConvShape from the fused node, refuses a node whose derived output
// disagrees with the graph's inferred shape (so the kernel can never write outside the planned
// buffer), applies the kernel's shape rule, and finally the device rule — compute capability 9.0
// with the sm_90a image loaded — which is queried once and cached (supports() gets only the node).
//
// Small batches: 128-row tiles and no split-K leave most SMs idle at batch 1-8, where the
// mma.sync kernel's split-K variants win.  So the layer keeps a ConvFp16 of the same shape as a
// fallback, and prepare() picks once per context: the wgmma kernel when its grid fills the SMs
// at the context's batch (fallback_grid: for conv_fp16_wgmma its planned grid; for the ws kernel
// the 128x128 grid, since its cost model may pick a larger tile with fewer CTAs than SMs on
// purpose), else ConvFp16's plan with its workspace.  variant = 2 * (the chosen kernel's launch
// id) + (1 for the fallback); run() launches exactly that.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include "kernels/cuda/conv/igemm.h"
#include "kernels/cuda/conv/wgmma.h"
#include "kernels/cuda/conv/wgmma_ws.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::cuda {
namespace {

long long fallback_grid(const ConvFp16Wgmma& conv, int batch) { return conv.plan(batch).ctas; }
long long fallback_grid(const ConvFp16WgmmaWs& conv, int batch) { return conv.max_ctas(batch); }

template <class Conv>
std::optional<ConvShape> served_shape(const Node& node) {
  std::optional<ConvShape> shape = conv_shape_of(node);
  if (!shape || !Conv::supports(*shape)) return std::nullopt;
  return shape;
}

// conv_fp16_wgmma adds a fused residual in its write-out; the warp-specialised kernel does not
// (its entry is wrapped by add_residual_epilogue, so it never sees one).
template <class Conv>
constexpr bool kNativeResidual = std::is_same_v<Conv, ConvFp16Wgmma>;

template <class Conv>
class WgmmaWithFallback final : public Fp16Kernel {
 public:
  WgmmaWithFallback(const ConvShape& shape, const float* weight, const float* bias)
      : conv_(shape, weight, bias),
        fallback_(shape, weight, bias),
        fallback_max_batch_(fallback_max_batch([this](int b) { return fallback_grid(conv_, b); })) {
  }
  KernelPlan prepare(const PrepareInfo& info) const override {
    KernelPlan plan;
    if (info.batch > fallback_max_batch_) {
      const auto p = conv_.plan(info.batch);
      plan.variant = 2 * p.variant;
      plan.variant_name = p.name;
      return plan;
    }
    const ConvFp16Plan p = fallback_.plan(info.batch);
    plan.variant = 2 * p.variant + 1;
    plan.variant_name = p.name;
    plan.workspace_bytes = p.workspace_bytes;
    return plan;
  }
  void run(const KernelArgs& args) override {
    const auto stream = static_cast<cudaStream_t>(args.stream);
    const void* residual = args.inputs.size() > 1 ? args.inputs[1] : nullptr;
    if (args.variant % 2 == 1) {
      fallback_.forward(args.variant / 2, args.inputs.at(0), residual, args.output, args.batch,
                        stream, args.workspace);
    } else if constexpr (kNativeResidual<Conv>) {
      conv_.forward(args.variant / 2, args.inputs.at(0), residual, args.output, args.batch, stream);
    } else {
      conv_.forward(args.variant / 2, args.inputs.at(0), args.output, args.batch, stream);
    }
  }
  size_t weight_bytes() const override { return conv_.weight_bytes() + fallback_.weight_bytes(); }

 private:
  Conv conv_;
  ConvFp16 fallback_;
  int fallback_max_batch_ = 0;
};

// `name` and `needs` word the errors: which entry, and its shape rule in words.
template <class Conv>
std::unique_ptr<LayerKernel> create_wgmma(const KernelBuildContext& context, const char* name,
                                          const char* needs) {
  const Node& node = context.node;
  ErrorSite site = node_site(context);
  const std::optional<ConvShape> shape = served_shape<Conv>(node);
  if (!shape)
    throw_error(site, std::string(name) + " does not serve this conv (needs " + needs + ")");
  if (!Conv::device_supported())
    throw_error(site,
                std::string(name) + " needs a compute capability 9.0 GPU and the sm_90a build");
  const ConvWeights weights = conv_weights_of(context, name, shape);
  return std::make_unique<WgmmaWithFallback<Conv>>(*shape, weights.weight, weights.bias);
}

template <class Conv>
void add_wgmma_entry(KernelRegistry& registry, const char* name, const char* needs, int priority) {
  KernelEntry entry;
  entry.name = name;
  entry.op = OpKind::Conv;
  entry.device = Device::CUDA;
  entry.precision = Precision::FP16;
  entry.priority = priority;
  entry.supports = [](const Node& node) {
    // Any clamp (both kernels have a clamp epilogue: ReLU6 / Clip layers of MobileNet and
    // EfficientNet); symmetric padding only.
    if (!symmetric_conv(node)) return false;
    return served_shape<Conv>(node).has_value() && Conv::device_supported();
  };
  entry.create = [name, needs](const KernelBuildContext& context) {
    return create_wgmma<Conv>(context, name, needs);
  };
  if constexpr (kNativeResidual<Conv>)
    entry.residual = true;
  else
    add_residual_epilogue(entry);
  registry.add(std::move(entry));
}

}  // namespace

void register_wgmma_conv_kernels(KernelRegistry& registry) {
  // Above conv_fp16_igemm (10): on an H200 it was 1.33-1.39x faster on conv3/conv4 at batch
  // 64 and 256 (docs/PERFORMANCE.md, run 4) and passed every GPU test.
  add_wgmma_entry<ConvFp16Wgmma>(registry, "conv_fp16_wgmma",
                                 "groups 1, dilation 1, in_c % 8 == 0, out_c % 32 == 0 (% 64 "
                                 "unless K pads by <= 1/8), a pool window of <= 128 pixels",
                                 15);
  // Below conv_fp16_wgmma: measured slower on conv3 and only 1.04-1.05x faster on conv4
  // (H200, docs/PERFORMANCE.md run 10), so a candidate in `cnnrt profile --compare`, not the
  // default.
  add_wgmma_entry<ConvFp16WgmmaWs>(registry, "conv_fp16_wgmma_ws",
                                   "groups 1, dilation 1, in_c % 8 == 0, out_c % 64 == 0, no fused "
                                   "pool",
                                   14);
}

}  // namespace cnnrt::cuda
