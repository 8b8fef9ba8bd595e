// The int8 mma.sync warp tile and cp.async ring shared by conv_s8_igemm (igemm_s8.cu) and the
// streaming int8 linear (linear_s8_stream.cu): both stage K-major rows of 64 bytes of K (+16 of
// padding) in shared memory through a cp.async ring and run a warp's (16·MI) x 32 tile of
// mma.sync.m16n8k32.s32.s8.s8.s32 over them.
//
// Why the 80-byte rows: the eight 16-byte rows an ldmatrix phase reads start in 8 distinct 4-bank
// groups (80 / 4 = 20 ≡ 20, 8, 28, 16, 4, 24, 12 mod 32): no conflicts.  Fragments come from
// ldmatrix.x4 of 8 x 16-byte matrices: for s8 m16n8k32 a thread's A words are (row g, bytes
// 4t..4t+3), (row g+8, same), (row g, +16), (row g+8, +16) and its B words (col g, k 4t..4t+3),
// (col g, +16) — g = lane / 4, t = lane % 4 — exactly the b16 ldmatrix layout of K-major rows.
// Accumulator acc[mi][ni][2·h + e]: A row 16·mi + g + 8·h of the warp tile, B row (column of the
// product) 8·ni + 2t + e.
#pragma once

#include <cstdint>

#include "kernels/cuda/conv/ptx.cuh"

namespace cnnrt::cuda::s8_tile {

constexpr int kBK = 64;              // K bytes per staged row (two k32 MMA steps)
constexpr int kRowBytes = kBK + 16;  // 80: conflict-free ldmatrix phases
constexpr int kSegs = kBK / 16;      // 16-byte segments per row

// One 64-byte K-tile of a warp's (16·MI) x 32 tile: A rows a_row0.. of the stage at `a`, B rows
// b_row0.. of the stage at `b` (both kRowBytes apart).
template <int MI>
__device__ __forceinline__ void warp_k_tile(uint32_t a, uint32_t b, int a_row0, int b_row0,
                                            int lane, int (&acc)[MI][4][4]) {
  // ldmatrix lane addresses: A rows lane % 16, bytes (lane / 16)·16; B rows (lane / 16)·8 +
  // lane % 8, bytes ((lane / 8) % 2)·16.
  const uint32_t a_lane = a + ((a_row0 + (lane & 15)) * kRowBytes + (lane >> 4) * 16);
  const uint32_t b_lane =
      b + ((b_row0 + (lane >> 4) * 8 + (lane & 7)) * kRowBytes + ((lane >> 3) & 1) * 16);
#pragma unroll
  for (int kk = 0; kk < kBK; kk += 32) {
    uint32_t af[MI][4];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) ptx::ldmatrix_x4(af[mi], a_lane + mi * 16 * kRowBytes + kk);
#pragma unroll
    for (int pair = 0; pair < 2; ++pair) {
      uint32_t bf[4];  // b0, b1 of n-tile 2·pair, then of 2·pair + 1
      ptx::ldmatrix_x4(bf, b_lane + pair * 16 * kRowBytes + kk);
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        ptx::mma_16832_s8(acc[mi][2 * pair], af[mi], bf[0], bf[1]);
        ptx::mma_16832_s8(acc[mi][2 * pair + 1], af[mi], bf[2], bf[3]);
      }
    }
  }
}

// The cp.async multistage loop of both kernels over k-tiles first .. first + tiles - 1: load(slot,
// kt) issues k-tile kt's copies into ring slot `slot` (one commit group per k-tile, STAGES - 1 in
// flight), compute(slot) runs the MMAs of the k-tile in that slot once every thread's copies of
// it have landed.  Returns with every copy landed (the ring may then be reused after a barrier).
template <int STAGES, class Load, class Compute>
__device__ __forceinline__ void cp_async_ring(int first, int tiles, const Load& load,
                                              const Compute& compute) {
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < tiles) load(s, first + s);
    ptx::cp_async_commit();
  }
  for (int kt = 0; kt < tiles; ++kt) {
    ptx::cp_async_wait<STAGES - 2>();
    __syncthreads();  // k-tile kt landed for every thread; slot (kt - 1) % STAGES is free
    const int next = kt + STAGES - 1;
    if (next < tiles) load(next % STAGES, first + next);
    ptx::cp_async_commit();
    compute(kt % STAGES);
  }
  ptx::cp_async_wait<0>();
}

}  // namespace cnnrt::cuda::s8_tile
