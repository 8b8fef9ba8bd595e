// What the two Hopper wgmma convolutions (wgmma.cu, wgmma_ws.cu) share on
// both sides of the launch: the implicit-GEMM geometry their kernel parameters start with, its
// host-side fill from a ConvShape, the shape rule they have in common, and the upload of the
// K-major fp16 weight they both read.  Written once so the two kernels cannot disagree on the K
// order (kh, kw, c) or the padding conventions.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "kernels/cuda/conv/epilogue_params.h"
#include "kernels/cuda/conv/igemm.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise_fp16.h"

namespace cnnrt::cuda {

// GEMM view: M = batch * conv_h * conv_w output pixels, N = out_c, K = kh * kw * in_c in
// (kh, kw, c) order, padded with zeros to w_k (a multiple of the kernel's k-tile).
struct WgmmaConvParams {
  const __half* x = nullptr;
  const __half* w = nullptr;    // [weight rows][w_k]
  const float* bias = nullptr;  // [weight rows] (zeros when the layer has none)
  __half* y = nullptr;
  int in_h = 0, in_w = 0, in_c = 0;  // in_c == channel stride (in_c % 8 == 0)
  int conv_h = 0, conv_w = 0;
  int kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  int c_chunks = 0;  // in_c / 8
  int k_chunks = 0;  // real K in 8-chunks: kh * kw * c_chunks
  int k_tiles = 0;   // w_k / k-tile
  int w_k = 0;
  int out_c = 0;
  EpilogueClamp act;  // the fused activation
  int m_total = 0;    // batch * conv_h * conv_w (set per launch)
  // Fused residual (ConvShape::residual; conv_fp16_wgmma only): r [m][out_c] added in the
  // write-out, then clamped with residual_act (act is then the identity).  Set per launch.
  const __half* residual = nullptr;
  EpilogueClamp residual_act;
};

// Everything but the pointers and m_total, K padded to a multiple of `k_tile`.
inline void fill_wgmma_conv_params(const ConvShape& s, int k_tile, WgmmaConvParams& p) {
  const ConvAttrs& a = s.conv;
  fill_conv_window(s, p);
  p.c_chunks = s.in_c / 8;
  p.k_chunks = a.kernel_h * a.kernel_w * p.c_chunks;
  p.w_k = (p.k_chunks * 8 + k_tile - 1) / k_tile * k_tile;
  p.k_tiles = p.w_k / k_tile;
  p.out_c = s.out_c;
  p.act = epilogue_clamp_of(s);
  if (s.residual) {  // the clamp follows the residual add
    p.residual_act = p.act;
    p.act = EpilogueClamp{};
  }
}

// The rule both kernels share: groups 1, dilation 1, channels that need no padding (in_c % 8,
// out_c % out_c_multiple: 64 for the warp-specialised kernel, 32 for conv_fp16_wgmma, whose
// n32 / n96 tiles serve the rest), positive extents; and the small-batch fallback (ConvFp16)
// serves the shape too.
inline bool wgmma_conv_shape_ok(const ConvShape& s, int out_c_multiple = 64) {
  const ConvAttrs& a = s.conv;
  return a.groups == 1 && a.dilation_h == 1 && a.dilation_w == 1 && s.in_c > 0 && s.in_c % 8 == 0 &&
         s.out_c > 0 && s.out_c % out_c_multiple == 0 && a.out_channels == s.out_c &&
         a.kernel_h > 0 && a.kernel_w > 0 && a.stride_h > 0 && a.stride_w > 0 && a.pad_h >= 0 &&
         a.pad_w >= 0 && s.in_h > 0 && s.in_w > 0 && s.conv_h > 0 && s.conv_w > 0 &&
         ConvFp16::supports(s);
}

// Uploads weight [out_c][in_c][kh][kw] fp32 as fp16 [rows][w_k] (k = (ky * kw + kx) * in_c + c,
// zero K tail, zero rows >= out_c) and bias (nullable) as fp32 [rows], zeros past out_c.  The
// caller owns *w_dev / *bias_dev (cudaFree).  Returns the bytes uploaded.
inline size_t upload_wgmma_weights(const ConvShape& s, const float* weight, const float* bias,
                                   int w_k, int rows, __half** w_dev, float** bias_dev) {
  const ConvAttrs& a = s.conv;
  // Packed in fp32, converted on the GPU (upload_as_fp16: the host conversion was a large part
  // of the build time, issue 7).
  std::vector<float> w_host(size_t(rows) * w_k, 0.f);
  for (int o = 0; o < s.out_c; ++o)
    for (int c = 0; c < s.in_c; ++c)
      for (int ky = 0; ky < a.kernel_h; ++ky)
        for (int kx = 0; kx < a.kernel_w; ++kx)
          w_host[size_t(o) * w_k + (size_t(ky) * a.kernel_w + kx) * s.in_c + c] =
              weight[((size_t(o) * s.in_c + c) * a.kernel_h + ky) * a.kernel_w + kx];
  std::vector<float> b_host(rows, 0.f);
  if (bias != nullptr) std::memcpy(b_host.data(), bias, sizeof(float) * s.out_c);
  *w_dev = static_cast<__half*>(upload_as_fp16(w_host).release());
  *bias_dev = nullptr;
  if (!plan_only()) {  // planning for a described target: sizes only
    CNNRT_CUDA_CHECK(cudaMalloc(bias_dev, b_host.size() * sizeof(float)));
    CNNRT_CUDA_CHECK(cudaMemcpy(*bias_dev, b_host.data(), b_host.size() * sizeof(float),
                                cudaMemcpyHostToDevice));
  }
  return w_host.size() * sizeof(__half) + b_host.size() * sizeof(float);
}

}  // namespace cnnrt::cuda
