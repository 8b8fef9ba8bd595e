// Integer reference kernels: the exact int8 arithmetic of docs/QUANTIZATION.md, the oracle every
// GPU int8 kernel is tested against bit for bit.
//
// Layout: NCHW int8 (vectors N×F), symmetric, real = scale × q.  Products accumulate in int32
// (the callers keep K ≤ kMaxInt8Reduction, so nothing wraps); the only float arithmetic is the
// requantisation `clamp(RNE(fp32(v) × M))` with M an fp32 multiplier computed once on the host,
// and the add's one fma.  Like reference.h: plain loops, no blocking, clarity over speed.
// Window rules (padding, ceil_mode, divisors, adaptive bins) are the fp32 reference's.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "graph/host_parallel.h"
#include "graph/ir.h"

namespace cnnrt::ref {

// --- scales and the one rounding step -------------------------------------------------------

constexpr float kMinScale = 1.1920928955078125e-7f;  // 2^-23: the floor of every scale
constexpr int kMaxInt8Reduction = 65536;             // K limit: K·128·127 + 2^30 < 2^31
constexpr int32_t kMaxInt8Bias = 1 << 30;            // |bias_q| limit

// max(amax / 127, kMinScale) in fp32; Error for a negative, NaN or infinite amax.
float scale_from_amax(float amax);

// fp32(numerator / denominator), divided in double and rounded once: every multiplier of the
// integer kernels comes from here, on the host.
float requant_multiplier(double numerator, double denominator);

// x = scale × q (one fp32 multiply).
inline float dequantize_int8(int8_t q, float scale) { return scale * static_cast<float>(q); }

// An integer clamp interval within [-127, 127].
struct Int8Bounds {
  int lo = -127, hi = 127;
};
// The activation interval [lo, hi] quantised at `scale`: [quantize(lo), quantize(hi)], with
// ±inf saturating to ±127.
Int8Bounds int8_bounds(ActivationBounds bounds, float scale);

// clamp(RNE(fp32(value) × multiplier), bounds): the requantisation step.
int8_t requantize(int32_t value, float multiplier, Int8Bounds bounds = {});

// --- conv and linear --------------------------------------------------------------------------

// A conv or linear layer prepared for int8, once, on the host (the GPU kernels take these
// arrays as they are).
struct Int8Layer {
  int out_channels = 0;
  int64_t per_channel = 0;          // K: weights per output channel
  HostVector<int8_t> weight;        // the fp32 weight's layout, quantised per output channel
  std::vector<float> weight_scale;  // s_w[c]
  std::vector<int32_t> bias;        // bias_q[c] = RNE(b[c] / (s_x·s_w[c])), 0 without a bias
  // int8 output: M[c] = fp32(s_x·s_w[c] / s_y); fp32 output: D[c] = fp32(s_x·s_w[c]).
  std::vector<float> multiplier;
  bool float_output = false;  // dequantise in the epilogue instead of requantising
  Int8Bounds int_bounds;      // activation clamp of an int8 output
  ActivationBounds float_bounds{-std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::infinity()};  // ... of an fp32 one
  float input_scale = 0, output_scale = 0;  // output_scale 0: fp32 output
};

// Quantises weight [out_channels, per_channel] per output channel (scale_from_amax of each
// channel's max |w|, raised where needed so the channel's int32 bias fits in ±2^30), the bias
// (may be nullptr) to int32, and computes the multipliers.  output_scale 0 = fp32 output.
// Error for K > kMaxInt8Reduction, non-finite weights or bias, or a non-positive input scale.
Int8Layer prepare_int8_layer(const float* weight, const float* bias, int out_channels,
                             int64_t per_channel, float input_scale, float output_scale,
                             ActivationBounds activation);

// Output extent of a convolution along one axis (asymmetric padding: before + after).
int conv_output_extent(int in, int kernel, int stride, int pad_before, int pad_after, int dilation);

// x: [n, c, h, w] int8 at layer.input_scale; padding top/left = pad_h/pad_w, bottom/right =
// attrs.pad_bottom()/pad_right(); weight [oc, c/groups, kh, kw] in `layer`; y: [n, oc, oh, ow],
// int8 at layer.output_scale or fp32 when layer.float_output (activation clamp applied).
void conv2d_int8(const int8_t* x, int n, int c, int h, int w, const ConvAttrs& attrs,
                 const Int8Layer& layer, void* y);

// x: [n, in_features] int8; y: [n, out_features] int8 or fp32 as for conv2d_int8.
void linear_int8(const int8_t* x, int n, int in_features, const Int8Layer& layer, void* y);

// --- pools, elementwise, concat -----------------------------------------------------------------

// requantize(max over the window, multiplier): padding never wins.  multiplier 1 (equal
// scales, as for a conv's fused pool) copies the maximum unchanged.
void maxpool2d_int8(const int8_t* x, int n, int c, int h, int w, const PoolAttrs& attrs,
                    float multiplier, int8_t* y);
// Window sums in int32, requantised by fp32(s_x / (s_y·divisor)) (PyTorch's divisors).
void avgpool2d_int8(const int8_t* x, int n, int c, int h, int w, const PoolAttrs& attrs,
                    float input_scale, float output_scale, int8_t* y);
void adaptive_avgpool2d_int8(const int8_t* x, int n, int c, int h, int w, int oh, int ow,
                             float input_scale, float output_scale, int8_t* y);

// y = clamp(RNE(fma(fp32(b), multiplier_b, fp32(a) × multiplier_a)), -127, 127).
void add_int8(const int8_t* a, float multiplier_a, const int8_t* b, float multiplier_b,
              int64_t count, int8_t* y);

// y = requantize(x, multiplier, bounds) element-wise (relu: bounds [0, 127]); x == y allowed.
void activation_int8(const int8_t* x, int64_t count, float multiplier, Int8Bounds bounds,
                     int8_t* y);

// Concatenates along channels, requantising input i by multipliers[i].
void concat_channels_int8(const int8_t* const* inputs, const int* channels,
                          const float* multipliers, int num_inputs, int n, int64_t spatial,
                          int8_t* y);

// --- whole tensors (tests, tools) -----------------------------------------------------------

std::vector<int8_t> quantize_values(const std::vector<float>& values, float scale);
std::vector<float> dequantize_values(const std::vector<int8_t>& values, float scale);

}  // namespace cnnrt::ref
