// ConvShape's derived extents (the graph's shape rules) and its validity rule.
#include "kernels/cuda/conv/conv_shape.h"

#include "graph/ops.h"

namespace cnnrt::cuda {

void ConvShape::derive() {
  conv_h = static_cast<int>(conv_output_size(in_h, conv.kernel_h, conv.stride_h, conv.pad_h,
                                             conv.pad_bottom(), conv.dilation_h));
  conv_w = static_cast<int>(conv_output_size(in_w, conv.kernel_w, conv.stride_w, conv.pad_w,
                                             conv.pad_right(), conv.dilation_w));
  if (pool) {
    out_h = static_cast<int>(
        pool_output_size(conv_h, pool->kernel_h, pool->stride_h, pool->pad_h, 1, pool->ceil_mode));
    out_w = static_cast<int>(
        pool_output_size(conv_w, pool->kernel_w, pool->stride_w, pool->pad_w, 1, pool->ceil_mode));
  } else {
    out_h = conv_h;
    out_w = conv_w;
  }
}

std::string conv_shape_problem(const ConvShape& shape) {
  const ConvAttrs& c = shape.conv;
  if (shape.in_c <= 0 || shape.in_h <= 0 || shape.in_w <= 0 || shape.out_c <= 0)
    return "non-positive extent";
  if (c.out_channels != 0 && c.out_channels != shape.out_c) return "conv.out_channels != out_c";
  if (c.kernel_h <= 0 || c.kernel_w <= 0 || c.stride_h <= 0 || c.stride_w <= 0 ||
      c.dilation_h <= 0 || c.dilation_w <= 0 || c.pad_h < 0 || c.pad_w < 0 || c.pad_bottom() < 0 ||
      c.pad_right() < 0 || c.groups <= 0)
    return "bad kernel/stride/dilation/padding/groups";
  if (shape.in_c % c.groups != 0 || shape.out_c % c.groups != 0)
    return "groups must divide in and out channels";
  if (!(shape.activation.lo <= shape.activation.hi)) return "activation bounds lo > hi (or NaN)";
  if (shape.residual && shape.pool) return "a fused residual with a fused pool";
  if (shape.pool) {  // before derive(): a zero stride would divide by zero there
    const PoolAttrs& p = *shape.pool;
    if (p.kernel_h <= 0 || p.kernel_w <= 0 || p.stride_h <= 0 || p.stride_w <= 0 || p.pad_h < 0 ||
        p.pad_w < 0 || 2 * p.pad_h > p.kernel_h || 2 * p.pad_w > p.kernel_w)
      return "bad pool attributes";
  }
  ConvShape derived = shape;
  derived.derive();
  if (derived.conv_h <= 0 || derived.conv_w <= 0) return "kernel larger than the padded input";
  if (derived.out_h <= 0 || derived.out_w <= 0) return "pool window larger than the conv output";
  const long long per_image = (long long)shape.in_h * shape.in_w * padded_channels(shape.in_c);
  if (per_image >= (1LL << 31)) return "input image too large";
  return "";
}

}  // namespace cnnrt::cuda
