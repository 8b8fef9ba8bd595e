// The write-out of the weights-as-A TMA convs (tma_mainloop.cuh's kWeightsAreA instances: the
// 2:4 sparse conv_fp16_sparse24_tma, the dense narrow-channel instance tma_wa_kernel.cuh, and
// the window convs tma_window_kernel.cuh): [channel][pixel] accumulators out to NHWC through
// each warp's staging tile — fp16 (transpose_store) and int8 (transpose_store_s8, the int8
// window conv's; conv_int8_sparse24_tma keeps its own byte stores, faster there: run 41h).
//
// DESIGN NOTE
// * Weights as A make the accumulators [channel][pixel] (register 4j + 2h + q of m64 block i:
//   channel 64i + 16w + g + 8h of the warpgroup's, pixel 8j + 2t + q, lane 4g + t of warp w),
//   NHWC wants [pixel][channel].  Each warp transposes its own 16 channels through a private
//   staging tile after the ring (kChunk pixels x 16 channels fp16 per pass; no barrier but
//   __syncwarp, so the two warpgroups and the producer never wait on each other): bias (+ clamp)
//   in fp32 -> fp16 pairs, stored transposed by stmatrix.trans (an accumulator pair is the 8x8
//   b16 fragment's row g, columns 2t, 2t + 1: four 8x8 blocks per instruction, where scalar
//   2-byte stores took 64 per lane and pass — the window conv's epilogue was issue-bound, run
//   41e), then 16-byte reads of 8 channels of one pixel and 16-byte global stores (two lanes
//   write a pixel's 32 bytes); the residual, when fused, is loaded for
//   the whole pass first and added (then clamped) by epilogue::add_residual, the family's
//   convention.  The staging's two 16-byte halves of a pixel row swap on pixel bit 2, which makes
//   both the stmatrix rows and the 16-byte reads conflict-free (32-byte rows, no padding).
// * Who owns what (TmaRing::kMI / kWN): the sparse instances split M between the consumer
//   warpgroups (warpgroup cw: channels cw * BM / 2 .., all BN pixels); SPLIT_N instances split N
//   (all BM channels, pixels cw * BN / 2 ..), for out_c too narrow to give each warpgroup its own
//   m64 blocks (conv1's 64 channels).
// * int8 (transpose_store_s8): the family's requantisation (epilogue_s8.cuh) per accumulator, the
//   two int8 of one pixel's channels g and g + 8 packed as one b16 (so a pair of pixels is the
//   fragment's b16x2) — three byte permutes a word from the requantised values' low bytes (run
//   52f: a mask, shift and or per byte were ~40 % of the epilogue's instructions, and the window
//   conv is bound by them, run 52e) — stmatrix.trans into 16-byte pixel rows whose bytes
//   interleave channels 0-7 and 8-15, and two byte permutes per 8 bytes on the way out (one lane
//   per pixel).
// * P: the kernel's parameters (fp16: bias, y, residual, out_c, act; int8: bias (bias_q),
//   multiplier, y, out_c, out_stride, lo, hi).
#pragma once

#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/conv/epilogue.cuh"
#include "kernels/cuda/conv/epilogue_s8.cuh"
#include "kernels/cuda/conv/tma_mainloop.cuh"

namespace cnnrt::cuda::tma_detail {

// The output rows of the pixels a lane writes, in the order the stores ask for them: pixel
// first + step * k for k = 0, 1, ... (fp16: lane / 2 + 16k; int8: lane + 32k); next() returns the
// row, or -1: not stored.  Pixel m is output row m below `m` (the dense and sparse convs).
struct LinearRows {
  int pixel, m, step;
  __host__ __device__ long long next() {
    const long long row = pixel < m ? pixel : -1;
    pixel += step;
    return row;
  }
};

#ifdef CNNRT_WGMMA_DEVICE
// Four 8x8 b16 matrices of the warp's fragments (w[m]: row lane / 4, columns 2 (lane % 4), +1 of
// matrix m) stored transposed: row r of matrix m at the address lane 8m + r gives.
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, const uint32_t (&w)[4]) {
  asm volatile(
      "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
      "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
      : "memory");
}

