// Integer reference kernels (see int8_ref.h and docs/QUANTIZATION.md, "The exact arithmetic").
//
// Written to be read next to the document: each function is the table row it implements, one
// output element per innermost computation.  The float steps are spelled as separate statements
// (`fp32(v)`, `× M`, RNE) so the order of operations is visible; GCC does not contract them into
// an FMA in ISO C++ mode, and the add's fma is written explicitly with std::fma.
#include "kernels/cpu/int8_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "cnnrt/error.h"
#include "graph/host_parallel.h"
#include "graph/ops.h"
#include "kernels/cpu/convert_ref.h"
#include "kernels/cpu/pool_window.h"

namespace cnnrt::ref {

float scale_from_amax(float amax) {
  if (!(amax >= 0.0f) || std::isinf(amax))
    throw Error("int8: amax must be finite and >= 0, got " + std::to_string(amax));
  return std::max(amax / 127.0f, kMinScale);
}

float requant_multiplier(double numerator, double denominator) {
  if (!(numerator > 0) || !(denominator > 0) || std::isinf(numerator) || std::isinf(denominator))
    throw Error("int8: a requantisation multiplier needs positive finite scales");
  return static_cast<float>(numerator / denominator);
}

Int8Bounds int8_bounds(ActivationBounds bounds, float scale) {
  if (!(bounds.lo <= bounds.hi)) throw Error("int8: activation bounds are empty or NaN");
  // quantize_int8 saturates ±inf to ±127 (and is monotonic, so the interval stays ordered).
  return {quantize_int8(bounds.lo, scale), quantize_int8(bounds.hi, scale)};
}

int8_t requantize(int32_t value, float multiplier, Int8Bounds bounds) {
  const float as_float = static_cast<float>(value);  // RNE (exact below 2^24)
  const float scaled = as_float * multiplier;        // one RNE fp32 multiply
  const float rounded = std::nearbyint(scaled);      // RNE to an integer (default rounding mode)
  if (!(rounded > static_cast<float>(bounds.lo))) return static_cast<int8_t>(bounds.lo);
  if (rounded > static_cast<float>(bounds.hi)) return static_cast<int8_t>(bounds.hi);
  return static_cast<int8_t>(rounded);
}

namespace {

// The conv/linear epilogue of output channel `channel`: requantise, or dequantise and clamp.
void store_output(const Int8Layer& layer, int channel, int32_t acc, void* y, int64_t index) {
  if (layer.float_output) {
    const float value = static_cast<float>(acc) * layer.multiplier[channel];
    static_cast<float*>(y)[index] =
        std::min(std::max(value, layer.float_bounds.lo), layer.float_bounds.hi);
  } else {
    static_cast<int8_t*>(y)[index] = requantize(acc, layer.multiplier[channel], layer.int_bounds);
  }
}

// `first`: the index of values[0] in the tensor, for the message.
void check_finite(const float* values, int64_t count, const char* what, int64_t first = 0) {
  for (int64_t i = 0; i < count; ++i)
    if (!std::isfinite(values[i]))
      throw Error(std::string("int8: ") + what + " value " + std::to_string(first + i) +
                  " is not finite");
}

}  // namespace

Int8Layer prepare_int8_layer(const float* weight, const float* bias, int out_channels,
                             int64_t per_channel, float input_scale, float output_scale,
                             ActivationBounds activation) {
  if (out_channels < 1 || per_channel < 1)
    throw Error("int8: a layer needs at least one output channel and one weight per channel");
  if (per_channel > kMaxInt8Reduction)
    throw Error("int8: " + std::to_string(per_channel) +
                " products per output exceed the int32 accumulator's budget of " +
                std::to_string(kMaxInt8Reduction));
  if (!(input_scale > 0) || std::isinf(input_scale) || !(output_scale >= 0) ||
      std::isinf(output_scale))
    throw Error("int8: scales must be positive and finite");
  if (bias != nullptr) check_finite(bias, out_channels, "bias");

  Int8Layer layer;
  layer.out_channels = out_channels;
  layer.per_channel = per_channel;
  layer.input_scale = input_scale;
  layer.output_scale = output_scale;
  layer.float_output = output_scale == 0;
  layer.weight.resize(
      static_cast<size_t>(out_channels * per_channel));  // every value written below
  layer.weight_scale.resize(out_channels);
  layer.bias.assign(out_channels, 0);
  layer.multiplier.resize(out_channels);
  // Channels are independent (their own scale, bias and multiplier): spread over the host's
  // cores, as fc6's 38 M weights took ~0.6 s on one at every engine build.  The weights'
  // finiteness is checked in the same pass (a separate serial scan cost ~60 ms for fc6); a
  // channel with a non-finite value is left unquantised and reported after the loop.
  std::vector<char> non_finite(static_cast<size_t>(out_channels), 0);
  parallel_for(static_cast<size_t>(out_channels), 8, [&](size_t begin, size_t end) {
    for (int c = static_cast<int>(begin); c < static_cast<int>(end); ++c) {
      const float* w = weight + c * per_channel;
      float amax = 0;
      bool finite = true;
      for (int64_t i = 0; i < per_channel; ++i) {
        const float magnitude = std::fabs(w[i]);
        finite &= magnitude <= std::numeric_limits<float>::max();  // false for inf and NaN
        amax = std::max(amax, magnitude);
      }
      if (!finite) {
        non_finite[c] = 1;
        continue;
      }
      float scale = scale_from_amax(amax);
      if (bias != nullptr) {
        // Raise the scale until the bias fits in ±2^30 units of s_x·s_w (pruned channels).
        const double needed = std::fabs(static_cast<double>(bias[c])) /
                              (static_cast<double>(input_scale) * kMaxInt8Bias);
        if (needed > scale) scale = std::nextafter(static_cast<float>(needed), INFINITY);
        const double units = std::nearbyint(
            bias[c] / (static_cast<double>(input_scale) * static_cast<double>(scale)));
        layer.bias[c] =
            static_cast<int32_t>(std::clamp<double>(units, -kMaxInt8Bias, kMaxInt8Bias));
      }
      layer.weight_scale[c] = scale;
      for (int64_t i = 0; i < per_channel; ++i)
        layer.weight[c * per_channel + i] = quantize_int8(w[i], scale);
      const double product = static_cast<double>(input_scale) * static_cast<double>(scale);
      layer.multiplier[c] = layer.float_output ? static_cast<float>(product)
                                               : requant_multiplier(product, output_scale);
    }
  });
  // The first non-finite weight, as a scan from the start would name it.
  const auto bad = std::find(non_finite.begin(), non_finite.end(), 1);
  if (bad != non_finite.end())
    check_finite(weight + (bad - non_finite.begin()) * per_channel, per_channel, "weight",
                 (bad - non_finite.begin()) * per_channel);
  if (layer.float_output)
    layer.float_bounds = activation;
  else
    layer.int_bounds = int8_bounds(activation, output_scale);
  return layer;
}

int conv_output_extent(int in, int kernel, int stride, int pad_before, int pad_after,
                       int dilation) {
  const int64_t span = static_cast<int64_t>(in) + pad_before + pad_after -
                       static_cast<int64_t>(dilation) * (kernel - 1) - 1;
  if (stride < 1 || span < 0)
    throw Error("int8 conv: the dilated kernel does not fit the padded input");
  return static_cast<int>(span / stride + 1);
}

void conv2d_int8(const int8_t* x, int n, int c, int h, int w, const ConvAttrs& attrs,
                 const Int8Layer& layer, void* y) {
  if (attrs.groups < 1 || c % attrs.groups != 0 || attrs.out_channels % attrs.groups != 0 ||
      attrs.out_channels != layer.out_channels || attrs.pad_h < 0 || attrs.pad_w < 0 ||
      attrs.pad_bottom() < 0 || attrs.pad_right() < 0 || attrs.dilation_h < 1 ||
      attrs.dilation_w < 1)
    throw Error("ref::conv2d_int8: invalid attributes");
  const int in_per_group = c / attrs.groups;
  const int out_per_group = attrs.out_channels / attrs.groups;
  const int kh = attrs.kernel_h, kw = attrs.kernel_w;
  if (static_cast<int64_t>(in_per_group) * kh * kw != layer.per_channel)
    throw Error("ref::conv2d_int8: the prepared weights do not match the conv's shape");
  const int oh =
      conv_output_extent(h, kh, attrs.stride_h, attrs.pad_h, attrs.pad_bottom(), attrs.dilation_h);
  const int ow =
      conv_output_extent(w, kw, attrs.stride_w, attrs.pad_w, attrs.pad_right(), attrs.dilation_w);
  const int oc = attrs.out_channels;
  for (int b = 0; b < n; ++b)
    for (int o = 0; o < oc; ++o) {
      const int group = o / out_per_group;
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          int32_t acc = layer.bias[o];
          for (int ci = 0; ci < in_per_group; ++ci) {
            const int channel = group * in_per_group + ci;
            for (int ky = 0; ky < kh; ++ky) {
              const int iy = oy * attrs.stride_h - attrs.pad_h + ky * attrs.dilation_h;
              if (iy < 0 || iy >= h) continue;  // padding: q = 0
              for (int kx = 0; kx < kw; ++kx) {
                const int ix = ox * attrs.stride_w - attrs.pad_w + kx * attrs.dilation_w;
                if (ix < 0 || ix >= w) continue;
                const int32_t xq = x[((static_cast<int64_t>(b) * c + channel) * h + iy) * w + ix];
                const int32_t wq =
                    layer.weight[((static_cast<int64_t>(o) * in_per_group + ci) * kh + ky) * kw +
                                 kx];
                acc += xq * wq;
              }
            }
          }
          store_output(layer, o, acc, y, ((static_cast<int64_t>(b) * oc + o) * oh + oy) * ow + ox);
        }
    }
}

