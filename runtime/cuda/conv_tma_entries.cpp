// Registry entries of the TMA-fed Hopper conv (kernels/cuda/conv/tma_conv.h): "conv_fp16_tma"
// (priority 16, above conv_fp16_wgmma's 15: 2.1-3x its speed on AlexNet conv3/conv4 in the lab,
// docs/kernels/conv_fp16_tma.md) and one entry per tile, "conv_fp16_tma_<BM>x<BN>" (priority 13,
// comparison entries like the baselines: `cnnrt profile --compare` times every tile, the
// automatic plan does not), and
// "conv_fp16_tma_staged" (priority 13, convs with a fused MaxPool only): always the staged pool
// form — the unpooled conv on its best tile into the step's workspace, then maxpool_fp16.
// conv_fp16_tma itself chooses fused or staged per context by the kernel's cost model
// (ConvFp16Tma::plan(batch); tma_conv.cu's design note).
//
// conv_fp16_tma takes its tile from the kernel's wave model (ConvFp16Tma::plan(batch)) and keeps
// a ConvFp16 of the same shape for the batches where even 128x128 tiles leave SMs idle (the rule
// and the threshold conv_fp16_wgmma uses: fallback_max_batch); the pinned entries always run their
// tile.  variant = 2 * ConvFp16Tma launch id (TMA: a tile, or a staged id) or 2 * ConvFp16 launch
// id + 1 (fallback).
//
// The input's im2col tensor map holds its address and the batch: prepare() gives the context a
// small cache (KernelPlan::state), run() encodes the map the first time it sees an input pointer
// and reuses it afterwards (a context's pointers are fixed; a graph bound to the caller's buffers
// adds one more), so steady-state runs and graph replays only launch.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/conv/igemm.h"
#include "kernels/cuda/conv/tma_conv.h"
#include "kernels/cuda/conv/tma_encode.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::cuda {
namespace {

// The encoded input maps of one context (KernelPlan::state).
using InputMaps = tma::InputMaps<ConvFp16TmaInput>;

// The pinned value of conv_fp16_tma_staged (tiles are 0 .. tile count - 1).
constexpr int kPinStaged = 1000;

class TmaConvKernel final : public Fp16Kernel {
 public:
  // pinned < 0: the default tile and the small-batch fallback; kPinStaged: the staged pool form;
  // else that tile, always.
  TmaConvKernel(const ConvShape& shape, const float* weight, const float* bias, int pinned)
      : conv_(shape, weight, bias), pinned_(pinned) {
    if (pinned_ < 0) {
      fallback_.emplace(shape, weight, bias);
      // Fused pool: the default tile's units (128x128 has no pooled instance).
      const bool pooled = shape.pool.has_value();
      fallback_max_batch_ = fallback_max_batch(
          [this, pooled](int b) { return pooled ? conv_.plan(b).units : conv_.plan(b, 0).units; });
    }
  }
  KernelPlan prepare(const PrepareInfo& info) const override {
    KernelPlan plan;
    if (fallback_ && info.batch <= fallback_max_batch_) {
      const ConvFp16Plan p = fallback_->plan(info.batch);
      plan.variant = 2 * p.variant + 1;
      plan.variant_name = p.name;
      plan.workspace_bytes = p.workspace_bytes;
      return plan;
    }
    const ConvFp16TmaPlan p = pinned_ < 0             ? conv_.plan(info.batch)
                              : pinned_ == kPinStaged ? conv_.plan_staged(info.batch)
                                                      : conv_.plan(info.batch, pinned_);
    plan.variant = 2 * p.variant;
    plan.variant_name = p.name;
    plan.workspace_bytes = p.workspace_bytes;
    plan.state = std::make_shared<const InputMaps>();
    return plan;
  }
  void run(const KernelArgs& args) override {
    const auto stream = static_cast<cudaStream_t>(args.stream);
    const void* x = args.inputs.at(0);
    const void* residual = args.inputs.size() > 1 ? args.inputs[1] : nullptr;
    if (args.variant % 2 == 1) {
      fallback_.value().forward(args.variant / 2, x, residual, args.output, args.batch, stream,
                                args.workspace);
      return;
    }
    if (args.state == nullptr) throw Error("conv_fp16_tma: run() without its prepared state");
    const ConvFp16TmaInput input =
        static_cast<const InputMaps*>(args.state)
            ->find_or_encode(x, args.batch,
                             [this](const void* p, int b) { return conv_.encode_input(p, b); });
    conv_.forward(args.variant / 2, input, residual, args.output, stream, args.workspace);
  }
  size_t weight_bytes() const override {
    return conv_.weight_bytes() + (fallback_ ? fallback_->weight_bytes() : 0);
  }

