// What the CUDA int8 conv and linear entries share (runtime/cuda/int8_entries.cpp,
// int8_linear_entries.cpp): a layer's device arrays and scales, and its preparation with the CPU
// reference's own function (ref::prepare_int8_layer), so the GPU's integers are the reference's
// by construction (docs/QUANTIZATION.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/cpu/int8_ref.h"
#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/conv/conv_shape.h"   // ConvShape
#include "kernels/cuda/elementwise_fp16.h"  // DeviceArray
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::cuda {

inline int round_up(int value, int multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// The int8 layer's device arrays and the scales it was prepared for.
struct Int8Device {
  DeviceArray weight, bias, multiplier;
  float input_scale = 0, output_scale = 0;  // output 0: fp32 output
};

// Scales from the calibration (errors name the file, layer and tensor), then
// ref::prepare_int8_layer — the reference's integers.
ref::Int8Layer prepare_layer(const KernelBuildContext& context, const float* weight,
                             const float* bias, int out_channels, int64_t per_channel,
                             ActivationBounds activation, Int8Device& device);

// Uploads the packed weight, the int32 bias and the multipliers; fills the S8Conv's epilogue.
void upload_layer(const ref::Int8Layer& layer, const int8_t* packed, size_t packed_bytes,
                  Int8Device& device, S8Conv& conv);

// The S8Conv of a conv node as the int8 entries describe it (NHWC/16 in, int8 NHWC/16 or fp32
// NHWC/8 out, K over the channel stride); the epilogue's scalars are filled by upload_layer.
// One description for the dense and the 2:4 int8 entries, so their shape rules see one conv.
S8Conv s8_conv_of(const ConvShape& shape, bool float_output);

// The fused max-pool of a conv shape over its pre-pool (conv) output, or nothing: as the dense
// and the 2:4 int8 conv entries both take it.
std::optional<NhwcPool> nhwc_pool_of(const ConvShape& shape);

// The fused max-pool after an int8 conv (conv_out: its pre-pool tensor), in the conv's output
// form: fp32 NHWC/8 for the graph output, else int8 NHWC/16.
inline void pool_conv_output(const NhwcPool& pool, bool float_output, const void* conv_out,
                             void* output, int batch, cudaStream_t stream) {
  if (float_output)
    maxpool_nhwc_f32(pool, static_cast<const float*>(conv_out), static_cast<float*>(output), batch,
                     stream);
  else
    maxpool_nhwc_s8(pool, conv_out, output, batch, stream);
}

// int8 NHWC/16 at the layer's output scale, or fp32 NHWC/8 for the graph output.
TensorType output_type_of(const Int8Device& device);

// The GEMM convs' weight rows [out_c][k_pad], k = (r·kw + s)·in_stride + c: the NHWC/16 input's
// own order, zeros elsewhere (conv's k_pad, in_stride, kh, kw set).  Space-to-depth (tap_stride
// s > 1, taps_h x taps_w the original kernel): tap (r, s) of the original kernel is block tap
// (r / st, s / st), channel ((r % st)·st + s % st)·C + c of the rearranged map.
std::vector<int8_t> pack_s8_gemm_weights(const ref::Int8Layer& layer, const S8Conv& conv,
                                         int taps_h, int taps_w, int tap_stride);
// The direct conv's [out_c][kh][kw][in_c / groups].
std::vector<int8_t> pack_s8_direct_weights(const ref::Int8Layer& layer, const S8Conv& conv);

}  // namespace cnnrt::cuda
