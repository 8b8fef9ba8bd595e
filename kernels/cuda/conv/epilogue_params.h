// The fused activation of every conv epilogue as a kernel parameter (host and device compile
// it): graph/ir.h defines each activation as a clamp [lo, hi] (ReLU [0, inf], ReLU6 [0, 6],
// Clip [min, max]), so one min/max pair serves them all.
#pragma once

#include "kernels/cuda/conv/conv_shape.h"

namespace cnnrt::cuda {

struct EpilogueClamp {
  int on = 0;  // 0: identity (no instruction at all: NaN passes through as before)
  float lo = 0.0f, hi = 0.0f;
};

inline EpilogueClamp epilogue_clamp_of(const ConvShape& shape) {
  EpilogueClamp c;
  c.on = shape.clamps() ? 1 : 0;
  c.lo = shape.activation.lo;
  c.hi = shape.activation.hi;
  return c;
}

}  // namespace cnnrt::cuda
