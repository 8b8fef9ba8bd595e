// Registry entries of the CUDA int8 conv kernels (kernels/cuda/conv/conv_s8.h), precision int8
// (the linears: int8_linear_entries.cpp):
//   conv_int8_s2d     strided convs with few input channels (AlexNet conv1) as space-to-depth +
//                     the tensor-core GEMM; reads the fp32 graph input directly (quantising it).
//                     On Hopper, where the batch fills the GPU, the GEMM is conv_int8_tma's over
//                     the blocks at a 64-byte channel stride (conv1: 48 channels + 16 zero ones;
//                     see "conv_int8_s2d's TMA GEMM" below); conv_int8_s2d_tma and
//                     conv_int8_s2d_wgmma pin the TMA / wgmma GEMM at every batch; its window
//                     conv (sm_90a, every batch where it serves) takes three consumer
//                     warpgroups where the CTAs take more than one unit each, two below
//                     (ConvS8Window::consumers_at); conv_int8_s2d_window2 / _window3 pin two /
//                     three, conv_int8_s2d_window3_pool runs its pooling form (the pool in the
//                     conv's helper warps: no pool pass; 2x slower, run 52),
//                     conv_int8_s2d_quantise its quantising form (the fp32 input quantised and
//                     rearranged in its producer: no x' pass; slower, run 51) — comparison entries
//   conv_int8_tma     dense convs with a channel stride % 64 == 0 on Hopper's TMA-fed,
//                     warp-specialised wgmma kernel (kernels/cuda/conv/tma_s8.h), conv_int8_igemm's
//                     split-K plan at batches its tiles leave SMs idle; a max-pool runs fused
//                     in its epilogue where its plan says so (int8 out; tma_s8.cu, "Fused or
//                     staged"); conv_int8_tma_<BM>x<BN> pin one tile at every batch (a pooled
//                     conv only on the tiles that fuse its pool), conv_int8_tma_staged the conv
//                     then the pool pass (comparison entries: profiles, tests)
//   conv_int8_wgmma   dense convs (groups 1, dilation 1, out_c % 64 == 0) on Hopper's wgmma
//                     m64nNk32 s8 (sm_90a), conv_int8_igemm's split-K plan at small batches
//   conv_int8_narrow  dense convs with K = kh·kw·pad16(in_c) <= 160 bytes and out_c <= 256 (the
//                     narrow early layers of MBConv nets) on a persistent small-K mma.sync kernel;
//                     above the wgmma and igemm entries, below conv_int8_s2d
//   conv_int8_igemm   dense convs (groups 1) on the int8 tensor cores (mma.sync m16n8k32, sm_80+)
//   conv_int8_wgmma_always  the wgmma kernel at every batch (tests, profiles; lower priority)
//   conv_int8_direct  any conv, grouped and depthwise included (lower priority)
//
// The factory does what docs/QUANTIZATION.md puts on the host, once, with the CPU reference's own
// function (ref::prepare_int8_layer): the scales of the tensors it reads and writes from the
// calibration (int8_tensor_scale: errors name the file, layer and tensor), weights quantised per
// output channel, int32 biases, fp32 multipliers; then packs the weights for its kernel and
// uploads them.  So the GPU's integers are the reference's by construction and only the
// per-element arithmetic runs on the device.  A conv that writes the graph output
// dequantises in its epilogue (fp32 NHWC/8 out).  A fused max-pool runs after the conv on the
// pre-pool tensor (in the workspace), exact because max commutes with the requantisation —
// except where conv_int8_tma's plan fuses it into the conv's epilogue (no pre-pool tensor).
// The node-level shape rules are int8_conv_rules.cpp's.
// The GEMM of conv_int8_wgmma and conv_int8_s2d is chosen once per context (prepare()): the
// wgmma kernel where it serves the (rearranged) conv on this device and its 128-row tiles fill
// the SMs at the context's batch, else the mma.sync GEMM with split-K — the fp16 wgmma entries'
// rule (fallback_max_batch).
// conv_int8_s2d's TMA GEMM: conv_int8_tma needs a channel stride % 64 (its 64-byte k-tile), the
// blocks' is pad16(s·s·C) (conv1: 48), so the TMA form rearranges into a second map at s·s·C
// rounded up to 64 (x' written 4/3 as large, K = 576 instead of 432 — taken only where that
// wastes at most a quarter of K) with its own weight rows packed at that stride; bias and
// multipliers are shared.  It runs (BN 64 tiles, tma_s8.cu) above the batch where the TMA
// kernel's default tiles fill the SMs, the pool after it as before; below that, or on other
// devices, the wgmma / mma.sync GEMM over the pad16 map.
// conv_int8_s2d's window conv: where conv_int8_window serves that same 64-byte-stride conv
// (kernels/cuda/conv/tma_window.h: AlexNet conv1, int8 output; each x' pixel from L2 about twice
// instead of once per tap, docs/kernels/conv_fp16_window.md), the default entry runs it instead
// of the TMA GEMM at every batch, on the same weight rows, with x' stored at the pad16 stride
// (conv1: 48 bytes a pixel, not 64: the window's TMA zero-fills the rest of each 64-byte row, as
// conv_fp16_window does, so the rearrangement writes and the conv reads a quarter fewer bytes);
// the pinned conv_int8_s2d_tma keeps the TMA GEMM over the 64-byte map.
// K (in_c / groups × kh × kw) above ref::kMaxInt8Reduction is refused.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/int8_ref.h"
#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/conv/space_to_depth.h"
#include "kernels/cuda/conv/tma_encode.h"
#include "kernels/cuda/conv/tma_s8.h"
#include "kernels/cuda/conv/tma_window.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise_fp16.h"
#include "runtime/calibration.h"
#include "runtime/cuda/cuda_registry.h"
#include "runtime/cuda/int8_conv_rules.h"
#include "runtime/cuda/int8_layer_prep.h"