 private:
  ConvFp16Tma conv_;
  int pinned_ = -1;
  std::optional<ConvFp16> fallback_;
  int fallback_max_batch_ = 0;
};

// pinned >= 0: that tile must serve the shape too (a fused pool: the tiles with a pooled instance);
// kPinStaged: only convs with a fused pool.
std::optional<ConvShape> served_shape(const Node& node, int pinned) {
  std::optional<ConvShape> shape = conv_shape_of(node);
  if (!shape || !ConvFp16Tma::supports(*shape) || !ConvFp16::supports(*shape)) return std::nullopt;
  if (pinned == kPinStaged) return shape->pool ? shape : std::nullopt;
  if (pinned >= 0 && !ConvFp16Tma::supports(*shape, pinned)) return std::nullopt;
  return shape;
}

constexpr const char* kNeeds =
    "groups 1, dilation 1, in_c % 32 == 0, out_c % 8 == 0, kernel <= 64, stride <= 8, padding "
    "within the im2col box, a fused pool's windows within a tile (the pinned tile: one with a "
    "pooled instance)";

void add_tma_entry(KernelRegistry& registry, const std::string& name, int pinned, int priority) {
  KernelEntry entry;
  entry.name = name;
  entry.op = OpKind::Conv;
  entry.device = Device::CUDA;
  entry.precision = Precision::FP16;
  entry.priority = priority;
  entry.residual = true;  // native: added in the register epilogue
  // The pinned forms compare (profile --compare, the harness): the automatic plan takes
  // conv_fp16_tma's own choice instead of building and judging an engine per tile (at batch 1
  // they doubled AlexNet's cold build: 60 -> 104 engines, 2.4 -> 3.0 s, run 34f).
  entry.baseline = pinned != -1;
  // Any clamp, asymmetric padding (the im2col box's corners), the fused residual or MaxPool.
  entry.supports = [pinned](const Node& node) {
    return served_shape(node, pinned).has_value() && ConvFp16Tma::device_supported();
  };
  entry.create = [name, pinned](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
    const ErrorSite site = node_site(context);
    const std::optional<ConvShape> shape = served_shape(context.node, pinned);
    if (!shape) throw_error(site, name + " does not serve this conv (needs " + kNeeds + ")");
    if (!ConvFp16Tma::device_supported())
      throw_error(site, name + " needs a compute capability 9.0 GPU and the sm_90a build");
    const ConvWeights weights = conv_weights_of(context, name, shape);
    try {
      return std::make_unique<TmaConvKernel>(*shape, weights.weight, weights.bias, pinned);
    } catch (const Error& error) {
      throw_error(site, error.what());
    }
  };
  registry.add(std::move(entry));
}

}  // namespace

void register_tma_conv_kernels(KernelRegistry& registry) {
  add_tma_entry(registry, "conv_fp16_tma", -1, 16);
  const std::vector<std::string>& tiles = ConvFp16Tma::tile_names();
  for (size_t t = 0; t < tiles.size(); ++t)
    add_tma_entry(registry, "conv_fp16_tma_" + tiles[t], int(t), 13);
  add_tma_entry(registry, "conv_fp16_tma_staged", kPinStaged, 13);
}

}  // namespace cnnrt::cuda
