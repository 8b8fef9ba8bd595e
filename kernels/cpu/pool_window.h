// The pooling windows of PyTorch's rules, shared by the fp32 (pool_ref.cpp) and the integer
// (int8_ref.cpp) references, so that both walk and divide by exactly the same windows.
//  * output extent: graph/ops.h's pool_output_size (shape inference's rule, ceil_mode included);
//  * a window clipped to the input [ya, yb) x [xa, xb): what max and avg pools read;
//  * avg divisor: the window clipped to the *padded* input (count_include_pad) or to the input;
//  * adaptive: [floor(i*in/out), ceil((i+1)*in/out)), divisor = its size.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "cnnrt/error.h"
#include "graph/ops.h"

namespace cnnrt::ref {

struct PoolExtent {
  int oh, ow;
};

// Checks the attributes (an Error naming `what` otherwise) and returns the output extent.
inline PoolExtent pool_extent(int h, int w, const PoolAttrs& a, const char* what) {
  if (a.kernel_h < 1 || a.kernel_w < 1 || a.stride_h < 1 || a.stride_w < 1 || a.pad_h < 0 ||
      a.pad_w < 0)
    throw Error(std::string("ref::") + what + ": invalid attributes");
  return {static_cast<int>(pool_output_size(h, a.kernel_h, a.stride_h, a.pad_h, 1, a.ceil_mode)),
          static_cast<int>(pool_output_size(w, a.kernel_w, a.stride_w, a.pad_w, 1, a.ceil_mode))};
}

struct PoolWindowRange {
  int ya, yb, xa, xb;  // clipped to the input
  int divisor;         // the average's divisor
};

inline PoolWindowRange pool_window(int oy, int ox, int h, int w, const PoolAttrs& a) {
  // Window in padded coordinates, clipped to the padded input's right/bottom edge.
  const int y0 = oy * a.stride_h - a.pad_h, x0 = ox * a.stride_w - a.pad_w;
  const int y1_padded = std::min(y0 + a.kernel_h, h + a.pad_h);
  const int x1_padded = std::min(x0 + a.kernel_w, w + a.pad_w);
  PoolWindowRange r;
  r.ya = std::max(y0, 0);
  r.yb = std::min(y1_padded, h);
  r.xa = std::max(x0, 0);
  r.xb = std::min(x1_padded, w);
  r.divisor =
      a.count_include_pad ? (y1_padded - y0) * (x1_padded - x0) : (r.yb - r.ya) * (r.xb - r.xa);
  return r;
}

inline PoolWindowRange adaptive_window(int oy, int ox, int h, int w, int oh, int ow) {
  PoolWindowRange r;
  r.ya = static_cast<int>((static_cast<int64_t>(oy) * h) / oh);               // floor
  r.yb = static_cast<int>((static_cast<int64_t>(oy + 1) * h + oh - 1) / oh);  // ceil
  r.xa = static_cast<int>((static_cast<int64_t>(ox) * w) / ow);
  r.xb = static_cast<int>((static_cast<int64_t>(ox + 1) * w + ow - 1) / ow);
  r.divisor = (r.yb - r.ya) * (r.xb - r.xa);
  return r;
}

}  // namespace cnnrt::ref
