// int8 implicit-GEMM convolution on the tensor cores: mma.sync.m16n8k32.s32.s8.s8.s32 (sm_80+).
//
// Design.  The conv is the GEMM  Y[M x N] = X̂[M x K] · Wᵀ  with M = batch·out_h·out_w output
// pixels, N = out channels and K = kh·kw·in_stride in (r, s, c) order — the order of both the
// NHWC/16 activations (a K-slice of 16 bytes is 16 channels of ONE input pixel, since in_stride
// is a multiple of 16) and the KRSC weights the host packed (rows of k_pad = round_up(K, 64)
// bytes, zeros past K).  Nothing is materialised: each thread owns a 16-byte K-segment of two A
// rows per K-tile and computes their source pixels from (r, s, c) on the fly; padding pixels, rows
// past M and K past k_total are zero-filled by cp.async (src-size 0).
//
// Tiling: a CTA of 8 warps computes a 128 x BN tile, BN = 128 (warps 2 x 4, 64 x 32 each: 4 x 4
// MMAs of 16 x 8 per k32 step, 64 int32 accumulators per thread) for wide layers that fill the
// GPU, else BN = 64 (warps 4 x 2, 32 x 32 each); K in steps of 64 bytes (two k32 MMA steps)
// through a 4-stage cp.async ring in dynamic shared memory.  Shared rows are 80 bytes (64 + 16
// of padding) and the warp tile's MMAs are mma_s8_tile.cuh's (shared with the streaming int8
// linear), which says why the rows are 80 bytes and how the fragments are read.
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
#include "kernels/cuda/conv/mma_s8_tile.cuh"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace {

constexpr int kBM = 128, kStages = 4, kThreads = 256;
using s8_tile::kBK;
using s8_tile::kRowBytes;  // 80: conflict-free ldmatrix phases (mma_s8_tile.cuh)
using s8_tile::kSegs;      // 16-byte segments per row and K-tile

template <int BN>
struct Tile {
  static constexpr int kWarpsM = BN == 128 ? 2 : 4;
  static constexpr int kWarpsN = 8 / kWarpsM;
  static constexpr int kMI = kBM / kWarpsM / 16;  // m16 tiles per warp
  static constexpr int kNI = BN / kWarpsN / 8;    // n8 tiles per warp (4)
  static constexpr int kStageA = kBM * kRowBytes, kStageB = BN * kRowBytes;
  static constexpr int kSmem = kStages * (kStageA + kStageB);
  static constexpr int kOutRow = BN + 16;                // int8 output staging row (bytes)
  static constexpr int kARows = kBM * kSegs / kThreads;  // A segments per thread (2)
  static constexpr int kBRows = BN * kSegs / kThreads;   // B segments per thread (1 or 2)
  static_assert(kBM * kOutRow <= kSmem, "output staging fits the ring");
  static_assert(kNI == 4, "warp tile is 32 channels wide");
};

// Where one A row comes from: its output pixel, fixed for the whole K loop.
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

// The cp.async of one A segment (K offset k) of row `a` into `dst`; zeros where nothing is read.
__device__ __forceinline__ void load_a(const S8Conv& p, const ARow& a, int k, uint32_t dst,
                                       const int8_t* fallback) {
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
  ptx::cp_async_16(dst, src, bytes);
}

// One K-tile (64 bytes) of the warp's tile from ring slot (a, b): two k32 MMA steps.
template <int BN>
__device__ __forceinline__ void mma_tile(uint32_t a, uint32_t b, int warp_m, int warp_n, int lane,
                                         int (&acc)[Tile<BN>::kMI][4][4]) {
  s8_tile::warp_k_tile<Tile<BN>::kMI>(a, b, warp_m * Tile<BN>::kMI * 16, warp_n * 32, lane, acc);
}

// fp32 output: float2 pairs from the registers (channel pairs never straddle pad8).
template <int BN>
__device__ void store_float(const S8Conv& p, float* y, int m0, int n0, int total_m, int warp_m,
                            int warp_n, int lane, const int (&acc)[Tile<BN>::kMI][4][4]) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mi = 0; mi < Tile<BN>::kMI; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int m = m0 + (warp_m * Tile<BN>::kMI + mi) * 16 + g + half * 8;
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

