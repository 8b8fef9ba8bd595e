// int8 depthwise convolution (groups == in_c == out_c) — design note.
//
// What bounds it.  As for fp16 (depthwise.cu's note): k*k multiply-adds per output channel, every
// input element read k*k times, few bytes to move (int8 moves half of fp16's), so the instruction
// stream and the loads in flight decide.  The kernel this one replaced (one thread = 16 channels
// of one pixel, 16-byte loads straight from global memory) spent per multiply-add two byte
// extractions and an IMAD, and waited on each tap's load: 1.1-2.9x slower than the staged fp16
// kernel on EfficientNet-Lite0 (H100, batch 64), though it moves half the bytes.
//
// The arithmetic.  IDP4A (__dp4a) sums four int8 products into an int32 in one instruction;
// depthwise has no reduction over channels, so the four bytes it multiplies must be four TAPS of
// one channel, not four channels of one pixel.  The accumulator stays an exact int32 (no fp32
// at all, so no 2^24 argument is needed: |sum| <= k*k*128*128 plus the bias), then the shared
// epilogue per channel (epilogue_s8.cuh's requantize / dequantize, what int8_output /
// float_output apply, with the bias and multiplier loaded once per thread): bit for bit
// ref::conv2d_int8 by construction.  fp32 FMAs were the other candidate (exact up to 1023 taps);
// they cost one FMA per product plus ~2 instructions per input byte to convert it (PRMT + FADD
// magic), more instructions per product than fp16's own kernel, so they would not have met the
// goal.
//
// Structure (each choice, and why):
// 1. Staging as depthwise.cu: the block's input tile (32 channels = 32 bytes a pixel) goes to
//    shared memory with 16-byte cp.async, all loads in flight at once; the copy's zero fill
//    (src-size 0) is the padding (any top/left pad; bottom/right is wherever the output ends) and
//    the channels past pad16(C), so the tap loop has no bounds check and every shared offset but
//    the row's is a compile-time constant.  Stride 2 keeps the staged rows in two parity planes
//    so a thread's kernel rows are consecutive plane rows (columns are not split: a dp4a window
//    wants consecutive columns).
// 2. Thread = 4 channels (one 32-bit word of a pixel) x kTile = 8 consecutive outputs of a row.
//    Per kernel row it loads the (8-1)*S + K pixels its outputs read, rounded up to whole groups
//    of 4 (12 at stride 1, 20 at stride 2: LDS.32 each) and transposes every 4 pixels x 4
//    channels with 8 PRMTs into one word per channel holding 4 consecutive columns.  Output o's
//    window starts at column o*S, at byte a = o*S % 4 of such a word; instead of shifting the
//    inputs per output, the weights come pre-shifted for every a (host packing): window a is
//    ceil((a + K) / 4) dp4a against words (0..0, w0, .., w_{K-1}, 0..0).  So 5x5 stride 1 costs
//    2 dp4a per output channel and kernel row (62% of the products useful), 3x3 1.5 (50%), and
//    each transposed word feeds up to 3 outputs.  kTile = 8, a multiple of 4, keeps every a a
//    compile-time constant; the cost is 1/8 of the threads idle on 7- and 14-wide maps.
// 3. Weights: per channel group of 32, [ky][channel % 4][16-byte chunk][quad] words, shifted as
//    above, staged once per block by cp.async and read as LDS.128 per kernel row: the 8 quads
//    of a quarter warp read 128 contiguous bytes (no conflict), the rest of the warp the same
//    bytes (broadcast).  5 KB a group at 5x5 stride 1.
// 4. Block = 8 quads (fastest) x rows x tiles, <= 256 threads; grid x = channel group (blocks
//    reading the same pixels' other channels run together), y = spatial block, z = image.
//    rows and tiles come from a cost model (choose_tiling: threads x their work + copies, over
//    every shape that fits 48 KB, no opt-in), which mostly divides the map exactly: 112 wide
//    -> 2 tiles x 16 rows, 56 at stride 2 -> 7 tiles x 4 rows, 14 -> 2 x 14, 7 -> 1 x 7.
// 5. Bank conflicts: a quarter warp reads 32 contiguous bytes of one pixel; the next quarters
//    are the next output rows, and a plane row is plane_cols = in_cols + 1 = 1 mod 4 pixels
//    long, i.e. 32 bytes mod 128 apart: conflict-free wherever a warp's 4 quarters are 4 rows.
// 6. __launch_bounds__(256, 4): <= 64 registers (32 accumulators, <= 20 transposed words),
//    32 warps per SM, at the price of <= 28 bytes of spills per thread (ptxas warns).  Measured
//    against (256, 3) = 80 registers, (224, 4) = 72 and (256, 2) = 128: 64 is fastest on 10 of
//    the 12 layers, up to 12% on the 3x3 stride-1 ones (ncu on b9 at 80: 21 warps per SM,
//    issue slots 55% busy, long waits on the staged tile).  The epilogue loads a thread's 4
//    biases and multipliers once for its 8 outputs and runs branch-free (dead channels masked).
//
// Predicted, then measured.  Predicted ~2x over fp16 on the 5x5 layers from the dp4a count
// alone; ncu on b9 says why it is not: 11.5 M instructions against fp16's 14.4 M, of which
// only 26% are dp4a — the transposes (PRMT, 12%), the LDS (9%), the epilogue (~22%: I2F, FMUL,
// F2I and the clamp per output channel, as every int8 kernel) and the per-block prologue and
// staging make up the rest.  Measured (H100 SXM, batch 64, a stand-alone harness around this
// file and depthwise.cu, median of 40 launches, inputs rotated over > 256 MB so L2 holds none;
// `cnnrt profile` inside the network will differ), ms int8 / fp16 on the same shape:
//   b0 3x3 s1 32 ch 112²    0.0376 / 0.044       b1 3x3 s2 96 ch 112²   0.0465 / 0.075
//   b2 3x3 s1 144 ch 56²    0.0482 / 0.053       b3 5x5 s2 144 ch 56²   0.0302 / 0.043
//   b4 5x5 s1 240 ch 28²    0.0296 / 0.036       b5 3x3 s2 240 ch 28²   0.0133 / 0.016
//   b6/b7 3x3 s1 480 ch 14² 0.0137 / 0.0137      b8 5x5 s1 480 ch 14²   0.0170 / 0.019
//   b9/b10 5x5 s1 672 14²   0.0218 / 0.0256      b11 5x5 s2 672 ch 14²  0.0121 / 0.017
//   b12-14 5x5 s1 1152 7²   0.0135 / 0.0146      b15 3x3 s1 1152 ch 7²  0.0108 / 0.0109
// (fp32 output, the graph-output variant: 3-25% slower, 4x the bytes stored.)  Every layer at or
// below fp16, the stride-2 ones well below; b6/b7 and b15 only level.  What is left: those are
// bound by per-thread fixed costs (prologue, staging, epilogue ~55% of their instructions) and
// 1/8 idle columns on 14- and 7-wide maps; staging the tile channel-major (transposed once per
// block, not per reading thread) would drop the PRMTs and 3/4 of the LDS.
//
// Every other shape (any kernel, stride, dilation) takes the generic kernel below: one thread =
// 16 channels of one output pixel, weights [kh][kw][pad16(C)], 32-bit indices within a launch
// (a launch takes as many samples as keep its grid below 2^30).  Correct everywhere, not tuned.
#include <algorithm>
#include <climits>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/conv/epilogue_s8.cuh"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace {

// --- the staged kernel ---------------------------------------------------------------------

constexpr int kTile = 8;                // output columns per thread, a multiple of 4 (note, 2)
constexpr int kGroup = 32;              // channels per block: 8 quads of 4, one per thread
constexpr int kQuads = kGroup / 4;      // threads across a pixel's channels
constexpr int kPixelBytes = kGroup;     // one staged pixel: 32 int8 channels
constexpr int kMaxThreads = 256;        // 8 quads x rows x tiles
constexpr int kMinBlocks = 4;           // per SM: <= 64 registers, 32 warps (note, 6)
constexpr int kSmemBudget = 48 * 1024;  // per block; no opt-in attribute needed

// Pre-shifted weight words (note, 2): alignment i in [0, 4 / S) is window start a = i * S within
// a word of 4 columns; it takes ceil((a + K) / 4) words, laid out one alignment after another.
__host__ __device__ constexpr int window_words(int a, int k) { return (a + k + 3) / 4; }
__host__ __device__ constexpr int word_offset(int alignment, int k, int s) {
  int words = 0;
  for (int i = 0; i < alignment; ++i) words += window_words(i * s, k);
  return words;
}
// 16-byte chunks per (kernel row, channel): 5x5 s1 8 words -> 2, 3x3 s1 6 -> 2, s2 4 or 3 -> 1.
__host__ __device__ constexpr int weight_chunks(int k, int s) {
  return (word_offset(4 / s, k, s) + 3) / 4;
}
// dp4a per thread and kernel row: kTile outputs' windows, 4 channels.
__host__ __device__ constexpr int dp4a_per_row(int k, int s) {
  int n = 0;
  for (int o = 0; o < kTile; ++o) n += window_words(o * s % 4, k);
  return 4 * n;
}
// The last column group of 4 a thread's windows reach, relative to its first.
__host__ __device__ constexpr int last_group(int k, int s) {
  return (kTile - 1) * s / 4 + window_words((kTile - 1) * s % 4, k) - 1;
}
// A group's packed weights: [ky][channel % 4][chunk][quad][4 words].
__host__ __device__ constexpr int group_weight_bytes(int k, int s) {
  return k * 4 * weight_chunks(k, s) * kQuads * 16;
}

