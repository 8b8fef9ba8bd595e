// 2:4 sparse fp16 linear: a weight-streaming GEMV over the kept half of a 2:4 weight.
//
// Regime.  At batch ≤ 8 a linear layer is bound by the bytes of its weight, read once (the dense
// GEMV of linear_fp16.cu: AlexNet fc6 streams 75.5 MB).  A 2:4 weight needs its kept values
// (half the dense fp16 bytes) and one 4-bit nibble per group of 4 (1/8 of the kept-value bytes):
// 1.125 bytes per dense weight instead of 2, so the bandwidth bound is 2 / 1.125 = 1.78× the
// dense GEMV.  fc6: 42.5 MB (dense 75.5), fc7: 18.9 MB (dense 33.6).  Tensor cores do not help
// here (at batch 1 mma.sp would waste 7/8 of its N), so this is a CUDA-core kernel that spends
// its instructions on not disturbing the stream.
//
// Layout (Sparse24Geometry, built once by the entry's factory from sparse24::Compressed).  A row
// is a sequence of 576-byte slabs; lane l of a warp owns chunk l of a slab: 16 bytes of values
// (4 groups × the fp16 pair kept0, kept1) at 16·l and its 4 nibbles (one uint16) at 512 + 2·l.
// So a warp moves a slab with one coalesced 16-byte copy per lane (512 B) and four more for the
// metadata (64 B) — the dense GEMV's 512-byte chunk, with the metadata interleaved per slab so a
// slab is one contiguous 576-byte span.  The last slab of a row may be narrower (8, 16 or 24
// lanes: values then metadata, packed the same way), which bounds a row's padding to 31 groups
// (124 features) instead of a whole slab; row_bytes stays a multiple of 16.  AlexNet's rows need
// none: fc6 18 slabs, fc7 8.  Bytes read per dense weight: values 1, metadata 0.125, padding 0
// for fc6/fc7; plus the fp32 bias (16 KB).
//
// The input of a flatten (Sparse24Input, linear_sparse24.h).  The groups are 4 consecutive
// features in PyTorch's (c, h, w) order, but x holds the flatten in (h, w, c) order, so group g of
// channel c needs x at (4q + i)·C + c.  Options weighed (fc6 at batch 1):
//  * a permuted column index per kept value: +2 bytes per kept value = +1 byte per dense weight,
//    2.125 bytes in all — slower than the dense GEMV.  Rejected.
//  * a permute kernel writing x in (c, h, w) order first: one more launch (~2–3 µs, a quarter of
//    fc7's whole budget).  Staging x permuted in shared memory: 147 KB per block at batch 8.
//  * chosen: compute the map in the kernel (zero extra weight bytes).  When H·W % 4 == 0 every
//    group is 4 pixels of one channel; slots are ordered pixel-quad-major (t = q·C + c) so lanes
//    with consecutive slots read consecutive channels of the same pixels: a warp's load of one
//    kept input touches at most 3 64-byte segments of x (the two kept pixels of a group are 2 of
//    its 4) — L1 hits, x is 18 KB at fc6 batch 1.  One FastDiv (multiply-high + shift) per slab
//    splits t into (q, c); a lane's next 3 slots follow by adding 32 channels (QuadMajorWalk,
//    C ≥ 32).  Other flattens (groups straddle channels, or C < 32) map each feature alone
//    (Gather: correct for any shape, not tuned).
//
// Compute per group and sample, one row per warp (up to 3 samples): the two kept inputs are
// loaded by their indices (flatten) or picked from the group's 4 (one 8-byte load, one prmt byte
// permute whose selector comes from the nibble), converted to float2, two fp32 FMAs against the
// kept weights.  With 2 rows per warp the group's 4 inputs are loaded once and picked per row.
// (Staged x: every kind takes the Vector math, from shared memory.)
// SASS (sm_90, batch 1): 19 (Vector) and 23 (QuadMajor) instructions per group, 46 for Gather,
// against the ~45 an H100 SM can issue per group while DRAM delivers 4.5 bytes per group.
//
// Work split (after the dense GEMV, linear_fp16.cu, whose measurements set it): a block of 8
// warps owns 8 / S row groups of R rows (R = 1 up to 3 samples, then 2: each x load feeds R
// rows); a row group's slabs are cut into S contiguous ranges, one per warp (S from
// sparse24_choose_split: ≥ 24 warps per SM).  A warp streams its range through a 4.5 KB
// shared-memory stage (8 / R slabs × R rows) with cp.async (bypassing L1: each weight byte is
// used once; round_of_slabs says why not register loads): the clean part of the range in half
// rounds, double-buffered — the next half round's copies in flight while one is computed — and
// a guarded tail in single half rounds.  With no weights held in registers batch 1 takes 48–64
// registers and 37 KB of shared memory per block: 4 blocks (32 warps) per SM, so fc6's and fc7's
// 4096 row warps are resident in one wave.  fc7 (8 slabs a row) is two half rounds per warp, fc6
// (18) four and a tail of 2 slabs.  x stays on the read-only L1 path.  Per-warp sums are
// shuffled, S partials meet in shared memory with the fp32 bias and the ReLU (NaN kept).
//
// Staged x (batch-1 passes, where 4 blocks still fit an SM: Sparse24Weights decides once; the
// copy is linear_sparse24_stage.cuh, shared with the mma.sp GEMV).  ncu
// on an H100 (docs/PERFORMANCE.md run 22) found the kernel latency-bound, not bandwidth-bound:
// 0.41 instructions issued per scheduler cycle, 41 % of the stall cycles waiting on L1TEX — the
// x loads, each behind its nibble and index (30 % of them missed L1).  So the block first copies
// the pass's x into shared memory in slot order (xs[4t + i] = element i of slot t's group: the
// flatten map is applied once per block, not once per row), and the math reads a group's inputs
// with one 8-byte shared load and one byte permute whatever the input kind.  Cost: fc6's 18 KB
// per block (4 × 55 KB of the 228 KB an H100 SM has) and one L2 read of x per block, issued after
// the warp's first weight copies so their DRAM latency covers it.  Predicted: fc6 26.4 → ~20 µs
// and fc7 12.7 → ~10.5 µs under ncu (fc6 ~1.45× the dense GEMV in the network).  Measured (run
// 23): fc6 24.5 µs, fc7 10.3; in the network fc6 1.19× and fc7 1.29× the dense GEMV (were 1.10×,
// 1.13×).  fc6 still moves only 1.8 TB/s at 0.45 issues per scheduler cycle: the remaining stalls
// sit on L1TEX, i.e. the cp.async waits for the weight stream itself — too few rounds ahead.
//
// Batch.  A pass holds P ≤ 8 samples (P = ceil(batch / passes), so 9 → 5 + 4, not 8 + 1); the
// kernel loops over the passes itself, one launch for any batch; every pass streams the weight
// again (above 8 the sparse tensor-core GEMM is the right tool, not this kernel).
//
// Predicted on an H100 at batch 1 (model fitted to the dense GEMV's H100 eager profile, fc6 30.2
// µs and fc7 15.8 µs: ≈ 4.3 µs fixed + bytes / 2.9 TB/s): fc6 ≈ 19 µs (1.6×), fc7 ≈ 11 µs (1.45×:
// the fixed part weighs more in a short kernel).  Measured (docs/PERFORMANCE.md run 21): fc6
// 1.10-1.34x, fc7 1.05-1.13x with the clean rounds double-buffered (1.04-1.26x before) — 1.53
// TB/s from DRAM where the dense GEMV reaches 2.5: latency-bound, not the bandwidth bound this
// note assumed.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/gemv_common.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/linear_sparse24.h"
#include "kernels/cuda/linear_sparse24_stage.cuh"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {

// --- kernel --------------------------------------------------------------------------------------

namespace {

constexpr int kBlockWarps = 8;  // warps per block; the S warps of a row group are in it
constexpr int kMaxSplit = kBlockWarps;
constexpr int kTargetWarpsPerSm = 24;  // as the dense GEMV: enough loads in flight per SM

// Rows per warp (each x load feeds them all) and slabs per round, by samples per pass.  Two rows
// from 4 samples on (4 rows, the dense GEMV's choice at 5–8, spilled when the weights were still
// loaded into registers; not retried with the shared-memory stage).
constexpr int rows_per_warp(int pass) { return pass <= 3 ? 1 : 2; }
constexpr int unroll_for(int rows) { return 8 / rows; }
// Blocks that must fit on an SM at once (caps registers at 64 / 80 / 128; ptxas -v reports no
// spill for any variant on sm_80 and sm_90).  At batch 1 AlexNet's 4096 row warps are 31 per SM
// on an H100: all resident in one wave only at ≤ 64 registers — a second, partial wave would add
// a whole DRAM round trip to fc7's ~10 µs.
constexpr int min_blocks_per_sm(int pass) { return pass <= 2 ? 4 : (pass <= 4 ? 3 : 2); }

// x[index] of one sample (index ≥ 0): a 32-bit index, so the address is one wide multiply-add.
__device__ __forceinline__ uint32_t load_x2(const __half* xs, int index) {
  return __ldg(reinterpret_cast<const unsigned short*>(xs) + static_cast<uint32_t>(index));
}

__device__ __forceinline__ uint32_t byte_perm(uint32_t lo, uint32_t hi, uint32_t selector) {
  return __byte_perm(lo, hi, selector);
}
__device__ __forceinline__ float2 half2_bits_to_float2(uint32_t bits) {
  __half2 h;
  memcpy(&h, &bits, sizeof(bits));
  return __half22float2(h);
}

// The 4 inputs of slot t's group in one sample as {hi:lo} words (zeros where the slot is
// padding or the feature is past in).  xs: the sample's row of x.  Used where one load of the
// 4 inputs serves several rows (kRows > 1) or is one 8-byte load anyway (Vector).
template <Sparse24Input kInput>
__device__ __forceinline__ void load_group_inputs(const Sparse24Geometry& g, const __half* xs,
                                                  int t, bool live, uint32_t& lo, uint32_t& hi) {
  lo = hi = 0u;
  if (!live) return;
  if constexpr (kInput == Sparse24Input::Vector) {
    // 8-byte aligned: x rows are multiples of 16 bytes.
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(xs + 4 * t));
    lo = v.x;
    hi = v.y;
  } else {
    uint32_t h[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int at = kInput == Sparse24Input::QuadMajor ? g.quad_major_x(t, i) : g.gather_x(t, i);
      h[i] = at >= 0 ? load_x2(xs, at) : 0u;
    }
    lo = h[0] | (h[1] << 16);
    hi = h[2] | (h[3] << 16);
  }
}