// Split-K partial sums: the raw int32 accumulators of K-slice blockIdx.z (no bias), as int2 pairs
// into [split][m][out_stride]; split_k_finish4_kernel adds them up (exact: integers) and applies
// the epilogue.
template <int BN>
__device__ void store_partial(const S8Conv& p, int* partial, int m0, int n0, int total_m,
                              int warp_m, int warp_n, int lane,
                              const int (&acc)[Tile<BN>::kMI][4][4]) {
  const int g = lane >> 2, t = lane & 3;
  int* slice = partial + static_cast<int64_t>(blockIdx.z) * total_m * p.out_stride;
#pragma unroll
  for (int mi = 0; mi < Tile<BN>::kMI; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int m = m0 + (warp_m * Tile<BN>::kMI + mi) * 16 + g + half * 8;
      if (m >= total_m) continue;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int c = n0 + warp_n * 32 + ni * 8 + t * 2;
        if (c < p.out_stride)
          *reinterpret_cast<int2*>(slice + static_cast<int64_t>(m) * p.out_stride + c) =
              make_int2(acc[mi][ni][half * 2], acc[mi][ni][half * 2 + 1]);
      }
    }
}

// The split-K finish (finish_s8_split) of every int8 GEMM — the igemm convs and linears, the TMA
// linear, cuBLASLt's int32 output: adds the slices' sums (exact: integers) and applies the
// epilogue, four consecutive channels per thread (out_stride % 4 == 0: pad16 or pad8 rows) with
// int4 loads of each slice and one 4- or 16-byte store (a scalar form's byte stores and
// per-element division cost more than the sums' reads).
__global__ void split_k_finish4_kernel(const S8Conv p, const int4* __restrict__ partial, int splits,
                                       void* __restrict__ y, int64_t quads) {
  pdl_wait();
  const int stride_quads = p.out_stride / 4;
  for (int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; index < quads;
       index += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(index % stride_quads) * 4;
    int4 acc = partial[index];
    for (int z = 1; z < splits; ++z) {
      const int4 v = partial[z * quads + index];
      acc.x += v.x;
      acc.y += v.y;
      acc.z += v.z;
      acc.w += v.w;
    }
    if (p.float_output) {
      static_cast<float4*>(y)[index] =
          make_float4(s8::float_output(p, c, acc.x), s8::float_output(p, c + 1, acc.y),
                      s8::float_output(p, c + 2, acc.z), s8::float_output(p, c + 3, acc.w));
    } else {
      const uint32_t word = uint32_t(uint8_t(s8::int8_output(p, c, acc.x))) |
                            uint32_t(uint8_t(s8::int8_output(p, c + 1, acc.y))) << 8 |
                            uint32_t(uint8_t(s8::int8_output(p, c + 2, acc.z))) << 16 |
                            uint32_t(uint8_t(s8::int8_output(p, c + 3, acc.w))) << 24;
      static_cast<uint32_t*>(y)[index] = word;
    }
  }
}

// int8 output: requantised into a shared tile, then 16-byte row segments to global memory.
template <int BN>
__device__ void store_int8(const S8Conv& p, int8_t* y, int8_t* stage, int m0, int n0, int total_m,
                           int warp_m, int warp_n, int lane,
                           const int (&acc)[Tile<BN>::kMI][4][4]) {
  using T = Tile<BN>;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mi = 0; mi < T::kMI; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = (warp_m * T::kMI + mi) * 16 + g + half * 8;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int col = warp_n * 32 + ni * 8 + t * 2;
        const int c = n0 + col;
        const char2 v = make_char2(s8::int8_output(p, c, acc[mi][ni][half * 2]),
                                   s8::int8_output(p, c + 1, acc[mi][ni][half * 2 + 1]));
        *reinterpret_cast<char2*>(stage + row * T::kOutRow + col) = v;
      }
    }
  __syncthreads();
  for (int chunk = threadIdx.x; chunk < kBM * (BN / 16); chunk += kThreads) {
    const int row = chunk / (BN / 16), seg = chunk % (BN / 16);
    const int m = m0 + row, c = n0 + seg * 16;
    if (m < total_m && c < p.out_stride)
      *reinterpret_cast<uint4*>(y + static_cast<int64_t>(m) * p.out_stride + c) =
          *reinterpret_cast<const uint4*>(stage + row * T::kOutRow + seg * 16);
  }
}