// The staged kernel's block geometry (choose_tiling), the same for every block of a launch.
struct DwTiling {
  int tiles = 0, rows = 0;  // column tiles of kTile outputs, output rows; threads = 8 x both
  int col_blocks = 0, row_blocks = 0;
  int in_rows = 0, in_cols = 0;         // the staged input extent
  int plane_cols = 0, plane_bytes = 0;  // a parity plane: [in_rows / S][plane_cols][32 bytes]
  int step_rows = 0, step_cols = 0;     // staging: pixels a thread advances, as (rows, columns)
  int smem_bytes = 0;
};

// Stage the block's input tile: thread -> (pixel, 16-byte half) = (tid / 2, tid % 2), advancing
// nthreads / 2 pixels a step (as rows and columns, no division in the loop).  Pixels outside the
// image and halves past pad16(C) are zero-filled by the copy (`fallback` is never read).
template <int S>
__device__ __forceinline__ void stage_input(uint32_t s_x, const int8_t* image,
                                            const int8_t* fallback, const S8Conv& p,
                                            const DwTiling& t, int iy0, int ix0, int channel0,
                                            int tid) {
  const int half = tid & 1, channel = channel0 + 16 * half;
  const bool half_ok = channel < p.in_stride;
  int pixel = tid >> 1;
  int r = pixel / t.in_cols, c = pixel - r * t.in_cols;
  while (r < t.in_rows) {
    const int iy = iy0 + r, ix = ix0 + c;
    const bool ok = half_ok && static_cast<unsigned>(iy) < static_cast<unsigned>(p.in_h) &&
                    static_cast<unsigned>(ix) < static_cast<unsigned>(p.in_w);
    const int8_t* src = ok ? image + (iy * p.in_w + ix) * p.in_stride + channel : fallback;
    const uint32_t dst =
        s_x + (r % S) * t.plane_bytes + ((r / S) * t.plane_cols + c) * kPixelBytes + 16 * half;
    ptx::cp_async_16(dst, src, ok ? 16 : 0);
    c += t.step_cols;
    r += t.step_rows;
    if (c >= t.in_cols) c -= t.in_cols, ++r;
  }
}