// One slab's 4 groups of this lane against kRows rows' chunks (values, nibbles): slot j is
// t0 + j · step.  Sample by sample, so only one sample's inputs are live at a time (registers
// decide how many warps fit).  kClean: every slot is real (no guard).
template <int kPass, int kRows, bool kClean, Sparse24Input kInput, bool kStaged>
__device__ __forceinline__ void slab_math(const Sparse24Geometry& g, const __half* x, int t0,
                                          int step, int samples, const uint4 (&values)[kRows],
                                          const uint32_t (&meta)[kRows],
                                          float (&acc)[kRows][kPass]) {
  QuadMajorWalk walk(g, kInput == Sparse24Input::QuadMajor && kRows == 1 ? t0 : 0);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int t = t0 + j * step;
    const bool live = kClean || t < g.groups;
    if constexpr (kInput != Sparse24Input::Vector && kRows == 1 && !kStaged) {
      // One row: load only the two kept inputs (2 gathered loads instead of 4, no selector).
      const uint32_t nibble = (meta[0] >> (4 * j)) & 0xFu;
      const int i0 = static_cast<int>(nibble & 3u), i1 = static_cast<int>(nibble >> 2);
      int at0, at1;
      bool live0 = live, live1 = live;
      if constexpr (kInput == Sparse24Input::QuadMajor) {
        if (j > 0) walk.advance(g, step);
        at0 = walk.x_base + i0 * g.channels;
        at1 = walk.x_base + i1 * g.channels;
      } else {
        at0 = g.gather_x(t, i0);
        at1 = g.gather_x(t, i1);
        live0 = live0 && at0 >= 0;
        live1 = live1 && at1 >= 0;
      }
      const float2 w = half2_bits_to_float2(sparse24_stage::word_of(values[0], j));
#pragma unroll
      for (int b = 0; b < kPass; ++b) {
        if (b > 0 && b >= samples) break;  // uniform: the last pass of a batch may be short
        const __half* xs = x + static_cast<int64_t>(b) * g.x_stride;
        const uint32_t h0 = live0 ? load_x2(xs, at0) : 0u;
        const uint32_t h1 = live1 ? load_x2(xs, at1) : 0u;
        const float2 in = half2_bits_to_float2(h0 | (h1 << 16));
        acc[0][b] = fmaf(w.x, in.x, acc[0][b]);
        acc[0][b] = fmaf(w.y, in.y, acc[0][b]);
      }
    } else {
      // Each row's weights and selector for this group, computed here and not hoisted (the empty
      // asm): left free, the scheduler converts every group's weights and selectors of the round
      // up front (they are loop-invariant over the samples) and spills.
      float2 w[kRows];
      uint32_t selector[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        uint32_t pair = sparse24_stage::word_of(values[r], j), nibble = (meta[r] >> (4 * j)) & 0xFu;
        asm volatile("" : "+r"(pair), "+r"(nibble) : "f"(acc[r][0]));
        w[r] = half2_bits_to_float2(pair);
        selector[r] = sparse24_selector(nibble);
      }
#pragma unroll
      for (int b = 0; b < kPass; ++b) {
        if (b > 0 && b >= samples) break;
        uint32_t lo = 0u, hi = 0u;
        if constexpr (kStaged) {  // x: the block's staged copy, slot order (one 8-byte load)
          if (live) {
            const uint2 v = *reinterpret_cast<const uint2*>(x + b * g.x_stride + 4 * t);
            lo = v.x;
            hi = v.y;
          }
        } else {
          load_group_inputs<kInput>(g, x + static_cast<int64_t>(b) * g.x_stride, t, live, lo, hi);
        }
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const float2 in = half2_bits_to_float2(byte_perm(lo, hi, selector[r]));
          acc[r][b] = fmaf(w[r].x, in.x, acc[r][b]);
          acc[r][b] = fmaf(w[r].y, in.y, acc[r][b]);
        }
      }
    }
  }
}

