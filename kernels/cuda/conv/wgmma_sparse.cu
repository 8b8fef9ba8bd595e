// Hopper 2:4 sparse implicit-GEMM fp16 convolution on sparse tensor cores (wgmma.mma_async.sp),
// with the conv family's fused epilogue (bias, any clamp, fused MaxPool, fused residual).
//
// Why this mapping: only operand A of a sparse MMA may be 2:4, grouped along K, so the weights
// are A and the GEMM is transposed relative to the dense kernels (wgmma_kernel.cuh):
// M = output channels, N = output pixels, K = kh * kw * in_c in (kh, kw, c) order.  A weight row
// keeps 2 of every 4 consecutive K elements (4 input channels at one tap, docs/SPARSITY.md), so
// it is stored compressed: w_k / 2 halves plus one 4-bit nibble per group.
//
// Tile: CTA = 2 warpgroups (256 threads) x BC = 64 * MI output channels x 128 pixels; warpgroup w
// owns pixels 64w..64w+63 and all BC channels: MI instructions m64n64k32 per 32 of K, both
// warpgroups reading the same A.  MI = 4, 3, 2, 1 (BC 256, 192, 128, 64: the largest dividing
// out_c, so channel tiles never straddle the end).  One k-tile = 64 of dense K:
//  * A: BC rows x 32 kept halves = 64 bytes, in the K-major 64-byte swizzle (8-row atoms of 512
//    bytes, chunk c of row r at 16 * (c ^ ((r >> 1) & 3))); a sparse m64nNk32 reads A as a
//    64 x 16 tile, so the 2 instructions of a k-tile start 32 bytes apart (+2 in the descriptor);
//  * B: the activations, gathered exactly like the dense kernels' A (wg_gather_rows: one 16-byte
//    cp.async per pixel, tap and 8 channels, zero-filled for padding taps and the K tail, the
//    same row table and 128-byte swizzle); instruction kk reads byte 64 * kk of each row (+4);
//  * metadata: sparsity selector 0, so threads 0 and 1 of each quad supply it.  Thread (warp q,
//    lane 4g + t) of a warpgroup, instruction kk, m-tile i: bits 0-15 = the nibbles of row
//    64i + 16q + g, groups 8kk + 4(t % 2) .. +3 of this k-tile (group j at bits 4j, nibble =
//    first index | second index << 2), bits 16-31 = the same for row + 8.  Verified against a
//    CPU product on an H100 (the other plausible layout, one row per thread, was wrong).  It is
//    built once at build time in exactly the order the threads read it: per (channel tile,
//    k-tile, m-tile) 64 uint2 (threads t and t ^ 2 share one; its 2 words are the 2 kk), i.e.
//    1/8 of the value bytes, cp.async'ed into the stage with A and B.  wgmma.sp reads the
//    metadata register asynchronously, so even and odd k-tiles use two register sets kept alive
//    until their group retires (keep_meta_alive).
// Pipeline: the dense kernel's (4-deep cp.async ring, one barrier per k-tile, loads 2 tiles
// ahead, one wgmma group in flight).  A stage is 4 KB x MI (A) + 16 KB (B) + 0.5 KB x MI
// (metadata): 34 KB at MI 4, so the row-streamed pool tiles (a staging ring of their own) fit.
// A first version with 128-K k-tiles (two B sub-tiles, 128-byte A rows) needed 3 stages at MI >=
// 3 and left no room for streaming: conv2 (fused pool) ran at 0.77x of the dense kernel.
//
// Epilogue: the accumulators are [channel][pixel] (wgmma m64n64 layout: register 4j + 2h + q
// holds channel row g + 8h of the warp's 16, pixel 8j + 2t + q), so the staging write
// transposes them into the dense kernels' [pixel][BC + 8] fp16 staging tile (bias + clamp
// first); from there the dense kernels' write-out (wg_write_rows: 16-byte rows, residual add)
// and fused pool (wg_pool_out, single-pass or row-streamed tiles, wgmma_pool_plan.h) serve
// unchanged.  The scalar 2-byte staging stores are bank-conflict-free (rows 68 words apart).
//
// Build: sm_90a only (CMake adds the image for this file); other images trap, and
// device_supported() is the dense wgmma kernel's probe of the same fatbinary build.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "graph/passes_sparsity.h"
#include "kernels/cpu/sparse24.h"
#include "kernels/cuda/conv/ptx_sparse.cuh"
#include "kernels/cuda/conv/wgmma.h"
#include "kernels/cuda/conv/wgmma_common.h"
#include "kernels/cuda/conv/wgmma_kernel.cuh"
#include "kernels/cuda/conv/wgmma_pool_plan.h"
#include "kernels/cuda/conv/wgmma_sparse.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/elementwise_fp16.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace wgsp {