// One warp's write-out of MI m64 blocks x WN pixels (design note): the warp's 16 channels of
// block i are ch_base + 64i + 16 * warp.., its pixels pix0 + 0 .. WN - 1, where the cursor
// `rows` (LinearRows or the like, at pix0 + lane / 2) maps them to output rows (NHWC: out_c
// channels each).  stg: the warp's staging, CHUNK pixels x 16 channels.
template <int WN, int CHUNK, bool RESIDUAL, int MI, class P, class Rows>
__device__ __forceinline__ void transpose_store(const float (&acc)[MI][WN / 2], const P& p,
                                                __half* stg, int ch_base, int warp, int lane,
                                                const Rows& first_rows) {
  static_assert(WN % CHUNK == 0 && CHUNK % 16 == 0, "whole staging passes");
  constexpr int kRows = CHUNK / 16;  // 16-pixel rows of a pass's write-out
  const int g = lane / 4, half = lane % 2;
  // stmatrix.x4: this lane gives row lane % 8 of matrix lane / 8 (j-block pair jj + mi / 2,
  // channel half mi % 2) its staging address; the pixel's two 16-byte halves swap on pixel bit
  // 2, which keeps the 8 rows of a matrix on distinct banks.
  const int st_mi = lane / 8, st_row = lane % 8;
#pragma unroll
  for (int i = 0; i < MI; ++i) {
    const int ch0 = ch_base + 64 * i + 16 * warp;  // the warp's 16
    const float b0 = ch0 + g < p.out_c ? __ldg(p.bias + ch0 + g) : 0.f;
    const float b1 = ch0 + g + 8 < p.out_c ? __ldg(p.bias + ch0 + g + 8) : 0.f;
    const int ch = ch0 + 8 * half;  // this lane's 8 channels in the write-out
    Rows rows_of = first_rows;
#pragma unroll
    for (int c0 = 0; c0 < WN; c0 += CHUNK) {
      long long rows[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const long long row = rows_of.next();
        rows[r] = ch < p.out_c ? row : -1;
      }
      uint4 res[kRows];
      if constexpr (RESIDUAL) {
#pragma unroll
        for (int r = 0; r < kRows; ++r)
          res[r] = rows[r] >= 0
                       ? __ldg(reinterpret_cast<const uint4*>(p.residual + rows[r] * p.out_c + ch))
                       : make_uint4(0, 0, 0, 0);
      }
      __syncwarp();  // the previous pass's reads are done
      // bias (+ clamp) in fp32 -> fp16 pairs (two pixels of one channel: the 8x8 fragment's
      // row g, columns 2t, 2t + 1), stored transposed — [pixel][channel] — four 8x8 at a time.
#pragma unroll
      for (int jj = 0; jj < CHUNK / 8; jj += 2) {
        uint32_t w[4];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const int j = c0 / 8 + jj + m / 2, h = m % 2;
          float v0 = acc[i][4 * j + 2 * h] + (h == 0 ? b0 : b1);
          float v1 = acc[i][4 * j + 2 * h + 1] + (h == 0 ? b0 : b1);
          if constexpr (!RESIDUAL) {
            v0 = epilogue::activate(v0, p.act);
            v1 = epilogue::activate(v1, p.act);
          }
          const __half2 v = __floats2half2_rn(v0, v1);
          w[m] = *reinterpret_cast<const uint32_t*>(&v);
        }
        const int px = 8 * (jj + st_mi / 2) + st_row, hh = st_mi % 2;
        const uint32_t addr = ptx::smem_u32(stg + px * 16 + (hh ^ ((px >> 2) & 1)) * 8);
        stmatrix_x4_trans(addr, w);
      }
      __syncwarp();
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int px = lane / 2 + 16 * r;
        uint4 out = *reinterpret_cast<const uint4*>(stg + px * 16 + (half ^ ((px >> 2) & 1)) * 8);
        if (rows[r] >= 0) {
          if constexpr (RESIDUAL)
            out = epilogue::add_residual(out, reinterpret_cast<const __half*>(&res[r]), p.act);
          *reinterpret_cast<uint4*>(p.y + rows[r] * p.out_c + ch) = out;
        }
      }
    }
  }
}