// One round: kUnroll consecutive slabs from `slab` × kRows rows.  The warp first copies the
// round's slabs into its shared-memory stage with cp.async (lane l: the 16 value bytes at 16·l of
// each slab, lanes 0–3 also its 64 metadata bytes), all copies in flight before one wait; then
// each lane computes from its own chunk.  Why not loads into registers, as the dense GEMV: ptxas
// schedules register loads by critical path and, with this kernel's x loads behind them and a 64
// register cap (4 blocks per SM at batch 1), sank the value loads behind the math (SASS: 2–3 of
// a round's 8 slabs in flight per warp); cp.async keeps the whole round in flight in no
// registers.  kClean: every slab of the round is full and holds real groups only (slab <
// groups / 128), nothing is guarded — AlexNet's rows are clean throughout.  Otherwise slabs at or
// past `end` (this warp's range) are not copied, and lanes past a narrow last slab or without a
// slab compute on zeros at padding slots (no x read).
template <int kRows, int kUnroll, bool kClean>
__device__ __forceinline__ void copy_slabs(const Sparse24Geometry& g, const uint8_t* rows_w,
                                           uint8_t* stage, int slab, int end, int lane) {
  const uint32_t stage_u32 = ptx::smem_u32(stage);
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int s = slab + u;
    const int width = kClean ? kSparse24SlabLanes : g.width(s);
    if (!kClean && s >= end) continue;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* src = rows_w + r * g.row_bytes + static_cast<int64_t>(s) * kSparse24SlabBytes;
      const uint32_t dst = stage_u32 + (u * kRows + r) * kSparse24SlabBytes;
      if (kClean || lane < width) ptx::cp_async_16(dst + 16 * lane, src + 16 * lane, 16);
      if (lane < width / 8)  // 2 · width bytes of metadata: width / 8 copies of 16
        ptx::cp_async_16(dst + 16 * width + 16 * lane, src + 16 * width + 16 * lane, 16);
    }
  }
  ptx::cp_async_commit();
}

