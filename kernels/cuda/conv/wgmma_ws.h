// Warp-specialised Hopper (sm_90a) wgmma implicit-GEMM fp16 convolution — interface.
//
// Same GEMM view, layouts and shape family as ConvFp16Wgmma (kernels/cuda/conv/wgmma.h):
// NHWC fp16 activations with in_c % 8 == 0, out_c % 64 == 0, groups 1, dilation 1, fused bias +
// activation — but NO fused pool (plain convs such as AlexNet conv3/conv4).  The kernel splits each
// CTA into one producer warpgroup (A gather + B loads by cp.async) and two consumer warpgroups
// (wgmma), handing stages over through mbarriers, and offers larger tiles (128x256, 256x128)
// than the first wgmma kernel; plan(batch) picks the tile by a wave-aware cost model (.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "kernels/cuda/conv/conv_shape.h"

namespace cnnrt::cuda {

class ConvFp16WgmmaWsImpl;

// The launch plan(batch) picks: which of the built tiles (128x128 s6, 128x256 s4, 256x128 s4).
struct ConvFp16WgmmaWsPlan {
  int variant = 0;     // tile index: a stable launch id
  std::string name;    // e.g. "wgmma_ws_128x256x64_s4"
  long long ctas = 0;  // CTAs at the planned batch
};

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

  // The tile for `batch` by a wave-aware cost model (pure arithmetic; once per context).
  ConvFp16WgmmaWsPlan plan(int batch) const;
  // Tests / benchmarks: tile bm x bn instead of the model's; nothing for a tile not built.
  std::optional<ConvFp16WgmmaWsPlan> plan_tile(int batch, int bm, int bn) const;
  // CTAs of the smallest tile (128x128) for `batch`: the most SMs the kernel can keep busy.
  // Callers compare it with the SM count to decide whether to use a small-batch fallback.
  long long max_ctas(int batch) const;

  // x: [batch, in_h, in_w, in_c] fp16; y: [batch, conv_h, conv_w, out_c] fp16.  Launches
  // `variant` (a plan's), nothing else; no workspace.
  void forward(int variant, const void* x, void* y, int batch, cudaStream_t stream) const;
  void forward(const ConvFp16WgmmaWsPlan& plan, const void* x, void* y, int batch,
               cudaStream_t stream) const {
    forward(plan.variant, x, y, batch, stream);
  }
  size_t weight_bytes() const;

 private:
  std::unique_ptr<ConvFp16WgmmaWsImpl> impl_;
};

}  // namespace cnnrt::cuda
