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
#include "kernels/cpu/pool_window.h"
#include "kernels/cpu/reference.h"

namespace cnnrt::ref {

void maxpool2d(const float* x, int n, int c, int h, int w, const PoolAttrs& attrs, float* y) {
  const auto [oh, ow] = pool_extent(h, w, attrs, "maxpool2d");
  for (int64_t plane = 0; plane < static_cast<int64_t>(n) * c; ++plane) {
    const float* in = x + plane * h * w;
    float* out = y + plane * oh * ow;
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        float best = -std::numeric_limits<float>::infinity();  // padding is never read
        const PoolWindowRange r = pool_window(oy, ox, h, w, attrs);
        for (int iy = r.ya; iy < r.yb && !std::isnan(best); ++iy)
          for (int ix = r.xa; ix < r.xb; ++ix) {
            const float v = in[iy * w + ix];
            if (v > best || std::isnan(v)) best = v;
            if (std::isnan(best)) break;
          }
        out[oy * ow + ox] = best;
      }
  }
}

void avgpool2d(const float* x, int n, int c, int h, int w, const PoolAttrs& attrs, float* y) {
  const auto [oh, ow] = pool_extent(h, w, attrs, "avgpool2d");
  for (int64_t plane = 0; plane < static_cast<int64_t>(n) * c; ++plane) {
    const float* in = x + plane * h * w;
    float* out = y + plane * oh * ow;
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        const PoolWindowRange r = pool_window(oy, ox, h, w, attrs);
        double sum = 0.0;
        for (int iy = r.ya; iy < r.yb; ++iy)
          for (int ix = r.xa; ix < r.xb; ++ix) sum += in[iy * w + ix];
        out[oy * ow + ox] = static_cast<float>(sum / r.divisor);
      }
  }
}

void adaptive_avgpool2d(const float* x, int n, int c, int h, int w, int oh, int ow, float* y) {
  if (oh < 1 || ow < 1) throw Error("ref::adaptive_avgpool2d: output size must be positive");
  for (int64_t plane = 0; plane < static_cast<int64_t>(n) * c; ++plane) {
    const float* in = x + plane * h * w;
    float* out = y + plane * oh * ow;
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        const PoolWindowRange r = adaptive_window(oy, ox, h, w, oh, ow);
        double sum = 0.0;
        for (int iy = r.ya; iy < r.yb; ++iy)
          for (int ix = r.xa; ix < r.xb; ++ix) sum += in[iy * w + ix];
        out[oy * ow + ox] = static_cast<float>(sum / r.divisor);
      }
  }
}

}  // namespace cnnrt::ref