template <int kPass, int kRows, int kUnroll, bool kClean, Sparse24Input kInput, bool kStaged>
__device__ __forceinline__ void compute_slabs(const Sparse24Geometry& g, const uint8_t* stage,
                                              const __half* x, int slab, int end, int lane,
                                              int samples, float (&acc)[kRows][kPass]) {
  // x in a register: else it is re-read from the parameters for every load.  (Not for the staged
  // copy: the compiler must still see that it is shared memory, or the loads turn generic.)
  if constexpr (!kStaged) asm("" : "+l"(x));
    // Not unrolled: unrolled, ptxas hoists every slab's shared-memory reads and x loads for ILP
    // (114–124 registers wanted at batch 1) and then spills under the 64-register cap.
#pragma unroll 1
  for (int u = 0; u < kUnroll; ++u) {
    const int s = slab + u;
    const int width = kClean ? kSparse24SlabLanes : g.width(s);
    const bool active = kClean || (s < end && lane < width);
    uint4 values[kRows];
    uint32_t meta[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* image = stage + (u * kRows + r) * kSparse24SlabBytes;
      values[r] = make_uint4(0u, 0u, 0u, 0u);  // a dead lane may sit on a narrow slab's metadata
      meta[r] = 0x4444u;                       // valid nibbles; the zero values make them harmless
      if (active) {
        values[r] = *reinterpret_cast<const uint4*>(image + 16 * lane);
        meta[r] = *reinterpret_cast<const uint16_t*>(image + 16 * width + 2 * lane);
      }
    }
    // A lane with no chunk here starts at `groups`: all its slots read as padding.
    const int t0 = active ? s * kSparse24SlabGroups + lane : g.groups;
    slab_math<kPass, kRows, kClean, kInput, kStaged>(g, x, t0, width, samples, values, meta, acc);
  }
}

// One round with nothing in flight before or after it (the guarded tail of a row range).
template <int kPass, int kRows, int kUnroll, bool kClean, Sparse24Input kInput, bool kStaged>
__device__ __forceinline__ void round_of_slabs(const Sparse24Geometry& g, const uint8_t* rows_w,
                                               uint8_t* stage, const __half* x, int slab, int end,
                                               int lane, int samples, float (&acc)[kRows][kPass]) {
  __syncwarp();  // every lane is done with the previous round's images
  copy_slabs<kRows, kUnroll, kClean>(g, rows_w, stage, slab, end, lane);
  ptx::cp_async_wait<0>();
  __syncwarp();  // the metadata was copied by lanes 0–3 for the whole warp
  compute_slabs<kPass, kRows, kUnroll, kClean, kInput, kStaged>(g, stage, x, slab, end, lane,
                                                                samples, acc);
}

