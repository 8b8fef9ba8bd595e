// int8 implicit-GEMM convolution for small K: a persistent mma.sync (m16n8k32 s8) kernel for
// the narrow early layers of MBConv networks (EfficientNet-Lite0 at batch 64: b1_expand 16 -> 96
// at 112x112, K = 16; the stem, 3 channels padded to 16, 3x3 stride 2, K = 144; b2/b3_expand
// 24 -> 144, K = 32; b0_project 32 -> 16).  Serves groups 1 with K = kh·kw·in_stride <= 160
// bytes and out_stride <= 256, any kernel, stride, padding and dilation (narrow_s8_serves).
//
// What bounds these layers.  They are memory-bound: b1_expand reads 12.8 MB and writes 77 MB
// of int8 (M = 802,816 pixels x 96 channels), ~30 µs at ~3 TB/s; the stem reads 51 MB (the
// NHWC/16 input, 16 bytes a pixel for 3 channels) and writes 26 MB.  conv_int8_igemm spends
// 0.15-0.17 ms on them (docs/PERFORMANCE.md, run 33): it pads K to 64-byte tiles (75% zeros at
// K = 16), runs one K-tile per CTA with nothing to overlap its loads with, and computes 128
// channels for 96.  The tensor-core work is tiny (b1_expand: ~600k m16n8k32 MMAs, a few µs);
// what remains next to the bytes is the epilogue, ~8 instructions an output byte.
//
// Design.  Persistent CTAs of 8 warps (grid = SMs x CTAs per SM by occupancy, each CTA walks
// M-tiles blockIdx.x, + gridDim.x, ...).  A tile is 256 output pixels x ALL output channels,
// so the input is read once and the tile's output is one contiguous run of 256·out_stride
// bytes.  The whole weight matrix (out_stride x K, <= 45 KB) and the per-channel bias /
// multiplier are loaded into shared memory once per CTA.  A-tiles (256 rows x K bytes,
// gathered as conv_int8_igemm does: rows of 16-byte segments in (r, s, c) order, cp.async with
// zero-fill for padding pixels and rows past M) go through a ring of 2-4 stages sized to keep 2
// CTAs per SM, so tiles i+1..i+S-1 load while tile i computes and writes.  One thread loads
// one row (its pixel decoded once per tile; a 1x1 stride-1 unpadded conv reads the input as a
// contiguous run without decoding), through cp.async.ca: the 3x3 windows' neighbouring rows
// share input pixels, which L1 then serves.  Each warp owns 32 rows; it keeps its A fragments
// for the whole K (ldmatrix.x4, K rounded up to 32 only: 1-5 k32 steps) in registers and
// walks the channels 16 at a time (one ldmatrix.x4 of B and 4 MMAs a k32 step), so no
// channel beyond out_stride rounded to 16 is computed.  The A bytes from K to 32·KS are zeros
// written once per CTA (no load touches them) and so are the weights', so the int32 sums are
// the reference's exactly.
//
// Epilogue: the int8 contract of epilogue_s8.cuh.  When the host has proved every |acc + bias|
// < 2^22 for the layer (always for the products at K <= 160: 160·128·127 < 2^22; the bias
// decides), it runs s8::requantize_small: the same three IEEE steps without the int<->float
// conversion instructions, which issue at a quarter of the FP32 rate on sm_80-90 and would
// otherwise cost b1_expand ~40 µs on their own; else s8::int8_output.  The int8 tile is staged
// in shared memory (rows of out_stride + 16 or 32 bytes: the 8 rows of a store phase fall in
// distinct banks) and written as 16-byte stores of the contiguous output run; fp32 output (the
// graph output) is written as float2 pairs from the registers with s8::float_output.  A fused
// max-pool runs after this kernel, as for conv_int8_igemm (int8_entries.cpp).
//
// Shared memory: weights n16 x (32·KS + 16) bytes (rows padded by 16: the 8 rows of an
// ldmatrix phase start in 8 distinct 4-bank groups since (32·KS + 16)/4 is odd·4), bias and
// multiplier 8·n16, the int8 out stage 256 x (out_stride + 16|32), the ring S x 256 x
// (32·KS + 16).  b1_expand: 4.6 + 0.8 + 28.7 + 4 x 12.3 = 83 KB (2 CTAs per SM); the stem:
// 5.6 + 0.3 + 12.3 + 2 x 45 = 108 KB.
//
// Prediction (H100, batch 64; floor = DRAM bytes at ~3 TB/s; run 33's igemm / fp16 times):
// b1_expand 0.035-0.045 ms (90 MB, floor 0.030; 0.172 / 0.098); stem 0.040-0.055 (77 MB,
// floor 0.026, plus 115 MB of L2->SM gather: 9 taps x 16 bytes a row; 0.150 / 0.097);
// b2_expand and b3_expand (24 -> 144 at 56x56: 6.4 + 29 MB) 0.015-0.020 each; b0_project
// (32 -> 16 at 112x112: 25.7 + 12.8 MB) 0.017-0.022.
#include <algorithm>
#include <string>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/conv/epilogue_s8.cuh"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace {

constexpr int kThreads = 256, kBM = 256;  // one A row per thread
constexpr int kWarpRows = 32;             // two m16 tiles per warp
// Shared memory a CTA may take so that two fit on an H100 SM (228 KB, 1 KB reserved per CTA).
constexpr int kTwoPerSmBytes = 113 * 1024;

// The int8 epilogue variants: requantize_small (host-proved |acc| < 2^22), requantize, fp32.
enum class Out { Int8Small, Int8, Float };

// Byte layout of the dynamic shared memory, the same on host and device.
struct Layout {
  int ks = 1;      // k32 steps: ceil(k_total / 32)
  int krow = 48;   // bytes of an A or weight row: 32·ks + 16
  int n16 = 16;    // channels computed: out_stride rounded up to 16
  int orow = 0;    // bytes of an int8 out-stage row (0: fp32 output, no stage)
  int stages = 2;  // A ring depth
  int weights = 0, bias = 0, multiplier = 0, out = 0, ring = 0, total = 0;  // offsets, size

  __host__ __device__ int stage_bytes() const { return kBM * krow; }
};

Layout layout_of(const S8Conv& conv) {
  Layout l;
  l.ks = (conv.k_total + 31) / 32;
  l.krow = 32 * l.ks + 16;
  l.n16 = (conv.out_stride + 15) / 16 * 16;
  // (orow / 4) % 8 == 4: a warp's 2-byte stores (8 rows x 8 bytes) hit 16 distinct banks.
  l.orow = conv.float_output ? 0 : conv.out_stride + (conv.out_stride % 32 == 0 ? 16 : 32);
  l.weights = 0;
  l.bias = l.n16 * l.krow;
  l.multiplier = l.bias + l.n16 * 4;
  l.out = l.multiplier + l.n16 * 4;
  l.ring = l.out + kBM * l.orow;
  l.stages = std::clamp((kTwoPerSmBytes - l.ring) / l.stage_bytes(), 2, 4);
  l.total = l.ring + l.stages * l.stage_bytes();
  return l;
}

// Waits until at most `pending` cp.async groups of this thread are in flight (pending < 3).
__device__ __forceinline__ void cp_async_wait_pending(int pending) {
  if (pending >= 2)
    ptx::cp_async_wait<2>();
  else if (pending == 1)
    ptx::cp_async_wait<1>();
  else
    ptx::cp_async_wait<0>();
}

// 16-byte async copy through L1 (.ca): gathered rows of a window share input pixels.
// src_bytes == 0 zero-fills without reading.
__device__ __forceinline__ void cp_async_16_ca(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}

// Row `tid` of M-tile `tile` into ring slot `dst` (this thread's row): kh·kw·in_stride / 16
// segments in (r, s, c) order, zeros for padding pixels and rows past M.
__device__ __forceinline__ void load_row(const S8Conv& p, const int8_t* x, bool contiguous,
                                         int64_t m, int64_t total_m, uint32_t dst) {
  const bool valid = m < total_m;
  if (!valid) m = 0;  // decoded harmlessly; every segment is zero-filled
  if (contiguous) {   // 1x1, stride 1, no padding: output pixel m reads input pixel m
    const int8_t* src = x + m * p.in_stride;
    for (int k = 0; k < p.k_total; k += 16)
      cp_async_16_ca(dst + k, valid ? src + k : x, valid ? 16 : 0);
    return;
  }
  const int pixels = p.out_h * p.out_w;
  const int64_t n = m / pixels;
  const int within = static_cast<int>(m - n * pixels);
  const int oy = within / p.out_w, ox = within - oy * p.out_w;
  const int8_t* image = x + n * p.in_h * p.in_w * p.in_stride;
  const int iy0 = oy * p.stride_h - p.pad_h, ix0 = ox * p.stride_w - p.pad_w;
  uint32_t at = dst;
  for (int r = 0; r < p.kh; ++r) {
    const int iy = iy0 + r * p.dil_h;
    const bool row_ok = valid && iy >= 0 && iy < p.in_h;
    for (int s = 0; s < p.kw; ++s) {
      const int ix = ix0 + s * p.dil_w;
      const bool ok = row_ok && ix >= 0 && ix < p.in_w;
      const int8_t* src = image + (static_cast<int64_t>(iy) * p.in_w + ix) * p.in_stride;
      for (int c = 0; c < p.in_stride; c += 16, at += 16)
        cp_async_16_ca(at, ok ? src + c : x, ok ? 16 : 0);
    }
  }
}

