// Hopper (sm_90a) TMA-fed warp-specialised int8 convolution (conv_int8_tma) — interface.
//
// The int8 instance of conv_fp16_tma's mainloop (tma_kernel.cuh): TMA im2col loads of the int8
// NHWC/16 activations, TMA tiled loads of the [out_c][k_pad] int8 weight rows conv_s8_igemm /
// conv_s8_wgmma read, wgmma m64nNk32 s8 with int32 accumulators, the int8 family's epilogue
// (conv_s8.h's contract: bit for bit the integer reference).  Serves tma_s8_serves(conv): groups
// 1, dilation 1, channel stride a multiple of 64 (64-byte k-tiles where it is not a multiple of
// 128), kernel <= 64, stride 1-8, padding the im2col bounding box expresses (the bottom/right
// padding is whatever out_h/out_w imply: TF-SAME included), any out_c (padding lanes written as
// zeros); int8 NHWC/16 or fp32 NHWC/8 out.  No fused pool and no split-K: the registry entry
// runs maxpool_nhwc_s8 after it and falls back to conv_s8_igemm at batches that leave SMs idle.
// The design note is atop tma_s8.cu.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/conv/conv_s8.h"

namespace cnnrt::cuda {

class ConvS8TmaImpl;

struct ConvS8TmaPlan {
  int variant = 0;      // tile index into ConvS8Tma::tile_names()
  std::string name;     // e.g. "tma_s8_128x256_k128_s4"
  long long units = 0;  // output tiles at the planned batch
  int ctas = 0;         // persistent CTAs (<= SMs)
};

// The im2col tensor map of one input buffer at one batch (host data, ~1 us to encode).
struct ConvS8TmaInput {
  CUtensorMap map;
  const void* x = nullptr;
  int batch = 0;
};

bool tma_s8_serves(const S8Conv& conv);
// conv_int8_tma's input map for `batch` images: boxes of 128 pixels x kb channels, the kb-byte
// swizzle.  The 2:4 int8 kernel reads the same map as its B operand, so both encode it here.
CUtensorMap tma_s8_input_map(const char* kernel, const S8Conv& conv, const void* x, int batch,
                             int kb);

class ConvS8Tma {
 public:
  // Compute capability 9.0 with the sm_90a image (wgmma_s8_device_supported()).
  static bool device_supported();
  // "128x128", "128x192", "128x256", "256x128", "256x64", "128x64".
  static const std::vector<std::string>& tile_names();

  // `conv` describes the layer with its weight, bias and multipliers already on the device (the
  // int8 entry's upload: rows of k_pad bytes, k_pad a multiple of 64); they must outlive this.
  // Encodes the weight maps, checks the kernel images' register count.  Throws cnnrt::Error.
  // k_bytes: the k-tile row, 0 for the default (128 where the channel stride is a multiple of
  // 128, else 64); 64 forces the 64-byte rows on any stride (conv_lab --s8 times both).
  explicit ConvS8Tma(const S8Conv& conv, int k_bytes = 0);
  ~ConvS8Tma();
  ConvS8Tma(const ConvS8Tma&) = delete;
  ConvS8Tma& operator=(const ConvS8Tma&) = delete;

  ConvS8TmaPlan plan(int batch) const;               // the wave model's tile
  ConvS8TmaPlan plan(int batch, int variant) const;  // a pinned tile
  ConvS8TmaInput encode_input(const void* x, int batch) const;
  void forward(int variant, const ConvS8TmaInput& input, void* y, cudaStream_t stream) const;
  void forward(int variant, const void* x, void* y, int batch, cudaStream_t stream) const {
    forward(variant, encode_input(x, batch), y, stream);
  }

 private:
  std::unique_ptr<ConvS8TmaImpl> impl_;
};

}  // namespace cnnrt::cuda