namespace cnnrt::cuda {
namespace {

// --- conv ----------------------------------------------------------------------------------------

enum class ConvPath { Gemm, Direct, SpaceToDepth, Depthwise, Narrow, Tma };
// Whether the GEMM may run on the Hopper wgmma kernel: never, when its grid fills the SMs, always.
// The space-to-depth path's TMA GEMM takes the same three settings.
enum class Wgmma { Off, Auto, Always };

// The node-level shape rules (int8_conv_rules.h).
using namespace int8_rules;

// ConvPath::Tma's tile argument for conv_int8_tma_staged: always the staged pool form (the conv
// on the default tile, then the pool pass); tiles are 0 .. tile count - 1.
constexpr int kPinStaged = 1000;

class ConvInt8Kernel final : public LayerKernel {
 public:
  // tma_tile (ConvPath::Tma): the pinned tile (fused with a max-pool where it runs it: the
  // entries' rule, int8_conv_rules.h), kPinStaged (the staged pool form), or -1 for the kernel's
  // own plan and the small-batch fallback to the mma.sync GEMM.  s2d_tma (ConvPath::SpaceToDepth):
  // whether its GEMM may run on the TMA kernel (header comment), as `wgmma` says for the wgmma
  // kernel; window_consumers: the consumer warpgroups of its window conv, where that serves (2 or
  // 3 pinned, 0 by batch: ConvS8Window::consumers_at); window_quantises: that window conv reads
  // the fp32 input itself (ConvS8Window's quantising form, two consumers: no rearrangement pass);
  // window_pool: its pooling form at every batch (three consumers, no pool pass).
  ConvInt8Kernel(const KernelBuildContext& context, const char* name, ConvPath path,
                 Wgmma wgmma = Wgmma::Off, int tma_tile = -1, Wgmma s2d_tma = Wgmma::Off,
                 int window_consumers = 0, bool window_quantises = false, bool window_pool = false)
      : path_(path),
        tma_tile_(tma_tile),
        window_consumers_(window_consumers),
        window_quantises_(window_quantises),
        window_pool_(window_pool) {
    const std::optional<ConvShape> shape = conv_shape_of(context.node);
    const ConvWeights weights = conv_weights_of(context, name, shape);
    const ConvAttrs& a = shape->conv;
    const int per_group = shape->in_c / a.groups;
    const ref::Int8Layer layer = prepare_layer(
        context, weights.weight, weights.bias, shape->out_c,
        static_cast<int64_t>(per_group) * a.kernel_h * a.kernel_w, shape->activation, device_);
    conv_.in_c = shape->in_c;
    conv_.in_h = shape->in_h;
    conv_.in_w = shape->in_w;
    conv_.in_stride = padded16(shape->in_c);
    conv_.out_c = shape->out_c;
    conv_.out_h = shape->conv_h;
    conv_.out_w = shape->conv_w;
    conv_.kh = a.kernel_h;
    conv_.kw = a.kernel_w;
    conv_.stride_h = a.stride_h;
    conv_.stride_w = a.stride_w;
    conv_.pad_h = a.pad_h;
    conv_.pad_w = a.pad_w;
    conv_.dil_h = a.dilation_h;
    conv_.dil_w = a.dilation_w;
    conv_.groups = a.groups;
    pool_ = nhwc_pool_of(*shape);
    if (path == ConvPath::SpaceToDepth) rearrange_for_s2d(*shape);
    // The wgmma kernel's k-tile is 128 bytes; the mma.sync GEMM takes that padding too.
    const bool wgmma_candidate = (path == ConvPath::Gemm || path == ConvPath::SpaceToDepth) &&
                                 wgmma != Wgmma::Off && wgmma_s8_device_supported() &&
                                 (path == ConvPath::SpaceToDepth || wgmma_shape_ok(*shape));
    k_align_ = wgmma_candidate ? 128 : 64;
    const std::vector<int8_t> packed = packed_weights(layer);
    upload_layer(layer, packed.data(), packed.size(), device_, conv_);
    if (path == ConvPath::SpaceToDepth && s2d_tma != Wgmma::Off && ConvS8Tma::device_supported())
      prepare_s2d_tma(layer, s2d_tma == Wgmma::Always);
    if (s2d_tma == Wgmma::Always && !tma_)
      throw_error(node_site(context),
                  std::string(name) + ": the TMA GEMM does not serve this conv");
    if (path == ConvPath::Narrow) {
      if (!narrow_s8_serves(conv_))
        throw_error(node_site(context), std::string(name) + ": shape not served");
      narrow_small_sums_ = narrow_s8_small_sums(layer.weight.data(), layer.bias.data(), conv_.out_c,
                                                layer.per_channel);
    }
    if (path == ConvPath::Tma) {
      if (!tma_s8_serves(conv_))
        throw_error(node_site(context), std::string(name) + ": shape not served");
      try {
        tma_.emplace(conv_, 0, pool_);  // fused with the pool where the plan says so
      } catch (const Error& error) {
        throw_error(node_site(context), error.what());
      }
      // Below the batch whose 128x128 tiles fill the SMs, the mma.sync split-K GEMM — except
      // where a unit's K is short (ConvS8Tma::runs_small_batches: the TMA's small tiles win).
      tma_max_fallback_ =
          tma_tile_ >= 0 || ConvS8Tma::runs_small_batches(conv_)
              ? 0
              : fallback_max_batch([this](int b) { return tma_->plan(b, 0).units; });
    }
    if (wgmma_candidate && wgmma_s8_serves(conv_)) {
      use_wgmma_ = true;
      wgmma_max_fallback_ = wgmma == Wgmma::Always ? 0 : fallback_max_batch([this](int b) {
        return wgmma_s8_ctas(conv_, b);
      });
    }
    if (path == ConvPath::SpaceToDepth && wgmma == Wgmma::Always && !use_wgmma_)
      throw_error(node_site(context),
                  std::string(name) + ": the wgmma GEMM does not serve this conv");
  }
  // The space-to-depth entry also reads the fp32 NCHW graph input, quantising it itself.
  std::vector<TensorType> input_types(size_t) const override {
    if (path_ == ConvPath::SpaceToDepth) return {fp32_nchw(), int8_nhwc16(device_.input_scale)};
    return {int8_nhwc16(device_.input_scale)};
  }
  TensorType output_type() const override { return output_type_of(device_); }
  // The variant packs the space-to-depth source (bit 0: fp32 NCHW) and the GEMM: variant / 2
  // is 0 for the wgmma kernel, else the mma.sync GEMM's split-K count (more than 1 when its
  // tiles alone would leave SMs idle, small batches).
  // Workspace: [space-to-depth map][pre-pool tensor][split-K partial sums], each 256-aligned.
  // ConvPath::Tma on its own kernel: variant = -1 - 2 * launch id (ConvS8TmaPlan::variant: a tile,
  // or ConvS8Tma::kFusedVariant + tile for the pool fused: no pool pass, no pre-pool tensor), the
  // state caches the input's im2col maps (encoded on a context's first run per input pointer, as
  // conv_fp16_tma does).
  KernelPlan prepare(const PrepareInfo& info) const override {
    KernelPlan plan;
    const bool fp32_source = path_ == ConvPath::SpaceToDepth && !info.input_types.empty() &&
                             info.input_types[0].dtype == DType::F32;
    if (window_) {
      // From the fp32 input the quantising form where the entry asks for it (no x' pass); else
      // the window conv over x' on its consumer count at this batch, or its pooling form where
      // pinned (never a default: 2x slower at batch 256, docs/PERFORMANCE.md run 52).
      const bool quantised = fp32_source && window_->quantises();
      const int consumers = window_->consumers_at(info.batch);
      const bool pooled = !quantised && window_->pools() && window_pool_;
      const int code = quantised        ? kWindowQuantiseCode
                       : pooled         ? kWindow3PoolCode
                       : consumers == 3 ? kWindow3Code
                                        : kWindowCode;
      plan.variant = -1 - (2 * code + (fp32_source ? 1 : 0));
      plan.variant_name = quantised ? std::string("quantise-s2d-in-window_s8_3x3_n128")
                                    : std::string(fp32_source ? "quantise+" : "") + "s2d" +
                                          std::to_string(s2d_tma_.out_stride) +
                                          (pooled           ? "+window_s8x3_3x3_n128+bandpool"
                                           : consumers == 3 ? "+window_s8x3_3x3_n128"
                                                            : "+window_s8_3x3_n128");
      plan.variant_name += pool_ && !pooled ? "+pool" : "";
      if (pooled)
        plan.state = std::make_shared<const WindowPoolMaps>();
      else
        plan.state = std::make_shared<const WindowInputMaps>();
      plan.workspace_bytes =
          workspace_parts(info.batch, 1, true, false, !quantised, pooled).total();
      return plan;
    }
    if (tma_ && info.batch > tma_max_fallback_) {
      const ConvS8TmaPlan p = tma_tile_ < 0             ? tma_->plan(info.batch)
                              : tma_tile_ == kPinStaged ? tma_->plan_staged(info.batch)
                                                        : tma_->plan(info.batch, tma_tile_);
      plan.variant = -1 - (2 * p.variant + (fp32_source ? 1 : 0));
      plan.variant_name = p.name + (pool_ && !p.fused_pool ? "+pool" : "");
      if (path_ == ConvPath::SpaceToDepth)
        plan.variant_name = std::string(fp32_source ? "quantise+" : "") + "s2d" +
                            std::to_string(s2d_tma_.out_stride) + "+" + plan.variant_name;
      plan.state = std::make_shared<const TmaInputMaps>();
      plan.workspace_bytes = workspace_parts(info.batch, 1, true, p.fused_pool).total();
      return plan;
    }
    const bool on_wgmma = use_wgmma_ && info.batch > wgmma_max_fallback_;
    const std::string gemm = on_wgmma ? wgmma_s8_name(conv_) : "igemm_s8";
    plan.variant_name = path_ == ConvPath::Direct      ? "direct_s8"
                        : path_ == ConvPath::Depthwise ? "depthwise_s8"
                        : path_ == ConvPath::Narrow    ? "narrow_s8"
                                                       : gemm;
    const bool no_gemm =
        path_ == ConvPath::Direct || path_ == ConvPath::Depthwise || path_ == ConvPath::Narrow;
    const int splits = no_gemm ? 1 : on_wgmma ? 0 : igemm_s8_splits(conv_, info.batch, sms_);
    plan.variant = splits * 2 + (fp32_source ? 1 : 0);
    if (path_ == ConvPath::SpaceToDepth)
      plan.variant_name = std::string(fp32_source ? "quantise+" : "") + "s2d+" + gemm;
    if (splits > 1) plan.variant_name += " split-k " + std::to_string(splits);
    if (pool_) plan.variant_name += "+pool";
    plan.workspace_bytes = workspace_parts(info.batch, splits, false).total();
    return plan;
  }
  void run(const KernelArgs& args) override {
    const auto stream = static_cast<cudaStream_t>(args.stream);
    // TMA: variant = -1 - (2 * tile + fp32 source); else 2 * splits + fp32 source (prepare()).
    const bool on_tma = args.variant < 0;
    const int code = on_tma ? -1 - args.variant : args.variant;
    const int splits = on_tma ? 1 : code / 2;
    // The pool fused into conv_int8_tma's epilogue: the kernel writes the pooled output itself.
    const bool window_quantised = on_tma && code / 2 == kWindowQuantiseCode;
    const bool window_pooled = on_tma && code / 2 == kWindow3PoolCode;  // no pool pass
    const bool fused_pool = on_tma && code / 2 < kWindowCode && ConvS8Tma::is_fused(code / 2);
    const Workspace parts =
        workspace_parts(args.batch, splits, on_tma, fused_pool, !window_quantised, window_pooled);
    char* workspace = static_cast<char*>(args.workspace);
    if (workspace == nullptr && parts.total() > 0) throw Error("conv int8: no workspace");
    const void* x = args.inputs.at(0);
    // The pooling window conv's band counters start at zero; cleared before the rearrangement so
    // that the memset does not sit between the two PDL-chained kernels.
    if (window_pooled)
      CNNRT_CUDA_CHECK(cudaMemsetAsync(workspace + parts.partial, 0, parts.partial_bytes, stream));
    if (path_ == ConvPath::SpaceToDepth && !window_quantised) {
      space_to_depth_s8(on_tma ? s2d_tma_ : s2d_, x, (code & 1) != 0, workspace, args.batch,
                        stream);
      x = workspace;
    }
    void* conv_out =
        pool_ && !fused_pool ? static_cast<void*>(workspace + parts.pre_pool) : args.output;
    if (path_ == ConvPath::Direct) {
      conv_s8_direct(conv_, x, conv_out, args.batch, stream);
    } else if (path_ == ConvPath::Depthwise) {
      conv_s8_depthwise(conv_, x, conv_out, args.batch, stream);
    } else if (path_ == ConvPath::Narrow) {
      conv_s8_narrow(conv_, x, conv_out, args.batch, sms_, narrow_small_sums_, stream);
    } else if (window_quantised) {
      window_->forward_quantised(window_maps<ConvWindowInput>(args.state, x, args.batch,
                                                              [&](const void* p, int b) {
                                                                return window_->encode_source(p, b);
                                                              }),
                                 conv_out, stream);
    } else if (window_pooled) {
      window_->forward_pooled(
          window_maps<ConvWindowPoolInput>(
              args.state, x, args.batch,
              [&](const void* p, int b) { return window_->encode_pooled(p, conv_out, b); }),
          args.output, reinterpret_cast<int*>(workspace + parts.partial), stream);
    } else if (on_tma && (code / 2 == kWindowCode || code / 2 == kWindow3Code)) {
      window_->forward(window_maps<ConvWindowInput>(
                           args.state, x, args.batch,
                           [&](const void* p, int b) { return window_->encode_input(p, b); }),
                       conv_out, stream, code / 2 == kWindow3Code ? 3 : 2);
    } else if (on_tma) {
      run_tma(code / 2, args.state, x, conv_out, args.batch, stream);
    } else if (splits == 0) {
      conv_s8_wgmma(conv_, x, conv_out, args.batch, stream);
    } else {
      const S8SplitK split{splits, reinterpret_cast<int*>(workspace + parts.partial)};
      conv_s8_igemm(conv_, x, conv_out, args.batch, stream, &split);
    }
    if (pool_ && !fused_pool && !window_pooled)
      pool_conv_output(*pool_, conv_.float_output, conv_out, args.output, args.batch, stream);
  }
  size_t weight_bytes() const override {
    return device_.weight.bytes() + device_.bias.bytes() + device_.multiplier.bytes() +
           tma_weight_.bytes();
  }

