// int8 implicit-GEMM convolution on the tensor cores: mma.sync.m16n8k32.s32.s8.s8.s32 (sm_80+).
//
// Design.  The conv is the GEMM  Y[M x N] = X̂[M x K] · Wᵀ  with M = batch·out_h·out_w output
// pixels, N = out channels and K = kh·kw·in_stride in (r, s, c) order — the order of both the
// NHWC/16 activations (a K-slice of 16 bytes is 16 channels of ONE input pixel, since in_stride
// is a multiple of 16) and the KRSC weights the host packed (rows of k_pad = round_up(K, 32)
// bytes, zeros past K).  Nothing is materialised: each thread owns one 16-byte segment of one A
// row per stage and computes its source pixel from (r, s, c) on the fly; padding pixels, rows
// past M and K past k_total are zero-filled by cp.async (src-size 0).
//
// Tiling: a CTA of 8 warps computes a 128 x 64 tile (warps 4 x 2, 32 x 32 each: 2 x 4 MMAs of
// 16 x 8 per k32 step, 32 int32 accumulators per thread), K in steps of 32 bytes through a
// 3-stage cp.async ring.  Shared rows are 48 bytes (32 + 16 of padding), which makes the
// fragments' 32-bit loads (8 rows x 4 words per access) hit 32 distinct banks.  Fragments are
// read with plain 32-bit loads: for s8 m16n8k32 a thread's A words are (row g, bytes 4t..4t+3),
// (row g+8, same), (row g, +16), (row g+8, +16) and its B words (col g, k 4t..4t+3), (col g,
// +16) — g = lane / 4, t = lane % 4 — i.e. exactly 32-bit words of K-major rows.
//
// Epilogue (epilogue_s8.cuh): bias + requantise + activation clamp per channel, the int8 tile
// staged through shared memory and written as 16-byte rows (channel padding written as zeros);
// the fp32 (graph output) form writes float2 pairs straight from the registers.  A fused max-pool
// runs after this kernel (conv_s8.h: maxpool_nhwc_s8) on the pre-pool tensor — exact, since
// max commutes with the monotonic requantisation — not inside it: fusing it through
// pool_tiling.h is the next step for speed, not for correctness.
//
// Exactness: int32 accumulation of int8 products is associative, so the MMA's internal order
// cannot change the result; the one float step is the reference's (docs/QUANTIZATION.md).
#include <algorithm>
#include <string>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/conv/epilogue_s8.cuh"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/cuda_check.h"