// The output tile (rows m0 .. m0 + rows - 1, all channels) of the out stage as 16-byte stores:
// the tile is one contiguous run of rows·out_stride bytes of y.
__device__ __forceinline__ void copy_out(const S8Conv& p, const Layout& l, const int8_t* stage,
                                         int8_t* y, int64_t m0, int rows) {
  const int per_row = p.out_stride / 16;
  const int chunks = rows * per_row;
  const int row_step = kThreads / per_row, seg_step = kThreads % per_row;
  int row = threadIdx.x / per_row, seg = threadIdx.x % per_row;
  int8_t* run = y + m0 * p.out_stride;
  for (int q = threadIdx.x; q < chunks; q += kThreads) {
    *reinterpret_cast<uint4*>(run + static_cast<int64_t>(q) * 16) =
        *reinterpret_cast<const uint4*>(stage + row * l.orow + seg * 16);
    row += row_step;
    seg += seg_step;
    if (seg >= per_row) {
      seg -= per_row;
      ++row;
    }
  }
}

template <int KS, Out kOut>
__global__ void __launch_bounds__(kThreads, 2)
    narrow_s8_kernel(const S8Conv p, const Layout l, const int8_t* __restrict__ x,
                     void* __restrict__ y, int64_t total_m, int tiles, bool contiguous) {
  pdl_wait();
  extern __shared__ __align__(128) int8_t smem[];
  const uint32_t base = ptx::smem_u32(smem);
  const uint32_t weights = base + l.weights, ring = base + l.ring;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int stage_bytes = l.stage_bytes();

  // Once per CTA: the weights (rows past out_c zero-filled, KS·32 bytes of each k_pad row:
  // zeros past K), the per-channel epilogue constants, and the A rows' bytes K .. 32·KS (zeros
  // that no load ever overwrites).
  for (int q = tid; q < l.n16 * 2 * KS; q += kThreads) {
    const int n = q / (2 * KS), seg = q % (2 * KS);
    const bool real = n < p.out_c;
    ptx::cp_async_16(weights + n * l.krow + seg * 16,
                     real ? p.weight + static_cast<int64_t>(n) * p.k_pad + seg * 16 : p.weight,
                     real ? 16 : 0);
  }
  if constexpr (kOut == Out::Int8Small) {
    auto* bias = reinterpret_cast<int*>(smem + l.bias);
    auto* multiplier = reinterpret_cast<float*>(smem + l.multiplier);
    for (int c = tid; c < l.n16; c += kThreads) {
      const bool real = c < p.out_c;
      bias[c] = s8::small_sum_bias(real ? p.bias[c] : 0);
      multiplier[c] = real ? p.multiplier[c] : 0.0f;
    }
  }
  if (p.k_total < 32 * KS)
    for (int s = 0; s < l.stages; ++s)
      *reinterpret_cast<uint4*>(smem + l.ring + s * stage_bytes + tid * l.krow + p.k_total) =
          make_uint4(0, 0, 0, 0);

  // Prologue: the first S - 1 tiles of this CTA (the weights ride in the first group).
  const int64_t stride_tiles = gridDim.x;
  for (int s = 0; s < l.stages - 1; ++s) {
    const int64_t tile = blockIdx.x + s * stride_tiles;
    if (tile < tiles)
      load_row(p, x, contiguous, tile * kBM + tid, total_m, ring + s * stage_bytes + tid * l.krow);
    ptx::cp_async_commit();
  }

  // ldmatrix lane addresses: A rows lane % 16 at bytes (lane / 16)·16 of the warp's 32 rows;
  // B (weight rows = channels) (lane / 16)·8 + lane % 8 at bytes ((lane / 8) % 2)·16.
  const uint32_t a_lane = (warp * kWarpRows + (lane & 15)) * l.krow + (lane >> 4) * 16;
  const uint32_t b_lane =
      weights + ((lane >> 4) * 8 + (lane & 7)) * l.krow + ((lane >> 3) & 1) * 16;
  [[maybe_unused]] const float lo = static_cast<float>(p.lo), hi = static_cast<float>(p.hi);

  int iter = 0;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += stride_tiles, ++iter) {
    cp_async_wait_pending(l.stages - 2);
    __syncthreads();  // tile `iter` landed for every thread; its predecessor's slot and the
                      // out stage are free
    {
      const int64_t ahead = tile + (l.stages - 1) * stride_tiles;
      const int slot = (iter + l.stages - 1) % l.stages;
      if (ahead < tiles)
        load_row(p, x, contiguous, ahead * kBM + tid, total_m,
                 ring + slot * stage_bytes + tid * l.krow);
      ptx::cp_async_commit();
    }
    const int64_t m0 = tile * kBM;
    const uint32_t a_tile = ring + (iter % l.stages) * stage_bytes + a_lane;
    uint32_t af[KS][2][4];
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
        ptx::ldmatrix_x4(af[ks][mi], a_tile + mi * 16 * l.krow + ks * 32);

    for (int n0 = 0; n0 < l.n16; n0 += 16) {
      int acc[2][2][4] = {};
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        uint32_t bf[4];  // b0, b1 of channels n0 .. n0 + 7, then of n0 + 8 .. n0 + 15
        ptx::ldmatrix_x4(bf, b_lane + n0 * l.krow + ks * 32);
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
          ptx::mma_16832_s8(acc[mi][0], af[ks][mi], bf[0], bf[1]);
          ptx::mma_16832_s8(acc[mi][1], af[ks][mi], bf[2], bf[3]);
        }
      }
      // Thread (g, t) holds rows g, g + 8 of each m16 tile, channels n0 + 8·ni + 2t, + 1.
      if constexpr (kOut == Out::Float) {
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int64_t m = m0 + warp * kWarpRows + mi * 16 + g + half * 8;
            if (m >= total_m) continue;
#pragma unroll
            for (int ni = 0; ni < 2; ++ni) {
              const int c = n0 + ni * 8 + t * 2;
              if (c >= p.out_stride) continue;
              const float2 v = make_float2(s8::float_output(p, c, acc[mi][ni][half * 2]),
                                           s8::float_output(p, c + 1, acc[mi][ni][half * 2 + 1]));
              *reinterpret_cast<float2*>(static_cast<float*>(y) + m * p.out_stride + c) = v;
            }
          }
      } else {
        int8_t* stage = smem + l.out;
        [[maybe_unused]] int2 bias[2];
        [[maybe_unused]] float2 multiplier[2];
        if constexpr (kOut == Out::Int8Small) {
#pragma unroll
          for (int ni = 0; ni < 2; ++ni) {
            const int c = n0 + ni * 8 + t * 2;
            bias[ni] = *reinterpret_cast<const int2*>(smem + l.bias + c * 4);
            multiplier[ni] = *reinterpret_cast<const float2*>(smem + l.multiplier + c * 4);
          }
        }
        const bool tail = n0 + 16 > p.out_c;  // padding lanes here: they must be zeros
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int row = warp * kWarpRows + mi * 16 + g + half * 8;
#pragma unroll
            for (int ni = 0; ni < 2; ++ni) {
              const int c = n0 + ni * 8 + t * 2;
              const int v0 = acc[mi][ni][half * 2], v1 = acc[mi][ni][half * 2 + 1];
              uint32_t pair;
              if constexpr (kOut == Out::Int8Small) {
                uint32_t q0 = s8::requantize_small(v0 + bias[ni].x, multiplier[ni].x, lo, hi);
                uint32_t q1 = s8::requantize_small(v1 + bias[ni].y, multiplier[ni].y, lo, hi);
                if (tail) {
                  q0 = c < p.out_c ? q0 : 0u;
                  q1 = c + 1 < p.out_c ? q1 : 0u;
                }
                pair = __byte_perm(q0, q1, 0x0040);  // the low bytes: int8 q0, q1
              } else {
                pair = static_cast<uint8_t>(s8::int8_output(p, c, v0)) |
                       static_cast<uint32_t>(static_cast<uint8_t>(s8::int8_output(p, c + 1, v1)))
                           << 8;
              }
              *reinterpret_cast<uint16_t*>(stage + row * l.orow + c) = static_cast<uint16_t>(pair);
            }
          }
      }
    }
    if constexpr (kOut != Out::Float) {
      __syncthreads();  // the out stage is complete
      const int rows = total_m - m0 < kBM ? static_cast<int>(total_m - m0) : kBM;
      copy_out(p, l, smem + l.out, static_cast<int8_t*>(y), m0, rows);
    }
  }
  ptx::cp_async_wait<0>();  // nothing in flight at exit (the last groups are empty)
}

