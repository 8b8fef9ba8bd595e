// Registry entries of the space-to-depth conv (kernels/cuda/conv/space_to_depth.h, AlexNet conv1):
// "conv_fp16_s2d" (priority 20, above conv_fp16_igemm's gather path wherever it applies) and its
// comparison forms "conv_fp16_s2d_window", "conv_fp16_s2d_tma" and "conv_fp16_s2d_wgmma"
// (priority 13, baseline: `cnnrt profile --compare` and the kernel harness run them, the builder
// and the automatic plan never choose them), which pin the inner conv to the window, the TMA or
// the wgmma kernel at every batch.
//
// DESIGN NOTE
// * What it serves: strided convs with few input channels (stride >= 2, in_c <= 4, kernel >=
//   stride, groups 1, dilation 1), as a space-to-depth rearrangement of the input into the
//   step's workspace followed by a stride-1 conv over s·s·C channels — the vector implicit GEMM
//   instead of igemm's 2-byte gather path.  Stride 1 gains nothing from the rearrangement; C > 4
//   already takes the vector path; kernel < stride would copy pixels no tap reads.  Every
//   accepted shape keeps at least a quarter of the MMA work useful ((k/s)² / ceil(k/s)² >= 1/4)
//   before channel padding, against the gather path's ~8-10x lower per-MMA throughput.
// * As the first layer it reads the graph input (NCHW fp32) itself: input_types offers fp32 NCHW,
//   and when the builder binds it, prepare() picks the rearrangement that converts as it gathers.
// * Four inner convs, one chosen per context in prepare() (run() only launches it):
//   - window (conv_fp16_window, kernels/cuda/conv/tma_window.h; sm_90a), first where it serves
//     the rewrite (conv1: 3x3 over 57x57, x' at 48 channels read as 64, 3 k16 steps per tap):
//     each input pixel comes from L2 about twice instead of the im2col TMA conv's 9 times, and
//     the zero channels are never multiplied; the pool staged (pre-pool tensor in the workspace).
//     It runs at every batch (batch 1 too: 26 units on as many CTAs), so where it serves the
//     default entry builds none of the others.  conv1's inner conv at
//     batch 256 on an H100: 0.159 ms on the TMA form's 256x64 tiles, 0.116 here (the lab's
//     64-channel x'; docs/PERFORMANCE.md run 41).
//   - TMA (conv_fp16_tma, kernels/cuda/conv/tma_conv.h): the same x' read as C' rounded up to 64
//     channels (the TMA's 128-byte k-tile row; the map's out-of-bounds fill supplies the zeros;
//     conv1: 48 real channels + 16 zero ones, K = 576 instead of 432), the weights zero on the
//     padding channels, its own plan(batch)
//     (tile, fused or staged pool: the staged form's pre-pool tensor follows x' in the
//     workspace).  Only where that padding wastes at most a quarter of K (C' >= 48 of 64: conv1,
//     not a stride-2 stem's 12 channels), the device runs it (sm_90a) and its default plan's
//     tiles fill the SMs (fallback_max_batch: the wgmma entries' rule).  conv1 at batch 256 on an
//     H100: ~0.17 ms modelled (256x64 tiles, staged pool) against 0.306 measured for the wgmma
//     inner conv (docs/kernels/space_to_depth.md, "The TMA inner conv").
//   - wgmma (conv_fp16_wgmma, sm_90a) over x' at pad8(C') channels (conv1: 48 -> 64, 3x3, pool
//     fused), where its grid fills the SMs;
//   - ConvFp16 (igemm, every sm_80+ GPU, split-K at small batches), built by the default entry
//     wherever the window conv does not serve: small batches, other devices.
//   variant = 8 * inner launch id + 2 * InnerKind + (reads NCHW fp32).
// * Workspace: [x' for the batch, 256-byte aligned | the inner conv's own part (igemm's split-K
//   partials, the TMA's staged pre-pool tensor)].  The TMA form's im2col tensor map holds x''s
//   address and the batch: prepare() gives the context a cache (KernelPlan::state), run() encodes
//   it on the context's first run (the workspace is fixed per context) and reuses it after.
// * A fused residual: add_residual_epilogue's pass after the conv (the inner convs run without).
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/conv/igemm.h"
#include "kernels/cuda/conv/space_to_depth.h"
#include "kernels/cuda/conv/tma_conv.h"
#include "kernels/cuda/conv/tma_encode.h"
#include "kernels/cuda/conv/tma_window.h"
#include "kernels/cuda/conv/wgmma.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::cuda {
namespace {

// Which inner conv runs: chosen per context (the default entry), or pinned (comparison entries).
enum class S2dInner { Auto, Window, Tma, Wgmma };
// The inner conv of a planned variant (design note).
enum InnerKind { kIgemm = 0, kWgmma = 1, kTma = 2, kWindow = 3 };

// The rewrite of `shape` when conv_fp16_s2d serves it (design note: why these limits).
std::optional<SpaceToDepthConv> s2d_conv_of(const ConvShape& shape) {
  const ConvAttrs& a = shape.conv;
  if (a.stride_h != a.stride_w || a.stride_h < 2 || a.dilation_h != 1 || a.dilation_w != 1 ||
      a.groups != 1 || shape.in_c > 4 || a.kernel_h < a.stride_h || a.kernel_w < a.stride_w)
    return std::nullopt;
  std::optional<SpaceToDepthConv> conv = space_to_depth_conv(shape);
  if (!conv || !ConvFp16::supports(conv->transformed)) return std::nullopt;
  return conv;
}

// The TMA form of the rewrite: the stride-1 conv over C' rounded up to 64 channels (x' itself stays
// at C'), when that is at most a third more than C' (a quarter of K wasted) and conv_fp16_tma
// serves it.
std::optional<SpaceToDepthConv> tma_form_of(const ConvShape& shape, const SpaceToDepthConv& conv) {
  const int stride = tma_block_channels(conv.rearrange.out_c());
  if (stride == 0) return std::nullopt;
  std::optional<SpaceToDepthConv> wide = space_to_depth_conv(shape, stride);
  if (!wide || !ConvFp16Tma::supports(wide->transformed)) return std::nullopt;
  return wide;
}

// The window form: the TMA form's rewrite (x' read as 64 channels), when conv_fp16_window serves
// it over x' as stored.
std::optional<SpaceToDepthConv> window_form_of(const ConvShape& shape,
                                               const SpaceToDepthConv& conv) {
  std::optional<SpaceToDepthConv> wide = tma_form_of(shape, conv);
  if (!wide || !ConvFp16Window::supports(wide->transformed, conv.rearrange.out_c_stride()))
    return std::nullopt;
  return wide;
}

// What conv_fp16_s2d (`inner` Auto) or a pinned form serves: the shape, when the pinned inner conv
// serves its rewrite on this device.
std::optional<ConvShape> served_shape(const Node& node, S2dInner inner) {
  const std::optional<ConvShape> shape = conv_shape_of(node);
  if (!shape) return std::nullopt;
  const std::optional<SpaceToDepthConv> conv = s2d_conv_of(*shape);
  if (!conv) return std::nullopt;
  if (inner == S2dInner::Tma &&
      !(ConvFp16Tma::device_supported() && tma_form_of(*shape, *conv).has_value()))
    return std::nullopt;
  if (inner == S2dInner::Window &&
      !(ConvFp16Window::device_supported() && window_form_of(*shape, *conv).has_value()))
    return std::nullopt;
  if (inner == S2dInner::Wgmma &&
      !(ConvFp16Wgmma::device_supported() && ConvFp16Wgmma::supports(conv->transformed)))
    return std::nullopt;
  return shape;
}

size_t rearranged_bytes(const SpaceToDepthShape& rearrange, int batch) {
  return (space_to_depth_bytes(rearrange, batch) + 255) / 256 * 256;
}

class ConvFp16S2dKernel final : public Fp16Kernel {
 public:
  // `shape` must be served_shape's for `inner` (the factory checks).
  ConvFp16S2dKernel(const ConvShape& shape, const float* weight, const float* bias,
                    S2dInner inner) {
    const SpaceToDepthConv conv = s2d_conv_of(shape).value();
    rearrange_ = conv.rearrange;
    const std::optional<SpaceToDepthConv> windowed =
        (inner == S2dInner::Auto || inner == S2dInner::Window) && ConvFp16Window::device_supported()
            ? window_form_of(shape, conv)
            : std::nullopt;
    if (windowed) {
      // It runs at every batch (run 41e: at batch 1-8 AlexNet's forward 0.5-2.6 us faster than on
      // igemm), so no other inner conv is built beside it.
      window_ = std::make_unique<ConvFp16Window>(windowed->transformed,
                                                 space_to_depth_weights(*windowed, weight).data(),
                                                 bias, conv.rearrange.out_c_stride());
    } else {
      const std::vector<float> rearranged_weight = space_to_depth_weights(conv, weight);
      if (inner == S2dInner::Auto) conv_.emplace(conv.transformed, rearranged_weight.data(), bias);
      if ((inner == S2dInner::Auto || inner == S2dInner::Wgmma) &&
          ConvFp16Wgmma::supports(conv.transformed) && ConvFp16Wgmma::device_supported()) {
        wgmma_ = std::make_unique<ConvFp16Wgmma>(conv.transformed, rearranged_weight.data(), bias);
        wgmma_max_fallback_ = inner == S2dInner::Wgmma ? -1 : fallback_max_batch([this](int b) {
          return wgmma_->plan(b).ctas;
        });
      }
      const std::optional<SpaceToDepthConv> wide =
          (inner == S2dInner::Auto || inner == S2dInner::Tma) && ConvFp16Tma::device_supported()
              ? tma_form_of(shape, conv)
              : std::nullopt;
      if (wide) {
        // The TMA reads x' as rearranged for the other inner convs (C' channels, conv1: 48) and
        // fills channels C'..63 with zeros itself (ConvFp16Tma's stored_in_c), whose weights are
        // zero: no 64-channel copy (run 36e: the 64-channel rearrangement took 119 us at batch
        // 256 against 84 us for 48 channels).
        tma_ = std::make_unique<ConvFp16Tma>(wide->transformed,
                                             space_to_depth_weights(*wide, weight).data(), bias,
                                             conv.rearrange.out_c_stride());
        tma_max_fallback_ = inner == S2dInner::Tma
                                ? -1
                                : fallback_max_batch([this](int b) { return tma_->plan(b).units; });
      }
    }
    if ((inner == S2dInner::Tma && !tma_) || (inner == S2dInner::Wgmma && !wgmma_) ||
        (inner == S2dInner::Window && !window_))
      throw Error("conv_fp16_s2d: the pinned inner conv does not serve this conv on this device");
  }
  // The rearrangement converts as it gathers: as the first layer it reads the graph input (NCHW
  // fp32) itself, so the builder inserts no conversion pass before it.
  std::vector<TensorType> input_types(size_t) const override { return {fp16_nhwc8(), fp32_nchw()}; }
  KernelPlan prepare(const PrepareInfo& info) const override {
    const bool reads_fp32 = !info.input_types.empty() && info.input_types[0] == fp32_nchw();
    KernelPlan plan;
    int inner = 0;
    InnerKind kind = kIgemm;
    if (window_) {
      kind = kWindow;
      plan.variant_name = "s2d" + std::to_string(rearrange_.out_c_stride()) + "+" + window_->name();
      // Both parts 256-byte aligned, as the arena's buffers are.
      plan.workspace_bytes = rearranged_bytes(rearrange_, info.batch) +
                             (window_->workspace_bytes(info.batch) + 255) / 256 * 256;
      plan.state = std::make_shared<const WindowInputMaps>();
    } else if (tma_ && info.batch > tma_max_fallback_) {
      const ConvFp16TmaPlan p = tma_->plan(info.batch);
      inner = p.variant;
      kind = kTma;
      plan.variant_name = "s2d" + std::to_string(rearrange_.out_c_stride()) + "+" + p.name;
      plan.workspace_bytes = rearranged_bytes(rearrange_, info.batch) + p.workspace_bytes;
      plan.state = std::make_shared<const TmaInputMaps>();
    } else if (wgmma_ && info.batch > wgmma_max_fallback_) {
      const ConvFp16WgmmaPlan p = wgmma_->plan(info.batch);
      inner = p.variant;
      kind = kWgmma;
      plan.variant_name = "s2d+" + p.name;
      plan.workspace_bytes = rearranged_bytes(rearrange_, info.batch);
    } else {
      if (!conv_)
        throw Error("conv_fp16_s2d: no inner conv for batch " + std::to_string(info.batch));
      const ConvFp16Plan p = conv_->plan(info.batch);
      inner = p.variant;
      plan.variant_name = "s2d+" + p.name;
      plan.workspace_bytes = rearranged_bytes(rearrange_, info.batch) + p.workspace_bytes;
    }
    if (reads_fp32) plan.variant_name += " (reads fp32 NCHW)";
    plan.variant = 8 * inner + 2 * kind + (reads_fp32 ? 1 : 0);
    return plan;
  }
  void run(const KernelArgs& args) override {
    const auto stream = static_cast<cudaStream_t>(args.stream);
    if (args.batch > 0 && args.workspace == nullptr)
      throw Error("conv_fp16_s2d: run without its workspace");
    const int kind = (args.variant / 2) % 4, inner = args.variant / 8;
    const SpaceToDepthShape& rearrange = rearrange_;  // every inner conv reads the same x'
    uint8_t* rearranged = static_cast<uint8_t*>(args.workspace);
    // The graph input straight from NCHW fp32, or the backend layout; same x' either way.
    if (args.variant % 2 == 1)
      space_to_depth_nchw_fp32(static_cast<const float*>(args.inputs.at(0)), rearranged, rearrange,
                               args.batch, stream);
    else
      space_to_depth_fp16(args.inputs.at(0), rearranged, rearrange, args.batch, stream);
    // The inner conv's part follows x'; when that part is empty the pointer is never read.
    uint8_t* inner_workspace = rearranged + rearranged_bytes(rearrange, args.batch);
    if (kind == kWindow) {
      if (!window_ || args.state == nullptr)
        throw Error("conv_fp16_s2d: a window variant without the window conv or its state");
      const ConvWindowInput input =
          static_cast<const WindowInputMaps*>(args.state)
              ->find_or_encode(rearranged, args.batch, [this](const void* x, int b) {
                return window_->encode_input(x, b);
              });
      window_->forward(input, args.output, stream, inner_workspace);
    } else if (kind == kTma) {
      if (!tma_ || args.state == nullptr)
        throw Error("conv_fp16_s2d: a TMA variant without the TMA conv or its prepared state");
      const ConvFp16TmaInput input =
          static_cast<const TmaInputMaps*>(args.state)
              ->find_or_encode(rearranged, args.batch,
                               [this](const void* x, int b) { return tma_->encode_input(x, b); });
      tma_->forward(inner, input, nullptr, args.output, stream, inner_workspace);
    } else if (kind == kWgmma) {
      if (!wgmma_) throw Error("conv_fp16_s2d: wgmma variant without the wgmma kernel");
      wgmma_->forward(inner, rearranged, args.output, args.batch, stream);
    } else {
      if (!conv_) throw Error("conv_fp16_s2d: igemm variant without the igemm conv");
      conv_->forward(inner, rearranged, args.output, args.batch, stream, inner_workspace);
    }
  }
  size_t weight_bytes() const override {
    return (conv_ ? conv_->weight_bytes() : 0) + (wgmma_ ? wgmma_->weight_bytes() : 0) +
           (tma_ ? tma_->weight_bytes() : 0) + (window_ ? window_->weight_bytes() : 0);
  }

