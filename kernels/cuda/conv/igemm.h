// fp16 tensor-core convolution (mma.sync implicit GEMM, every sm_80+ GPU) with a fused epilogue
// (bias, activation clamp, MaxPool) — interface.  docs/kernels/conv_fp16.md explains the design.
//
// Layout: NHWC fp16 in and out, channel stride padded_channels(C) (kernels/cuda/conv/
// conv_shape.h).  Batch is a run-time argument; which variant runs at a batch is decided once,
// by plan(batch), and forward() only launches the planned variant.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/conv/conv_shape.h"

namespace cnnrt::cuda {

class ConvFp16Impl;

// One launchable variant of a layer (tile config and pool tiling, split-K slices, ...), as
// plan() picks it for a batch.  `variant` is a launch id that means the same launch at every
// batch of this layer (an index into the layer's launch table, built at construction), so
// forward() decodes it in O(1) and no decision is ever re-derived at run time.
struct ConvFp16Plan {
  int variant = 0;
  std::string name;            // e.g. "igemm 128x96 pool-tile 13x13 (conv 27x27, 7 passes ...)"
  size_t workspace_bytes = 0;  // at the planned batch; serves every smaller batch too
  double estimated_us = 0;     // the cost model's time at the planned batch (0: not modelled,
                               // the direct fallback); what plan() compares (igemm_plan.cpp)
  bool uses_workspace() const { return workspace_bytes > 0; }
};

class ConvFp16 {
 public:
  // Whether the kernel serves this shape at all (any valid conv: the direct kernel is the
  // fallback of the tensor-core paths).
  static bool supports(const ConvShape& shape);
  // Prepacks weight [out_c, in_c/groups, kh, kw] fp32 and bias [out_c] (nullable) onto the
  // device, fixes the path (tensor cores with the vector or gather loader, or direct) and builds
  // the launch table (tile configs x pool tilings, split-K slicings) with its occupancies.
  ConvFp16(const ConvShape& shape, const float* weight, const float* bias);
  ~ConvFp16();
  ConvFp16(const ConvFp16&) = delete;
  ConvFp16& operator=(const ConvFp16&) = delete;

  // The modelled-fastest variant at `batch` (pure arithmetic, no CUDA call): call once per
  // context.  with_workspace false: fused variants only (one kernel, no workspace); true: also
  // split-K at small batches (two kernels, a workspace of plan.workspace_bytes).
  ConvFp16Plan plan(int batch, bool with_workspace = true) const;
  // x: [batch, in_h, in_w, pad8(in_c)] fp16; y: [batch, out_h, out_w, pad8(out_c)] fp16, both
  // 16-byte aligned; workspace: >= plan.workspace_bytes for this batch (16-byte aligned), or
  // nullptr when the variant needs none.  One or two kernels on `stream`, graph-capturable.
  void forward(int variant, const void* x, void* y, int batch, cudaStream_t stream,
               void* workspace) const;
  // With the fused residual of a shape.residual layer: r [batch, out_h, out_w, pad8(out_c)]
  // fp16, y = clamp(conv(x) + b + r).  A residual layer must be given one, others none.
  void forward(int variant, const void* x, const void* residual, void* y, int batch,
               cudaStream_t stream, void* workspace) const;
  void forward(const ConvFp16Plan& plan, const void* x, void* y, int batch, cudaStream_t stream,
               void* workspace = nullptr) const {
    forward(plan.variant, x, y, batch, stream, workspace);
  }
  // Bytes of workspace launch `variant` needs at `batch` (0 for fused and direct).
  size_t workspace_bytes(int variant, int batch) const;

  size_t weight_bytes() const;
  // The path fixed at construction: "igemm", "igemm_gather" (few input channels) or "direct".
  std::string path() const;

  // Kernel lab / tests: every variant the model weighs at `batch`, in its order (fused: the best
  // packed and the best row-streamed pool tiling per tile config; then "unfused + pool pass" for
  // pool layers, the best split-K slicing at small batches; "direct" always last).  plan() picks
  // one of them; the unfused one only the lab runs (a fused node promises that its pre-pool
  // tensor never reaches memory).
  std::vector<ConvFp16Plan> variants(int batch) const;

 private:
  std::unique_ptr<ConvFp16Impl> impl_;
};

}  // namespace cnnrt::cuda