// 4 pixels' words (byte j = channel j) -> 4 channels' words (byte i = pixel i).
__device__ __forceinline__ void transpose4(const uint32_t (&px)[4], uint32_t (&ch)[4]) {
  const uint32_t lo01 = __byte_perm(px[0], px[1], 0x5140), hi01 = __byte_perm(px[0], px[1], 0x7362);
  const uint32_t lo23 = __byte_perm(px[2], px[3], 0x5140), hi23 = __byte_perm(px[2], px[3], 0x7362);
  ch[0] = __byte_perm(lo01, lo23, 0x5410);
  ch[1] = __byte_perm(lo01, lo23, 0x7632);
  ch[2] = __byte_perm(hi01, hi23, 0x5410);
  ch[3] = __byte_perm(hi01, hi23, 0x7632);
}

// K x K, stride S, dilation 1.  x, y: this launch's first image; image n = blockIdx.z.
template <int K, int S, bool kFloat>
__global__ void __launch_bounds__(kMaxThreads, kMinBlocks)
    depthwise_s8_staged(const S8Conv p, const DwTiling t, const int8_t* __restrict__ x,
                        const int8_t* __restrict__ w, void* __restrict__ y) {
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int kChunks = weight_chunks(K, S), kWeightBytes = group_weight_bytes(K, S);
  constexpr int kGroups = (kTile * S + 4) / 4;  // column groups of 4 a thread reads per row
  static_assert(last_group(K, S) < kGroups && kTile % 4 == 0, "windows past the staged columns");
  const int group = blockIdx.x, n = blockIdx.z;
  const int row_block = blockIdx.y / t.col_blocks;
  const int col_block = blockIdx.y - row_block * t.col_blocks;
  const int oy0 = row_block * t.rows, ox0 = col_block * t.tiles * kTile;
  const int tid = threadIdx.x, nthreads = blockDim.x;
  const uint32_t s_w = ptx::smem_u32(smem), s_x = s_w + kWeightBytes;

  const int8_t* wsrc = w + static_cast<long long>(group) * kWeightBytes;
  for (int e = tid; e < kWeightBytes / 16; e += nthreads)
    ptx::cp_async_16(s_w + 16 * e, wsrc + 16 * e, 16);
  stage_input<S>(s_x, x + static_cast<long long>(n) * p.in_h * p.in_w * p.in_stride, x, p, t,
                 oy0 * S - p.pad_h, ox0 * S - p.pad_w, group * kGroup, tid);
  ptx::cp_async_commit();

  const int quad = tid & (kQuads - 1), rest = tid >> 3;
  const int tile = rest / t.rows, row = rest - tile * t.rows;
  int acc[kTile][4];
#pragma unroll
  for (int o = 0; o < kTile; ++o)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[o][c] = 0;
  ptx::cp_async_wait<0>();
  __syncthreads();

  // Output row `row`, kernel row ky reads staged row row * S + ky: plane ky % S, plane row
  // row + ky / S.  The thread's columns start at tile * kTile * S, a multiple of 4.
  const unsigned char* base =
      smem + kWeightBytes + (row * t.plane_cols + tile * kTile * S) * kPixelBytes + 4 * quad;
  const uint4* ws = reinterpret_cast<const uint4*>(smem) + quad;
#pragma unroll
  for (int ky = 0; ky < K; ++ky) {
    const unsigned char* in_row =
        base + (ky % S) * t.plane_bytes + (ky / S) * t.plane_cols * kPixelBytes;
    uint32_t cols[kGroups][4];  // [column group][channel]: byte i = column 4 * group + i
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      uint32_t px[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        px[i] = *reinterpret_cast<const uint32_t*>(in_row + (4 * g + i) * kPixelBytes);
      transpose4(px, cols[g]);
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      uint32_t wk[4 * kChunks];
#pragma unroll
      for (int h = 0; h < kChunks; ++h) {
        const uint4 v = ws[((ky * 4 + c) * kChunks + h) * kQuads];
        wk[4 * h] = v.x, wk[4 * h + 1] = v.y, wk[4 * h + 2] = v.z, wk[4 * h + 3] = v.w;
      }
      // Alignment by alignment, `first` (its first weight word) a running sum the unrolled
      // loops fold to constants, so wk stays in registers.
      int first = 0;
#pragma unroll
      for (int a = 0; a < 4; a += S) {
#pragma unroll
        for (int o = 0; o < kTile; ++o) {
          if (o * S % 4 != a) continue;
#pragma unroll
          for (int j = 0; j < window_words(a, K); ++j)
            acc[o][c] = __dp4a(static_cast<int>(cols[o * S / 4 + j][c]),
                               static_cast<int>(wk[first + j]), acc[o][c]);
        }
        first += window_words(a, K);
      }
    }
  }

  const int oy = oy0 + row, ox = ox0 + tile * kTile, channel0 = group * kGroup + 4 * quad;
  if (oy >= p.out_h || ox >= p.out_w || channel0 >= p.out_stride) return;
  const int count = p.out_w - ox;  // outputs o < count exist
  const long long pixel0 = (static_cast<long long>(n) * p.out_h + oy) * p.out_w + ox;
  // epilogue_s8.cuh's int8_output / float_output spelt out (its requantize / dequantize), their
  // per-channel operands loaded once for the 8 outputs (the compiler does not merge the 8 loads
  // itself): channels >= C write zero. Branch-free: every channel's value is computed (dead ones
  // from zeros) and then masked.
  bool live[4];
  int bias[4];
  float scale[4];
  uint32_t live_bytes = 0;
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    live[c] = channel0 + c < p.out_c;
    bias[c] = live[c] ? __ldg(p.bias + channel0 + c) : 0;
    scale[c] = live[c] ? __ldg(p.multiplier + channel0 + c) : 0.0f;
    live_bytes |= live[c] ? 0xffu << (8 * c) : 0u;
  }
  if constexpr (kFloat) {
    float4* out =
        reinterpret_cast<float4*>(static_cast<float*>(y) + pixel0 * p.out_stride + channel0);
    const int step = p.out_stride / 4;  // float4s per pixel (out_stride = pad8(C))
#pragma unroll
    for (int o = 0; o < kTile; ++o) {
      float v[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const float value = s8::dequantize(acc[o][c] + bias[c], scale[c], p.float_lo, p.float_hi);
        v[c] = live[c] ? value : 0.0f;
      }
      if (o < count) out[o * step] = make_float4(v[0], v[1], v[2], v[3]);
    }
  } else {
    uint32_t* out =
        reinterpret_cast<uint32_t*>(static_cast<int8_t*>(y) + pixel0 * p.out_stride + channel0);
    const int step = p.out_stride / 4;  // words per pixel (out_stride = pad16(C))
#pragma unroll
    for (int o = 0; o < kTile; ++o) {
      uint32_t word = 0;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int8_t q = s8::requantize(acc[o][c] + bias[c], scale[c], p.lo, p.hi);
        word |= static_cast<uint32_t>(static_cast<uint8_t>(q)) << (8 * c);
      }
      if (o < count) out[o * step] = word & live_bytes;
    }
  }
}

