// fp16 depthwise convolution — design note.
//
// What bounds it.  A depthwise conv does k*k fp32 FMAs per output channel and reads each input
// element k*k times; the bytes it must move (input and output once) are few, so it reaches the
// DRAM floor only if its instruction stream is lean and its loads overlap.  The kernel this one
// replaced (one thread per 8 channels x 4 columns of a row, loads straight from global memory)
// ran EfficientNet-Lite0's 16 depthwise layers at 32% of the floor, the 5x5 ones at 18-25%
// (docs/PERFORMANCE.md, "Depthwise kernel against the DRAM floor").  ncu on b8_dw (480 ch 14²,
// 5x5, batch 64) said why: each input load sat in its own bounds-check branch and was consumed at
// once, so the 40 loads of a thread waited one after another (long-scoreboard 3.6 cycles per
// issued instruction, issue slots 44% busy); and only 800 of its ~2500 instructions per thread
// were FMAs, the rest address arithmetic, predicates, zero fills and the epilogue.
//
// Structure (each choice, and why):
// 1. The block stages its input tile in shared memory with 16-byte cp.async: every load of the
//    block is in flight at once without holding registers (the exposed latency above), and the
//    copy's zero fill (src-size 0) is the padding, asymmetric included, so the compute loop has
//    no bounds check.  The tile's layout is fixed per template, so each tap is an LDS at a
//    compile-time offset from one per-thread base: no address arithmetic, no predicate.  The
//    block's weights and bias are staged too (LDS.128 with the same constant offsets).
// 2. Thread = 4 channels x kTile = 7 consecutive outputs of one row.  Per kernel row a thread
//    reads (7-1)*S + K input quads, converts each to fp32 once and feeds the <= 7 outputs that
//    use it, with the row's K weight quads held in registers: 5x5 stride 1 costs 700 FMAs, 220
//    conversions and 80 LDS per thread.  4 channels x 7 columns instead of 8 x 4: the same
//    ~70 registers (28 accumulators + 20 weights; 8 channels would need 40 weights and 32
//    accumulators for 4 columns), 11/35 instead of 8/20 conversions per FMA, and the weight
//    traffic per FMA of the shared memory halves (a weight quad serves 7 outputs, not 4).  7
//    also divides every EfficientNet width (112, 56, 28, 14, 7), so no column is wasted there;
//    odd, it keeps neighbouring tiles' reads conflict-free (below).
// 3. Block = 32 channels (8 quads, the fastest thread index) x rows x 1, 2 or 4 column tiles,
//    <= 224 threads; grid x = channel group, y = spatial block, z = image.  224 = 8 x 28: whole
//    7-row or 14-row bands.  Rows are halved until the staged tile fits 48 KB (no opt-in
//    attribute); stride 2 takes at most 2 tiles, whose input is already (14-1)*2+K = 31
//    columns wide at K = 5 (measured: 4 tiles 1-7% slower on b1/b3, 1 tile 3-10% slower).
// 4. Shared layout: S x S planes (input row parity x column parity; one plane at stride 1) of
//    [row][column][32 channels], 64 B a pixel, so a stride-2 thread's taps are stride 1 within a
//    plane and every offset but the row's is a constant.  Bank conflicts: a quarter of a warp
//    (8 quads) reads 64 contiguous bytes; the next 8 lanes read the next tile (7 pixels = 448 B
//    on) or, with one tile, the next row: plane_cols is odd, so both land 64 B mod 128 apart.
// 5. __launch_bounds__(224, 4): <= 72 registers, 4 blocks of 7 warps per SM (28 warps), where
//    the compiler's free choice was 73 registers, i.e. 3 blocks (b8: 25.2 -> 21.4 us).
// 6. The epilogue (clamp / no clamp, a last quad that straddles C, residual or not) is chosen
//    once per thread, so the common case runs no select per element and no zero residual; the
//    residual loads go out together.  Order as the conv family: + bias, + residual, clamp,
//    round to fp16 once; channels >= C are written as +0 (a Clip with min > 0 would otherwise
//    make them non-zero); quads past pad8(C) are not written.
//
// Summation order is the old kernel's (per output: kernel rows, then columns, fmaf into fp32):
// on every case of the stand-alone harness below the results were bit-identical to it.
//
// Weights: fp32 [group][tap][32 channels] (bias [group][32]), zero-padded to whole groups, so a
// block's K*K*128 bytes are one contiguous copy.  Every other shape (any kernel, stride,
// dilation) takes the generic kernel, one output vector per thread: correct everywhere, not
// tuned.
//
// Predicted, then measured.  H100 SXM, batch 64, fp16 NHWC, EfficientNet-Lite0 shapes, a
// stand-alone harness around this file (median of 40 launches, inputs rotated over > 200 MB so
// L2 holds none; % of the floor at 2971 GB/s; `cnnrt profile` inside the network will differ):
// - Loads made branch-free and batched per row (step one, not kept): predicted "the latency
//   goes, the instruction count stays".  b8 50 -> 38.6 us, all 16 0.867 -> 0.662 ms; ncu:
//   long-scoreboard 3.6 -> 1.5, issue busy 44 -> 63%, instructions 15.3 -> 16.7 M: now
//   issue-bound, which is what 1-5 attack.
// - This structure: predicted from instruction counts (~620 -> ~350 per 8-channel output)
//   b8 ~17 us, all 16 ~1.8x.  Measured first 23.9 us at 475 instructions per output (the
//   epilogue ~300 per thread, staging ~150); with 5 and 6: 10.2 M instructions, 72% issue busy
//   (not_selected and math-pipe throttle lead the stalls).  Final (this file; compute-sanitizer
//   memcheck, racecheck and synccheck clean on that harness's 29 cases — not kept in the repo: the
//   kernel harness's depthwise rows, tests/harness/cases.cpp, cover every path), before -> now:
//     layer                      ms before -> now     % of floor
//     b0      3x3 s1 32 ch 112²  0.0820 -> 0.0463     42 -> 75
//     b1      3x3 s2 96 ch 112²  0.1140 -> 0.0771     57 -> 84
//     b2      3x3 s1 144 ch 56²  0.0881 -> 0.0564     44 -> 69
//     b3      5x5 s2 144 ch 56²  0.0948 -> 0.0466     26 -> 52
//     b4      5x5 s1 240 ch 28²  0.0854 -> 0.0398     19 -> 41
//     b5      3x3 s2 240 ch 28²  0.0331 -> 0.0189     31 -> 54
//     b6, b7  3x3 s1 480 ch 14²  0.027-0.028 -> 0.017-0.018   29-30 -> 45-48
//     b8-b10  5x5 s1 14²         0.051-0.064 -> 0.024-0.028   16-18 -> 34-40
//     b11     5x5 s2 672 ch 14²  0.0380 -> 0.0196     19 -> 36
//     b12-b14 5x5 s1 1152 ch 7²  0.028 -> 0.017       18 -> 29
//     b15     3x3 s1 1152 ch 7²  0.0191 -> 0.0133     26 -> 37
//     all 16                     0.872 -> 0.485 ms    30 -> 54 (1.80x; the issue asks >= 60)
// What is left: the 5x5 layers are issue-bound at ~1500 instructions a warp of which 920 are
//   FMAs and fp16 -> fp32 conversions (no fp32 FMA takes an fp16 operand before sm_100); the 7²
//   layers run 2304 blocks of 2 warps against 1848 resident (1.25 waves), every block loading
//   before it computes: persistent blocks that stage the next tile while computing this one
//   are the next step there.
#include <cuda_fp16.h>