using namespace ptx;
using wgmma_detail::kBM;
using wgmma_detail::kThreads;
using wgmma_detail::WgLoader;
using wgmma_detail::WgmmaParams;
using wgmma_detail::WgTile;

constexpr int kKTile = 64;          // dense K per k-tile
constexpr int kXStage = kBM * 128;  // activations: 128 pixel rows of 64 halves

struct SpParams : WgmmaParams {
  const uint2* meta = nullptr;  // [channel tiles][k_tiles][MI][64]
  int w_row = 0;                // compressed weight row in halves (w_k / 2)
  int zero = 0;                 // always 0; the compiler cannot know it (keep_meta_alive)
};

constexpr int stages_of(int) { return 4; }
// Rounded up to 1024 bytes: the swizzle atoms of every stage's A and B must stay 1024-byte
// aligned (MI 1 and 3 give 20.5 and 29.5 KB; unrounded, the odd stages' tiles were misaligned
// and those instances computed garbage on an H100).
constexpr size_t stage_bytes(int mi) {
  return (size_t(mi) * 64 * 64 + kXStage + size_t(mi) * 64 * 8 + 1023) / 1024 * 1024;
}
static_assert(stage_bytes(1) % 1024 == 0 && stage_bytes(3) % 1024 == 0, "aligned stages");
constexpr size_t smem_bytes(int mi) {
  return 1024 + size_t(stages_of(mi)) * stage_bytes(mi) + size_t(kBM) * 16;
}
constexpr size_t stream_smem_bytes(int mi, int stage_rows, int tile_tw) {
  return smem_bytes(mi) + size_t(stage_rows) * tile_tw * (64 * mi + 8) * 2;
}

// One k-tile's compressed weights (BC rows x 64 bytes, 64-byte swizzle: row r's 16-byte chunk c
// at r * 64 + 16 * (c ^ ((r >> 1) & 3))) and metadata (MI x 64 uint2, copied as MI x 32 uint4).
template <int MI>
__device__ __forceinline__ void sp_load_w(const SpParams& p, uint32_t stage, const __half* w_tile,
                                          const uint2* meta_tile, int kt, int tid) {
  const int c = tid & 3, r0 = tid >> 2;  // rows r0 + 64 i share (r >> 1) & 3
  const uint32_t off = uint32_t(r0) * 64 + (uint32_t(c ^ ((r0 >> 1) & 3)) << 4);
#pragma unroll
  for (int i = 0; i < MI; ++i)
    cp_async_16(stage + off + i * 64 * 64,
                w_tile + size_t(r0 + 64 * i) * p.w_row + kt * (kKTile / 2) + c * 8, 16);
  const uint32_t m_dst = stage + MI * 64 * 64 + kXStage;
  const uint4* m_src = reinterpret_cast<const uint4*>(meta_tile) + size_t(kt) * MI * 32;
  for (int i = tid; i < MI * 32; i += kThreads) cp_async_16(m_dst + i * 16, m_src + i, 16);
}

