// Hopper (sm_90a) wgmma implicit-GEMM fp16 convolution — interface.  Experimental.
//
// Serves convolutions (groups 1, dilation 1) whose channels need no padding: in_c % 8 == 0 and
// out_c % 64 == 0 (AlexNet conv2..conv5 and the space-to-depth form of conv1), optionally with a
// fused MaxPool after bias + ReLU.  Same activation layout as every CUDA kernel here
// (kernels/cuda/conv_fp16.h): NHWC fp16, channel stride round_up(C, 8) — which equals C for the
// shapes served, so no padding lanes exist.  Bias and ReLU are fused.  The device code exists only
// in the sm_90a image (see the .cu); device_supported() says whether the current device can run it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/cuda/conv_fp16.h"

namespace cnnrt::cuda {

class ConvFp16WgmmaImpl;

class ConvFp16Wgmma {
 public:
  // Shape rule only (no device query): groups 1, dilation 1, in_c % 8 == 0, out_c % 64 == 0,
  // positive extents, ConvFp16::supports(shape) (the small-batch fallback callers keep), and a
  // pool window of at most 128 pixels when a pool is fused.
  static bool supports(const ConvShape& shape);
  // True when the current device is compute capability 9.0 AND the loaded kernel image carries
  // the wgmma code (a one-time probe launch).  Cached after the first call (function-local
  // static), so it describes the device current at that first call.
  static bool device_supported();

  // Prepacks weight [out_c, in_c, kh, kw] fp32 and bias [out_c] (nullable) onto the device.
  // Throws cnnrt::Error when the shape is not supported or the device cannot run the kernel.
  ConvFp16Wgmma(const ConvShape& shape, const float* weight, const float* bias);
  ~ConvFp16Wgmma();
  ConvFp16Wgmma(const ConvFp16Wgmma&) = delete;
  ConvFp16Wgmma& operator=(const ConvFp16Wgmma&) = delete;

  // x: [batch, in_h, in_w, in_c] fp16; y: [batch, out_h, out_w, out_c] fp16 (the pooled extent
  // when a pool is fused).  No workspace.
  void forward(const void* x, void* y, int batch, cudaStream_t stream) const;
  // CTAs forward() launches for `batch` (one per SM at a time: callers compare it with the SM
  // count to decide whether the 128-row tiles fill the GPU).  With a fused pool the tiling is
  // chosen per batch (cost model in the .cu); once the single-pass tiling fills the SMs every
  // choice does too, so ctas(batch) >= SM count keeps holding for larger batches.
  long long ctas(int batch) const;
  size_t weight_bytes() const;
  // e.g. "wgmma_128x128x64_s4"; pooled: "..._pool(per batch)", and with a batch the tiling
  // forward() uses, e.g. "wgmma_128x192x64_s4_pool13x13_stream7x4r" (7 passes of 4 conv rows).
  std::string variant() const;
  std::string variant(int batch) const;
  // Tests / benchmarks: use a PH x PW pooled block per CTA for every batch instead of the cost
  // model (0, 0 restores it).  False (and no change) when no pool is fused or the block cannot
  // run (conv tile row wider than 128, shared memory over the device limit).
  bool force_pool_block(int ph, int pw);
  // M passes per CTA forward() runs for `batch` (1 without a pool or for single-pass tiles).
  int pool_passes(int batch) const;

 private:
  std::unique_ptr<ConvFp16WgmmaImpl> impl_;
};

}  // namespace cnnrt::cuda
