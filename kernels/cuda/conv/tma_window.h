// Hopper (sm_90a) fp16 convolution by shifted windows (conv1's inner conv) — interface.
//
// Serves stride-1, unpadded 3x3 convs with groups 1, dilation 1, in_c = 64 held in a tensor of
// stored_in_c (33..64, a multiple of 8) channels per pixel (the rest read as zeros), 8 <= out_c <=
// 64 (a multiple of 8), rows short enough that a 128-pixel window's 3x3 halo fits its 256-pixel
// slab (2 * in_w + 2 + 128 <= 256: in_w <= 63), an activation and a fused MaxPool run staged (the
// conv into the workspace, then maxpool_fp16), no residual: AlexNet conv1's space-to-depth form
// (57x57x48 -> 64).  NHWC fp16 in (stored_in_c per pixel) and out (out_c per pixel).  The design
// note is atop tma_window_kernel.cuh; the device code exists only in the sm_90a image.
#pragma once

#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/conv/conv_shape.h"

namespace cnnrt::cuda {

namespace tma_window {
// The fp32 NCHW source of conv_int8_window's quantising form and its space-to-depth (s = 4, c = 3;
// tma_window_quantise.cuh): computed once per layer (ConvS8Window), read by the kernel.
struct S2dSource {
  int h = 0, w = 0;          // x's rows and columns
  int pad_h = 0, pad_w = 0;  // the original conv's padding
  // The box starts at column col0 (-pad_w rounded down to a multiple of 4: a tiled TMA load's
  // innermost coordinate must be 16-byte aligned), so x' column j's 4 columns start at box column
  // 4j + shift (shift = -col0 - pad_w: 0 or 2, an even pad); cols (a multiple of 4) covers them.
  int col0 = 0, shift = 0, cols = 0;
  uint32_t box_bytes = 0;           // 4 * 3 * cols * 4
  float scale = 0, reciprocal = 0;  // the input's scale; filter_reciprocal(scale)
};
}  // namespace tma_window

// The slab tensor map of one input buffer at one batch (host data, ~1 us to encode), of either
// element type.
struct ConvWindowInput {
  CUtensorMap map;
  const void* x = nullptr;
  int batch = 0;
};
// The pooling form's maps (ConvS8Window::encode_pooled): x' and the pre-pool tensor.
struct ConvWindowPoolInput {
  CUtensorMap map, pre;
  const void* x = nullptr;
  void* pre_pool = nullptr;
  int batch = 0;
};

class ConvFp16Window {
 public:
  // Shape rule only (no device query): see the header comment.
  static bool supports(const ConvShape& shape, int stored_in_c);
  // Compute capability 9.0 with the sm_90a image loaded, or a described sm_90a target.
  static bool device_supported();

  // Uploads weight [out_c, in_c, 3, 3] fp32 (zero on channels past stored_in_c) as fp16 [64
  // rows][9 taps x 64 channels] and bias (nullable), encodes the weight's map, checks the kernel
  // images' register count.  Throws cnnrt::Error when the shape is not supported or the device
  // cannot run it.
  ConvFp16Window(const ConvShape& shape, const float* weight, const float* bias, int stored_in_c);
  ~ConvFp16Window();
  ConvFp16Window(const ConvFp16Window&) = delete;
  ConvFp16Window& operator=(const ConvFp16Window&) = delete;

  // The workspace forward() needs at `batch` (the pre-pool tensor of a fused pool, else 0); a
  // plan name.
  size_t workspace_bytes(int batch) const;
  const char* name() const;

  // The input's slab map; encode once per (x, batch) and keep it.  Host only; checked.
  ConvWindowInput encode_input(const void* x, int batch) const;
  // y = clamp(conv(x) + b) (then pooled, through `workspace`), on `stream`.
  void forward(const ConvWindowInput& input, void* y, cudaStream_t stream,
               void* workspace = nullptr) const;
  size_t weight_bytes() const;