 private:
  static size_t round_up_bytes(size_t bytes) { return (bytes + 255) / 256 * 256; }

  // Byte offsets of the workspace's parts for `batch` (see prepare()); on_tma: the space-to-depth
  // map is the TMA form's; fused_pool: no pre-pool tensor; map: false where no space-to-depth
  // map is written (the window conv's quantising form); pool_counts: the pooling window conv's
  // band counters in the split-K sums' place.
  struct Workspace {
    size_t pre_pool = 0, partial = 0, partial_bytes = 0;
    size_t total() const { return partial + partial_bytes; }  // the split-K sums come last
  };
  Workspace workspace_parts(int batch, int splits, bool on_tma, bool fused_pool = false,
                            bool map = true, bool pool_counts = false) const {
    Workspace parts;
    const S8SpaceToDepth& s2d = on_tma ? s2d_tma_ : s2d_;
    if (path_ == ConvPath::SpaceToDepth && map)
      parts.pre_pool =
          round_up_bytes(static_cast<size_t>(batch) * s2d.blocks_h * s2d.blocks_w * s2d.out_stride);
    parts.partial = parts.pre_pool;
    if (pool_ && !fused_pool)
      parts.partial += round_up_bytes(static_cast<size_t>(batch) * conv_.out_h * conv_.out_w *
                                      conv_.out_stride * (conv_.float_output ? sizeof(float) : 1));
    parts.partial_bytes =
        pool_counts ? window_->pool_count_bytes(batch) : igemm_s8_split_bytes(conv_, batch, splits);
    return parts;
  }