void linear_int8(const int8_t* x, int n, int in_features, const Int8Layer& layer, void* y) {
  if (in_features != layer.per_channel)
    throw Error("ref::linear_int8: the prepared weights do not match the input features");
  const int out_features = layer.out_channels;
  for (int b = 0; b < n; ++b)
    for (int o = 0; o < out_features; ++o) {
      int32_t acc = layer.bias[o];
      for (int i = 0; i < in_features; ++i)
        acc += static_cast<int32_t>(x[static_cast<int64_t>(b) * in_features + i]) *
               static_cast<int32_t>(layer.weight[static_cast<int64_t>(o) * in_features + i]);
      store_output(layer, o, acc, y, static_cast<int64_t>(b) * out_features + o);
    }
}

void maxpool2d_int8(const int8_t* x, int n, int c, int h, int w, const PoolAttrs& attrs,
                    float multiplier, int8_t* y) {
  const auto [oh, ow] = pool_extent(h, w, attrs, "maxpool2d_int8");
  for (int64_t plane = 0; plane < static_cast<int64_t>(n) * c; ++plane) {
    const int8_t* in = x + plane * h * w;
    int8_t* out = y + plane * oh * ow;
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        int best = -129;  // below every int8 (padding is never read)
        const PoolWindowRange r = pool_window(oy, ox, h, w, attrs);
        for (int iy = r.ya; iy < r.yb; ++iy)
          for (int ix = r.xa; ix < r.xb; ++ix) best = std::max(best, int{in[iy * w + ix]});
        // PyTorch's rules keep at least one real element in every window.
        out[oy * ow + ox] = requantize(best, multiplier);
      }
  }
}

