// runtime/cuda/int8_layer_prep.h: the int8 layers' shared preparation.
#include "runtime/cuda/int8_layer_prep.h"

#include "runtime/calibration.h"

namespace cnnrt::cuda {

// Scales from the calibration, then ref::prepare_int8_layer — the reference's integers.
ref::Int8Layer prepare_layer(const KernelBuildContext& context, const float* weight,
                             const float* bias, int out_channels, int64_t per_channel,
                             ActivationBounds activation, Int8Device& device) {
  const Node& node = context.node;
  device.input_scale = int8_tensor_scale(context, node.inputs.at(0));
  const bool float_output = node.name == context.graph.output;
  device.output_scale = float_output ? 0.0f : int8_tensor_scale(context, node.name);
  try {
    return ref::prepare_int8_layer(weight, bias, out_channels, per_channel, device.input_scale,
                                   device.output_scale, activation);
  } catch (const Error& error) {
    throw_error(node_site(context), error.what());
  }
}

// Uploads the packed weight, the int32 bias and the multipliers; fills the S8Conv's epilogue.
void upload_layer(const ref::Int8Layer& layer, const int8_t* packed, size_t packed_bytes,
                  Int8Device& device, S8Conv& conv) {
  device.weight = DeviceArray(packed_bytes);
  device.weight.upload(packed, packed_bytes);
  device.bias = DeviceArray(layer.bias.size() * sizeof(int32_t));
  device.bias.upload(layer.bias.data(), device.bias.bytes());
  device.multiplier = DeviceArray(layer.multiplier.size() * sizeof(float));
  device.multiplier.upload(layer.multiplier.data(), device.multiplier.bytes());
  conv.weight = static_cast<const int8_t*>(device.weight.get());
  conv.bias = static_cast<const int32_t*>(device.bias.get());
  conv.multiplier = static_cast<const float*>(device.multiplier.get());
  conv.float_output = layer.float_output;
  conv.lo = layer.int_bounds.lo;
  conv.hi = layer.int_bounds.hi;
  conv.float_lo = layer.float_bounds.lo;
  conv.float_hi = layer.float_bounds.hi;
  conv.out_stride = layer.float_output ? round_up(conv.out_c, 8) : padded16(conv.out_c);
}

TensorType output_type_of(const Int8Device& device) {
  return device.output_scale == 0 ? fp32_nhwc8() : int8_nhwc16(device.output_scale);
}

std::optional<NhwcPool> nhwc_pool_of(const ConvShape& shape) {
  if (!shape.pool) return std::nullopt;
  const PoolAttrs& p = *shape.pool;
  return NhwcPool{shape.out_c, shape.conv_h, shape.conv_w, shape.out_h, shape.out_w, p.kernel_h,
                  p.kernel_w,  p.stride_h,   p.stride_w,   p.pad_h,     p.pad_w};
}

S8Conv s8_conv_of(const ConvShape& shape, bool float_output) {
  const ConvAttrs& a = shape.conv;
  S8Conv conv;
  conv.in_c = shape.in_c;
  conv.in_h = shape.in_h;
  conv.in_w = shape.in_w;
  conv.in_stride = padded16(shape.in_c);
  conv.out_c = shape.out_c;
  conv.out_h = shape.conv_h;
  conv.out_w = shape.conv_w;
  conv.out_stride = float_output ? round_up(shape.out_c, 8) : padded16(shape.out_c);
  conv.kh = a.kernel_h;
  conv.kw = a.kernel_w;
  conv.stride_h = a.stride_h;
  conv.stride_w = a.stride_w;
  conv.pad_h = a.pad_h;
  conv.pad_w = a.pad_w;
  conv.dil_h = a.dilation_h;
  conv.dil_w = a.dilation_w;
  conv.groups = a.groups;
  conv.k_total = conv.kh * conv.kw * conv.in_stride;
  conv.k_pad = round_up(conv.k_total, 64);
  conv.float_output = float_output;
  return conv;
}

std::vector<int8_t> pack_s8_gemm_weights(const ref::Int8Layer& layer, const S8Conv& conv,
                                         int taps_h, int taps_w, int tap_stride) {
  const int st = tap_stride, channels = conv.in_c / (st * st);
  const int kh = taps_h > 0 ? taps_h : conv.kh, kw = taps_w > 0 ? taps_w : conv.kw;
  std::vector<int8_t> packed(static_cast<size_t>(conv.out_c) * conv.k_pad, 0);
  for (int o = 0; o < conv.out_c; ++o)
    for (int c = 0; c < channels; ++c)
      for (int r = 0; r < kh; ++r)
        for (int s = 0; s < kw; ++s) {
          const int tap = (r / st) * conv.kw + s / st;
          const int channel = ((r % st) * st + s % st) * channels + c;
          packed[static_cast<size_t>(o) * conv.k_pad + tap * conv.in_stride + channel] =
              layer.weight[((static_cast<size_t>(o) * channels + c) * kh + r) * kw + s];
        }
  return packed;
}

std::vector<int8_t> pack_s8_direct_weights(const ref::Int8Layer& layer, const S8Conv& conv) {
  const int per_group = conv.in_c / conv.groups;
  std::vector<int8_t> packed(layer.weight.size());
  for (int o = 0; o < conv.out_c; ++o)
    for (int c = 0; c < per_group; ++c)
      for (int r = 0; r < conv.kh; ++r)
        for (int s = 0; s < conv.kw; ++s)
          packed[((static_cast<size_t>(o) * conv.kh + r) * conv.kw + s) * per_group + c] =
              layer.weight[((static_cast<size_t>(o) * per_group + c) * conv.kh + r) * conv.kw + s];
  return packed;
}

}  // namespace cnnrt::cuda
