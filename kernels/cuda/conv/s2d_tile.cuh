// Tiled space-to-depth from the NCHW fp32 graph input, shared by the fp16 form
// (space_to_depth.cu) and the quantising int8 form (s2d_s8.cu); which shapes it serves and how it
// tiles them is decided on the host (s2d_tile.h), the numbers are in
// docs/kernels/space_to_depth.md.
//
// Why: the generic kernels build each 16-byte output chunk from 8 (fp16) or 16 (int8) scattered
// 4-byte loads, each with its own (tap, channel) index math, bounds checks and conversion; the
// int8 one re-derives the index with divisions per byte.  They are instruction-bound (the int8
// one at a third of DRAM bandwidth), and at batch 1 the int8 one has too few threads.  Here each
// instruction moves a warp's worth of contiguous data, and every index is incremental.
//
// Shape: a warp owns a tile — `tile_blocks` consecutive blocks of one block row of one sample,
// whose output is one contiguous run of y.
// * Load: lane j takes source column j (or 2j, 2j + 1: `kPairs`) of the tile's s·tile_blocks
//   columns; the warp walks the tile's C·s source rows (channel c, row dy of the block row), each
//   row one coalesced 128- or 256-byte warp load (a float2 per lane in pair mode).  The rows'
//   offsets advance by additions; kRowBatch rows are loaded before any is converted, so a lane
//   has up to kRowBatch loads in flight (AlexNet conv1, C·s = 12: all of them; 24 values = 96
//   bytes per lane in pair mode), enough by Little's law (≈ 3 TB/s × ≈ 1 µs over 132 SMs:
//   ~23 KB per SM, vs ~3 KB per warp here).
// * Convert: each source value once (the fp16 rounding; the int8 quantisation as a reciprocal
//   multiply, the few values it cannot vouch for redone with the exact division after the batch,
//   in the warps that have any: s2d_quantise.cuh), stored in the warp's shared-memory image of
//   its output tile at block·out_stride + (dy·s + dx)·C + c.  The lane's part of that slot,
//   block·out_stride + dx·C, is computed once per thread; the row's, dy·s·C + c, is
//   incremental.  Pixels outside the image store the conversion of +0.0f, which is +0 in both
//   forms (int8: 0 for any scale, a zero or NaN one included).  Padding channels (real
//   channels <= c < out_stride) are never stored: zeroed once when the warp starts.
// * Store: the tile's bytes leave with 16-byte loads from shared memory and 16-byte stores to y,
//   512 contiguous bytes per warp instruction (whole sectors, no read-modify-write).
// Shared-memory banks (conv1, C = 3, s = 4): a warp's 2-byte stores of one row land 96 bytes
// apart per block, 6 per column — 2-way conflicts per wavefront (4-way in pair mode), 1-byte
// int8 stores 1- or 2-way; the shared-memory pipe stays well under its rate at DRAM bandwidth.
// No __syncthreads: warps are independent (their tiles and shared memory are their own), so a
// CTA is only a packing of 1-4 warps, sized on the host so batch 1 still gets >= kS2dMinCtas
// CTAs.  The grid covers every tile once; the loop is grid-stride only for safety.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/conv/s2d_tile.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace s2d_tile {

// Rows loaded before any is converted: 12 with a compile-time block (AlexNet conv1: C·s = 12),
// 8 with a run-time one (its (c, dy) increments hold more registers; 12 spill in the int8 form,
// around the calls of the division's slow path).
constexpr int kRowBatch = 12, kRuntimeRowBatch = 8;

template <bool kPairs>
struct Columns;
template <>
struct Columns<false> {
  float v;
  __device__ __forceinline__ static Columns load(const float* __restrict__ p) { return {p[0]}; }
  __device__ __forceinline__ static Columns zero() { return {0.0f}; }
};
template <>
struct Columns<true> {
  float2 v;
  __device__ __forceinline__ static Columns load(const float* __restrict__ p) {
    return {*reinterpret_cast<const float2*>(p)};
  }
  __device__ __forceinline__ static Columns zero() { return {make_float2(0.0f, 0.0f)}; }
};

// Stores the converted value(s) of one row at `slot` of the tile (pair: and one block column
// on); sets bit `bit` (and `bit` + 1) of `deferred` for those left to store_exact.
template <typename Convert, bool kPairs>
__device__ __forceinline__ void store(typename Convert::Bits* tile, int slot, int c_count,
                                      const Columns<kPairs>& v, const Convert& convert,
                                      uint32_t& deferred, int bit) {
  if constexpr (kPairs) {
    tile[slot] = convert(v.v.x, deferred, 1u << bit);
    tile[slot + c_count] = convert(v.v.y, deferred, 2u << bit);
  } else {
    tile[slot] = convert(v.v, deferred, 1u << bit);
  }
}