// Shapes the staged kernel serves: square 3x3 or 5x5, stride 1 or 2, dilation 1.
bool staged_shape(const S8Conv& c) {
  return c.kh == c.kw && (c.kh == 3 || c.kh == 5) && c.stride_h == c.stride_w &&
         (c.stride_h == 1 || c.stride_h == 2) && c.dil_h == 1 && c.dil_w == 1;
}

DwTiling tiling_of(const S8Conv& c, int tiles, int rows) {
  const int k = c.kh, s = c.stride_h;
  DwTiling t;
  t.tiles = tiles;
  t.rows = rows;
  t.col_blocks = (c.out_w + tiles * kTile - 1) / (tiles * kTile);
  t.row_blocks = (c.out_h + rows - 1) / rows;
  t.in_rows = (rows - 1) * s + k;
  t.in_cols = tiles * kTile * s + 4;  // the last tile's (kTile - 1) * S + K columns, in 4s
  t.plane_cols = t.in_cols + 1;       // in_cols = 0 mod 4: rows 32 bytes mod 128 apart (note, 5)
  t.plane_bytes = (t.in_rows + s - 1) / s * t.plane_cols * kPixelBytes;
  const int step = 4 * tiles * rows;  // nthreads / 2 pixels
  t.step_rows = step / t.in_cols;
  t.step_cols = step % t.in_cols;
  t.smem_bytes = group_weight_bytes(k, s) + s * t.plane_bytes;
  return t;
}

