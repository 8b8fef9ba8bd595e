// fp16 depthwise convolution (groups == in channels == out channels) with the conv family's
// fused epilogue: bias, the fused residual (ConvShape::residual) and the activation clamp.
// kernels/cuda/conv/depthwise.cu explains the design.
//
// Layout: NHWC fp16, channel stride padded_channels(C) (conv_shape.h), padding lanes written as
// zeros.  Any kernel size, stride, dilation and (asymmetric) padding; 3x3 and 5x5 with stride 1
// or 2 and no dilation take the register-tiled kernels, everything else a generic one.  No
// fused max-pool (no network puts one after a depthwise conv).  Host-only header.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/conv/conv_shape.h"
#include "kernels/cuda/conv/epilogue_params.h"
#include "kernels/cuda/elementwise_fp16.h"

namespace cnnrt::cuda {

namespace depthwise_detail {
// The kernels' parameters (depthwise.cu): all but `total` fixed by the shape, so a layer builds
// them once at construction; forward() adds the batch.
struct DwParams {
  int channels, chunks;  // C and pad8(C) / 8
  int in_h, in_w, out_h, out_w;
  int kh, kw, sh, sw, dh, dw, pad_top, pad_left;
  // Tiled kernel (see the design note): block = 32 channels x block_rows x block_cols outputs.
  int tiles_log2;  // column tiles (of T outputs) per block, log2
  int block_rows, block_cols, col_blocks;
  int in_rows, in_cols;  // staged input extent of a block
  int plane_cols;        // staged columns per plane (odd: conflict-free row neighbours)
  int plane_bytes;       // one plane: ceil(in_rows / S) * plane_cols * 64
  int total;             // generic kernel: threads (batch * out_h * out_w * chunks)
  EpilogueClamp clamp;
};
}  // namespace depthwise_detail

class DepthwiseConvFp16 {
 public:
  // Depthwise with multiplier 1 (groups == in_c == out_c), no fused pool, a valid shape.
  static bool supports(const ConvShape& shape);
  // weight [C, 1, kh, kw] fp32 (PyTorch's layout), bias [C] or nullptr; packed once on the device
  // as fp32 [ceil(C / 32)][kh * kw][32] and [ceil(C / 32) * 32] (depthwise.cu says why) with zero
  // padding lanes.
  DepthwiseConvFp16(const ConvShape& shape, const float* weight, const float* bias);

  // x [batch, in_h, in_w, pad8(C)], residual (when shape.residual, else ignored) and y [batch,
  // out_h, out_w, pad8(C)], 16-byte aligned; y must not alias x or the residual.  One kernel on
  // `stream`, graph-capturable.
  void forward(const void* x, const void* residual, void* y, int batch, cudaStream_t stream) const;

  // "dw 3x3 s1 tile 7" / "dw generic": which kernel serves the shape (fixed at construction).
  std::string variant_name() const;
  size_t weight_bytes() const { return weights_.bytes() + bias_.bytes(); }

 private:
  ConvShape shape_;
  int tile_ = 1;                         // output columns per thread; 0 selects the generic kernel
  depthwise_detail::DwParams params_{};  // the shape's parameters and block geometry
  DeviceArray weights_, bias_;
};

}  // namespace cnnrt::cuda