#include <algorithm>
#include <vector>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/depthwise.h"
#include "kernels/cuda/conv/epilogue_params.h"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace {

using depthwise_detail::DwParams;

constexpr int kTile = 7;                // output columns per thread of the tiled kernel
constexpr int kGroup = 32;              // channels per block: 8 quads of 4, one per thread
constexpr int kPixelBytes = 64;         // one staged pixel: kGroup fp16 channels
constexpr int kMaxThreads = 224;        // 8 quads x column tiles x rows, 7 warps at most
constexpr int kMinBlocks = 4;           // per SM: <= 72 registers, 28 warps (the design note)
constexpr int kSmemBudget = 48 * 1024;  // per block; no opt-in attribute needed
constexpr int kGenericThreads = 256;

__device__ __forceinline__ void unpack_half4(const uint2& raw, float (&f)[4]) {
  const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&raw.x));
  const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&raw.y));
  f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y;
}

// The epilogue of `count` (<= T) outputs of one quad along a row, y[offset + o * 2 * chunks]:
// acc + bias (+ residual) -> clamp -> fp16, channels >= C (from `valid` on) written as +0.
// kClamp, kMask and kResidual are decided once per thread (store_outputs), so the common case
// runs no select, no zero residual and no per-output branch; the residual loads go out together.
template <bool kClamp, bool kMask, bool kResidual, int T>
__device__ __forceinline__ void store_row(uint2* y, const uint2* residual, long long offset,
                                          const float (&acc)[T][4], const float4& bias,
                                          const DwParams& p, int valid, int count) {
  const int quads = 2 * p.chunks;  // quads per pixel
  uint2 res[T];
  if (kResidual) {
    const uint2* rp = residual + offset;
#pragma unroll
    for (int o = 0; o < T; ++o, rp += quads) res[o] = o < count ? __ldg(rp) : make_uint2(0, 0);
  }
  const float b[4] = {bias.x, bias.y, bias.z, bias.w};
  uint2* yp = y + offset;
#pragma unroll
  for (int o = 0; o < T; ++o, yp += quads) {
    float r[4] = {0, 0, 0, 0}, v[4];
    if (kResidual) unpack_half4(res[o], r);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      float a = acc[o][c] + b[c];
      if (kResidual) a += r[c];
      if (kClamp) a = fminf(fmaxf(a, p.clamp.lo), p.clamp.hi);
      v[c] = !kMask || c < valid ? a : 0.0f;
    }
    uint2 out;
    *reinterpret_cast<__half2*>(&out.x) = __floats2half2_rn(v[0], v[1]);
    *reinterpret_cast<__half2*>(&out.y) = __floats2half2_rn(v[2], v[3]);
    if (o < count) *yp = out;
  }
}