template <int BN>
__global__ void __launch_bounds__(kThreads)
    igemm_s8_kernel(const S8Conv p, const int8_t* __restrict__ x, void* __restrict__ y, int total_m,
                    int* __restrict__ partial, int tiles_per_split) {
  // This CTA's K-tiles: all of them, or split-K slice blockIdx.z.  Its weight rows are pulled
  // into L2 before the wait (pdl.cuh), while the kernel before it still runs.
  const int first = blockIdx.z * tiles_per_split;
  const int tiles = min(p.k_pad / kBK - first, tiles_per_split);
  prefetch_rows_l2(p.weight + static_cast<int64_t>(blockIdx.y) * BN * p.k_pad, p.k_pad,
                   min(BN, p.out_c - static_cast<int>(blockIdx.y) * BN), size_t(first) * kBK,
                   size_t(first + tiles) * kBK, blockIdx.x, gridDim.x);
  pdl_wait();
  using T = Tile<BN>;
  extern __shared__ __align__(128) int8_t smem[];
  const uint32_t ring_a = ptx::smem_u32(smem);
  const uint32_t ring_b = ring_a + kStages * T::kStageA;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / T::kWarpsN, warp_n = warp % T::kWarpsN;
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * BN;

  // Loader roles: segment column tid % 4 of rows tid / 4 + 64·i (A), and the same for B.
  const int seg = tid % kSegs, row0 = tid / kSegs;
  ARow a[T::kARows];
#pragma unroll
  for (int i = 0; i < T::kARows; ++i) a[i] = a_row_of(p, x, m0 + row0 + i * 64, total_m);
  const int8_t* b_src[T::kBRows];
#pragma unroll
  for (int i = 0; i < T::kBRows; ++i) {
    const int n = n0 + row0 + i * 64;
    b_src[i] = n < p.out_c ? p.weight + static_cast<int64_t>(n) * p.k_pad + seg * 16 : nullptr;
  }
  auto load_tile = [&](int slot, int kt) {
#pragma unroll
    for (int i = 0; i < T::kARows; ++i)
      load_a(p, a[i], kt * kBK + seg * 16,
             ring_a + slot * T::kStageA + (row0 + i * 64) * kRowBytes + seg * 16, x);
#pragma unroll
    for (int i = 0; i < T::kBRows; ++i)
      ptx::cp_async_16(ring_b + slot * T::kStageB + (row0 + i * 64) * kRowBytes + seg * 16,
                       b_src[i] != nullptr ? b_src[i] + kt * kBK : x, b_src[i] != nullptr ? 16 : 0);
  };

  int acc[T::kMI][4][4] = {};
  s8_tile::cp_async_ring<kStages>(first, tiles, load_tile, [&](int slot) {
    mma_tile<BN>(ring_a + slot * T::kStageA, ring_b + slot * T::kStageB, warp_m, warp_n, lane, acc);
  });
  __syncthreads();  // the ring is reused as the output stage

  if (partial != nullptr)
    store_partial<BN>(p, partial, m0, n0, total_m, warp_m, warp_n, lane, acc);
  else if (p.float_output)
    store_float<BN>(p, static_cast<float*>(y), m0, n0, total_m, warp_m, warp_n, lane, acc);
  else
    store_int8<BN>(p, static_cast<int8_t*>(y), smem, m0, n0, total_m, warp_m, warp_n, lane, acc);
}

template <int BN>
void launch(const S8Conv& conv, const int8_t* x, void* y, int total_m, int splits, int* partial,
            cudaStream_t stream) {
  // The attribute is per kernel and process: set once (thread-safe static initialisation).
  static const cudaError_t configured = cudaFuncSetAttribute(
      igemm_s8_kernel<BN>, cudaFuncAttributeMaxDynamicSharedMemorySize, Tile<BN>::kSmem);
  CNNRT_CUDA_CHECK(configured);
  const int tiles = conv.k_pad / kBK, per_split = (tiles + splits - 1) / splits;
  const dim3 grid(static_cast<unsigned>((total_m + kBM - 1) / kBM),
                  static_cast<unsigned>((conv.out_stride + BN - 1) / BN),
                  static_cast<unsigned>((tiles + per_split - 1) / per_split));
  launch_kernel(igemm_s8_kernel<BN>, grid, kThreads, Tile<BN>::kSmem, stream, conv, x, y, total_m,
                splits > 1 ? partial : nullptr, per_split);
  if (splits <= 1) return;
  finish_s8_split(conv, partial, static_cast<int>(grid.z), total_m, y, stream);
}

