// Space-to-depth rewrite of strided few-channel convolutions (AlexNet conv1) — interface.
//
// Why: a conv with C <= 4 input channels cannot use the 16-byte-vector implicit GEMM of
// ConvFp16 without padding C to 8 (63% wasted MMA work for C = 3), so it takes the "gather"
// path, whose 2-byte loads cap it at ~20 TFLOP/s.  With stride s, regrouping each s×s block of
// (zero-padded) input pixels into one pixel of s·s·C channels turns the conv into a stride-1,
// padding-0 conv with a ceil(k/s)×ceil(k/s) kernel over C' = s·s·C channels (conv1: 3×3 over 48,
// 84% of the MMA work useful) that the vector path serves at ~200 TFLOP/s:
//
//   x'[n][Y][X][(dy·s + dx)·C + c] = x[n][Y·s + dy − pad_h][X·s + dx − pad_w][c]   (0 outside)
//   w'[o][(dy·s + dx)·C + c][KY][KX] = w[o][c][KY·s + dy][KX·s + dx]             (0 if ≥ k)
//
// Output pixel oy of the original conv reads rows oy·s − pad + ky; with ky = KY·s + dy that is
// row (oy + KY)·s + dy − pad of block row oy + KY, so a stride-1 conv over x' with x' extent
// out + ceil(k/s) − 1 produces exactly the original output extent (checked in
// space_to_depth_conv, never assumed).  ReLU and the fused MaxPool act on the same conv output,
// so the epilogue is unchanged.
//
// Layout (the CUDA backend's convention): NHWC fp16, channel stride padded_channels(C) with zero
// padding channels, on input and output.  The transformed ConvShape declares
// in_c = padded_channels(s·s·C) (its weights are zero on the padding channels), which keeps it on
// the vector path even when s·s·C <= 4.  A caller may ask for a wider channel stride of x'
// (space_to_depth_conv's channel_stride): conv_fp16_s2d's TMA inner conv needs in_c % 64 == 0,
// so conv1's x' is then 57×57×64 with channels 48..63 zero, and the transformed conv declares
// in_c = 64 (K = 576, 63% useful).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <optional>
#include <vector>

#include "kernels/cuda/conv/igemm.h"
#include "kernels/cuda/conv/s2d_tile.h"

namespace cnnrt::cuda {

// Geometry of one rearrangement (per sample).
struct SpaceToDepthShape {
  int in_c = 0, in_h = 0, in_w = 0;  // source image; channel stride padded_channels(in_c)
  int block = 1;                     // s
  int pad_h = 0, pad_w = 0;          // offset of block (0, 0) above/left of the image
  int out_h = 0, out_w = 0;          // blocks produced; those past the image are zeros
  // x''s channel stride when > 0 (a multiple of 8, at least out_c(); conv_fp16_s2d's TMA form
  // takes 64 for conv1's 48 channels), else pad8(out_c()).  Channels past out_c() are zeros.
  int channel_stride = 0;
  int out_c() const { return block * block * in_c; }  // real channels of x'
  int out_c_stride() const {                          // channel stride of x'
    return channel_stride > 0 ? channel_stride : padded_channels(out_c());
  }
};

// Bytes of x' for `batch` samples (no rounding).
size_t space_to_depth_bytes(const SpaceToDepthShape& shape, int batch);

// x: [batch, in_h, in_w, pad8(in_c)] fp16 → y: [batch, out_h, out_w, out_c_stride()] fp16,
// padding channels written as +0.  y must be 16-byte aligned (checked: throws cnnrt::Error).
// One kernel launch on `stream`; no allocation, no sync (graph-capturable).
void space_to_depth_fp16(const void* x, void* y, const SpaceToDepthShape& shape, int batch,
                         cudaStream_t stream);

// The same y straight from the graph input as the host gave it: x is [batch, in_c, in_h, in_w]
// fp32 (NCHW, dense), each value rounded to fp16 to nearest-even as nchw_fp32_to_nhwc_fp16
// rounds, so the result is bit-identical to that conversion followed by space_to_depth_fp16 —
// minus one launch and the padded fp16 copy of the input written and read back.  Same checks,
// same single capturable launch.  `kernel`: Auto runs the tiled kernel (s2d_tile.h) where it
// serves the shape (block <= 32 and a warp tile of at most 8 KB: with in_c <= 4, as
// conv_fp16_s2d accepts, every block <= 32) and the generic one elsewhere; Generic forces the
// latter.  Both give the same bits.
void space_to_depth_nchw_fp32(const float* x, void* y, const SpaceToDepthShape& shape, int batch,
                              cudaStream_t stream, S2dKernel kernel = S2dKernel::Auto);

// A conv expressed as rearrangement + stride-1 conv.
struct SpaceToDepthConv {
  ConvShape original;  // derived
  SpaceToDepthShape rearrange;
  ConvShape transformed;  // derived; same conv_h/conv_w/out_h/out_w as original
};

// The channel count a TMA-fed stride-1 conv over x' runs at (fp16 and int8 alike: a k-tile row is
// 64 elements): s·s·C rounded up to 64, or 0 where that would waste more than a quarter of K
// (fewer than 48 of 64 channels real: conv1's 48 qualify, a stride-2 stem's 12 do not).
inline int tma_block_channels(int block_channels) {
  const int padded = (block_channels + 63) / 64 * 64;
  return 3 * padded <= 4 * block_channels ? padded : 0;
}

// The rewrite of `shape`, or nothing when it cannot be expressed exactly: needs groups 1,
// dilation 1, equal strides >= 1, valid extents, and the transformed shape's derived conv and
// pooled extents equal to the original's.  Says nothing about whether it is faster.
// channel_stride > 0: x' at that channel stride (SpaceToDepthShape::channel_stride; nothing
// unless it is a multiple of 8 and at least s·s·C), which the transformed shape declares as
// its in_c (the weights zero there).
std::optional<SpaceToDepthConv> space_to_depth_conv(const ConvShape& shape, int channel_stride = 0);

// w' (fp32 OIHW, [out_c, transformed.in_c, k'h, k'w]) from w (fp32 OIHW, [out_c, in_c, kh, kw]).
std::vector<float> space_to_depth_weights(const SpaceToDepthConv& conv, const float* weight);

}  // namespace cnnrt::cuda