void avgpool2d_int8(const int8_t* x, int n, int c, int h, int w, const PoolAttrs& attrs,
                    float input_scale, float output_scale, int8_t* y) {
  const auto [oh, ow] = pool_extent(h, w, attrs, "avgpool2d_int8");
  for (int64_t plane = 0; plane < static_cast<int64_t>(n) * c; ++plane) {
    const int8_t* in = x + plane * h * w;
    int8_t* out = y + plane * oh * ow;
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        // The fp32 reference's windows and divisors (pool_window.h).
        const PoolWindowRange r = pool_window(oy, ox, h, w, attrs);
        int32_t sum = 0;
        for (int iy = r.ya; iy < r.yb; ++iy)
          for (int ix = r.xa; ix < r.xb; ++ix) sum += in[iy * w + ix];
        const int divisor = r.divisor;
        out[oy * ow + ox] = requantize(
            sum, requant_multiplier(input_scale, static_cast<double>(output_scale) * divisor));
      }
  }
}

void adaptive_avgpool2d_int8(const int8_t* x, int n, int c, int h, int w, int oh, int ow,
                             float input_scale, float output_scale, int8_t* y) {
  if (oh < 1 || ow < 1) throw Error("ref::adaptive_avgpool2d_int8: output size must be positive");
  for (int64_t plane = 0; plane < static_cast<int64_t>(n) * c; ++plane) {
    const int8_t* in = x + plane * h * w;
    int8_t* out = y + plane * oh * ow;
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        const PoolWindowRange r = adaptive_window(oy, ox, h, w, oh, ow);
        int32_t sum = 0;
        for (int iy = r.ya; iy < r.yb; ++iy)
          for (int ix = r.xa; ix < r.xb; ++ix) sum += in[iy * w + ix];
        out[oy * ow + ox] = requantize(
            sum, requant_multiplier(input_scale, static_cast<double>(output_scale) * r.divisor));
      }
  }
}