template <int KS, Out kOut>
void launch(const S8Conv& conv, const Layout& l, const int8_t* x, void* y, int64_t total_m, int sms,
            bool contiguous, cudaStream_t stream) {
  const auto kernel = narrow_s8_kernel<KS, kOut>;
  // The attribute is per kernel and process: the device's opt-in limit, set once
  // (thread-safe static initialisation); a layout above it fails at launch.
  static const cudaError_t configured = [&] {
    int device = 0, optin = 0;
    cudaError_t error = cudaGetDevice(&device);
    if (error == cudaSuccess)
      error = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (error == cudaSuccess)
      error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin);
    return error;
  }();
  CNNRT_CUDA_CHECK(configured);
  int per_sm = 0;
  CNNRT_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, l.total));
  const int64_t tiles = (total_m + kBM - 1) / kBM;
  const int ctas = static_cast<int>(std::min<int64_t>(tiles, std::max(per_sm, 1) * int64_t{sms}));
  launch_kernel(kernel, ctas, kThreads, l.total, stream, conv, l, x, y, total_m,
                static_cast<int>(tiles), contiguous);
}

template <int KS>
void launch_ks(const S8Conv& conv, const Layout& l, const int8_t* x, void* y, int64_t total_m,
               int sms, bool small_sums, bool contiguous, cudaStream_t stream) {
  if (conv.float_output)
    launch<KS, Out::Float>(conv, l, x, y, total_m, sms, contiguous, stream);
  else if (small_sums)
    launch<KS, Out::Int8Small>(conv, l, x, y, total_m, sms, contiguous, stream);
  else
    launch<KS, Out::Int8>(conv, l, x, y, total_m, sms, contiguous, stream);
}

}  // namespace

