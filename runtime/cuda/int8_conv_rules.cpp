// runtime/cuda/int8_conv_rules.h: the int8 conv entries' node-level shape rules.
#include "runtime/cuda/int8_conv_rules.h"

#include <cstdint>

#include "kernels/cpu/int8_ref.h"
#include "kernels/cuda/conv/space_to_depth.h"
#include "kernels/cuda/conv/tma_s8.h"
#include "kernels/cuda/conv/tma_window.h"
#include "runtime/cuda/cuda_registry.h"
#include "runtime/cuda/int8_layer_prep.h"

namespace cnnrt::cuda::int8_rules {
namespace {

// Space-to-depth pays where padding the channels to 16 would waste most of K, and the blocks
// carry no pixel that no tap reads (kernel >= stride): the fp16 family's rule (conv_fp16_s2d).
bool s2d_eligible(const ConvShape& shape) {
  const ConvAttrs& a = shape.conv;
  return a.groups == 1 && a.stride_h == a.stride_w && a.stride_h >= 2 && a.dilation_h == 1 &&
         a.dilation_w == 1 && a.kernel_h >= a.stride_h && a.kernel_w >= a.stride_w &&
         shape.in_c <= 4 && a.stride_h * a.stride_h * shape.in_c <= 64;
}

}  // namespace

bool conv_fits_int32(const ConvShape& shape) {
  return static_cast<int64_t>(shape.in_c / shape.conv.groups) * shape.conv.kernel_h *
             shape.conv.kernel_w <=
         ref::kMaxInt8Reduction;
}

bool wgmma_shape_ok(const ConvShape& shape) {
  return shape.conv.groups == 1 && shape.conv.dilation_h == 1 && shape.conv.dilation_w == 1 &&
         shape.out_c % 64 == 0;
}

bool conv_s2d_supported(const Node& node) {
  const std::optional<ConvShape> shape = conv_shape_of(node);
  return shape && s2d_eligible(*shape) && conv_fits_int32(*shape);
}
namespace {
// prepare_s2d_tma's conv of an s2d-eligible node: the blocks at tma_block_channels channels, a
// ceil(k/s) kernel at stride 1 without padding (in_stride 0 where no such stride exists).
S8Conv s2d_tma_conv_of(const ConvShape& shape) {
  const int s = shape.conv.stride_h, channels = s * s * shape.in_c;
  S8Conv conv;
  conv.in_c = channels;
  conv.in_stride = tma_block_channels(channels);
  conv.kh = ceil_div(shape.conv.kernel_h, s);
  conv.kw = ceil_div(shape.conv.kernel_w, s);
  conv.out_c = shape.out_c;
  conv.out_h = shape.conv_h;
  conv.out_w = shape.conv_w;
  conv.in_h = conv.out_h + conv.kh - 1;
  conv.in_w = conv.out_w + conv.kw - 1;
  conv.out_stride = padded16(shape.out_c);
  conv.k_total = conv.k_pad = conv.kh * conv.kw * conv.in_stride;
  return conv;
}
}  // namespace

// ... and its TMA GEMM serves it on this device.
bool conv_s2d_tma_supported(const Node& node) {
  if (!conv_s2d_supported(node) || !ConvS8Tma::device_supported()) return false;
  const S8Conv conv = s2d_tma_conv_of(*conv_shape_of(node));
  return conv.in_stride > 0 && tma_s8_serves(conv);
}
bool conv_s2d_window_supported(const Node& node) {
  if (!conv_s2d_tma_supported(node) || !ConvS8Window::device_supported()) return false;
  const S8Conv conv = s2d_tma_conv_of(*conv_shape_of(node));
  return ConvS8Window::supports(conv, padded16(conv.in_c));  // x' at the pad16 stride
}
bool conv_s2d_window_pool_supported(const Node& node) {
  if (!conv_s2d_window_supported(node)) return false;
  const ConvShape shape = *conv_shape_of(node);
  const std::optional<NhwcPool> pool = nhwc_pool_of(shape);
  return pool && ConvS8Window::pool_serves(s2d_tma_conv_of(shape), *pool);
}
// ... and its wgmma GEMM serves it on this device (the rearranged conv keeps out_c:
// wgmma_s8_serves' out_c % 64 is the only rule the s2d conv can miss).
bool conv_s2d_wgmma_supported(const Node& node) {
  return conv_s2d_supported(node) && wgmma_s8_device_supported() &&
         conv_shape_of(node)->out_c % 64 == 0;
}
bool conv_igemm_supported(const Node& node) {
  const std::optional<ConvShape> shape = conv_shape_of(node);
  return shape && shape->conv.groups == 1 && conv_fits_int32(*shape);
}
// K = kh·kw·pad16(in_c) bytes and the int8 output's channel stride within the narrow kernel's
// limits.
bool conv_narrow_supported(const Node& node) {
  const std::optional<ConvShape> shape = conv_shape_of(node);
  return shape && shape->conv.groups == 1 && conv_fits_int32(*shape) &&
         shape->conv.kernel_h * shape->conv.kernel_w * padded16(shape->in_c) <= kNarrowS8MaxK &&
         padded16(shape->out_c) <= kNarrowS8MaxN;
}
bool conv_wgmma_supported(const Node& node) {
  const std::optional<ConvShape> shape = conv_shape_of(node);
  return shape && wgmma_shape_ok(*shape) && conv_fits_int32(*shape) && wgmma_s8_device_supported();
}
// The S8Conv the entry would build (int8 output; an fp32 output's stride is the kernel's too).
bool conv_tma_supported(const Node& node) {
  const std::optional<ConvShape> shape = conv_shape_of(node);
  if (!shape || shape->residual || !conv_fits_int32(*shape) || !ConvS8Tma::device_supported())
    return false;
  return tma_s8_serves(s8_conv_of(*shape, false));
}
// The default entry leaves the small-K layers to conv_int8_narrow (one or two k-tiles: the
// narrow kernel's memory-bound loop is built for them).
bool conv_tma_default_supported(const Node& node) {
  return conv_tma_supported(node) && !conv_narrow_supported(node);
}
bool conv_tma_tile_supported(const Node& node, int tile) {
  if (!conv_tma_supported(node)) return false;
  const ConvShape shape = *conv_shape_of(node);
  const std::optional<NhwcPool> pool = nhwc_pool_of(shape);
  return !pool || ConvS8Tma::tile_fuses_pool(s8_conv_of(shape, false), *pool, tile);
}
bool conv_tma_staged_supported(const Node& node) {
  return conv_tma_supported(node) && conv_shape_of(node)->pool.has_value();
}
bool conv_depthwise_supported(const Node& node) {
  const std::optional<ConvShape> shape = conv_shape_of(node);
  // No fused residual: int8 kernels have no residual epilogue (the builder never fuses one
  // where int8 layers are possible).
  return shape && shape->conv.groups == shape->in_c && shape->in_c == shape->out_c &&
         !shape->residual && conv_fits_int32(*shape);
}
bool conv_direct_supported(const Node& node) {
  const std::optional<ConvShape> shape = conv_shape_of(node);
  return shape && conv_fits_int32(*shape);
}

}  // namespace cnnrt::cuda::int8_rules
