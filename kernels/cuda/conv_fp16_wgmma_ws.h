// Warp-specialised Hopper (sm_90a) wgmma implicit-GEMM fp16 convolution — interface.
//
// Same GEMM view, layouts and shape family as ConvFp16Wgmma (kernels/cuda/conv_fp16_wgmma.h):
// NHWC fp16 activations with in_c % 8 == 0, out_c % 64 == 0, groups 1, dilation 1, fused bias +
// ReLU — but NO fused pool (plain convs such as AlexNet conv3/conv4).  The kernel splits each
// CTA into one producer warpgroup (A gather + B loads by cp.async) and two consumer warpgroups
// (wgmma), handing stages over through mbarriers, and offers larger tiles (128x256, 256x128)
// than the first wgmma kernel; the tile is chosen per batch by a wave-aware cost model (.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/cuda/conv_fp16.h"

namespace cnnrt::cuda {

class ConvFp16WgmmaWsImpl;

class ConvFp16WgmmaWs {
 public:
  // Shape rule only (no device query): groups 1, dilation 1, in_c % 8 == 0, out_c % 64 == 0,
  // positive extents, no fused pool, and ConvFp16::supports(shape) (the small-batch fallback
  // callers keep).
  static bool supports(const ConvShape& shape);
  // Same device rule as ConvFp16Wgmma::device_supported() (compute capability 9.0 and the sm_90a
  // image loaded; cached after the first call).
  static bool device_supported();

  // Prepacks weight [out_c, in_c, kh, kw] fp32 and bias [out_c] (nullable) onto the device.
  // Throws cnnrt::Error when the shape or the device is not supported.
  ConvFp16WgmmaWs(const ConvShape& shape, const float* weight, const float* bias);
  ~ConvFp16WgmmaWs();
  ConvFp16WgmmaWs(const ConvFp16WgmmaWs&) = delete;
  ConvFp16WgmmaWs& operator=(const ConvFp16WgmmaWs&) = delete;

  // x: [batch, in_h, in_w, in_c] fp16; y: [batch, conv_h, conv_w, out_c] fp16.  No workspace.
  void forward(const void* x, void* y, int batch, cudaStream_t stream) const;
  // CTAs forward() launches for `batch` with the tile it picks (one CTA per SM at a time).
  long long ctas(int batch) const;
  // CTAs of the smallest tile (128x128) for `batch`: the most SMs the kernel can keep busy.
  // Callers compare it with the SM count to decide whether to use a small-batch fallback.
  long long max_ctas(int batch) const;
  size_t weight_bytes() const;
  // e.g. "wgmma_ws_128x256x64_s4"; variant() names the forced tile, or "wgmma_ws_(per batch)"
  // when the cost model chooses per batch; variant(batch) names the tile forward() uses.
  std::string variant() const;
  std::string variant(int batch) const;
  // Tests / benchmarks: run tile bm x bn for every batch (0, 0 restores the cost model).  False
  // (and no change) for a tile that is not built (128x128, 128x256, 256x128 are).
  bool force_tile(int bm, int bn);

 private:
  std::unique_ptr<ConvFp16WgmmaWsImpl> impl_;
};

}  // namespace cnnrt::cuda