void add_int8(const int8_t* a, float multiplier_a, const int8_t* b, float multiplier_b,
              int64_t count, int8_t* y) {
  for (int64_t i = 0; i < count; ++i) {
    const float a_part = static_cast<float>(a[i]) * multiplier_a;                // RNE multiply
    const float sum = std::fma(static_cast<float>(b[i]), multiplier_b, a_part);  // one rounding
    const float rounded = std::nearbyint(sum);
    y[i] = static_cast<int8_t>(std::clamp(rounded, -127.0f, 127.0f));
  }
}

void activation_int8(const int8_t* x, int64_t count, float multiplier, Int8Bounds bounds,
                     int8_t* y) {
  for (int64_t i = 0; i < count; ++i) y[i] = requantize(x[i], multiplier, bounds);
}

void concat_channels_int8(const int8_t* const* inputs, const int* channels,
                          const float* multipliers, int num_inputs, int n, int64_t spatial,
                          int8_t* y) {
  int64_t total_channels = 0;
  for (int i = 0; i < num_inputs; ++i) total_channels += channels[i];
  for (int b = 0; b < n; ++b) {
    int64_t channel_offset = 0;
    for (int i = 0; i < num_inputs; ++i) {
      const int64_t block = channels[i] * spatial;  // one sample's slab of input i
      const int8_t* in = inputs[i] + b * block;
      int8_t* out = y + (b * total_channels + channel_offset) * spatial;
      for (int64_t k = 0; k < block; ++k) out[k] = requantize(in[k], multipliers[i]);
      channel_offset += channels[i];
    }
  }
}

std::vector<int8_t> quantize_values(const std::vector<float>& values, float scale) {
  std::vector<int8_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = quantize_int8(values[i], scale);
  return out;
}

std::vector<float> dequantize_values(const std::vector<int8_t>& values, float scale) {
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = dequantize_int8(values[i], scale);
  return out;
}

}  // namespace cnnrt::ref
