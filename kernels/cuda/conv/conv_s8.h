// The int8 members of the CUDA conv family (docs/QUANTIZATION.md is their contract): an
// implicit-GEMM conv on the int8 tensor cores (mma.sync m16n8k32 s8, sm_80+, igemm_s8.cu), its
// persistent small-K form for narrow layers (igemm_s8_narrow.cu), its Hopper form on wgmma
// m64nNk32 s8 (sm_90a, wgmma_s8.cu), a direct conv for grouped and depthwise layers
// (direct_s8.cu), and the NHWC max-pool that finishes a conv with a fused pool (direct_s8.cu).
// The linear layer runs through the same GEMM as a 1x1 conv on a 1x1 map
// (runtime/cuda/int8_entries.cpp).
//
// Layout: activations int8 NHWC, channel stride pad16(C) (graph/tensor_type.h: int8_nhwc16),
// padding lanes zero; an fp32 output (the graph output, dequantised in the epilogue) is NHWC with
// channel stride pad8(C) (fp32_nhwc8, the CUDA fp32 family's layout).  Every kernel writes zeros
// into its output's padding lanes.
//
// The arithmetic is the integer reference's (kernels/cpu/int8_ref.h), so results are bit for bit
// those of ref::conv2d_int8: acc = bias_q[c] + Σ q_x·q_w in int32 (exact, order-free), then
//   int8 out: q = clamp(__float2int_rn(__fmul_rn(__int2float_rn(acc), M[c])), lo, hi)
//   fp32 out: v = __fmul_rn(__int2float_rn(acc), D[c]) clamped as std::max / std::min do;
// weights, int32 biases and multipliers come from ref::prepare_int8_layer on the host.  Only
// enqueues on `stream`; batch is a run-time argument.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/conv/s2d_tile.h"

namespace cnnrt::cuda {

__host__ __device__ inline int padded16(int c) { return (c + 15) / 16 * 16; }

// One int8 conv (or linear as a 1x1 conv over a 1x1 map), per sample, all extents pre-pool.
struct S8Conv {
  int in_c = 0, in_h = 0, in_w = 0, in_stride = 0;      // in_stride = pad16(in_c)
  int out_c = 0, out_h = 0, out_w = 0, out_stride = 0;  // pad16 (int8) or pad8 (fp32)
  int kh = 1, kw = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
  int groups = 1;
  // GEMM path: K = kh*kw*in_stride in (r, s, c) order, weight rows of k_pad = round_up(K, 64)
  // bytes; direct path: weight [out_c][kh][kw][in_c / groups]; depthwise path: [kh][kw][pad16].
  int k_total = 0, k_pad = 0;
  const int8_t* weight = nullptr;     // device
  const int32_t* bias = nullptr;      // device, out_c (bias_q; zeros without a bias)
  const float* multiplier = nullptr;  // device, out_c: M[c] (int8 out) or D[c] (fp32 out)
  bool float_output = false;
  int lo = -127, hi = 127;           // int8 out: the activation's integer bounds
  float float_lo = 0, float_hi = 0;  // fp32 out: the activation's bounds (may be ±inf)
};

// Split-K for GEMMs with few output tiles and a long K (the linear layers at batch 9..256): K
// in `splits` slices, each CTA's raw int32 sums into `partial` ([splits][M][out_stride]), then
// one pass adds the slices (integer sums: exact) and applies the epilogue.
struct S8SplitK {
  int splits = 1;
  int* partial = nullptr;  // igemm_s8_split_bytes() bytes of device memory
};

// groups == 1 only: the tensor-core implicit GEMM.  x: int8 NHWC/16; y: int8 NHWC/16 or fp32
// NHWC/8.  `split` (optional): split-K as planned by igemm_s8_splits.
void conv_s8_igemm(const S8Conv& conv, const void* x, void* y, int batch, cudaStream_t stream,
                   const S8SplitK* split = nullptr);
// The epilogue alone on `rows` rows of raw int32 sums acc [rows][out_stride] (no bias): y gets
// int8_output / float_output of them (a library GEMM's int32 product, e.g. linear_s8_lt.h): the
// one-slice finish_s8_split, with its alignment and stride conditions.
void finish_s8(const S8Conv& conv, const int32_t* acc, int rows, void* y, cudaStream_t stream);
// The same on `splits` slices of raw sums, partial [splits][rows][out_stride] (16-byte aligned;
// out_stride % 4 == 0), added up (exact) before the epilogue: a split-K GEMM's finish
// (linear_s8_tma.h).  Throws cnnrt::Error on a stride that is not a multiple of 4.
void finish_s8_split(const S8Conv& conv, const int32_t* partial, int splits, int rows, void* y,
                     cudaStream_t stream);
// The split count that gives `sms` multiprocessors two waves of CTAs (1: no split).
int igemm_s8_splits(const S8Conv& conv, int batch, int sms);
size_t igemm_s8_split_bytes(const S8Conv& conv, int batch, int splits);
// Depthwise layers (groups == in_c == out_c; depthwise_s8.cu): 3x3 and 5x5 at stride 1 or 2
// on a kernel that stages its input tile in shared memory (dp4a over taps, 4 channels x 8
// outputs per thread), every other shape on a generic one.  depthwise_s8_weights packs the
// weights ([C][kh][kw], the reference's) in the layout the kernel chosen for `conv` (kernel,
// stride, dilation) reads; conv.weight points at that.  int8 NHWC/16 or fp32 NHWC/8 output.
bool depthwise_s8_serves(const S8Conv& conv);
std::vector<int8_t> depthwise_s8_weights(const S8Conv& conv, const int8_t* weight);
void conv_s8_depthwise(const S8Conv& conv, const void* x, void* y, int batch, cudaStream_t stream);
// Hopper (sm_90a) wgmma form of conv_s8_igemm (wgmma_s8.cu): the fp16 wgmma kernel's mainloop
// on int8 (wgmma m64nNk32 s8).  Serves wgmma_s8_serves(conv): groups 1, dilation 1, out_c % 64
// == 0 with out_stride == out_c, k_pad % 128 == 0; on a device where
// wgmma_s8_device_supported().  No split-K: 128-row tiles, wgmma_s8_ctas(conv, batch) CTAs.
bool wgmma_s8_serves(const S8Conv& conv);
bool wgmma_s8_device_supported();
long long wgmma_s8_ctas(const S8Conv& conv, int batch);
std::string wgmma_s8_name(const S8Conv& conv);
void conv_s8_wgmma(const S8Conv& conv, const void* x, void* y, int batch, cudaStream_t stream);
// Small-K GEMM convs (igemm_s8_narrow.cu): the narrow early layers of MBConv networks (K =
// kh·kw·in_stride <= kNarrowS8MaxK bytes, out_stride <= kNarrowS8MaxN) on a persistent
// mma.sync kernel that reads each input row once, keeps the weights in shared memory and
// overlaps the next tiles' loads with this one's epilogue.  Weights as conv_s8_igemm's (rows of
// k_pad >= round_up(K, 32) bytes, zeros past K).  `sms`: the device's multiprocessors (the grid
// is persistent).  `small_sums`: narrow_s8_small_sums held for the layer's integer weights and
// biases, so the epilogue may requantise without conversion instructions (same bits).
constexpr int kNarrowS8MaxK = 160, kNarrowS8MaxN = 256;
bool narrow_s8_serves(const S8Conv& conv);
// Every |bias_q[c]| + 128·Σ|w[c][k]| (weight [out_c][k], bias may be nullptr) below 2^22.
bool narrow_s8_small_sums(const int8_t* weight, const int32_t* bias, int out_c, int64_t k);
void conv_s8_narrow(const S8Conv& conv, const void* x, void* y, int batch, int sms, bool small_sums,
                    cudaStream_t stream);
// Any groups (depthwise included): one thread per output element.
void conv_s8_direct(const S8Conv& conv, const void* x, void* y, int batch, cudaStream_t stream);

// Max-pool of an NHWC map (int8: channel stride pad16, fp32: pad8) [c, h, w] into [c, out_h,
// out_w], window (k, stride, pad) as PoolAttrs says; padding never wins, padding lanes zero.
// int8 values are copied unchanged (the fused pool's multiplier is 1: docs/QUANTIZATION.md).
struct NhwcPool {
  int c = 0, h = 0, w = 0, out_h = 0, out_w = 0;
  int kh = 1, kw = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};
void maxpool_nhwc_s8(const NhwcPool& pool, const void* x, void* y, int batch, cudaStream_t stream);
void maxpool_nhwc_f32(const NhwcPool& pool, const float* x, float* y, int batch,
                      cudaStream_t stream);

}  // namespace cnnrt::cuda

