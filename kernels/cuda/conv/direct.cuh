// Direct (non-GEMM) fp16 convolution with the same fused epilogue: the fallback for shapes the
// tensor-core kernel does not serve (depthwise, groups whose channels per group are not a
// multiple of 8).  One thread per output element (pooled pixel, channel): it recomputes every
// conv value of its pooling window in fp32.  Deliberately simple -- correctness over speed; the
// pool windows overlap, so it recomputes, which is fine for the layers that land here.
#pragma once

#include <cuda_fp16.h>

#include "kernels/cuda/conv/epilogue.cuh"
#include "kernels/cuda/conv/igemm_params.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda::conv_detail {

// p.w: [out_c][kh][kw][cpg] fp16; p.bias: [out_c] fp32; p.pool is the identity window (1/1/0)
// when the layer has none.
__global__ void conv_direct_kernel(const ConvParams p) {
  pdl_wait();
  const long long total = (long long)p.batch * p.out_h * p.out_w * p.out_cs;
  for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
       idx += (long long)gridDim.x * blockDim.x) {
    const int oc = int(idx % p.out_cs);
    long long t = idx / p.out_cs;
    const int ox = int(t % p.out_w);
    t /= p.out_w;
    const int oy = int(t % p.out_h);
    const int n = int(t / p.out_h);
    if (oc >= p.out_c) {
      p.y[idx] = __float2half(0.f);
      continue;
    }
    const int g = oc / p.opg;
    const __half* wrow = p.w + size_t(oc) * p.kh * p.kw * p.cpg;
    float best = -INFINITY;
    for (int i = 0; i < p.pool.pk_h; ++i) {
      const int cy = oy * p.pool.ps_h - p.pool.pp_h + i;
      if (cy < 0 || cy >= p.conv_h) continue;
      for (int j = 0; j < p.pool.pk_w; ++j) {
        const int cx = ox * p.pool.ps_w - p.pool.pp_w + j;
        if (cx < 0 || cx >= p.conv_w) continue;
        float sum = p.bias[oc];
        for (int ky = 0; ky < p.kh; ++ky) {
          const int ih = cy * p.sh - p.ph + ky * p.dh;
          if (ih < 0 || ih >= p.in_h) continue;
          for (int kx = 0; kx < p.kw; ++kx) {
            const int iw = cx * p.sw - p.pw + kx * p.dw;
            if (iw < 0 || iw >= p.in_w) continue;
            const __half* xp =
                p.x + ((size_t(n) * p.in_h + ih) * p.in_w + iw) * p.in_cs + g * p.cpg;
            const __half* wp = wrow + (ky * p.kw + kx) * p.cpg;
            for (int c = 0; c < p.cpg; ++c) sum += __half2float(xp[c]) * __half2float(wp[c]);
          }
        }
        sum = epilogue::activate(sum, p.act);
        if (p.residual != nullptr)  // no pool: idx is the conv output's own element
          sum = epilogue::activate(sum + __half2float(p.residual[idx]), p.residual_act);
        best = fmaxf(best, sum);
      }
    }
    p.y[idx] = __float2half(best);
  }
}

}  // namespace cnnrt::cuda::conv_detail