namespace cnnrt::cuda {
namespace {

constexpr int kBM = 128, kBN = 64, kBK = 32, kStages = 3, kThreads = 256;
constexpr int kRowBytes = kBK + 16;  // 48: conflict-free fragment loads
constexpr int kStageA = kBM * kRowBytes, kStageB = kBN * kRowBytes;
constexpr int kOutRow = kBN + 16;  // int8 output staging row (bytes)
static_assert(kBM * kOutRow <= kStages * (kStageA + kStageB), "output staging fits the ring");

// Where one thread's A segment comes from: its output pixel, fixed for the whole K loop.
struct ARow {
  const int8_t* image = nullptr;  // the sample's input, nullptr for rows past M
  int iy0 = 0, ix0 = 0;           // top-left input pixel of the window
};

__device__ __forceinline__ ARow a_row_of(const S8Conv& p, const int8_t* x, int m, int total_m) {
  ARow row;
  if (m >= total_m) return row;
  const int pixels = p.out_h * p.out_w;
  const int n = m / pixels, within = m - n * pixels;
  const int oy = within / p.out_w, ox = within - oy * p.out_w;
  row.image = x + static_cast<int64_t>(n) * p.in_h * p.in_w * p.in_stride;
  row.iy0 = oy * p.stride_h - p.pad_h;
  row.ix0 = ox * p.stride_w - p.pad_w;
  return row;
}

// Issues the cp.async copies of K-tile `kt` into ring slot `stage`.
__device__ __forceinline__ void load_tile(const S8Conv& p, const ARow& a, int a_seg,
                                          uint32_t a_dst, const int8_t* b_src, bool b_valid,
                                          int b_seg, uint32_t b_dst, const int8_t* fallback,
                                          int kt) {
  const int k = kt * kBK + a_seg * 16;
  const void* src = fallback;
  int bytes = 0;
  if (a.image != nullptr && k < p.k_total) {
    const int rs = k / p.in_stride, c = k - rs * p.in_stride;
    const int r = rs / p.kw, s = rs - r * p.kw;
    const int iy = a.iy0 + r * p.dil_h, ix = a.ix0 + s * p.dil_w;
    if (iy >= 0 && iy < p.in_h && ix >= 0 && ix < p.in_w) {
      src = a.image + (static_cast<int64_t>(iy) * p.in_w + ix) * p.in_stride + c;
      bytes = 16;
    }
  }
  ptx::cp_async_16(a_dst, src, bytes);
  if (b_src != nullptr)
    ptx::cp_async_16(b_dst, b_valid ? b_src + kt * kBK + b_seg * 16 : fallback, b_valid ? 16 : 0);
}

// One k32 step of the warp's 32 x 32 tile from ring slot (a, b).
__device__ __forceinline__ void mma_step(const int8_t* a, const int8_t* b, int warp_m, int warp_n,
                                         int lane, int (&acc)[2][4][4]) {
  const int g = lane >> 2, t = lane & 3;
  uint32_t af[2][4];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
    const int8_t* row = a + (warp_m * 32 + mi * 16 + g) * kRowBytes + t * 4;
    af[mi][0] = *reinterpret_cast<const uint32_t*>(row);
    af[mi][1] = *reinterpret_cast<const uint32_t*>(row + 8 * kRowBytes);
    af[mi][2] = *reinterpret_cast<const uint32_t*>(row + 16);
    af[mi][3] = *reinterpret_cast<const uint32_t*>(row + 8 * kRowBytes + 16);
  }
#pragma unroll
  for (int ni = 0; ni < 4; ++ni) {
    const int8_t* col = b + (warp_n * 32 + ni * 8 + g) * kRowBytes + t * 4;
    const uint32_t b0 = *reinterpret_cast<const uint32_t*>(col);
    const uint32_t b1 = *reinterpret_cast<const uint32_t*>(col + 16);
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) ptx::mma_16832_s8(acc[mi][ni], af[mi], b0, b1);
  }
}

// fp32 output: float2 pairs from the registers (channel pairs never straddle pad8).
__device__ void store_float(const S8Conv& p, float* y, int m0, int n0, int total_m, int warp_m,
                            int warp_n, int lane, const int (&acc)[2][4][4]) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int m = m0 + warp_m * 32 + mi * 16 + g + half * 8;
      if (m >= total_m) continue;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int c = n0 + warp_n * 32 + ni * 8 + t * 2;
        if (c >= p.out_stride) continue;
        const float2 v = make_float2(s8::float_output(p, c, acc[mi][ni][half * 2]),
                                     s8::float_output(p, c + 1, acc[mi][ni][half * 2 + 1]));
        *reinterpret_cast<float2*>(y + static_cast<int64_t>(m) * p.out_stride + c) = v;
      }
    }
}

// int8 output: requantised into a shared tile, then 16-byte row segments to global memory.
__device__ void store_int8(const S8Conv& p, int8_t* y, int8_t* stage, int m0, int n0,
                           int total_m, int warp_m, int warp_n, int lane,
                           const int (&acc)[2][4][4]) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp_m * 32 + mi * 16 + g + half * 8;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int col = warp_n * 32 + ni * 8 + t * 2;
        const int c = n0 + col;
        const char2 v = make_char2(s8::int8_output(p, c, acc[mi][ni][half * 2]),
                                   s8::int8_output(p, c + 1, acc[mi][ni][half * 2 + 1]));
        *reinterpret_cast<char2*>(stage + row * kOutRow + col) = v;
      }
    }
  __syncthreads();
  for (int chunk = threadIdx.x; chunk < kBM * (kBN / 16); chunk += kThreads) {
    const int row = chunk / (kBN / 16), seg = chunk % (kBN / 16);
    const int m = m0 + row, c = n0 + seg * 16;
    if (m < total_m && c < p.out_stride)
      *reinterpret_cast<uint4*>(y + static_cast<int64_t>(m) * p.out_stride + c) =
          *reinterpret_cast<const uint4*>(stage + row * kOutRow + seg * 16);
  }
}