 private:
  using TmaInputMaps = tma::InputMaps<ConvFp16TmaInput>;
  using WindowInputMaps = tma::InputMaps<ConvWindowInput>;
  SpaceToDepthShape rearrange_;   // x' at pad8(C') channels (the TMA reads it as 64, zero-filled)
  std::optional<ConvFp16> conv_;  // the default entry's: every batch no other conv takes
  std::unique_ptr<ConvFp16Wgmma> wgmma_;
  std::unique_ptr<ConvFp16Tma> tma_;
  std::unique_ptr<ConvFp16Window> window_;
  // Each runs above its batch (pinned: -1, every batch; max: never).
  int wgmma_max_fallback_ = std::numeric_limits<int>::max();
  int tma_max_fallback_ = std::numeric_limits<int>::max();
};

void add_s2d_entry(KernelRegistry& registry, const std::string& name, S2dInner inner,
                   int priority) {
  KernelEntry entry;
  entry.name = name;
  entry.op = OpKind::Conv;
  entry.device = Device::CUDA;
  entry.precision = Precision::FP16;
  entry.priority = priority;
  entry.baseline = inner != S2dInner::Auto;
  entry.supports = [inner](const Node& node) { return served_shape(node, inner).has_value(); };
  entry.create = [name, inner](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
    const ErrorSite site = node_site(context);
    const std::optional<ConvShape> shape = served_shape(context.node, inner);
    if (!shape)
      throw_error(site, name +
                            " does not serve this conv (needs stride >= 2, in_c <= 4, groups 1, "
                            "dilation 1, kernel >= stride; the pinned forms: their inner conv on "
                            "this device)");
    const ConvWeights weights = conv_weights_of(context, name, shape);
    try {
      return std::make_unique<ConvFp16S2dKernel>(*shape, weights.weight, weights.bias, inner);
    } catch (const Error& error) {
      throw_error(site, error.what());
    }
  };
  add_residual_epilogue(entry);
  registry.add(std::move(entry));
}

}  // namespace

void register_s2d_conv_kernels(KernelRegistry& registry) {
  // Beats conv_fp16_igemm's gather path wherever it applies.
  add_s2d_entry(registry, "conv_fp16_s2d", S2dInner::Auto, 20);
  // Comparison forms: their supports() lie within conv_fp16_s2d's, which stays the builder's pick.
  add_s2d_entry(registry, "conv_fp16_s2d_window", S2dInner::Window, 13);
  add_s2d_entry(registry, "conv_fp16_s2d_tma", S2dInner::Tma, 13);
  add_s2d_entry(registry, "conv_fp16_s2d_wgmma", S2dInner::Wgmma, 13);
}

}  // namespace cnnrt::cuda