// The block shape of least estimated cost per image: every thread's tap loop (idle ones
// included: rows or tiles past the map) plus the staging copies, plus a fixed cost per block;
// ties go to more threads.  Costs in issued instructions per thread, roughly counted (note, 2).
DwTiling choose_tiling(const S8Conv& c) {
  const int k = c.kh, s = c.stride_h, groups = (kTile * s + 4) / 4;
  // Per kernel row: dp4a at 2 issue cycles, an LDS and 2 PRMTs per pixel, the weights' LDS.128;
  // then ~10 instructions of epilogue per output channel.
  const long long per_thread =
      k * (2LL * dp4a_per_row(k, s) + 12 * groups + 4 * weight_chunks(k, s)) + 4 * kTile * 10;
  const int col_tiles = (c.out_w + kTile - 1) / kTile;
  DwTiling best;
  long long best_cost = -1;
  for (int tiles = 1; tiles <= std::min(col_tiles, kMaxThreads / 8); ++tiles)
    for (int rows = 1; rows <= std::min(c.out_h, kMaxThreads / (8 * tiles)); ++rows) {
      const DwTiling t = tiling_of(c, tiles, rows);
      if (t.smem_bytes > kSmemBudget) continue;
      const long long blocks = static_cast<long long>(t.col_blocks) * t.row_blocks;
      const long long cost =
          blocks * (8LL * tiles * rows * per_thread + 2LL * t.in_rows * t.in_cols * 10 + 4000);
      if (best_cost < 0 || cost < best_cost ||
          (cost == best_cost && tiles * rows > best.tiles * best.rows))
        best = t, best_cost = cost;
    }
  return best;  // one row of one tile always fits (< 12 KB)
}

template <int K, int S>
void launch_staged(const S8Conv& conv, const DwTiling& t, const int8_t* x, void* y,
                   const dim3& grid, cudaStream_t stream) {
  const unsigned threads = 8u * t.tiles * t.rows;
  if (conv.float_output)
    launch_kernel(depthwise_s8_staged<K, S, true>, grid, threads, t.smem_bytes, stream, conv, t, x,
                  conv.weight, y);
  else
    launch_kernel(depthwise_s8_staged<K, S, false>, grid, threads, t.smem_bytes, stream, conv, t, x,
                  conv.weight, y);
}

// --- the generic kernel --------------------------------------------------------------------

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1 << 20;

// Byte b of `word` as a signed value.
__device__ __forceinline__ int lane_s8(uint32_t word, int b) {
  return static_cast<int>(word << (24 - 8 * b)) >> 24;
}

__device__ __forceinline__ void multiply_add(int (&acc)[16], const uint4& x, const uint4& w) {
  const uint32_t xs[4] = {x.x, x.y, x.z, x.w}, ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int k = 0; k < 4; ++k)
#pragma unroll
    for (int b = 0; b < 4; ++b) acc[4 * k + b] += lane_s8(xs[k], b) * lane_s8(ws[k], b);
}