// K-major operand in the 64-byte swizzle layout (the compressed A): 8-row atoms of 512 bytes.
__device__ __forceinline__ uint64_t make_desc_64b(uint32_t smem_addr) {
  return uint64_t((smem_addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(512 >> 4) << 32) |
         (uint64_t(2) << 62);
}

#ifdef CNNRT_WGMMA_DEVICE
__device__ __forceinline__ uint32_t word(const uint2& v, int i) { return i == 0 ? v.x : v.y; }

// wgmma.mma_async.sp reads its metadata register asynchronously, like an A fragment: reloading
// the register while the group that reads it is in flight gave wrong sums (H100, measured), and
// ptxas does not track that dependency.  So each k-tile's metadata lives in one of two register
// sets (even / odd k-tiles) and this fake use after the wait that retires its group — a store
// predicated on a kernel parameter that is always 0, which ptxas cannot drop — keeps the set
// allocated until then.
template <int MI>
__device__ __forceinline__ void keep_meta_alive(const uint2 (&e)[MI], int zero, uint32_t addr) {
#pragma unroll
  for (int i = 0; i < MI; ++i)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n@p st.shared.v2.u32 [%3], {%0, %1};\n}\n" ::"r"(
            e[i].x),
        "r"(e[i].y), "r"(zero), "r"(addr)
        : "memory");
}

// One k-tile: wait for its loads, refill the slot of tile kt + STAGES - 2, issue its MMAs with
// metadata set e, and retire the group of kt - 1 (one group stays in flight).
template <int MI, int STAGES>
__device__ __forceinline__ void sp_k_tile(const SpParams& p, WgLoader& ld, uint32_t ring,
                                          const unsigned char* ring_ptr, const int4* s_rows,
                                          const __half* w_tile, const uint2* meta_tile, int wg,
                                          int tid, int kt, int meta_idx, uint2 (&e)[MI],
                                          float (&acc)[MI][32]) {
  constexpr uint32_t kA = MI * 64 * 64, kStage = uint32_t(stage_bytes(MI));
  cp_async_wait<STAGES - 3>();
  fence_proxy_async_shared();
  __syncthreads();  // tile kt landed everywhere; the wgmma of kt - 2 retired everywhere
  const int k_next = kt + STAGES - 2;
  if (k_next < p.k_tiles) {
    const uint32_t st = ring + (k_next % STAGES) * kStage;
    sp_load_w<MI>(p, st, w_tile, meta_tile, k_next, tid);
    wgmma_detail::wg_gather_rows(ld, p, st + kA, s_rows);
  }
  cp_async_commit();

  const uint32_t st = ring + (kt % STAGES) * kStage;
  const uint2* meta =
      reinterpret_cast<const uint2*>(ring_ptr + (kt % STAGES) * kStage + kA + kXStage);
#pragma unroll
  for (int i = 0; i < MI; ++i) e[i] = meta[i * 64 + meta_idx];
  const uint64_t desc_b = make_desc(st + kA + wg * 64 * 128);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 2; ++kk)  // +32 bytes of A, +64 bytes of B per instruction
#pragma unroll
    for (int i = 0; i < MI; ++i)
      wgmma_sp_m64n64k32(acc[i], make_desc_64b(st + i * 64 * 64) + 2 * kk, desc_b + 4 * kk,
                         word(e[i], kk));
  wgmma_commit();
  wgmma_wait<1>();
}