template <bool kClamp, int T>
__device__ __forceinline__ void store_row_masked(uint2* y, const uint2* residual, long long offset,
                                                 const float (&acc)[T][4], const float4& bias,
                                                 const DwParams& p, int valid, int count) {
  if (residual != nullptr) {
    if (valid >= 4)
      store_row<kClamp, false, true>(y, residual, offset, acc, bias, p, valid, count);
    else
      store_row<kClamp, true, true>(y, residual, offset, acc, bias, p, valid, count);
  } else {
    if (valid >= 4)
      store_row<kClamp, false, false>(y, residual, offset, acc, bias, p, valid, count);
    else
      store_row<kClamp, true, false>(y, residual, offset, acc, bias, p, valid, count);
  }
}

template <int T>
__device__ __forceinline__ void store_outputs(uint2* y, const uint2* residual, long long offset,
                                              const float (&acc)[T][4], const float4& bias,
                                              const DwParams& p, int valid, int count) {
  if (p.clamp.on)
    store_row_masked<true>(y, residual, offset, acc, bias, p, valid, count);
  else
    store_row_masked<false>(y, residual, offset, acc, bias, p, valid, count);
}

// The block's input tile into shared memory: a warp per staged row (rows warp, warp + warps, ...),
// lane = (column lane / 4 + k * col_step, 16-byte piece lane % 4).  Pixels outside the image and
// chunks past pad8(C) are zero-filled by the copy itself (src-size 0, `fallback` never read).
// `image` points at this lane's chunk of the image.
template <int S>
__device__ __forceinline__ void stage_input(const char* image, const char* fallback, uint32_t s_x,
                                            const DwParams& p, int iy0, int ix0, bool chunk_ok,
                                            int tid, int nthreads) {
  // nthreads is a multiple of 8 (not always of 32): a partial last warp steps by fewer columns;
  // col_step is even, so a lane's column parity (its plane when S = 2) never changes.
  const int warp = tid >> 5, lane = tid & 31, nwarps = (nthreads + 31) >> 5;
  const int lanes = nthreads - 32 * warp < 32 ? nthreads - 32 * warp : 32;
  const int col_step = lanes >> 2, c0 = lane >> 2;
  const long long pixel_bytes = 16LL * p.chunks, step_bytes = col_step * pixel_bytes;
  const long long row_step = nwarps * pixel_bytes * p.in_w;
  const uint32_t dst_step = col_step / S * kPixelBytes;
  const uint32_t dst_lane =
      s_x + (c0 % S) * p.plane_bytes + (c0 / S) * kPixelBytes + 16 * (lane & 3);
  const char* src_row =
      image + (static_cast<long long>(iy0 + warp) * p.in_w + ix0 + c0) * pixel_bytes;
  for (int r = warp; r < p.in_rows; r += nwarps, src_row += row_step) {
    const bool row_ok = chunk_ok && static_cast<unsigned>(iy0 + r) < static_cast<unsigned>(p.in_h);
    const char* src = src_row;
    uint32_t dst = dst_lane + (r % S) * S * p.plane_bytes + (r / S) * p.plane_cols * kPixelBytes;
    for (int c = c0; c < p.in_cols; c += col_step, src += step_bytes, dst += dst_step) {
      const bool ok = row_ok && static_cast<unsigned>(ix0 + c) < static_cast<unsigned>(p.in_w);
      ptx::cp_async_16(dst, ok ? src : fallback, ok ? 16 : 0);
    }
  }
}