// Block: kBlockWarps warps = (kBlockWarps / split) row groups × split slab slices; group k owns
// rows [row0, row0 + kRows).  rows_pad (a multiple of 8) is a multiple of kRows, so a row group is
// wholly inside or wholly past the matrix.  Every warp reaches every barrier of every pass.
template <int kPass, Sparse24Input kInput, bool kStaged>
__global__ void __launch_bounds__(kBlockWarps * 32, min_blocks_per_sm(kPass))
    sparse24_gemv_kernel(const uint8_t* __restrict__ weight, const float* __restrict__ bias,
                         const __half* __restrict__ x, __half* __restrict__ y,
                         const Sparse24Geometry g, int batch, int split, bool relu) {
  pdl_wait();
  constexpr int kRows = rows_per_warp(kPass);
  constexpr int kUnroll = unroll_for(kRows);
  constexpr int kOutputs = kRows * kPass;  // ≤ 32: one lane per (row, sample) below
  constexpr int kStageBytes = kUnroll * kRows * kSparse24SlabBytes;  // 4608 per warp
  __shared__ float partial[kBlockWarps][kOutputs];
  __shared__ __align__(16) uint8_t stage[kBlockWarps][kStageBytes];
  extern __shared__ __align__(16) __half staged_x[];  // kStaged: [kPass][x_stride]

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int row_groups = kBlockWarps / split;
  const int slice = warp % split;
  const int row0 = (blockIdx.x * row_groups + warp / split) * kRows;
  // This warp's slabs: one contiguous range of the row.
  const int per_warp = (g.slabs + split - 1) / split;
  const int begin = min(g.slabs, slice * per_warp), end = min(g.slabs, begin + per_warp);
  const int clean_end = min(end, g.groups / kSparse24SlabGroups);
  static_assert(kUnroll % 2 == 0, "the tail rounds are half rounds");

  for (int first = 0; first < batch; first += kPass) {
    const int samples = min(kPass, batch - first);
    const __half* xp = x + static_cast<int64_t>(first) * g.x_stride;
    float acc[kRows][kPass];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int b = 0; b < kPass; ++b) acc[r][b] = 0.0f;

    // Clean half rounds, double-buffered in the warp's stage: the next half round's copies are
    // in flight while this one is computed (a single buffer left the loads idle during the math:
    // 1.48 TB/s from DRAM on fc6, docs/PERFORMANCE.md run 21).  The first half round is issued
    // before x is staged, so its DRAM latency hides the staging.
    constexpr int kHalf = kUnroll / 2;
    constexpr int kHalfBytes = kHalf * kRows * kSparse24SlabBytes;
    const bool live_rows = row0 < g.rows_pad;
    const uint8_t* rows_w = weight + static_cast<int64_t>(live_rows ? row0 : 0) * g.row_bytes;
    int slab = begin;
    const int rounds = live_rows && clean_end > begin ? (clean_end - begin) / kHalf : 0;
    if (rounds > 0) {
      __syncwarp();  // the previous pass's images are read
      copy_slabs<kRows, kHalf, true>(g, rows_w, stage[warp], slab, end, lane);
    }
    const __half* xin = xp;
    if constexpr (kStaged) {
      sparse24_stage::stage_x<kInput>(g, xp, staged_x, samples, g.x_stride);
      __syncthreads();  // the copy is complete (the previous pass's reads: its last barrier)
      xin = staged_x;
    }
    if (live_rows) {
      for (int k = 0; k < rounds; ++k) {
        if (k + 1 < rounds) {  // into the buffer computed at k - 1 (a __syncwarp ago)
          copy_slabs<kRows, kHalf, true>(g, rows_w, stage[warp] + ((k + 1) & 1) * kHalfBytes,
                                         slab + kHalf * (k + 1), end, lane);
          ptx::cp_async_wait<1>();
        } else {
          ptx::cp_async_wait<0>();
        }
        __syncwarp();  // half round k landed, metadata included (copied by lanes 0-3)
        compute_slabs<kPass, kRows, kHalf, true, kInput, kStaged>(
            g, stage[warp] + (k & 1) * kHalfBytes, xin, slab + kHalf * k, end, lane, samples, acc);
        __syncwarp();  // its buffer may be refilled
      }
      slab += kHalf * rounds;
      // The rest (a short range, a narrow or padded last slab) in half rounds: smaller code for
      // the guarded path, and a short range is not padded up to a full round.
      for (; slab < end; slab += kHalf)
        round_of_slabs<kPass, kRows, kHalf, false, kInput, kStaged>(g, rows_w, stage[warp], xin,
                                                                    slab, end, lane, samples, acc);
    }

    store_warp_sums(acc, partial[warp], lane);
    __syncthreads();

    // Thread t finishes output (row group t / kOutputs, row r, sample b).
    const int t = threadIdx.x;
    if (t < row_groups * kOutputs) {
      const int group = t / kOutputs, i = t % kOutputs;
      const int row = (blockIdx.x * row_groups + group) * kRows + i / kPass;
      const int b = i % kPass;
      if (row < g.rows_pad && b < samples) {
        float out = bias[row];
        for (int s = 0; s < split; ++s) out += partial[group * split + s][i];
        if (relu) out = (out > 0.0f || out != out) ? out : 0.0f;  // keeps NaN (a NaN input shows)
        y[static_cast<int64_t>(first + b) * g.rows_pad + row] = __float2half_rn(out);
      }
    }
    __syncthreads();  // `partial` is reused by the next pass
  }
}

