// The one conv-shape vocabulary of the CUDA conv family: every conv kernel (the mma.sync implicit
// GEMM, the Hopper wgmma kernels, space-to-depth, the cuDNN and im2col baselines) describes a
// layer with ConvShape, and the registry builds it once per node (runtime/cuda/cuda_registry.h:
// conv_shape_of).
//
// Activation layout on the GPU (the CUDA backend's convention, every kernel follows it):
// NHWC fp16, channel stride = padded_channels(C) = round_up(C, 8); the padding channels hold
// zeros (every kernel that writes a tensor writes zeros there).  Batch is a run-time argument.
//
// Extents come from the graph's own shape rules (graph/ops.h: conv_output_size,
// pool_output_size), so a kernel and the memory plan cannot disagree on them.  Host-only header.
#pragma once

#include <cmath>
#include <optional>
#include <string>

#include "graph/ir.h"

namespace cnnrt::cuda {

inline int padded_channels(int c) { return (c + 7) / 8 * 8; }

// The fused activation as the clamp graph/ir.h defines (activation_bounds): identity, ReLU,
// ReLU6 and Clip are all [lo, hi].
inline constexpr ActivationBounds kIdentityActivation{-INFINITY, INFINITY};
inline constexpr ActivationBounds kReluActivation{0.0f, INFINITY};

// One conv layer, per sample: y = maxpool?(clamp(conv(x, w) + b (+ r), lo, hi)), r the fused
// residual (a tensor of the output's shape and layout; never with a pool).
struct ConvShape {
  int in_c = 0, in_h = 0, in_w = 0;
  int out_c = 0;
  ConvAttrs conv;  // conv.out_channels == out_c; padding may be asymmetric (pad_bottom/right)
  ActivationBounds activation = kIdentityActivation;  // applied after the bias
  std::optional<PoolAttrs> pool;                      // fused max-pool, after the activation
  bool residual = false;                              // adds r before the activation
  // Derived (fill with derive()): conv output extent and final (pooled) output extent.
  int conv_h = 0, conv_w = 0, out_h = 0, out_w = 0;
  void derive();
  // False for the identity: kernels then skip the clamp (NaN passes through unchanged).
  bool clamps() const { return !(activation.lo == -INFINITY && activation.hi == INFINITY); }
  // Identity or ReLU: all the library baselines (cuDNN, cuBLASLt epilogues) can express.
  bool identity_or_relu() const {
    return activation.hi == INFINITY && (activation.lo == -INFINITY || activation.lo == 0.0f);
  }
};

// The conv window as every fp16 conv kernel's parameter struct names it (igemm's ConvParams, the
// mma.sp SpConvParams, WgmmaConvParams): one copy from the shape, so the kernels cannot read
// it differently.  Padding is the top / left one; the bottom / right padding only shapes
// conv_h / conv_w.  Dilation is left to the structs that have it.
template <class Params>
void fill_conv_window(const ConvShape& s, Params& p) {
  const ConvAttrs& a = s.conv;
  p.in_h = s.in_h;
  p.in_w = s.in_w;
  p.in_c = s.in_c;
  p.conv_h = s.conv_h;
  p.conv_w = s.conv_w;
  p.kh = a.kernel_h;
  p.kw = a.kernel_w;
  p.sh = a.stride_h;
  p.sw = a.stride_w;
  p.ph = a.pad_h;
  p.pw = a.pad_w;
}

// Empty when the shape is a valid conv (positive extents, attributes in range, groups dividing
// the channels, a non-empty conv and pooled output, lo <= hi), else what is wrong with it.
// Derives a copy first, so the caller's derived fields need not be filled.
std::string conv_shape_problem(const ConvShape& shape);

}  // namespace cnnrt::cuda