// K x K, stride S, dilation 1: one block stages 32 channels of its input tile (and their
// weights) in shared memory, each thread computes T consecutive outputs of one row for 4 channels.
template <int K, int S, int T>
__global__ void __launch_bounds__(kMaxThreads, kMinBlocks)
    depthwise_tiled_kernel(const uint4* __restrict__ x, const float4* __restrict__ w,
                           const float4* __restrict__ bias, const uint2* __restrict__ residual,
                           uint2* __restrict__ y, DwParams p) {
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int kSpan = (T - 1) * S + K;
  constexpr int kWeightBytes = K * K * kGroup * 4, kBiasBytes = kGroup * 4;
  const int group = blockIdx.x;
  const int row_block = blockIdx.y / p.col_blocks;
  const int col_block = blockIdx.y - row_block * p.col_blocks;
  const int n = blockIdx.z;
  const int oy0 = row_block * p.block_rows, ox0 = col_block * p.block_cols;
  const int iy0 = oy0 * S - p.pad_top, ix0 = ox0 * S - p.pad_left;
  const uint32_t s_w = ptx::smem_u32(smem), s_x = s_w + kWeightBytes + kBiasBytes;
  const int tid = threadIdx.x, nthreads = blockDim.x;

  // Stage the group's weights ([tap][32] fp32, contiguous), its bias and the input tile.
  const char* wsrc =
      reinterpret_cast<const char*>(w) + static_cast<long long>(group) * kWeightBytes;
  for (int e = tid; e < kWeightBytes / 16; e += nthreads)
    ptx::cp_async_16(s_w + 16 * e, wsrc + 16 * e, 16);
  if (tid < kBiasBytes / 16)
    ptx::cp_async_16(s_w + kWeightBytes + 16 * tid, bias + group * (kGroup / 4) + tid, 16);
  const int chunk = group * 4 + (tid & 3);
  stage_input<S>(reinterpret_cast<const char*>(x) +
                     (static_cast<long long>(n) * p.in_h * p.in_w * p.chunks + chunk) * 16,
                 reinterpret_cast<const char*>(x), s_x, p, iy0, ix0, chunk < p.chunks, tid,
                 nthreads);
  ptx::cp_async_commit();

  const int quad = tid & 7, rest = tid >> 3;
  const int tile = rest & ((1 << p.tiles_log2) - 1), row = rest >> p.tiles_log2;
  float acc[T][4];
#pragma unroll
  for (int o = 0; o < T; ++o)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[o][c] = 0.0f;
  ptx::cp_async_wait<0>();
  __syncthreads();

  // Input (row * S + ky, tile * T * S + j) lives in plane (ky % S, j % S) at plane row
  // row + ky / S, plane column tile * T + j / S: every offset below but the row's is a constant.
  const unsigned char* base = smem + kWeightBytes + kBiasBytes + row * p.plane_cols * kPixelBytes +
                              tile * T * kPixelBytes + 8 * quad;
  const float4* ws = reinterpret_cast<const float4*>(smem) + quad;
#pragma unroll
  for (int ky = 0; ky < K; ++ky) {
    const unsigned char* in_row =
        base + (ky % S) * S * p.plane_bytes + (ky / S) * p.plane_cols * kPixelBytes;
    float4 wk[K];
#pragma unroll
    for (int kx = 0; kx < K; ++kx) wk[kx] = ws[(ky * K + kx) * (kGroup / 4)];
#pragma unroll
    for (int j = 0; j < kSpan; ++j) {
      float v[4];
      unpack_half4(
          *reinterpret_cast<const uint2*>(in_row + (j % S) * p.plane_bytes + (j / S) * kPixelBytes),
          v);
#pragma unroll
      for (int o = 0; o < T; ++o) {
        const int kx = j - o * S;
        if (kx < 0 || kx >= K) continue;
        acc[o][0] = fmaf(v[0], wk[kx].x, acc[o][0]);
        acc[o][1] = fmaf(v[1], wk[kx].y, acc[o][1]);
        acc[o][2] = fmaf(v[2], wk[kx].z, acc[o][2]);
        acc[o][3] = fmaf(v[3], wk[kx].w, acc[o][3]);
      }
    }
  }

  const int oy = oy0 + row, channel0 = group * kGroup + 4 * quad;
  if (oy >= p.out_h || channel0 >= 8 * p.chunks) return;
  const int ox_first = ox0 + tile * T;
  const long long pixel0 = (static_cast<long long>(n) * p.out_h + oy) * p.out_w + ox_first;
  const float4 b = reinterpret_cast<const float4*>(smem + kWeightBytes)[quad];
  store_outputs<T>(y, residual, pixel0 * 2 * p.chunks + group * 8 + quad, acc, b, p,
                   p.channels - channel0, p.out_w - ox_first);
}