// Dynamic shared memory of the staged-x instance: one sample of x (batch-1 passes only).
size_t staged_x_bytes(const Sparse24Geometry& g) { return size_t(g.x_stride) * sizeof(__half); }

template <int kPass, Sparse24Input kInput, bool kStaged = false>
void launch_pass(const Sparse24Weights& w, bool relu, const void* x, void* y, int batch, int split,
                 cudaStream_t stream) {
  const Sparse24Geometry& g = w.geometry();
  const int rows_per_block = kBlockWarps / split * rows_per_warp(kPass);
  const int blocks = (g.rows_pad + rows_per_block - 1) / rows_per_block;
  const size_t smem = kStaged ? staged_x_bytes(g) : 0;
  launch_kernel(sparse24_gemv_kernel<kPass, kInput, kStaged>, blocks, kBlockWarps * 32, smem,
                stream, static_cast<const uint8_t*>(w.weight()), w.bias(),
                static_cast<const __half*>(x), static_cast<__half*>(y), g, batch, split, relu);
}

template <Sparse24Input kInput>
void launch_for_input(const Sparse24Weights& w, bool relu, const void* x, void* y, int batch,
                      int pass, int split, bool staged, cudaStream_t stream) {
  switch (pass) {
    case 1:
      if (staged) return launch_pass<1, kInput, true>(w, relu, x, y, batch, split, stream);
      return launch_pass<1, kInput>(w, relu, x, y, batch, split, stream);
    case 2:
      return launch_pass<2, kInput>(w, relu, x, y, batch, split, stream);
    case 3:
      return launch_pass<3, kInput>(w, relu, x, y, batch, split, stream);
    case 4:
      return launch_pass<4, kInput>(w, relu, x, y, batch, split, stream);
    case 5:
      return launch_pass<5, kInput>(w, relu, x, y, batch, split, stream);
    case 6:
      return launch_pass<6, kInput>(w, relu, x, y, batch, split, stream);
    case 7:
      return launch_pass<7, kInput>(w, relu, x, y, batch, split, stream);
    default:
      return launch_pass<8, kInput>(w, relu, x, y, batch, split, stream);
  }
}

// Samples per pass: the batch spread evenly over the fewest passes of ≤ 8.
int pass_size(int64_t batch) {
  const int64_t passes = (batch + kSparse24MaxBatchPass - 1) / kSparse24MaxBatchPass;
  return static_cast<int>((batch + passes - 1) / passes);
}

// The batch-1 instance that stages x, for the geometry's input kind.
const void* staged_kernel(Sparse24Input input) {
  switch (input) {
    case Sparse24Input::Vector:
      return reinterpret_cast<const void*>(sparse24_gemv_kernel<1, Sparse24Input::Vector, true>);
    case Sparse24Input::QuadMajor:
      return reinterpret_cast<const void*>(sparse24_gemv_kernel<1, Sparse24Input::QuadMajor, true>);
    default:
      return reinterpret_cast<const void*>(sparse24_gemv_kernel<1, Sparse24Input::Gather, true>);
  }
}

}  // namespace