// Overwrites the values store() deferred (bits of `deferred`) with Convert::exact.
template <typename Convert, bool kPairs>
__device__ __forceinline__ void store_exact(typename Convert::Bits* tile, int slot, int c_count,
                                            const Columns<kPairs>& v, const Convert& convert,
                                            uint32_t deferred, int bit) {
  if constexpr (kPairs) {
    if (deferred >> bit & 1u) tile[slot] = convert.exact(v.v.x);
    if (deferred >> bit & 2u) tile[slot + c_count] = convert.exact(v.v.y);
  } else {
    if (deferred >> bit & 1u) tile[slot] = convert.exact(v.v);
  }
}

// `Convert` maps one fp32 value to the stored bits:
//   using Bits = uint16_t (fp16) or uint8_t (int8);
//   __device__ Bits operator()(float v, uint32_t& deferred, uint32_t bit) const — the bits,
//     unless it sets `bit` in `deferred`;
//   static constexpr bool kMayDefer — whether it ever does; if so
//   __device__ Bits exact(float v) const — the bits of a deferred value.
// Deferred values (the int8 form's few near a rounding boundary: s2d_quantise.cuh) are redone
// after the batch, only in warps that have any (one vote per batch), so the exact path's
// division and its slow-path call stay out of the unrolled batch.
// kBlock: the block size when it is fixed at compile time (4: AlexNet conv1; the rows' loops
// then unroll fully), 0 when it is read from s.
template <typename Convert, int kBlock, bool kPairs>
__global__ void __launch_bounds__(kS2dMaxWarpsPerCta * 32)
    s2d_tile_kernel(const float* __restrict__ x, uint4* __restrict__ y, const S2dTileShape s,
                    const S2dTilePlan plan, const Convert convert) {
  pdl_wait();
  using Bits = typename Convert::Bits;
  using Cols = Columns<kPairs>;
  extern __shared__ uint4 s2d_tile_smem[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  uint4* const tile_chunks = s2d_tile_smem + warp * plan.tile_chunks;
  Bits* const tile = reinterpret_cast<Bits*>(tile_chunks);
  for (int k = lane; k < plan.tile_chunks; k += 32) tile_chunks[k] = make_uint4(0, 0, 0, 0);
  __syncwarp();

  const int block = kBlock > 0 ? kBlock : s.block;
  const int col = lane * (kPairs ? 2 : 1);  // the lane's first source column in the tile
  const int lane_block = col / block;
  // Every lane has a slot, idle ones too (the tile holds ceil(32·cols / block) blocks), so the
  // stores need no lane guard; slots past the tile's blocks are never copied out.
  const int lane_slot = lane_block * s.out_stride + (col - lane_block * block) * s.c;
  const int row_slot_step = block * s.c;  // slot distance of rows dy and dy + 1
  const int plane = s.h * s.w;            // the plan keeps c·h·w inside int
  const int chunks_per_block = s.out_stride * static_cast<int>(sizeof(Bits)) / 16;
  constexpr int kBitsPerRow = kPairs ? 2 : 1;  // deferral bits per row (kRowBatch · 2 <= 32)

  for (int t = blockIdx.x * warps + warp; t < plan.tiles; t += gridDim.x * warps) {
    const int block_row = t / plan.tiles_per_row;  // n·out_h + by
    const int bx0 = (t - block_row * plan.tiles_per_row) * plan.tile_blocks;
    const int by = block_row % s.out_h, n = block_row / s.out_h;
    const int blocks = min(plan.tile_blocks, s.out_w - bx0);
    const int ix = bx0 * block - s.pad_w + col;
    const bool col_inside = col < blocks * block && ix >= 0 && ix < s.w;
    const int iy0 = by * block - s.pad_h;
    // Sample n, channel 0, row iy0, column ix; read only where the row and column are inside.
    // Rows are int offsets from it (one wide multiply-add per load).
    const float* const source =
        x + (static_cast<int64_t>(n) * s.c * plane + static_cast<int64_t>(iy0) * s.w + ix);

    if constexpr (kBlock > 0) {
      constexpr int kChannels = kRowBatch / kBlock > 0 ? kRowBatch / kBlock : 1;
      for (int c0 = 0; c0 < s.c; c0 += kChannels) {
        // Row (c0 + i, dy)'s value(s); a second call (the deferred redo) reloads them rather
        // than keep the batch live across the division's slow-path calls.
        auto value = [&](int i, int dy) {
          return c0 + i < s.c && col_inside && iy0 + dy >= 0 && iy0 + dy < s.h
                     ? Cols::load(source + ((c0 + i) * plane + dy * s.w))
                     : Cols::zero();
        };
        Cols v[kChannels][kBlock];
#pragma unroll
        for (int i = 0; i < kChannels; ++i)
#pragma unroll
          for (int dy = 0; dy < kBlock; ++dy) v[i][dy] = value(i, dy);
        uint32_t deferred = 0;
#pragma unroll
        for (int i = 0; i < kChannels; ++i)
          if (c0 + i < s.c)
#pragma unroll
            for (int dy = 0; dy < kBlock; ++dy)
              store(tile, lane_slot + dy * row_slot_step + c0 + i, s.c, v[i][dy], convert, deferred,
                    (i * kBlock + dy) * kBitsPerRow);
        if constexpr (Convert::kMayDefer) {
          if (__any_sync(0xffffffffu, deferred != 0)) {
#pragma unroll 1
            for (int row = 0; row < kChannels * kBlock; ++row) {
              const int i = row / kBlock, dy = row % kBlock;
              if (deferred >> (row * kBitsPerRow) & (kPairs ? 3u : 1u))
                store_exact(tile, lane_slot + dy * row_slot_step + c0 + i, s.c, value(i, dy),
                            convert, deferred, row * kBitsPerRow);
            }
          }
        }
      }
    } else {
      // Rows (c, dy), c-major, kRuntimeRowBatch at a time, (c, dy) advanced by increments.
      const int rows = s.c * block;
      auto value = [&](int r, int c, int dy) {
        return r < rows && col_inside && iy0 + dy >= 0 && iy0 + dy < s.h
                   ? Cols::load(source + (c * plane + dy * s.w))
                   : Cols::zero();
      };
      int c = 0, dy = 0;
      for (int r0 = 0; r0 < rows; r0 += kRuntimeRowBatch) {
        Cols v[kRuntimeRowBatch];
        const int batch_c = c, batch_dy = dy;
#pragma unroll
        for (int i = 0; i < kRuntimeRowBatch; ++i) {
          v[i] = value(r0 + i, c, dy);
          if (++dy == block) {
            dy = 0;
            ++c;
          }
        }
        uint32_t deferred = 0;
        c = batch_c;
        dy = batch_dy;
#pragma unroll
        for (int i = 0; i < kRuntimeRowBatch; ++i) {
          if (r0 + i < rows)
            store(tile, lane_slot + dy * row_slot_step + c, s.c, v[i], convert, deferred,
                  i * kBitsPerRow);
          if (++dy == block) {
            dy = 0;
            ++c;
          }
        }
        if constexpr (Convert::kMayDefer) {
          if (__any_sync(0xffffffffu, deferred != 0)) {
            int redo_c = batch_c, redo_dy = batch_dy;
#pragma unroll 1
            for (int i = 0; i < kRuntimeRowBatch; ++i) {
              if (deferred >> (i * kBitsPerRow) & (kPairs ? 3u : 1u))
                store_exact(tile, lane_slot + redo_dy * row_slot_step + redo_c, s.c,
                            value(r0 + i, redo_c, redo_dy), convert, deferred, i * kBitsPerRow);
              if (++redo_dy == block) {
                redo_dy = 0;
                ++redo_c;
              }
            }
          }
        }
      }
    }
    __syncwarp();
    uint4* const out = y + (static_cast<int64_t>(block_row) * s.out_w + bx0) * chunks_per_block;
    const int chunks = blocks * chunks_per_block;
    for (int k = lane; k < chunks; k += 32) out[k] = tile_chunks[k];
    __syncwarp();  // the next tile's stores into `tile` wait for these reads
  }
}

template <typename Convert, int kBlock>
void launch_block(const float* x, void* y, const S2dTileShape& shape, const S2dTilePlan& plan,
                  const Convert& convert, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(plan.ctas)), threads(plan.warps_per_cta * 32);
  if (plan.pairs)
    launch_kernel(s2d_tile_kernel<Convert, kBlock, true>, grid, threads, plan.smem_bytes, stream, x,
                  static_cast<uint4*>(y), shape, plan, convert);
  else
    launch_kernel(s2d_tile_kernel<Convert, kBlock, false>, grid, threads, plan.smem_bytes, stream,
                  x, static_cast<uint4*>(y), shape, plan, convert);
}

// Launches the planned kernel (plan.tiled must hold) on `stream`: one capturable launch.
template <typename Convert>
void launch(const float* x, void* y, const S2dTileShape& shape, const S2dTilePlan& plan,
            const Convert& convert, cudaStream_t stream) {
  if (shape.block == 4)
    launch_block<Convert, 4>(x, y, shape, plan, convert, stream);
  else
    launch_block<Convert, 0>(x, y, shape, plan, convert, stream);
}

}  // namespace s2d_tile
}  // namespace cnnrt::cuda