// groups16 = pad16(C) / 16 channel groups per pixel; `total` = batch·out_h·out_w·groups16.
// Integer sums over the window's valid taps (order-free), then the shared epilogue; padding
// lanes compute zeros and write zeros.
template <bool kFloat>
__global__ void depthwise_s8_kernel(const S8Conv p, const uint4* __restrict__ x,
                                    const uint4* __restrict__ w, void* __restrict__ y, int total,
                                    int groups16) {
  pdl_wait();
  for (int index = blockIdx.x * blockDim.x + threadIdx.x; index < total;
       index += gridDim.x * blockDim.x) {
    const int group = index % groups16;
    int pixel = index / groups16;
    const int ox = pixel % p.out_w;
    pixel /= p.out_w;
    const int oy = pixel % p.out_h;
    const int n = pixel / p.out_h;
    const uint4* image = x + static_cast<size_t>(n) * p.in_h * p.in_w * groups16 + group;
    int acc[16] = {};
    for (int r = 0; r < p.kh; ++r) {
      const int iy = oy * p.stride_h - p.pad_h + r * p.dil_h;
      if (iy < 0 || iy >= p.in_h) continue;
      for (int s = 0; s < p.kw; ++s) {
        const int ix = ox * p.stride_w - p.pad_w + s * p.dil_w;
        if (ix < 0 || ix >= p.in_w) continue;
        multiply_add(acc, __ldg(image + (iy * p.in_w + ix) * groups16),
                     __ldg(w + (r * p.kw + s) * groups16 + group));
      }
    }
    const int first = group * 16;
    if constexpr (kFloat) {
      // fp32 NHWC/8 rows: the last group may hold fewer than 16 lanes of the row.
      float* out = static_cast<float*>(y) + static_cast<size_t>(index / groups16) * p.out_stride;
#pragma unroll
      for (int j = 0; j < 16; ++j)
        if (first + j < p.out_stride) out[first + j] = s8::float_output(p, first + j, acc[j]);
    } else {
      uint32_t words[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        uint32_t word = 0;
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          const int j = 4 * k + b;
          word |= static_cast<uint32_t>(static_cast<uint8_t>(s8::int8_output(p, first + j, acc[j])))
                  << (8 * b);
        }
        words[k] = word;
      }
      static_cast<uint4*>(y)[index] = make_uint4(words[0], words[1], words[2], words[3]);
    }
  }
}

void launch_generic(const S8Conv& conv, const void* x, void* y, int batch, cudaStream_t stream) {
  const int groups16 = conv.in_stride / 16;
  const int64_t per_sample = static_cast<int64_t>(conv.out_h) * conv.out_w * groups16;
  const int64_t in_per_sample = static_cast<int64_t>(conv.in_h) * conv.in_w * groups16;
  if (per_sample > INT_MAX / 2 || in_per_sample > INT_MAX)
    throw Error("conv_s8_depthwise: one sample exceeds 32-bit indexing");
  // 32-bit indices within a launch: as many samples per launch as keep the grid below 2^30 (so
  // the grid-stride loop's index + stride stays below 2^31 too).
  const int chunk =
      static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(batch, (INT_MAX / 2) / per_sample)));
  const auto* w = reinterpret_cast<const uint4*>(conv.weight);
  const size_t out_bytes = static_cast<size_t>(conv.out_h) * conv.out_w * conv.out_stride *
                           (conv.float_output ? sizeof(float) : 1);
  for (int first = 0; first < batch; first += chunk) {
    const int samples = std::min(chunk, batch - first);
    const int total = static_cast<int>(samples * per_sample);
    const int blocks = static_cast<int>(
        std::min<int64_t>((static_cast<int64_t>(total) + kThreads - 1) / kThreads, kMaxBlocks));
    const auto* in = static_cast<const uint4*>(x) + first * in_per_sample;
    void* out = static_cast<char*>(y) + first * out_bytes;
    if (conv.float_output)
      launch_kernel(depthwise_s8_kernel<true>, blocks, kThreads, 0, stream, conv, in, w, out, total,
                    groups16);
    else
      launch_kernel(depthwise_s8_kernel<false>, blocks, kThreads, 0, stream, conv, in, w, out,
                    total, groups16);
  }
}

}  // namespace

bool depthwise_s8_serves(const S8Conv& conv) {
  return conv.groups == conv.in_c && conv.in_c == conv.out_c && conv.in_c > 0 &&
         conv.in_stride == padded16(conv.in_c) &&
         (conv.float_output ? conv.out_stride == (conv.out_c + 7) / 8 * 8
                            : conv.out_stride == padded16(conv.out_c));
}