Sparse24Weights::Sparse24Weights(const HostSparse24& host)
    : geometry_(host.geometry), weight_(host.weight.size()), bias_(upload_fp32(host.bias)) {
  weight_.upload(host.weight.data(), host.weight.size());
  if (plan_only()) return;  // a described target: the unstaged kernel is what its plan names
  // Staged only where the batch-1 occupancy survives: min_blocks_per_sm(1) blocks of (static +
  // staged x + the driver's per-block reserve) in one SM's shared memory (AlexNet fc6 on an H100:
  // 4 × (36.9 + 18.4 + 1) KB = 225 KB of 228).
  const void* kernel = staged_kernel(geometry_.input);
  cudaFuncAttributes attributes{};
  CNNRT_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  int device = 0, reserved = 0;
  CNNRT_CUDA_CHECK(cudaGetDevice(&device));
  CNNRT_CUDA_CHECK(
      cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device));
  const DeviceTraits& traits = device_traits();
  const size_t block = attributes.sharedSizeBytes + staged_x_bytes(geometry_);
  stages_x_ = block <= traits.smem_optin &&
              (block + size_t(reserved)) * min_blocks_per_sm(1) <= traits.smem_per_sm;
  if (!stages_x_) return;
  // The limit only permits (every layer's size fits under it); the carveout asks for all of the
  // SM's shared memory, which the 4 blocks need.
  CNNRT_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(traits.smem_optin - attributes.sharedSizeBytes)));
  CNNRT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                        int(cudaSharedmemCarveoutMaxShared)));
}

int sparse24_choose_split(const Sparse24Geometry& geometry, int64_t batch, int sm_count) {
  if (geometry.rows_pad < 1 || geometry.slabs < 1 || batch < 1 || sm_count < 1)
    throw Error("sparse24_choose_split: invalid shape rows=" + std::to_string(geometry.rows_pad) +
                " slabs=" + std::to_string(geometry.slabs) + " batch=" + std::to_string(batch));
  const int rows = rows_per_warp(pass_size(batch));
  const int64_t row_warps = (geometry.rows_pad + rows - 1) / rows;
  const int64_t target = static_cast<int64_t>(sm_count) * kTargetWarpsPerSm;
  int split = 1;
  while (split < kMaxSplit && row_warps * split < target && split * 2 <= geometry.slabs) split *= 2;
  return split;
}

void gemv_sparse24_fp16(const Sparse24Weights& weights, bool relu, const void* x, void* y,
                        int64_t batch, cudaStream_t stream, int split, bool stage_x) {
  if (x == y) throw Error("gemv_sparse24_fp16: input and output must not alias");
  if (split != 0 && split != 1 && split != 2 && split != 4 && split != 8)
    throw Error("gemv_sparse24_fp16: split must be 0 (auto), 1, 2, 4 or 8, got " +
                std::to_string(split));
  if (batch <= 0) return;
  if (batch > (int64_t{1} << 30)) throw Error("gemv_sparse24_fp16: batch too large");
  const int s =
      split != 0 ? split : sparse24_choose_split(weights.geometry(), batch, current_sm_count());
  const int pass = pass_size(batch);
  const int n = static_cast<int>(batch);
  const bool staged = stage_x && weights.stages_x();
  switch (weights.geometry().input) {
    case Sparse24Input::Vector:
      return launch_for_input<Sparse24Input::Vector>(weights, relu, x, y, n, pass, s, staged,
                                                     stream);
    case Sparse24Input::QuadMajor:
      return launch_for_input<Sparse24Input::QuadMajor>(weights, relu, x, y, n, pass, s, staged,
                                                        stream);
    case Sparse24Input::Gather:
      return launch_for_input<Sparse24Input::Gather>(weights, relu, x, y, n, pass, s, staged,
                                                     stream);
  }
}

}  // namespace cnnrt::cuda