// Any kernel size, stride and dilation: one output vector (8 channels) per thread.
__global__ void __launch_bounds__(kGenericThreads)
    depthwise_generic_kernel(const uint4* __restrict__ x, const float4* __restrict__ w,
                             const float4* __restrict__ bias, const uint2* __restrict__ residual,
                             uint2* __restrict__ y, DwParams p) {
  pdl_wait();
  int i = blockIdx.x * kGenericThreads + threadIdx.x;
  if (i >= p.total) return;
  const int chunk = i % p.chunks;
  i /= p.chunks;
  const int ox = i % p.out_w;
  i /= p.out_w;
  const int oy = i % p.out_h, n = i / p.out_h;
  const int taps = p.kh * p.kw;
  // Weights [group][tap][32]: this chunk's 8 at group * taps * 8 + tap * 8 + (chunk % 4) * 2.
  const float4* wc = w + static_cast<long long>(chunk / 4) * taps * 8 + (chunk % 4) * 2;
  float acc[2][1][4] = {};  // [half of the chunk][one output][channel]
  const uint4* image = x + static_cast<long long>(n) * p.in_h * p.in_w * p.chunks + chunk;
  for (int ky = 0; ky < p.kh; ++ky) {
    const int iy = oy * p.sh - p.pad_top + ky * p.dh;
    if (iy < 0 || iy >= p.in_h) continue;
    for (int kx = 0; kx < p.kw; ++kx) {
      const int ix = ox * p.sw - p.pad_left + kx * p.dw;
      if (ix < 0 || ix >= p.in_w) continue;
      const uint4 raw = __ldg(image + (static_cast<long long>(iy) * p.in_w + ix) * p.chunks);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float v[4];
        unpack_half4(h == 0 ? make_uint2(raw.x, raw.y) : make_uint2(raw.z, raw.w), v);
        const float4 wv = __ldg(wc + (ky * p.kw + kx) * 8 + h);
        acc[h][0][0] = fmaf(v[0], wv.x, acc[h][0][0]);
        acc[h][0][1] = fmaf(v[1], wv.y, acc[h][0][1]);
        acc[h][0][2] = fmaf(v[2], wv.z, acc[h][0][2]);
        acc[h][0][3] = fmaf(v[3], wv.w, acc[h][0][3]);
      }
    }
  }
  const long long pixel = (static_cast<long long>(n) * p.out_h + oy) * p.out_w + ox;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int quad = 2 * chunk + h;
    store_outputs<1>(y, residual, pixel * 2 * p.chunks + quad, acc[h], __ldg(bias + quad), p,
                     p.channels - 4 * quad, 1);
  }
}

