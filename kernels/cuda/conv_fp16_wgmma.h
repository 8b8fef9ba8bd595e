// Hopper (sm_90a) wgmma implicit-GEMM fp16 convolution — interface.  Experimental.
//
// Serves plain convolutions (groups 1, dilation 1, no fused pool) whose channels need no
// padding: in_c % 8 == 0 and out_c % 64 == 0 (AlexNet conv3/conv4/conv5 and similar).  Same
// activation layout as every CUDA kernel here (kernels/cuda/conv_fp16.h): NHWC fp16, channel
// stride round_up(C, 8) — which equals C for the shapes served, so no padding lanes exist.
// Bias and ReLU are fused.  The device code exists only in the sm_90a image (see the .cu);
// device_supported() says whether the current device can run it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/cuda/conv_fp16.h"

namespace cnnrt {
class KernelRegistry;
}

namespace cnnrt::cuda {

class ConvFp16WgmmaImpl;

class ConvFp16Wgmma {
 public:
  // Shape rule only (no device query): groups 1, dilation 1, no pool, in_c % 8 == 0,
  // out_c % 64 == 0, positive extents.
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

  // x: [batch, in_h, in_w, in_c] fp16; y: [batch, conv_h, conv_w, out_c] fp16.  No workspace.
  void forward(const void* x, void* y, int batch, cudaStream_t stream) const;
  size_t weight_bytes() const;
  std::string variant() const;  // e.g. "wgmma_128x128x64_s4"

 private:
  std::unique_ptr<ConvFp16WgmmaImpl> impl_;
};

// Adds the "conv_fp16_wgmma" registry entry (defined in runtime/cuda/conv_wgmma_kernels.cpp).
void register_wgmma_conv_kernels(KernelRegistry& registry);

}  // namespace cnnrt::cuda