 private:
  ConvShape shape_;
  int stored_in_c_ = 0, c_steps_ = 4, sms_ = 132;  // c_steps_: k16 steps per tap (3 or 4)
  __half* w_ = nullptr;
  float* bias_ = nullptr;
  size_t bytes_ = 0;
  CUtensorMap w_map_;
};

// conv_int8_window: the same kernel on int8 (wgmma s8 k32, the 64-byte swizzle), the int8
// family's requantising epilogue, bit for bit the integer reference.  Serves an S8Conv that is a
// stride-1 unpadded 3x3 conv over a 64-byte channel stride (in_c <= 64: conv_int8_s2d's TMA
// form of conv1), out_c <= 64, int8 output (out_stride <= 64), in_w <= 63; the weight rows
// [out_c][9 x 64] (k_pad 576) as that form packs them.  The input x' may be stored at fewer
// bytes a pixel (stored_stride: a multiple of 16 from in_c to 64; conv1 quantised at 48), the
// rest of each 64-byte row the TMA's zero fill.  The entry pools the output (a pass after the
// conv), or, in the pooling form, the conv does while it runs (tma_window_pool.cuh).
class ConvS8Window {
 public:
  // stored_stride 0: conv.in_stride.
  static bool supports(const S8Conv& conv, int stored_stride = 0);
  static bool device_supported();
  // Keeps `conv` (its device weight, bias and multipliers: the caller's, alive as long as this);
  // encodes the weight map, checks the kernel images.  Throws cnnrt::Error.  small_sums: every
  // |acc + bias| < 2^22 (narrow_s8_small_sums on the layer's integers), so the epilogue takes
  // the conversion-free requantisation (the same bits).  consumers: the kernel's consumer
  // warpgroups, 2 or 3 (tma_window_kernel.cuh's design note), or 0: by batch (consumers_at).
  // quantise_source: where quantise_serves(conv, *source), the window conv can also read the
  // space-to-depth's fp32 NCHW source itself (tma_window_quantise.cuh: the quantisation and
  // rearrangement in its producer, no x' in global memory; two consumers).
  // pool: where pool_serves(conv, *pool), the pooling form is offered too (forward_pooled).
  ConvS8Window(const S8Conv& conv, bool small_sums, int consumers = 0, int stored_stride = 0,
               const S8SpaceToDepth* quantise_source = nullptr, const NhwcPool* pool = nullptr);
  // The consumer warpgroups at `batch`: the pinned count, else three where the CTAs take more
  // than one unit each (run 50-51: 3-7 % faster from batch 16 to 256) and two below (one unit a
  // CTA: the third consumer idles, and the 512-thread CTA ran batch 1 and 4 0.4-1.2 us slower).
  int consumers_at(int batch) const;
  ConvWindowInput encode_input(const void* x, int batch) const;
  void forward(const ConvWindowInput& input, void* y, cudaStream_t stream, int consumers) const;

  // The quantising form: a 4 x 4 space-to-depth of 3 channels onto this conv's input map, an
  // even pad_w, rows of at most 57 blocks at pad 2, a positive input scale
  // (tma_window_quantise.cuh's design note).
  static bool quantise_serves(const S8Conv& conv, const S8SpaceToDepth& s2d);
  bool quantises() const { return quantises_; }
  // The fp32 source's map (x: NCHW fp32, 16-byte aligned) and the launch that reads it; only
  // where quantises().  Checked (cnnrt::Error).
  ConvWindowInput encode_source(const void* x, int batch) const;
  void forward_quantised(const ConvWindowInput& source, void* y, cudaStream_t stream) const;

  // The pooling form (three consumers; tma_window_pool.cuh's design note): a 3x3 stride-2
  // unpadded floor-mode max-pool of the whole output (at the output's own channel stride), out_w
  // <= 64.  Shape rule only.
  static bool pool_serves(const S8Conv& conv, const NhwcPool& pool);
  bool pools() const { return pools_; }
  // The band counters forward_pooled needs at `batch` (int32 each; the caller zeroes them before
  // every launch, e.g. with cudaMemsetAsync ahead of the rearrangement pass).
  size_t pool_count_bytes(int batch) const;
  // x' (as encode_input) and the pre-pool tensor's map (pre_pool: [n][out_h][out_w][out_stride],
  // 16-byte aligned).  Checked (cnnrt::Error).
  ConvWindowPoolInput encode_pooled(const void* x, void* pre_pool, int batch) const;
  // y = pool(clamp(conv(x) + b)) into y (NHWC at out_stride), the conv's rows through the
  // pre-pool tensor; count: pool_count_bytes(batch) of zeros.
  void forward_pooled(const ConvWindowPoolInput& input, void* y, int* count,
                      cudaStream_t stream) const;

 private:
  S8Conv conv_;
  bool small_sums_ = false;
  int consumers_ = 0;       // 0: by batch
  int stored_stride_ = 64;  // x' bytes a pixel (the map's row pitch)
  int sms_ = 132;
  bool quantises_ = false;
  tma_window::S2dSource source_;  // where quantises_
  bool pools_ = false;
  NhwcPool pool_;                                           // where pools_
  int pool_bands() const { return (pool_.out_h + 1) / 2; }  // two pooled rows a band
  CUtensorMap w_map_;
};

}  // namespace cnnrt::cuda