  // The GEMM sees the rearranged map: s·s·C channels, a ceil(k/s) kernel, stride 1, no padding;
  // taps_h_/taps_w_/tap_stride_ keep the original kernel for the weight packing.
  void rearrange_for_s2d(const ConvShape& shape) {
    const int s = shape.conv.stride_h;
    s2d_ = {shape.in_c,
            shape.in_h,
            shape.in_w,
            s,
            shape.conv.pad_h,
            shape.conv.pad_w,
            shape.conv_h + ceil_div(conv_.kh, s) - 1,
            shape.conv_w + ceil_div(conv_.kw, s) - 1,
            padded16(s * s * shape.in_c),
            device_.input_scale};
    taps_h_ = conv_.kh;
    taps_w_ = conv_.kw;
    tap_stride_ = s;
    conv_.in_c = s * s * shape.in_c;
    conv_.in_h = s2d_.blocks_h;
    conv_.in_w = s2d_.blocks_w;
    conv_.in_stride = s2d_.out_stride;
    conv_.kh = ceil_div(taps_h_, s);
    conv_.kw = ceil_div(taps_w_, s);
    conv_.stride_h = conv_.stride_w = 1;
    conv_.pad_h = conv_.pad_w = 0;
  }

  std::vector<int8_t> packed_weights(const ref::Int8Layer& layer) {
    switch (path_) {
      case ConvPath::Direct:
        return pack_s8_direct_weights(layer, conv_);
      case ConvPath::Depthwise:
        return depthwise_s8_weights(conv_, layer.weight.data());
      default:
        return pack_gemm(layer);
    }
  }
  // [out_c][k_pad] (pack_s8_gemm_weights) at the GEMM's K padding.
  std::vector<int8_t> pack_gemm(const ref::Int8Layer& layer) {
    conv_.k_total = conv_.kh * conv_.kw * conv_.in_stride;
    conv_.k_pad = round_up(conv_.k_total, k_align_);
    return pack_s8_gemm_weights(layer, conv_, taps_h_, taps_w_, tap_stride_);
  }