namespace cnnrt::cuda {

// Space-to-depth for a strided int8 conv with few input channels (AlexNet conv1: 3 channels,
// stride 4): padding 3 channels to 16 would make 13/16 of the GEMM's K zeros.  Instead the
// input is rearranged into blocks of stride x stride pixels, block (by, bx) holding input pixels
// (by·s - pad_h + ry, bx·s - pad_w + rx) as channels (ry·s + rx)·C + c (zeros outside the
// image), NHWC with channel stride pad16(s·s·C); the conv becomes a stride-1, unpadded conv of
// ceil(kh/s) x ceil(kw/s) over the blocks (weights rearranged alike on the host, zeros where
// r >= kh), run by conv_s8_igemm.  The source is either the int8 NHWC/16 tensor or the fp32 NCHW
// graph input, quantised here exactly as the conversion step would (`__fdiv_rn`, RNE, ±127):
// the quantising first layer.  From fp32 the tiled kernel of s2d_tile.cuh runs where it serves
// the shape (`kernel` Auto; every shape conv_int8_s2d takes), a warp per run of blocks of one
// block row with coalesced row loads and each value quantised once; the generic one (a thread
// per 16-byte group, any shape, and the int8 source) otherwise or when `kernel` is Generic.
// Same bits either way.  x: fp32 NCHW dense, or int8 NHWC/16; y: 16-byte aligned.
struct S8SpaceToDepth {
  int c = 0, h = 0, w = 0;  // the source map
  int s = 1, pad_h = 0, pad_w = 0;
  int blocks_h = 0, blocks_w = 0;  // the rearranged map's extent
  int out_stride = 0;              // pad16(s·s·c)
  float input_scale = 0;           // fp32 source: the quantisation scale
};
void space_to_depth_s8(const S8SpaceToDepth& s2d, const void* x, bool fp32_nchw_source, void* y,
                       int batch, cudaStream_t stream, S2dKernel kernel = S2dKernel::Auto);

}  // namespace cnnrt::cuda
