// CPU reference kernels, part 2: max, average and adaptive average pooling (PyTorch semantics).
//
// Rules copied from PyTorch's definitions, not from its code:
//  * output extent: floor((in + 2*pad - kernel) / stride) + 1, or ceil(...) in ceil_mode, where a
//    last window that would start in the right padding is dropped;
//  * max pool: padding acts as -inf, so only real elements compete; NaN propagates;
//  * avg pool: sum over the window clipped to the input; divisor = window clipped to the
//    *padded* input (count_include_pad) or to the input itself (not count_include_pad) — so in
//    ceil_mode a window hanging past the right padding is not counted at full size;
//  * adaptive avg pool: window [floor(i*in/out), ceil((i+1)*in/out)).
// The output extent comes from graph/ops.h's pool_output_size, the rule shape inference uses.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "cnnrt/error.h"
#include "graph/ops.h"
#include "kernels/cpu/reference.h"

namespace cnnrt::ref {

namespace {

// Output extent along one axis: the graph's own rule (PyTorch's, ceil_mode included), so the
// reference and shape inference cannot disagree about how many outputs a pool has.
int extent(int in, int kernel, int stride, int pad, bool ceil_mode) {
  return static_cast<int>(pool_output_size(in, kernel, stride, pad, 1, ceil_mode));
}

void check_pool_attrs(const PoolAttrs& a, const char* what) {
  if (a.kernel_h < 1 || a.kernel_w < 1 || a.stride_h < 1 || a.stride_w < 1 || a.pad_h < 0 ||
      a.pad_w < 0)
    throw Error(std::string("ref::") + what + ": invalid attributes");
}

}  // namespace

void maxpool2d(const float* x, int n, int c, int h, int w, const PoolAttrs& attrs, float* y) {
  check_pool_attrs(attrs, "maxpool2d");
  const int oh = extent(h, attrs.kernel_h, attrs.stride_h, attrs.pad_h, attrs.ceil_mode);
  const int ow = extent(w, attrs.kernel_w, attrs.stride_w, attrs.pad_w, attrs.ceil_mode);
  for (int64_t plane = 0; plane < static_cast<int64_t>(n) * c; ++plane) {
    const float* in = x + plane * h * w;
    float* out = y + plane * oh * ow;
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        float best = -std::numeric_limits<float>::infinity();  // what padding counts as
        for (int ky = 0; ky < attrs.kernel_h; ++ky) {
          const int iy = oy * attrs.stride_h - attrs.pad_h + ky;
          if (iy < 0 || iy >= h) continue;
          for (int kx = 0; kx < attrs.kernel_w; ++kx) {
            const int ix = ox * attrs.stride_w - attrs.pad_w + kx;
            if (ix < 0 || ix >= w) continue;
            const float v = in[iy * w + ix];
            if (v > best || std::isnan(v)) best = v;
            if (std::isnan(best)) break;
          }
        }
        out[oy * ow + ox] = best;
      }
  }
}

void avgpool2d(const float* x, int n, int c, int h, int w, const PoolAttrs& attrs, float* y) {
  check_pool_attrs(attrs, "avgpool2d");
  const int oh = extent(h, attrs.kernel_h, attrs.stride_h, attrs.pad_h, attrs.ceil_mode);
  const int ow = extent(w, attrs.kernel_w, attrs.stride_w, attrs.pad_w, attrs.ceil_mode);
  for (int64_t plane = 0; plane < static_cast<int64_t>(n) * c; ++plane) {
    const float* in = x + plane * h * w;
    float* out = y + plane * oh * ow;
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        // Window in padded coordinates, clipped to the padded input's right/bottom edge.
        const int y0 = oy * attrs.stride_h - attrs.pad_h;
        const int x0 = ox * attrs.stride_w - attrs.pad_w;
        const int y1_padded = std::min(y0 + attrs.kernel_h, h + attrs.pad_h);
        const int x1_padded = std::min(x0 + attrs.kernel_w, w + attrs.pad_w);
        const int padded_count = (y1_padded - y0) * (x1_padded - x0);
        // The same window clipped to the real input.
        const int ya = std::max(y0, 0), yb = std::min(y1_padded, h);
        const int xa = std::max(x0, 0), xb = std::min(x1_padded, w);
        double sum = 0.0;
        for (int iy = ya; iy < yb; ++iy)
          for (int ix = xa; ix < xb; ++ix) sum += in[iy * w + ix];
        const int divisor = attrs.count_include_pad ? padded_count : (yb - ya) * (xb - xa);
        out[oy * ow + ox] = static_cast<float>(sum / divisor);
      }
  }
}

void adaptive_avgpool2d(const float* x, int n, int c, int h, int w, int oh, int ow, float* y) {
  if (oh < 1 || ow < 1) throw Error("ref::adaptive_avgpool2d: output size must be positive");
  for (int64_t plane = 0; plane < static_cast<int64_t>(n) * c; ++plane) {
    const float* in = x + plane * h * w;
    float* out = y + plane * oh * ow;
    for (int oy = 0; oy < oh; ++oy) {
      const int ya = static_cast<int>((static_cast<int64_t>(oy) * h) / oh);               // floor
      const int yb = static_cast<int>((static_cast<int64_t>(oy + 1) * h + oh - 1) / oh);  // ceil
      for (int ox = 0; ox < ow; ++ox) {
        const int xa = static_cast<int>((static_cast<int64_t>(ox) * w) / ow);
        const int xb = static_cast<int>((static_cast<int64_t>(ox + 1) * w + ow - 1) / ow);
        double sum = 0.0;
        for (int iy = ya; iy < yb; ++iy)
          for (int ix = xa; ix < xb; ++ix) sum += in[iy * w + ix];
        out[oy * ow + ox] = static_cast<float>(sum / ((yb - ya) * (xb - xa)));
      }
    }
  }
}

}  // namespace cnnrt::ref