  // conv_int8_s2d's TMA GEMM (header comment): the blocks at a 64-aligned channel stride, weight
  // rows packed for it, conv_int8_tma over them; `always`: at every batch (the pinned entry).
  void prepare_s2d_tma(const ref::Int8Layer& layer, bool always) {
    const int stride = tma_block_channels(conv_.in_c);
    if (stride == 0) return;
    S8Conv wide = conv_;
    wide.in_stride = stride;
    wide.k_total = wide.kh * wide.kw * stride;
    wide.k_pad = wide.k_total;  // a multiple of 64 already
    if (!tma_s8_serves(wide)) return;
    const std::vector<int8_t> packed =
        pack_s8_gemm_weights(layer, wide, taps_h_, taps_w_, tap_stride_);
    tma_weight_ = DeviceArray(packed.size());
    tma_weight_.upload(packed.data(), packed.size());
    wide.weight = static_cast<const int8_t*>(tma_weight_.get());
    s2d_tma_ = s2d_;
    if (!always && ConvS8Window::supports(wide, s2d_.out_stride) &&
        ConvS8Window::device_supported()) {
      // The window conv runs at every batch (header comment): no TMA GEMM beside it, and x' at
      // the pad16 stride (s2d_tma_ keeps s2d_'s: the map the window's rearrangement writes).
      window_.emplace(wide,
                      narrow_s8_small_sums(layer.weight.data(), layer.bias.data(), conv_.out_c,
                                           layer.per_channel),
                      window_consumers_, s2d_.out_stride, window_quantises_ ? &s2d_ : nullptr,
                      pool_ ? &*pool_ : nullptr);
      return;
    }
    s2d_tma_.out_stride = stride;
    tma_.emplace(wide);
    // Above the batch whose default tiles fill the SMs (conv_fp16_s2d's rule; on conv1 the wave
    // model takes a BN = 64 tile, whose units, not 128x128's, are the grid).
    tma_max_fallback_ =
        always ? 0 : fallback_max_batch([this](int b) { return tma_->plan(b).units; });
  }
  // The encoded input maps of one context (KernelPlan::state).
  using TmaInputMaps = tma::InputMaps<ConvS8TmaInput>;
  void run_tma(int tile, const void* state, const void* x, void* y, int batch,
               cudaStream_t stream) const {
    if (state == nullptr || !tma_) throw Error("conv_int8_tma: run() without its prepared state");
    const ConvS8TmaInput input = static_cast<const TmaInputMaps*>(state)->find_or_encode(
        x, batch, [this](const void* p, int b) { return tma_->encode_input(p, b); });
    tma_->forward(tile, input, y, stream);
  }

