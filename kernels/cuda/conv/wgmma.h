// Hopper (sm_90a) wgmma implicit-GEMM fp16 convolution — interface.
//
// Serves convolutions (groups 1, dilation 1) whose channels need no padding: in_c % 8 == 0 and
// out_c % 32 == 0 (AlexNet conv2..conv5 and the space-to-depth form of conv1, and their
// channel-pruned forms at 32 / 96 channels through n32 / n96 tiles), optionally with a
// fused MaxPool after bias + activation.  Same activation layout as every CUDA conv
// (kernels/cuda/conv/conv_shape.h): NHWC fp16, channel stride round_up(C, 8) — which equals C
// for the shapes served, so no padding lanes exist.  The device code exists only in the sm_90a
// image (wgmma_kernel.cuh); device_supported() says whether the current device can run it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "kernels/cuda/conv/conv_shape.h"

namespace cnnrt::cuda {

class ConvFp16WgmmaImpl;

// The launch plan(batch) picks: with a fused pool, which pool tiling (pool_tiling.h) runs.
struct ConvFp16WgmmaPlan {
  int variant = 0;     // index of the pool tiling (0 without a pool): a stable launch id
  std::string name;    // e.g. "wgmma_128x192x64_s4_pool13x13_stream7x4r"
  long long ctas = 0;  // CTAs the launch has at the planned batch
  int passes = 1;      // M passes per CTA (> 1: row-streamed pool tiles)
};

class ConvFp16Wgmma {
 public:
  // Shape rule only (no device query): groups 1, dilation 1, in_c % 8 == 0, out_c % 32 == 0
  // (out_c % 64 != 0 only where K = kh * kw * in_c pads to the 64-wide k-tile by at most K / 8),
  // positive extents, ConvFp16::supports(shape) (the small-batch fallback callers keep), and a
  // pool window of at most 128 pixels when a pool is fused.
  static bool supports(const ConvShape& shape);
  // True when the current device is compute capability 9.0 AND the loaded kernel image carries
  // the wgmma code (a one-time probe launch).  Cached after the first call (function-local
  // static), so it describes the device current at that first call.
  static bool device_supported();

  // Prepacks weight [out_c, in_c, kh, kw] fp32 and bias [out_c] (nullable) onto the device and
  // enumerates the feasible pool tilings.  Throws cnnrt::Error when the shape is not supported
  // or the device cannot run the kernel.
  ConvFp16Wgmma(const ConvShape& shape, const float* weight, const float* bias);
  ~ConvFp16Wgmma();
  ConvFp16Wgmma(const ConvFp16Wgmma&) = delete;
  ConvFp16Wgmma& operator=(const ConvFp16Wgmma&) = delete;

  // The launch for `batch` (pure arithmetic; call once per context).  With a fused pool the
  // tiling comes from a cost model (wgmma.cu); once the single-pass tiling fills the SMs every
  // choice does too, so plan(b).ctas >= SM count keeps holding for larger batches.
  ConvFp16WgmmaPlan plan(int batch) const;
  // Tests / benchmarks: the launch with a PH x PW pooled block per CTA instead of the cost
  // model's; nothing when no pool is fused or the block cannot run (conv tile row wider than
  // 128, shared memory over the device limit).
  std::optional<ConvFp16WgmmaPlan> plan_pool_block(int batch, int ph, int pw) const;

  // x: [batch, in_h, in_w, in_c] fp16; y: [batch, out_h, out_w, out_c] fp16 (the pooled extent
  // when a pool is fused).  Launches `variant` (a plan's), nothing else; no workspace.
  void forward(int variant, const void* x, void* y, int batch, cudaStream_t stream) const;
  // With the fused residual of a shape.residual layer (r in y's layout): y = clamp(conv + b + r).
  void forward(int variant, const void* x, const void* residual, void* y, int batch,
               cudaStream_t stream) const;
  void forward(const ConvFp16WgmmaPlan& plan, const void* x, void* y, int batch,
               cudaStream_t stream) const {
    forward(plan.variant, x, y, batch, stream);
  }
  size_t weight_bytes() const;

 private:
  std::unique_ptr<ConvFp16WgmmaImpl> impl_;
};

}  // namespace cnnrt::cuda