// The int8 write-out of one warp's MI m64 blocks x WN pixels (design note): requantised int8
// (int8 NHWC/16, out_stride bytes per pixel; channels >= out_c are the padding lanes' zeros),
// the warp's 16 channels ch_base + 64i + 16 * warp.. of each pixel, the cursor `rows` at pixel
// first + lane (step 32).  stg: the warp's staging, CHUNK pixels x 16 bytes.
// SMALL: every |acc + bias| < 2^22 (the host proved it: narrow_s8_small_sums), so
// s8::requantize_small — the same bits without the quarter-rate int <-> float conversions.
template <int WN, int CHUNK, bool SMALL, int MI, class P, class Rows>
__device__ __forceinline__ void transpose_store_s8(const int (&acc)[MI][WN / 2], const P& p,
                                                   int8_t* stg, int ch_base, int warp, int lane,
                                                   const Rows& first_rows) {
  static_assert(WN % CHUNK == 0 && CHUNK % 32 == 0, "whole staging passes");
  constexpr int kRows = CHUNK / 32;  // a lane's pixels per pass
  const int g = lane / 4;
  const int st_mi = lane / 8, st_row = lane % 8;  // stmatrix.x4: this lane's row address
#pragma unroll
  for (int i = 0; i < MI; ++i) {
    const int ch0 = ch_base + 64 * i + 16 * warp;  // the warp's 16
    if (ch0 >= p.out_stride) continue;             // warp-uniform: a group past the tensor
    const int c[2] = {ch0 + g, ch0 + g + 8};
    const bool in[2] = {c[0] < p.out_c, c[1] < p.out_c};
    int bias[2] = {in[0] ? __ldg(p.bias + c[0]) : 0, in[1] ? __ldg(p.bias + c[1]) : 0};
    if constexpr (SMALL) {
      bias[0] = s8::small_sum_bias(bias[0]);
      bias[1] = s8::small_sum_bias(bias[1]);
    }
    const float mult[2] = {in[0] ? __ldg(p.multiplier + c[0]) : 0.f,
                           in[1] ? __ldg(p.multiplier + c[1]) : 0.f};
    // The padding lanes' bytes (channels >= out_c: bias and multiplier 0, so their requantised
    // value is 0 already) masked off all the same: bytes 0 and 2 are channel g, 1 and 3 g + 8.
    const uint32_t keep = (in[0] ? 0x00FF00FFu : 0u) | (in[1] ? 0xFF00FF00u : 0u);
    Rows rows_of = first_rows;
#pragma unroll
    for (int c0 = 0; c0 < WN; c0 += CHUNK) {
      long long rows[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) rows[r] = rows_of.next();
      __syncwarp();  // the previous pass's reads are done
#pragma unroll
      for (int jj = 0; jj < CHUNK / 8; jj += 4) {
        uint32_t w[4];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const int j = c0 / 8 + jj + m;
          // r[q][h]: pixel 2t + q's channel g + 8h, the int8 in its low byte (requantize_small's
          // float bits, or requantize's int), which go to byte 2q + h of the word: three byte
          // permutes a word (run 52's ncu: the masks and shifts they replace were about a third
          // of the epilogue's instructions, and the window conv is bound by them).
          uint32_t r[2][2];
#pragma unroll
          for (int q = 0; q < 2; ++q)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              if constexpr (SMALL)
                r[q][h] = s8::requantize_small(acc[i][4 * j + 2 * h + q] + bias[h], mult[h],
                                               float(p.lo), float(p.hi));
              else
                r[q][h] = uint32_t(
                    s8::requantize(acc[i][4 * j + 2 * h + q] + bias[h], mult[h], p.lo, p.hi));
            }
          w[m] = __byte_perm(__byte_perm(r[0][0], r[0][1], 0x0040),
                             __byte_perm(r[1][0], r[1][1], 0x0040), 0x5410) &
                 keep;
        }
        const uint32_t addr = ptx::smem_u32(stg + (8 * (jj + st_mi) + st_row) * 16);
        stmatrix_x4_trans(addr, w);
      }
      __syncwarp();
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        // Bytes c0, c8, c1, c9, ...: even bytes are channels 0-7, odd ones 8-15.
        const uint4 raw = *reinterpret_cast<const uint4*>(stg + (lane + 32 * r) * 16);
        const uint4 out =
            make_uint4(__byte_perm(raw.x, raw.y, 0x6420), __byte_perm(raw.z, raw.w, 0x6420),
                       __byte_perm(raw.x, raw.y, 0x7531), __byte_perm(raw.z, raw.w, 0x7531));
        if (rows[r] >= 0)
          *reinterpret_cast<uint4*>(static_cast<int8_t*>(p.y) + rows[r] * p.out_stride + ch0) = out;
      }
    }
  }
}
#endif

// The mainloop's epilogue type (tma_mainloop.cuh's Epi) of BM channels x BN pixels per tile;
// CHUNK pixels per staging pass (64; 32 where the ring leaves less shared memory).  Pixel m is
// output row m (m < p.m).
template <int BM, int BN, bool SPLIT_N, bool RESIDUAL, int CHUNK = 64>
struct TmaTransposeEpilogue {
  static constexpr int kWN = SPLIT_N ? BN / 2 : BN;     // pixels per warpgroup
  static constexpr int kWarpStaging = CHUNK * 16 * 2;   // CHUNK pixels x 16 channels fp16
  static constexpr size_t kStaging = 8 * kWarpStaging;  // 8 consumer warps

#ifdef CNNRT_WGMMA_DEVICE
  template <int MI, class P>
  static __device__ __forceinline__ void store(const float (&acc)[MI][kWN / 2], const P& p,
                                               const TmaUnit& u) {
    __half* stg = reinterpret_cast<__half*>(u.after_ring + (u.cw * 4 + u.warp) * kWarpStaging);
    const LinearRows rows{u.n0 + (SPLIT_N ? u.cw * kWN : 0) + u.lane / 2, p.m, 16};
    transpose_store<kWN, CHUNK, RESIDUAL>(
        acc, p, stg, u.m_blk * BM + (SPLIT_N ? 0 : u.cw * (BM / 2)), u.warp, u.lane, rows);
  }
#endif
};

}  // namespace cnnrt::cuda::tma_detail