std::vector<int8_t> depthwise_s8_weights(const S8Conv& conv, const int8_t* weight) {
  const int channels = conv.out_c, kh = conv.kh, kw = conv.kw;
  if (!staged_shape(conv)) {  // the generic kernel's [kh][kw][pad16(C)]
    const int stride = padded16(channels);
    std::vector<int8_t> packed(static_cast<size_t>(kh) * kw * stride, 0);
    for (int c = 0; c < channels; ++c)
      for (int tap = 0; tap < kh * kw; ++tap)
        packed[static_cast<size_t>(tap) * stride + c] =
            weight[static_cast<size_t>(c) * kh * kw + tap];
    return packed;
  }
  // The staged kernel's: per group of 32 channels [ky][channel % 4][chunk][quad][word][byte],
  // word `index` of (ky, channel) is word j of alignment i's window: byte b holds tap
  // kx = 4 j + b - i * S where 0 <= kx < K, else zero (note, 2 and 3).
  const int k = kh, s = conv.stride_h, chunks = weight_chunks(k, s);
  const int groups = (padded16(channels) + kGroup - 1) / kGroup;
  std::vector<int8_t> packed(static_cast<size_t>(groups) * group_weight_bytes(k, s), 0);
  for (int c = 0; c < channels; ++c)
    for (int ky = 0; ky < k; ++ky)
      for (int i = 0; i < 4 / s; ++i)
        for (int j = 0; j < window_words(i * s, k); ++j) {
          const int index = word_offset(i, k, s) + j;
          const size_t at =
              ((((static_cast<size_t>(c / kGroup) * k + ky) * 4 + c % 4) * chunks + index / 4) *
                   kQuads +
               c % kGroup / 4) *
                  16 +
              (index % 4) * 4;
          for (int b = 0; b < 4; ++b) {
            const int kx = 4 * j + b - i * s;
            if (kx >= 0 && kx < k)
              packed[at + b] = weight[(static_cast<size_t>(c) * k + ky) * k + kx];
          }
        }
  return packed;
}

void conv_s8_depthwise(const S8Conv& conv, const void* x, void* y, int batch, cudaStream_t stream) {
  if (!depthwise_s8_serves(conv)) throw Error("conv_s8_depthwise: not a depthwise int8 conv");
  if (batch <= 0 || conv.out_h <= 0 || conv.out_w <= 0) return;
  if (!staged_shape(conv)) {
    launch_generic(conv, x, y, batch, stream);
    return;
  }
  // 32-bit offsets within an image, 64-bit to the image; grid z (images) <= 65535 a launch.
  const int64_t in_bytes = static_cast<int64_t>(conv.in_h) * conv.in_w * conv.in_stride;
  const int64_t out_bytes = static_cast<int64_t>(conv.out_h) * conv.out_w * conv.out_stride *
                            (conv.float_output ? sizeof(float) : 1);
  if (in_bytes > INT_MAX || out_bytes > INT_MAX)
    throw Error("conv_s8_depthwise: one sample exceeds 32-bit indexing");
  const DwTiling t = choose_tiling(conv);
  const long long spatial = static_cast<long long>(t.col_blocks) * t.row_blocks;
  if (spatial > 65535)
    throw Error("conv_s8_depthwise: the " + std::to_string(conv.out_h) + "x" +
                std::to_string(conv.out_w) + " output needs more than 65535 blocks per image");
  const unsigned channel_groups = static_cast<unsigned>((conv.in_stride + kGroup - 1) / kGroup);
  constexpr int kMaxImages = 65535;
  for (int first = 0; first < batch; first += kMaxImages) {
    const int images = std::min(kMaxImages, batch - first);
    const dim3 grid(channel_groups, static_cast<unsigned>(spatial), static_cast<unsigned>(images));
    const int8_t* in = static_cast<const int8_t*>(x) + first * in_bytes;
    void* out = static_cast<char*>(y) + first * out_bytes;
    switch (conv.kh * 10 + conv.stride_h) {
      case 31:
        launch_staged<3, 1>(conv, t, in, out, grid, stream);
        break;
      case 32:
        launch_staged<3, 2>(conv, t, in, out, grid, stream);
        break;
      case 51:
        launch_staged<5, 1>(conv, t, in, out, grid, stream);
        break;
      default:
        launch_staged<5, 2>(conv, t, in, out, grid, stream);
    }
  }
}

}  // namespace cnnrt::cuda