// 128-wide tiles once the layer is wide and its 128 x 128 grid still fills an H100 (~132 SMs)
// about twice; else 64-wide tiles for more CTAs.
// (A width that is not a multiple of 128 takes 64-wide tiles: AlexNet conv2's 192 channels in
// 128-wide tiles would compute 64 columns of zeros.)
bool wide_tiles(const S8Conv& conv, int64_t total_m) {
  const int64_t wide_ctas = (total_m + kBM - 1) / kBM * (conv.out_stride / 128);
  return conv.out_stride % 128 == 0 && wide_ctas >= 264;
}

}  // namespace

void conv_s8_igemm(const S8Conv& conv, const void* x, void* y, int batch, cudaStream_t stream,
                   const S8SplitK* split) {
  if (conv.groups != 1 || conv.in_stride % 16 != 0 || conv.k_pad % kBK != 0 ||
      conv.k_pad < conv.k_total || conv.k_total != conv.kh * conv.kw * conv.in_stride)
    throw Error("conv_s8_igemm: invalid conv description");
  const int64_t total_m = static_cast<int64_t>(batch) * conv.out_h * conv.out_w;
  if (total_m <= 0) return;
  if (total_m > (int64_t{1} << 31) - kBM)
    throw Error("conv_s8_igemm: " + std::to_string(total_m) + " output pixels exceed the grid");
  const auto* in = static_cast<const int8_t*>(x);
  const int splits = split ? split->splits : 1;
  int* partial = split ? split->partial : nullptr;
  if (splits > 1 && partial == nullptr) throw Error("conv_s8_igemm: split-K without a workspace");
  if (wide_tiles(conv, total_m))
    launch<128>(conv, in, y, static_cast<int>(total_m), splits, partial, stream);
  else
    launch<64>(conv, in, y, static_cast<int>(total_m), splits, partial, stream);
}

void finish_s8(const S8Conv& conv, const int32_t* acc, int rows, void* y, cudaStream_t stream) {
  finish_s8_split(conv, acc, 1, rows, y, stream);
}

void finish_s8_split(const S8Conv& conv, const int32_t* partial, int splits, int rows, void* y,
                     cudaStream_t stream) {
  if (conv.out_stride % 4 != 0 || splits < 1)
    throw Error("finish_s8_split: rows of " + std::to_string(conv.out_stride) +
                " channels (not a multiple of 4) or " + std::to_string(splits) + " slices");
  const int64_t quads = static_cast<int64_t>(rows) * conv.out_stride / 4;
  if (quads <= 0) return;
  const int blocks = static_cast<int>(std::min<int64_t>((quads + 255) / 256, 1 << 20));
  launch_kernel(split_k_finish4_kernel, blocks, 256, 0, stream, conv,
                reinterpret_cast<const int4*>(partial), splits, y, quads);
}

int igemm_s8_splits(const S8Conv& conv, int batch, int sms) {
  const int64_t total_m = static_cast<int64_t>(batch) * conv.out_h * conv.out_w;
  const int bn = wide_tiles(conv, total_m) ? 128 : 64;
  const int64_t ctas = (total_m + kBM - 1) / kBM * ((conv.out_stride + bn - 1) / bn);
  const int tiles = conv.k_pad / kBK;
  // Enough CTAs for two waves, each slice at least 4 K-tiles (256 bytes of K), at most 16.
  int64_t splits = (2 * static_cast<int64_t>(sms) + ctas - 1) / ctas;
  splits = std::min<int64_t>({splits, tiles / 4, 16});
  return static_cast<int>(std::max<int64_t>(splits, 1));
}

size_t igemm_s8_split_bytes(const S8Conv& conv, int batch, int splits) {
  return splits <= 1 ? 0
                     : static_cast<size_t>(splits) * batch * conv.out_h * conv.out_w *
                           conv.out_stride * sizeof(int);
}

}  // namespace cnnrt::cuda