bool narrow_s8_serves(const S8Conv& conv) {
  return conv.groups == 1 && conv.in_stride % 16 == 0 &&
         conv.k_total == conv.kh * conv.kw * conv.in_stride && conv.k_total > 0 &&
         conv.k_total <= kNarrowS8MaxK && conv.k_pad >= (conv.k_total + 31) / 32 * 32 &&
         conv.k_pad % 16 == 0 && conv.out_stride > 0 && conv.out_stride <= kNarrowS8MaxN &&
         conv.out_stride % (conv.float_output ? 8 : 16) == 0;
}

bool narrow_s8_small_sums(const int8_t* weight, const int32_t* bias, int out_c, int64_t k) {
  for (int c = 0; c < out_c; ++c) {
    int64_t bound = bias != nullptr ? std::abs(static_cast<int64_t>(bias[c])) : 0;
    for (int64_t i = 0; i < k; ++i) bound += 128 * std::abs(static_cast<int>(weight[c * k + i]));
    if (bound >= s8::kSmallSumLimit) return false;
  }
  return true;
}

void conv_s8_narrow(const S8Conv& conv, const void* x, void* y, int batch, int sms, bool small_sums,
                    cudaStream_t stream) {
  if (!narrow_s8_serves(conv)) throw Error("conv_s8_narrow: conv not served");
  const int64_t total_m = static_cast<int64_t>(batch) * conv.out_h * conv.out_w;
  if (total_m <= 0) return;
  if ((total_m + kBM - 1) / kBM > (int64_t{1} << 31) - 1)
    throw Error("conv_s8_narrow: " + std::to_string(total_m) + " output pixels exceed the grid");
  const Layout l = layout_of(conv);
  const bool contiguous = conv.kh == 1 && conv.kw == 1 && conv.stride_h == 1 &&
                          conv.stride_w == 1 && conv.pad_h == 0 && conv.pad_w == 0 &&
                          conv.in_h == conv.out_h && conv.in_w == conv.out_w;
  const auto* in = static_cast<const int8_t*>(x);
  sms = std::max(sms, 1);
  switch (l.ks) {
    case 1:
      return launch_ks<1>(conv, l, in, y, total_m, sms, small_sums, contiguous, stream);
    case 2:
      return launch_ks<2>(conv, l, in, y, total_m, sms, small_sums, contiguous, stream);
    case 3:
      return launch_ks<3>(conv, l, in, y, total_m, sms, small_sums, contiguous, stream);
    case 4:
      return launch_ks<4>(conv, l, in, y, total_m, sms, small_sums, contiguous, stream);
    default:
      return launch_ks<5>(conv, l, in, y, total_m, sms, small_sums, contiguous, stream);
  }
}

}  // namespace cnnrt::cuda
