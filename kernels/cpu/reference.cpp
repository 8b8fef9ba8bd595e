// CPU reference kernels, part 1: convolution, linear and the elementwise ops (relu, clamp, add,
// channel concat).  Pooling lives in pool_ref.cpp, normalisations in norm_ref.cpp.
//
// These are the oracle every fast kernel is judged against, so they are written to be read,
// not to be fast: one output element per innermost computation, indices spelled out in full,
// sums of products accumulated in double.  Invalid attributes (zero stride, channels not
// divisible by groups) throw cnnrt::Error instead of dividing by zero or reading out of bounds.
#include "kernels/cpu/reference.h"

#include <cstring>
#include <string>

#include "cnnrt/error.h"
#include "graph/ops.h"

namespace cnnrt::ref {

namespace {

void check_conv_attrs(int c, const ConvAttrs& a) {
  if (a.out_channels < 1 || a.kernel_h < 1 || a.kernel_w < 1 || a.stride_h < 1 || a.stride_w < 1 ||
      a.dilation_h < 1 || a.dilation_w < 1 || a.groups < 1 || a.pad_h < 0 || a.pad_w < 0 ||
      a.pad_bottom() < 0 || a.pad_right() < 0)
    throw Error("ref::conv2d: invalid attributes");
  if (c % a.groups != 0 || a.out_channels % a.groups != 0)
    throw Error("ref::conv2d: channels (" + std::to_string(c) + " in, " +
                std::to_string(a.out_channels) + " out) not divisible by groups " +
                std::to_string(a.groups));
}

}  // namespace

void conv2d(const float* x, int n, int c, int h, int w, const float* weight, const float* bias,
            const ConvAttrs& conv_attrs, float* y) {
  // `same` pads follow from the input size; resolving them again here (idempotent) keeps a
  // caller that built the attributes by hand from silently getting zero padding.
  ConvAttrs attrs = conv_attrs;
  if (attrs.pad_same) resolve_same_padding(attrs, h, w);
  check_conv_attrs(c, attrs);
  const int oc = attrs.out_channels;
  // The graph's output-size rule; the bottom/right padding only shows there: taps that fall into
  // it read zeros like any other out-of-range tap below.
  const int oh = static_cast<int>(conv_output_size(h, attrs.kernel_h, attrs.stride_h, attrs.pad_h,
                                                   attrs.pad_bottom(), attrs.dilation_h));
  const int ow = static_cast<int>(conv_output_size(w, attrs.kernel_w, attrs.stride_w, attrs.pad_w,
                                                   attrs.pad_right(), attrs.dilation_w));
  const int in_per_group = c / attrs.groups;
  const int out_per_group = oc / attrs.groups;
  const int kh = attrs.kernel_h, kw = attrs.kernel_w;

  for (int b = 0; b < n; ++b)
    for (int o = 0; o < oc; ++o) {
      const int group = o / out_per_group;
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          double sum = bias != nullptr ? bias[o] : 0.0;
          for (int ci = 0; ci < in_per_group; ++ci) {
            const int channel = group * in_per_group + ci;
            for (int ky = 0; ky < kh; ++ky) {
              const int iy = oy * attrs.stride_h - attrs.pad_h + ky * attrs.dilation_h;
              if (iy < 0 || iy >= h) continue;  // zero padding
              for (int kx = 0; kx < kw; ++kx) {
                const int ix = ox * attrs.stride_w - attrs.pad_w + kx * attrs.dilation_w;
                if (ix < 0 || ix >= w) continue;
                const double xv = x[((static_cast<int64_t>(b) * c + channel) * h + iy) * w + ix];
                const double wv =
                    weight[((static_cast<int64_t>(o) * in_per_group + ci) * kh + ky) * kw + kx];
                sum += xv * wv;
              }
            }
          }
          y[((static_cast<int64_t>(b) * oc + o) * oh + oy) * ow + ox] = static_cast<float>(sum);
        }
    }
}

void relu(const float* x, int64_t count, float* y) {
  // `v < 0 ? 0 : v` keeps NaN as NaN, like torch.relu.
  for (int64_t i = 0; i < count; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

void clamp(const float* x, int64_t count, float lo, float hi, float* y) {
  // Comparisons written so NaN passes through unchanged, like torch.clamp and relu above.
  for (int64_t i = 0; i < count; ++i) y[i] = x[i] < lo ? lo : (x[i] > hi ? hi : x[i]);
}

void linear(const float* x, int n, int in_features, const float* weight, const float* bias,
            int out_features, float* y) {
  for (int b = 0; b < n; ++b)
    for (int o = 0; o < out_features; ++o) {
      double sum = bias != nullptr ? bias[o] : 0.0;
      for (int i = 0; i < in_features; ++i)
        sum += static_cast<double>(x[static_cast<int64_t>(b) * in_features + i]) *
               weight[static_cast<int64_t>(o) * in_features + i];
      y[static_cast<int64_t>(b) * out_features + o] = static_cast<float>(sum);
    }
}

void add(const float* a, const float* b, int64_t count, float* y) {
  for (int64_t i = 0; i < count; ++i) y[i] = a[i] + b[i];
}

void concat_channels(const float* const* inputs, const int* channels, int num_inputs, int n,
                     int64_t spatial, float* y) {
  int64_t total_channels = 0;
  for (int i = 0; i < num_inputs; ++i) total_channels += channels[i];
  for (int b = 0; b < n; ++b) {
    int64_t channel_offset = 0;
    for (int i = 0; i < num_inputs; ++i) {
      const int64_t block = channels[i] * spatial;  // one sample's slab of input i
      std::memcpy(y + (b * total_channels + channel_offset) * spatial, inputs[i] + b * block,
                  sizeof(float) * block);
      channel_offset += channels[i];
    }
  }
}

}  // namespace cnnrt::ref