  // The window conv's variant codes (run()'s TMA codes are tiles below them): over x' on two
  // consumers, the quantising form over the fp32 input, over x' on three consumers, and pooling.
  static constexpr int kWindowCode = 1 << 12, kWindowQuantiseCode = kWindowCode + 1,
                       kWindow3Code = kWindowCode + 2, kWindow3PoolCode = kWindowCode + 3;
  // A window form's maps from the context's cache (KernelPlan::state: WindowInputMaps, or
  // WindowPoolMaps for the pooling form), encoded on first use; ConvS8Window checks the form.
  using WindowInputMaps = tma::InputMaps<ConvWindowInput>;
  using WindowPoolMaps = tma::InputMaps<ConvWindowPoolInput>;
  // encode(x, batch): ConvS8Window's encode_input or encode_source (the pooling form's pre-pool
  // map lies at a fixed offset from x', in the same workspace, so x and the batch key it too).
  template <class Input, class Encode>
  Input window_maps(const void* state, const void* x, int batch, const Encode& encode) const {
    if (state == nullptr || !window_)
      throw Error("conv_int8_window: run() without its prepared state");
    return static_cast<const tma::InputMaps<Input>*>(state)->find_or_encode(x, batch, encode);
  }
  ConvPath path_;
  int tma_tile_ = -1;              // ConvPath::Tma: pinned tile, kPinStaged, or -1
  int window_consumers_ = 0;       // the window conv's consumer warpgroups (2, 3; 0: by batch)
  bool window_quantises_ = false;  // ... and whether it reads the fp32 input itself
  bool window_pool_ = false;       // ... and pools its output at every batch
  std::optional<ConvS8Tma> tma_;   // ConvPath::Tma's kernel (its weights are device_'s), or the
                                   // space-to-depth path's TMA GEMM (tma_weight_)
  int tma_max_fallback_ = 0;       // ... runs above this batch, else the mma.sync GEMM
  int sms_ = current_sm_count();
  int k_align_ = 64;                // the GEMM weight rows' K padding
  bool use_wgmma_ = false;          // the wgmma kernel serves this conv on this device
  int wgmma_max_fallback_ = 0;      // ... above this batch
  bool narrow_small_sums_ = false;  // narrow path: every |acc| < 2^22 (conv_s8_narrow)
  S8Conv conv_;
  S8SpaceToDepth s2d_;
  S8SpaceToDepth s2d_tma_;              // the TMA GEMM's map (stride tma_block_channels) or the
                                        // window conv's (the pad16 stride)
  DeviceArray tma_weight_;              // the TMA GEMM's / window conv's rows at that stride
  std::optional<ConvS8Window> window_;  // the default entry's window conv over that map
  int taps_h_ = 0, taps_w_ = 0, tap_stride_ = 1;  // space-to-depth: the original kernel
  std::optional<NhwcPool> pool_;
  Int8Device device_;
};

// A comparison entry: conv_int8_s2d with its window conv pinned to `consumers` warpgroups, in
// its quantising form, or pooling.
EntryRow s2d_window_row(const char* name, int consumers, bool quantises, bool pools = false) {
  EntryRow row{name, OpKind::Conv,
               pools ? conv_s2d_window_pool_supported : conv_s2d_window_supported,
               [name, consumers, quantises, pools](const KernelBuildContext& context) {
                 return std::unique_ptr<LayerKernel>(std::make_unique<ConvInt8Kernel>(
                     context, name, ConvPath::SpaceToDepth, Wgmma::Auto, -1, Wgmma::Auto, consumers,
                     quantises, pools));
               }};
  row.baseline = true;
  return row;
}

}  // namespace

// conv_int8_tma's priority: above conv_int8_wgmma (15) and conv_int8_narrow (16, which the
// default entry leaves the small-K layers to).
constexpr int kTmaPriority = 17;

void register_int8_kernels(KernelRegistry& registry) {
  add_entries(registry, Device::CUDA, Precision::INT8, 20,
              {{"conv_int8_s2d", OpKind::Conv, conv_s2d_supported,
                [](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
                  return std::make_unique<ConvInt8Kernel>(context, "conv_int8_s2d",
                                                          ConvPath::SpaceToDepth, Wgmma::Auto, -1,
                                                          Wgmma::Auto);
                }}});
  // Its TMA GEMM, or its wgmma GEMM, at every batch (profiles, the harness; never a default).
  add_entries(registry, Device::CUDA, Precision::INT8, 4,
              {{"conv_int8_s2d_tma", OpKind::Conv, conv_s2d_tma_supported,
                [](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
                  return std::make_unique<ConvInt8Kernel>(context, "conv_int8_s2d_tma",
                                                          ConvPath::SpaceToDepth, Wgmma::Off, -1,
                                                          Wgmma::Always);
                },
                false, false, /*baseline=*/true},
               {"conv_int8_s2d_wgmma", OpKind::Conv, conv_s2d_wgmma_supported,
                [](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
                  return std::make_unique<ConvInt8Kernel>(context, "conv_int8_s2d_wgmma",
                                                          ConvPath::SpaceToDepth, Wgmma::Always);
                },
                false, false, /*baseline=*/true},
               // conv_int8_s2d's window conv pinned to three or two consumers, pooling (run 52)
               // or quantising (run 51): comparison entries (header comment).
               s2d_window_row("conv_int8_s2d_window3", 3, false),
               s2d_window_row("conv_int8_s2d_window3_pool", 3, false, true),
               s2d_window_row("conv_int8_s2d_window2", 2, false),
               s2d_window_row("conv_int8_s2d_quantise", 2, true)});
  // conv_int8_tma: the TMA mainloop, above conv_int8_wgmma (docs/kernels/conv_int8_tma.md); its
  // pinned tiles (a pooled conv only on the tiles that run its pool fused) and its staged pool
  // form below every other int8 conv, never a default.
  add_entries(registry, Device::CUDA, Precision::INT8, kTmaPriority,
              {{"conv_int8_tma", OpKind::Conv, conv_tma_default_supported,
                [](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
                  return std::make_unique<ConvInt8Kernel>(context, "conv_int8_tma", ConvPath::Tma);
                }}});
  const std::vector<std::string>& tiles = ConvS8Tma::tile_names();
  for (size_t t = 0; t <= tiles.size(); ++t) {
    const bool staged = t == tiles.size();
    const std::string name = "conv_int8_tma_" + (staged ? std::string("staged") : tiles[t]);
    const int pinned = staged ? kPinStaged : int(t);
    add_entries(
        registry, Device::CUDA, Precision::INT8, 4,
        {{name, OpKind::Conv,
          [pinned](const Node& node) {
            return pinned == kPinStaged ? conv_tma_staged_supported(node)
                                        : conv_tma_tile_supported(node, pinned);
          },
          [name, pinned](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
            return std::make_unique<ConvInt8Kernel>(context, name.c_str(), ConvPath::Tma,
                                                    Wgmma::Off, pinned);
          },
          false, false, /*baseline=*/true}});
  }
  // Above conv_int8_igemm: measured faster wherever its grid fills the SMs (docs/PERFORMANCE.md,
  // run 17), and it falls back to that GEMM's split-K plan below.
  add_entries(registry, Device::CUDA, Precision::INT8, 15,
              {{"conv_int8_wgmma", OpKind::Conv, conv_wgmma_supported,
                [](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
                  return std::make_unique<ConvInt8Kernel>(context, "conv_int8_wgmma",
                                                          ConvPath::Gemm, Wgmma::Auto);
                }}});
  // Small K (<= 160 bytes) and out_c <= 256: memory-bound layers where the GEMMs' 64/128-byte
  // K-tiles are mostly padding (docs/PERFORMANCE.md, run 33); above wgmma and igemm, which the
  // automatic plan still times against it.  Below conv_int8_s2d, which reads the fp32 input.
  add_entries(registry, Device::CUDA, Precision::INT8, 16,
              {{"conv_int8_narrow", OpKind::Conv, conv_narrow_supported,
                [](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
                  return std::make_unique<ConvInt8Kernel>(context, "conv_int8_narrow",
                                                          ConvPath::Narrow);
                }}});
  // Depthwise layers only (igemm and wgmma take groups == 1): above the direct kernel.
  add_entries(registry, Device::CUDA, Precision::INT8, 10,
              {{"conv_int8_depthwise", OpKind::Conv, conv_depthwise_supported,
                [](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
                  return std::make_unique<ConvInt8Kernel>(context, "conv_int8_depthwise",
                                                          ConvPath::Depthwise);
                }},
               {"conv_int8_igemm", OpKind::Conv, conv_igemm_supported,
                [](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
                  return std::make_unique<ConvInt8Kernel>(context, "conv_int8_igemm",
                                                          ConvPath::Gemm);
                }}});
  add_entries(registry, Device::CUDA, Precision::INT8, 5,
              {{"conv_int8_wgmma_always", OpKind::Conv, conv_wgmma_supported,
                [](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
                  return std::make_unique<ConvInt8Kernel>(context, "conv_int8_wgmma_always",
                                                          ConvPath::Gemm, Wgmma::Always);
                }},
               {"conv_int8_direct", OpKind::Conv, conv_direct_supported,
                [](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
                  return std::make_unique<ConvInt8Kernel>(context, "conv_int8_direct",
                                                          ConvPath::Direct);
                }}});
}

}  // namespace cnnrt::cuda
