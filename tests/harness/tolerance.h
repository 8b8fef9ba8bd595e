// How close a kernel must come to the CPU reference (kernels/cpu/), per precision — the one
// place the kernel test harness (and the tests that reuse it) takes its tolerances from.
//
// Two bounds, both must hold:
//  * rel_l2: ||got - ref|| / ||ref|| over the whole output (batch included);
//  * element: every element |got - ref| <= element * (|ref| + rms(ref)), so one wrong pixel in a
//    large tensor cannot hide inside an aggregate, while an output that cancels to ~0 is judged
//    against the tensor's scale rather than its own (tiny) magnitude.
// NaN in the output where the reference has none (an element never written: outputs start as
// NaN bytes) fails both.
//
// The harness draws inputs and weights on the fp16 grid (harness.h), so converting them into any
// kernel's input type is exact and the bounds below only pay for a kernel's own arithmetic.
#pragma once

#include "cnnrt/cnnrt.h"

namespace cnnrt::harness {

struct Tolerance {
  double rel_l2;
  double element;
};

// fp32: kernels accumulate in double like the reference and round once to fp32; only the
//   summation order differs, so an error above fp32 rounding (~6e-8) is a bug.  1e-5 leaves
//   two orders of magnitude for order effects in 10^4-term sums.
// fp16: the output is rounded to fp16 once (relative error <= 2^-11 ≈ 4.9e-4, ~2.8e-4 rms) after
//   fp32 accumulation; a fused epilogue or pool works on already-rounded values, and max and
//   clamp commute with rounding.  rel L2 <= 2e-3 is ~7x the expected rms — the bound the fp16
//   kernels' own tests have held since they were written — and an element may be off by ~8
//   roundings (4e-3), which no indexing error stays under.
// int8: exact.  Every int8 entry is held bit for bit against the integer reference
//   (kernels/cpu/int8_ref.h, docs/QUANTIZATION.md), not against this fp32 oracle: the harness's
//   int8 mode (int8_mode.cpp, compare_exact) counts every differing value; {0, 0} here says the
//   same for any caller that asks.
inline Tolerance tolerance_for(Precision precision) {
  switch (precision) {
    case Precision::FP16:
      return {2e-3, 4e-3};
    case Precision::INT8:
      return {0.0, 0.0};
    default:
      return {1e-5, 1e-5};
  }
}

}  // namespace cnnrt::harness