// The K loop of one pass; returns with every wgmma retired and every cp.async landed.
template <int MI, int STAGES>
__device__ __forceinline__ void sp_mainloop(const SpParams& p, WgLoader& ld, uint32_t ring,
                                            const unsigned char* ring_ptr, const int4* s_rows,
                                            const __half* w_tile, const uint2* meta_tile, int wg,
                                            int tid, float (&acc)[MI][32]) {
  constexpr uint32_t kA = MI * 64 * 64, kStage = uint32_t(stage_bytes(MI));
  wgmma_detail::wg_seek_a(ld, p);
#pragma unroll
  for (int i = 0; i < MI; ++i) {
#pragma unroll
    for (int j = 0; j < 32; ++j) acc[i][j] = 0.f;
    fence_operands(acc[i]);
  }
  const int lane = tid & 31, quad_row = ((tid >> 5) & 3) * 8 + (lane >> 2);
  const int meta_idx = quad_row * 2 + (lane & 1);
  const uint32_t never = smem_u32(s_rows);  // the fake store's address (never written)

#pragma unroll
  for (int s = 0; s < STAGES - 2; ++s) {
    if (s < p.k_tiles) {
      sp_load_w<MI>(p, ring + s * kStage, w_tile, meta_tile, s, tid);
      wgmma_detail::wg_gather_rows(ld, p, ring + s * kStage + kA, s_rows);
    }
    cp_async_commit();
  }
  uint2 even[MI], odd[MI];  // metadata of the even / odd k-tiles (keep_meta_alive)
#pragma unroll
  for (int i = 0; i < MI; ++i) even[i] = odd[i] = make_uint2(0, 0);
  for (int kt = 0; kt < p.k_tiles; kt += 2) {
    sp_k_tile<MI, STAGES>(p, ld, ring, ring_ptr, s_rows, w_tile, meta_tile, wg, tid, kt, meta_idx,
                          even, acc);
    keep_meta_alive(odd, p.zero, never);  // kt - 1's group retired in that call
    if (kt + 1 >= p.k_tiles) break;
    sp_k_tile<MI, STAGES>(p, ld, ring, ring_ptr, s_rows, w_tile, meta_tile, wg, tid, kt + 1,
                          meta_idx, odd, acc);
    keep_meta_alive(even, p.zero, never);
  }
  wgmma_wait<0>();
  keep_meta_alive(even, p.zero, never);
  keep_meta_alive(odd, p.zero, never);
#pragma unroll
  for (int i = 0; i < MI; ++i) fence_operands(acc[i]);
  cp_async_wait<0>();
}
#endif  // CNNRT_WGMMA_DEVICE

// Bias + clamp -> fp16 staging [pixel][BC + 8], transposing the [channel][pixel] accumulators;
// a streamed pass's pixels past its conv rows are dropped.
template <int MI, bool POOL>
__device__ __forceinline__ void sp_stage_acc(const float (&acc)[MI][32], __half* s_c,
                                             const SpParams& p, int n0, int pass, int passes,
                                             int wg, int tid) {
  constexpr int kCRow = 64 * MI + 8;
  const int lane = tid & 31, g = lane >> 2, t = lane & 3, wq = (tid >> 5) & 3;
  int srow[16];
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int r = 64 * wg + 8 * j + 2 * t + q;
      int s = r;
      if (POOL && passes > 1) {
        const int rr = r / p.tile.tile_tw, ly = pass * p.tile.pass_rows + rr;
        s = rr < p.tile.pass_rows && ly < p.tile.tile_th
                ? (ly % p.tile.stage_rows) * p.tile.tile_tw + (r - rr * p.tile.tile_tw)
                : -1;
      }
      srow[2 * j + q] = s;
    }
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int ch = 64 * i + 16 * wq + g + 8 * h;
      const float b = p.bias[n0 + ch];
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          float v = acc[i][4 * j + 2 * h + q] + b;
          if (p.act.on) v = fminf(fmaxf(v, p.act.lo), p.act.hi);
          if (srow[2 * j + q] >= 0) s_c[srow[2 * j + q] * kCRow + ch] = __float2half_rn(v);
        }
    }
}