bool is_depthwise(const ConvShape& s) {
  return s.conv.groups == s.in_c && s.out_c == s.in_c && !s.pool;
}

// Output columns per thread of the tiled kernel; 0: the generic kernel.
int tile_of(const ConvShape& s) {
  const ConvAttrs& a = s.conv;
  if (a.kernel_h != a.kernel_w || a.stride_h != a.stride_w || a.dilation_h != 1 ||
      a.dilation_w != 1)
    return 0;
  const int k = a.kernel_h, st = a.stride_h;
  if ((k != 3 && k != 5) || (st != 1 && st != 2)) return 0;
  return kTile;
}

// Dynamic shared memory of the tiled kernel: weights, bias, S * S planes of the input tile.
int smem_bytes_of(const DwParams& p, int k, int s) {
  return (k * k + 1) * kGroup * 4 + s * s * p.plane_bytes;
}

// The tiled kernel's block for the shape (the design note): up to 4 column tiles (2 at stride
// 2), as many rows as 224 threads allow, halved until the staged tile fits kSmemBudget (the
// smallest block, one row of one tile, takes < 12 KB at K = 5, S = 2).
void choose_geometry(DwParams& p, int k, int s, int tile) {
  const int col_tiles = (p.out_w + tile - 1) / tile;
  int tiles = 1;
  const int max_tiles = s == 1 ? 4 : 2;  // stride 2: 4 tiles' input is ~2x wider (the note)
  while (tiles < col_tiles && tiles < max_tiles) tiles *= 2;
  int log2 = 0;
  while ((1 << log2) < tiles) ++log2;
  int rows = std::min(p.out_h, kMaxThreads / (8 * tiles));
  for (;;) {
    p.tiles_log2 = log2;
    p.block_rows = rows;
    p.block_cols = tiles * tile;
    p.col_blocks = (p.out_w + p.block_cols - 1) / p.block_cols;
    p.in_rows = (rows - 1) * s + k;
    p.in_cols = (p.block_cols - 1) * s + k;
    p.plane_cols = (p.in_cols + s - 1) / s | 1;
    p.plane_bytes = (p.in_rows + s - 1) / s * p.plane_cols * kPixelBytes;
    if (smem_bytes_of(p, k, s) <= kSmemBudget || (rows == 1 && log2 == 0)) return;
    if (rows > 1)
      rows = (rows + 1) / 2;
    else
      --log2, tiles /= 2;
  }
}

// Grid: x = channel group (neighbouring blocks read the same pixels' other channels), y =
// spatial block, z = image.
template <int K, int S, int T>
void launch_tiled(const void* x, const float4* w, const float4* b, const void* r, void* y,
                  const DwParams& p, const dim3& grid, cudaStream_t stream) {
  const unsigned threads = 8u * (1u << p.tiles_log2) * p.block_rows;
  launch_kernel(depthwise_tiled_kernel<K, S, T>, grid, threads, smem_bytes_of(p, K, S), stream,
                static_cast<const uint4*>(x), w, b, static_cast<const uint2*>(r),
                static_cast<uint2*>(y), p);
}

}  // namespace

bool DepthwiseConvFp16::supports(const ConvShape& shape) {
  return is_depthwise(shape) && conv_shape_problem(shape).empty();
}

