// Tiled space-to-depth from the NCHW fp32 graph input — the host half: whether the tiled kernel
// serves a shape, and how it tiles it.  The kernel and its design note are in s2d_tile.cuh; the
// fp16 form is launched by space_to_depth.cu, the int8 (quantising) form by s2d_s8.cu; the
// prediction and the measurements are in docs/kernels/space_to_depth.md.
//
// Plain data and one pure function: no CUDA runtime calls, so the decision is made on the host
// once per launch from the shape, the batch and the input's alignment (never per element), is
// the same on every device, and can be tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cnnrt::cuda {

// Which kernel a space-to-depth from NCHW fp32 runs.  Auto: the tiled one wherever
// s2d_tile_plan says it serves the shape, else the generic one (one thread per 16-byte output
// chunk, any shape); Generic: always the generic one (the tests compare the two bit for bit, and
// the timing test times both).  Both give the same bits.
enum class S2dKernel { Auto, Generic };

// One rearrangement, per sample: x [c][h][w] fp32 (dense) → y [out_h][out_w][out_stride]
// elements of out_bytes each, channel (dy·block + dx)·c + ci of block (by, bx) holding
// x[ci][by·block + dy − pad_h][bx·block + dx − pad_w] (0 outside), padding channels 0.
struct S2dTileShape {
  int c = 0, h = 0, w = 0;
  int block = 1, pad_h = 0, pad_w = 0;
  int out_h = 0, out_w = 0;  // blocks
  int out_stride = 0;        // elements; out_stride·out_bytes must be a multiple of 16
  int out_bytes = 1;         // 2: fp16, 1: int8
};

// How the tiled kernel covers the output: a warp per tile of `tile_blocks` consecutive blocks of
// one block row, `tiles_per_row` tiles per row (balanced: sizes differ by at most one block's
// worth at the row end), `warps_per_cta` warps per CTA, a grid of `ctas`.  tiled == false: the
// shape needs the generic kernel (block > 32, a warp's tile over kS2dMaxTileBytes of shared
// memory, a sample or a tile count past an int's range); the other fields are then meaningless.
struct S2dTilePlan {
  bool tiled = false;
  bool pairs = false;  // 2 columns per lane, one 8-byte load per row (else 1 column, 4 bytes)
  int tile_blocks = 0;
  int tiles_per_row = 0;
  int tiles = 0;        // batch · out_h · tiles_per_row
  int tile_chunks = 0;  // 16-byte chunks of shared memory per warp: a slot for every lane's
                        // columns, ceil(32·cols / block) blocks of out_stride·out_bytes
  int warps_per_cta = 0;
  int ctas = 0;
  size_t smem_bytes = 0;  // per CTA
};

// CTAs the plan aims for at least (two per SM of a 132-SM H100/H200): a batch-1 launch shrinks
// its CTAs (and drops the 2-column lanes) until it has this many, rather than leaving SMs idle.
constexpr int kS2dMinCtas = 264;
constexpr int kS2dMaxWarpsPerCta = 4;
constexpr int kS2dMaxTileBytes = 8192;

// The plan for `batch` samples of `shape` read from `x_address` (the 8-byte loads of the
// 2-column lanes need it, the row length and the column offset even).
S2dTilePlan s2d_tile_plan(const S2dTileShape& shape, int batch, uintptr_t x_address);

}  // namespace cnnrt::cuda