template <int MI, bool POOL>
__global__ void __launch_bounds__(kThreads, 1) conv_wgmma_sp_kernel(const SpParams p) {
  pdl_wait();
#ifdef CNNRT_WGMMA_DEVICE
  constexpr int BC = 64 * MI, STAGES = stages_of(MI), kCRow = BC + 8;
  static_assert(size_t(kBM) * kCRow * 2 <= STAGES * stage_bytes(MI), "staging aliases the ring");
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_base = smem_u32(smem_raw);
  const uint32_t ring = (raw_base + 1023u) & ~1023u;
  unsigned char* ring_ptr = smem_raw + (ring - raw_base);
  int4* s_rows = reinterpret_cast<int4*>(ring_ptr + STAGES * stage_bytes(MI));

  const int tid = threadIdx.x, wg = tid >> 7;
  const WgTile t = wgmma_detail::wg_tile_of<POOL>(p, BC);
  const __half* w_tile = p.w + size_t(t.n0) * p.w_row;
  const uint2* meta_tile = p.meta + size_t(blockIdx.y) * p.k_tiles * MI * 64;
  WgLoader ld = wgmma_detail::wg_loader_of(tid);

  const int passes = POOL ? p.tile.passes : 1;
  __half* const s_c =
      passes == 1 ? reinterpret_cast<__half*>(ring_ptr) : reinterpret_cast<__half*>(s_rows + kBM);
  for (int pass = 0; pass < passes; ++pass) {
    wgmma_detail::wg_fill_rows<POOL>(p, s_rows, tid, pass, passes, t);
    __syncthreads();
    float acc[MI][32];
    sp_mainloop<MI, STAGES>(p, ld, ring, ring_ptr, s_rows, w_tile, meta_tile, wg, tid, acc);
    __syncthreads();  // the ring is drained (single pass: it becomes the staging tile)
    sp_stage_acc<MI, POOL>(acc, s_c, p, t.n0, pass, passes, wg, tid);
    __syncthreads();
    if constexpr (POOL) {
      const int py_begin = pass == 0 ? 0 : wgmma_detail::wg_pooled_rows_after(p, passes, pass - 1);
      const int py_end = wgmma_detail::wg_pooled_rows_after(p, passes, pass);
      if (py_end > py_begin)
        wgmma_detail::wg_pool_out<BC>(p, s_c, t, passes, tid, py_begin, py_end);
    } else {
      wgmma_detail::wg_write_rows<BC>(p, s_c, t, tid);
    }
  }
#else
  __trap();  // not the sm_90a image: device_supported() keeps this from ever being launched
#endif
}

}  // namespace wgsp

class ConvFp16Sparse24Impl {
 public:
  ConvShape shape;
  wgsp::SpParams base;  // everything but x, y, the batch and (pool) the tiling
  int mi = 1;           // 64-channel m-tiles per CTA
  int sms = 132;
  std::vector<WgmmaTiling> tilings;
  int single = -1;
  DeviceArray values, meta, bias;
  bool pool() const { return shape.pool.has_value(); }
};