DepthwiseConvFp16::DepthwiseConvFp16(const ConvShape& shape, const float* weight, const float* bias)
    : shape_(shape) {
  if (!supports(shape))
    throw Error("depthwise_fp16: not a depthwise conv (groups == in == out channels, no pool)");
  shape_.derive();
  tile_ = tile_of(shape_);
  const int c = shape_.in_c, groups = (c + kGroup - 1) / kGroup;
  const int taps = shape_.conv.kernel_h * shape_.conv.kernel_w;
  // [group][tap][32] (the design note says why); channel = group * 32 + lane.
  std::vector<float> packed(static_cast<size_t>(groups) * taps * kGroup, 0.0f);
  for (int ch = 0; ch < c; ++ch)
    for (int tap = 0; tap < taps; ++tap)
      packed[(static_cast<size_t>(ch / kGroup) * taps + tap) * kGroup + ch % kGroup] =
          weight[static_cast<size_t>(ch) * taps + tap];
  std::vector<float> bias_padded(static_cast<size_t>(groups) * kGroup, 0.0f);
  if (bias != nullptr) std::copy(bias, bias + c, bias_padded.begin());
  weights_ = upload_fp32(packed);
  bias_ = upload_fp32(bias_padded);

  // Everything but the batch, once: the shape's extents and epilogue, and (tiled) the block
  // geometry choose_geometry derives from them.
  const ConvAttrs& a = shape_.conv;
  DwParams& p = params_;
  p.channels = shape_.in_c;
  p.chunks = padded_channels(shape_.in_c) / 8;
  p.in_h = shape_.in_h, p.in_w = shape_.in_w, p.out_h = shape_.out_h, p.out_w = shape_.out_w;
  p.kh = a.kernel_h, p.kw = a.kernel_w, p.sh = a.stride_h, p.sw = a.stride_w;
  p.dh = a.dilation_h, p.dw = a.dilation_w, p.pad_top = a.pad_h, p.pad_left = a.pad_w;
  p.clamp = epilogue_clamp_of(shape_);
  if (tile_ != 0) choose_geometry(p, a.kernel_h, a.stride_h, tile_);
}

std::string DepthwiseConvFp16::variant_name() const {
  if (tile_ == 0) return "dw generic";
  return "dw " + std::to_string(shape_.conv.kernel_h) + "x" + std::to_string(shape_.conv.kernel_w) +
         " s" + std::to_string(shape_.conv.stride_h) + " tile " + std::to_string(tile_);
}

void DepthwiseConvFp16::forward(const void* x, const void* residual, void* y, int batch,
                                cudaStream_t stream) const {
  if (batch <= 0) return;
  if (shape_.residual && residual == nullptr)
    throw Error("depthwise_fp16: the fused residual is missing");
  const ConvAttrs& a = shape_.conv;
  DwParams p = params_;
  const auto* w = static_cast<const float4*>(weights_.get());
  const auto* b = static_cast<const float4*>(bias_.get());
  const void* r = shape_.residual ? residual : nullptr;
  if (tile_ == 0) {
    const long long total = static_cast<long long>(batch) * p.out_h * p.out_w * p.chunks;
    if (total >= (1LL << 31) - kGenericThreads)
      throw Error("depthwise_fp16: batch " + std::to_string(batch) + " too large (" +
                  std::to_string(total) + " threads)");
    p.total = static_cast<int>(total);
    const unsigned blocks =
        static_cast<unsigned>((p.total + kGenericThreads - 1) / kGenericThreads);
    launch_kernel(depthwise_generic_kernel, blocks, kGenericThreads, 0, stream,
                  static_cast<const uint4*>(x), w, b, static_cast<const uint2*>(r),
                  static_cast<uint2*>(y), p);
    return;
  }
  const long long spatial =
      static_cast<long long>(p.col_blocks) * ((p.out_h + p.block_rows - 1) / p.block_rows);
  if (batch > 65535 || spatial > 65535)
    throw Error("depthwise_fp16: batch " + std::to_string(batch) + " or the " +
                std::to_string(p.out_h) + "x" + std::to_string(p.out_w) +
                " output too large for the grid (65535 images, 65535 blocks per image)");
  const dim3 grid(static_cast<unsigned>((p.chunks * 8 + kGroup - 1) / kGroup),
                  static_cast<unsigned>(spatial), static_cast<unsigned>(batch));
  switch (a.kernel_h * 10 + a.stride_h) {
    case 31:
      launch_tiled<3, 1, kTile>(x, w, b, r, y, p, grid, stream);
      break;
    case 32:
      launch_tiled<3, 2, kTile>(x, w, b, r, y, p, grid, stream);
      break;
    case 51:
      launch_tiled<5, 1, kTile>(x, w, b, r, y, p, grid, stream);
      break;
    default:
      launch_tiled<5, 2, kTile>(x, w, b, r, y, p, grid, stream);
  }
}

}  // namespace cnnrt::cuda
