// fp16 tensor-core convolution with a fused epilogue (bias, ReLU, MaxPool) — interface.
//
// Activation layout on the GPU (the CUDA backend's convention, every kernel follows it):
// NHWC fp16, channel stride = round_up(C, 8); the padding channels hold zeros (every kernel
// that writes a tensor writes zeros there).  Batch is a run-time argument.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace cnnrt::cuda {

inline int padded_channels(int c) { return (c + 7) / 8 * 8; }

// One conv layer, per sample.  pool is applied after bias and ReLU when present.
struct ConvShape {
  int in_c = 0, in_h = 0, in_w = 0;
  int out_c = 0;
  ConvAttrs conv;  // conv.out_channels == out_c
  bool relu = false;
  std::optional<PoolAttrs> pool;  // fused max-pool
  // Derived (fill with derive()): conv output extent and final (pooled) output extent.
  int conv_h = 0, conv_w = 0, out_h = 0, out_w = 0;
  void derive();
};

class ConvFp16Impl;

class ConvFp16 {
 public:
  // Whether the tensor-core kernel serves this shape at all.
  static bool supports(const ConvShape& shape);
  // Prepacks weight [out_c, in_c/groups, kh, kw] fp32 and bias [out_c] (nullable) onto the
  // device and picks the variant (tile shape, few-channel path) for the shape.
  ConvFp16(const ConvShape& shape, const float* weight, const float* bias);
  ~ConvFp16();
  // x: [batch, in_h, in_w, pad8(in_c)] fp16; y: [batch, out_h, out_w, pad8(out_c)] fp16.
  // Fused variants only (one kernel, no workspace).
  void forward(const void* x, void* y, int batch, cudaStream_t stream) const;
  // Bytes of device workspace forward(x, y, b, stream, workspace) may use for ANY b <= batch
  // (0: none needed).  The workspace variants (split-K at small batches, unfused pool) need it.
  size_t workspace_bytes(int batch) const;
  // Like forward(), but may pick a workspace variant (split-K, unfused pool) when the model says
  // it is faster; workspace: >= workspace_bytes(batch) bytes, 16-byte aligned, or nullptr (then
  // exactly the 4-argument forward).  Two kernels on `stream`; still graph-capturable.
  void forward(const void* x, void* y, int batch, cudaStream_t stream, void* workspace) const;
  size_t weight_bytes() const;
  // The path this layer takes ("igemm", "igemm_gather" for few input channels, "direct").
  std::string variant() const;

  // Kernel-lab / test hooks.  variants(batch) names every launchable variant for that batch
  // (fused: one per tile config; then, where they apply, "unfused + pool pass" and "split-K";
  // the direct fallback always last); forward_variant runs one of them.
  // forward() runs chosen_variant(batch), the heuristic's pick.
  std::vector<std::string> variants(int batch) const;
  size_t chosen_variant(int batch) const;
  void forward_variant(size_t index, const void* x, void* y, int batch, cudaStream_t stream) const;
  // Workspace-aware hooks: the pick of forward(..., workspace) (with_workspace = true), the
  // workspace one variant needs at this batch (0 for fused / direct), and a launch with it
  // (throws when the variant needs a workspace and none is given).
  size_t chosen_variant(int batch, bool with_workspace) const;
  size_t variant_workspace_bytes(size_t index, int batch) const;
  void forward_variant(size_t index, const void* x, void* y, int batch, cudaStream_t stream,
                       void* workspace) const;

 private:
  std::unique_ptr<ConvFp16Impl> impl_;
};

}  // namespace cnnrt::cuda