namespace {

using wgsp::kKTile;

// Row streaming only for K loops of >= 16 k-tiles of 64 (wgmma_pool_plan.h says why).
constexpr int kMinStreamKTiles = 16;

template <bool POOL>
auto kernel_of(int mi) {
  return mi == 4   ? wgsp::conv_wgmma_sp_kernel<4, POOL>
         : mi == 3 ? wgsp::conv_wgmma_sp_kernel<3, POOL>
         : mi == 2 ? wgsp::conv_wgmma_sp_kernel<2, POOL>
                   : wgsp::conv_wgmma_sp_kernel<1, POOL>;
}
auto kernel_of(int mi, bool pool) { return pool ? kernel_of<true>(mi) : kernel_of<false>(mi); }

// The compressed weight in the kernel's two arrays: kept values [out_c][w_k / 2] (fp32 here,
// uploaded as fp16) and the per-thread metadata words (design note).
struct PackedSparse {
  std::vector<float> values;
  std::vector<uint32_t> meta;
};

PackedSparse pack_sparse(const ConvShape& s, const float* weight, int w_k, int mi,
                         const std::string& layer) {
  // The project's 2:4 format (kernels/cpu/sparse24.h: its check names the layer, output channel,
  // tap and channels; its kept pairs are in K order (tap, channel group), which is this kernel's
  // K order, since in_c % 8 == 0 leaves no channel padding), then the K tail up to w_k: zeros
  // with the valid nibble {0, 1}.
  const sparse24::Compressed c = sparse24::compress(
      weight, sparsity::WeightShape{s.out_c, s.in_c, s.conv.kernel_h * s.conv.kernel_w}, layer);
  const int groups = w_k / 4, half_k = w_k / 2, real_groups = c.shape.groups_per_row();
  PackedSparse out;
  out.values.assign(size_t(s.out_c) * half_k, 0.f);
  std::vector<uint8_t> nibble(size_t(s.out_c) * groups, uint8_t(0 | 1 << 2));
  for (int o = 0; o < s.out_c; ++o) {
    std::copy_n(c.values.begin() + size_t(o) * real_groups * 2, real_groups * 2,
                out.values.begin() + size_t(o) * half_k);
    for (int g = 0; g < real_groups; ++g)
      nibble[size_t(o) * groups + g] =
          uint8_t(c.meta[size_t(o) * c.meta_words_per_row() + g / 4] >> (4 * (g % 4)) & 0xF);
  }
  const int k_tiles = w_k / kKTile, bc = 64 * mi, n_tiles = s.out_c / bc;
  auto nibbles16 = [&](int row, int group0) {
    uint32_t v = 0;
    for (int j = 0; j < 4; ++j) v |= uint32_t(nibble[size_t(row) * groups + group0 + j]) << (4 * j);
    return v;
  };
  out.meta.resize(size_t(n_tiles) * k_tiles * mi * 64 * 2);
  size_t at = 0;
  for (int nt = 0; nt < n_tiles; ++nt)
    for (int kt = 0; kt < k_tiles; ++kt)
      for (int i = 0; i < mi; ++i)
        for (int quad_row = 0; quad_row < 32; ++quad_row)  // warp * 8 + lane / 4
          for (int half = 0; half < 2; ++half)             // lane % 2: groups 0-3 or 4-7
            for (int kk = 0; kk < 2; ++kk) {
              const int row = nt * bc + 64 * i + (quad_row / 8) * 16 + quad_row % 8;
              const int group0 = kt * (kKTile / 4) + 8 * kk + 4 * half;
              out.meta[at++] = nibbles16(row, group0) | nibbles16(row + 8, group0) << 16;
            }
  return out;
}

std::string kernel_name(const ConvFp16Sparse24Impl& m) {
  return "wgmma_sp_" + std::to_string(64 * m.mi) + "x128x64_s" +
         std::to_string(wgsp::stages_of(m.mi));
}

ConvFp16Sparse24Plan plan_of(const ConvFp16Sparse24Impl& m, int variant, int batch) {
  ConvFp16Sparse24Plan plan;
  plan.variant = variant;
  plan.name = kernel_name(m);
  const long long n_tiles = m.shape.out_c / (64 * m.mi);
  if (!m.pool()) {
    const long long m_total = (long long)batch * m.shape.conv_h * m.shape.conv_w;
    plan.ctas = (m_total + wgsp::kBM - 1) / wgsp::kBM * n_tiles;
    return plan;
  }
  const PoolTile& t = m.tilings[variant].tile;
  plan.ctas = (long long)batch * t.tiles_y * t.tiles_x * n_tiles;
  plan.name += "_pool" + std::to_string(t.tile_ph) + "x" + std::to_string(t.tile_pw);
  if (t.passes > 1)
    plan.name += "_stream" + std::to_string(t.passes) + "x" + std::to_string(t.pass_rows) + "r";
  return plan;
}

}  // namespace

// The dense kernel's rule, but whole 64-channel M tiles (the dense kernel also takes 32 / 96).
bool ConvFp16Sparse24::supports(const ConvShape& s) {
  return ConvFp16Wgmma::supports(s) && s.out_c % 64 == 0;
}
bool ConvFp16Sparse24::device_supported() { return ConvFp16Wgmma::device_supported(); }