__global__ void __launch_bounds__(kThreads)
    igemm_s8_kernel(const S8Conv p, const int8_t* __restrict__ x, void* __restrict__ y,
                    int total_m) {
  __shared__ __align__(16) int8_t smem[kStages * (kStageA + kStageB)];
  int8_t* const ring_a = smem;
  int8_t* const ring_b = smem + kStages * kStageA;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp >> 1, warp_n = warp & 1;
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;

  // Loader roles: every thread one A segment (row tid/2, half tid%2); threads < 128 one B segment.
  const int a_seg = tid & 1;
  const ARow a = a_row_of(p, x, m0 + (tid >> 1), total_m);
  const int b_n = n0 + (tid >> 1);
  const bool b_loader = tid < 2 * kBN;
  const bool b_valid = b_loader && b_n < p.out_c;
  const int8_t* b_src = b_loader ? p.weight + static_cast<int64_t>(b_valid ? b_n : 0) * p.k_pad
                                 : nullptr;
  const uint32_t a_dst0 = ptx::smem_u32(ring_a + (tid >> 1) * kRowBytes + a_seg * 16);
  const uint32_t b_dst0 = ptx::smem_u32(ring_b + (tid >> 1) * kRowBytes + a_seg * 16);

  int acc[2][4][4] = {};
  const int tiles = p.k_pad / kBK;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < tiles)
      load_tile(p, a, a_seg, a_dst0 + s * kStageA, b_src, b_valid, a_seg, b_dst0 + s * kStageB, x,
                s);
    ptx::cp_async_commit();
  }
  for (int kt = 0; kt < tiles; ++kt) {
    ptx::cp_async_wait<kStages - 2>();
    __syncthreads();  // tile kt landed for every thread; slot (kt - 1) % kStages is free
    const int next = kt + kStages - 1;
    if (next < tiles) {
      const int slot = next % kStages;
      load_tile(p, a, a_seg, a_dst0 + slot * kStageA, b_src, b_valid, a_seg,
                b_dst0 + slot * kStageB, x, next);
    }
    ptx::cp_async_commit();
    const int slot = kt % kStages;
    mma_step(ring_a + slot * kStageA, ring_b + slot * kStageB, warp_m, warp_n, lane, acc);
  }
  ptx::cp_async_wait<0>();
  __syncthreads();  // the ring is reused as the output stage

  if (p.float_output)
    store_float(p, static_cast<float*>(y), m0, n0, total_m, warp_m, warp_n, lane, acc);
  else
    store_int8(p, static_cast<int8_t*>(y), smem, m0, n0, total_m, warp_m, warp_n, lane, acc);
}

}  // namespace

void conv_s8_igemm(const S8Conv& conv, const void* x, void* y, int batch, cudaStream_t stream) {
  if (conv.groups != 1 || conv.in_stride % 16 != 0 || conv.k_pad % kBK != 0 ||
      conv.k_pad < conv.k_total || conv.k_total != conv.kh * conv.kw * conv.in_stride)
    throw Error("conv_s8_igemm: invalid conv description");
  const int64_t total_m = static_cast<int64_t>(batch) * conv.out_h * conv.out_w;
  if (total_m <= 0) return;
  if (total_m > (int64_t{1} << 31) - kBM)
    throw Error("conv_s8_igemm: " + std::to_string(total_m) + " output pixels exceed the grid");
  const dim3 grid(static_cast<unsigned>((total_m + kBM - 1) / kBM),
                  static_cast<unsigned>((conv.out_stride + kBN - 1) / kBN));
  igemm_s8_kernel<<<grid, kThreads, 0, stream>>>(conv, static_cast<const int8_t*>(x), y,
                                                 static_cast<int>(total_m));
  CNNRT_CUDA_CHECK_LAUNCH();
}

}  // namespace cnnrt::cuda