ConvFp16Sparse24::ConvFp16Sparse24(const ConvShape& shape_in, const float* weight,
                                   const float* bias, const std::string& layer)
    : impl_(std::make_unique<ConvFp16Sparse24Impl>()) {
  ConvFp16Sparse24Impl& m = *impl_;
  m.shape = shape_in;
  m.shape.derive();
  const ConvShape& s = m.shape;
  if (!supports(s))
    throw Error(layer +
                ": conv_fp16_sparse24: unsupported shape (needs groups 1, dilation 1, "
                "in_c % 8 == 0, out_c % 64 == 0, a pool window of <= 128 pixels)");
  if (!device_supported())
    throw Error(layer +
                ": conv_fp16_sparse24 needs a compute capability 9.0 device and the "
                "sm_90a build");
  if (weight == nullptr) throw Error(layer + ": conv_fp16_sparse24: no weight");
  m.mi = s.out_c % 256 == 0 ? 4 : s.out_c % 192 == 0 ? 3 : s.out_c % 128 == 0 ? 2 : 1;

  wgsp::SpParams& p = m.base;
  fill_wgmma_conv_params(s, kKTile, p);
  p.w_row = p.w_k / 2;
  p.out_h = s.out_h;
  p.out_w = s.out_w;
  p.pool = pool_window_of(s.pool);
  const DeviceTraits& device = device_traits();
  m.sms = std::max(device.sms, 1);
  const size_t single = wgsp::smem_bytes(m.mi);
  if (device.smem_optin < single)
    throw Error(layer + ": conv_fp16_sparse24: the device offers too little shared memory");
  if (m.pool()) {
    WgmmaPoolSmem smem;
    smem.single = single;
    smem.streamed = [mi = m.mi](int stage_rows, int tile_tw) {
      return wgsp::stream_smem_bytes(mi, stage_rows, tile_tw);
    };
    smem.optin = device.smem_optin;
    smem.per_sm = device.smem_per_sm;
    m.tilings = enumerate_wgmma_pool_tilings(s.out_h, s.out_w, p.pool, wgsp::kBM, smem, &m.single,
                                             "conv_fp16_sparse24");
  }

  const PackedSparse packed = pack_sparse(s, weight, p.w_k, m.mi, layer);
  m.values = upload_as_fp16(packed.values);
  m.meta = DeviceArray(packed.meta.size() * sizeof(uint32_t));
  m.meta.upload(packed.meta.data(), m.meta.bytes());
  std::vector<float> b(s.out_c, 0.f);
  if (bias != nullptr) std::copy(bias, bias + s.out_c, b.begin());
  m.bias = upload_fp32(b);
  p.w = static_cast<const __half*>(m.values.get());
  p.meta = static_cast<const uint2*>(m.meta.get());
  p.bias = static_cast<const float*>(m.bias.get());
  if (!plan_only())
    CNNRT_CUDA_CHECK(cudaFuncSetAttribute(kernel_of(m.mi, m.pool()),
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(m.pool() ? device.smem_optin : single)));
}

ConvFp16Sparse24::~ConvFp16Sparse24() = default;

ConvFp16Sparse24Plan ConvFp16Sparse24::plan(int batch) const {
  const ConvFp16Sparse24Impl& m = *impl_;
  const int b = std::max(batch, 1);
  if (!m.pool()) return plan_of(m, 0, b);
  return plan_of(m,
                 choose_wgmma_pool_tiling(m.tilings, m.single, m.shape.out_c / (64 * m.mi),
                                          m.base.k_tiles, kMinStreamKTiles, m.sms, b),
                 b);
}

std::optional<ConvFp16Sparse24Plan> ConvFp16Sparse24::plan_pool_block(int batch, int ph,
                                                                      int pw) const {
  const ConvFp16Sparse24Impl& m = *impl_;
  if (!m.pool()) return std::nullopt;
  for (size_t i = 0; i < m.tilings.size(); ++i)
    if (m.tilings[i].tile.tile_ph == ph && m.tilings[i].tile.tile_pw == pw)
      return plan_of(m, int(i), std::max(batch, 1));
  return std::nullopt;
}

void ConvFp16Sparse24::forward(int variant, const void* x, const void* residual, void* y, int batch,
                               cudaStream_t stream) const {
  const ConvFp16Sparse24Impl& m = *impl_;
  wgsp::SpParams p = m.base;
  const WgmmaLaunch launch =
      set_wgmma_launch("conv_fp16_sparse24", m.shape, m.tilings, wgsp::kBM, wgsp::smem_bytes(m.mi),
                       variant, x, residual, y, batch, p);
  if (launch.grid_x == 0) return;
  const dim3 grid(launch.grid_x, static_cast<unsigned>(m.shape.out_c / (64 * m.mi)));
  launch_kernel(kernel_of(m.mi, m.pool()), grid, wgsp::kThreads, launch.smem, stream, p);
}

size_t ConvFp16Sparse24::weight_bytes() const {
  return impl_->values.bytes() + impl_->meta.bytes() + impl_->bias.bytes();
}

}  // namespace cnnrt::cuda
