// Implicit-GEMM fp16 convolution on tensor cores with a fused bias / ReLU / MaxPool epilogue.
//
// GEMM view (per group): M = output pixels, N = output channels, K = kh*kw*cin.  A rows are
// gathered on the fly from the NHWC input (no im2col buffer); B is the prepacked weight
// [group][n_rows][k] fp16 with K contiguous, zero-padded to a multiple of 64 in K and in N to
// cover every tile config's last N tile (BN = 64 / 96 / 128), so B loads never need a guard.
//
// Two A loaders (template flag GATHER):
//  * vector: K ordered (kh, kw, c8-chunk) over channels padded to 8; one 16-byte cp.async per
//    (row, tap, 8 channels), zero-filled (src-size 0) for padding taps and K tails.
//  * gather: for few input channels (C <= 4, AlexNet conv1): K ordered (kh, kw, c) over the REAL
//    channels (363 instead of 968 for conv1), loaded with 2-byte __ldg gathers into registers
//    one k-tile ahead and stored to shared memory after the MMAs of the current tile, so the
//    loads overlap the tensor-core work.  A warp owns one A row and lane = k column, so the
//    per-row table read is a broadcast and the smem stores are conflict-free.
//
// Shared memory rows are 32 halves + 8 halves padding (80 B): eight consecutive rows hit eight
// distinct 16-byte bank groups, so every ldmatrix phase is conflict-free without a swizzle.
// Pipeline: STAGES-deep cp.async ring, one __syncthreads per k-tile (the slot refilled in
// iteration kt is the one consumed in kt-1, and every thread has passed the barrier).
// MMA: mma.sync m16n8k16 row.col f16 -> f32; fragments via ldmatrix.x4.
//
// Epilogue: accumulators + bias (fp32), ReLU, rounded to fp16 and staged in shared memory;
//  * no pool: 16-byte vector stores of whole 8-channel chunks (padding channels forced to 0);
//  * POOL: the CTA's M tile is a TH x TW spatial tile of ONE image's conv output that covers the
//    whole windows of a PH x PW block of pooled outputs ((PH-1)*stride + kernel rows).  When
//    TH*TW > BM the CTA runs several M passes over the same staging buffer (`passes`), so large
//    tiles (less halo recomputation, less edge waste) are possible.  The pooled outputs are then
//    reduced from shared memory with __hmax2; the pre-pool tensor never reaches device memory.
//    Taking the max after rounding to fp16 equals rounding the fp32 max (rounding is monotone).
//    Row-streaming variant (p.pool_rows > 0): passes of whole conv rows, staging = a small ring
//    of conv rows, pooled rows written as soon as their windows are complete; the staging size
//    no longer grows with the pass count, so one CTA can sweep a whole image (no halo).
//  * split-K (non-pool instances, p.partial set): grid.z slices the K loop and each CTA writes
//    its raw fp32 sums to the workspace; conv_splitk_finish_kernel (bottom of this file)
//    reduces them with bias / ReLU / pool.  conv_finish_kernel pools the fp16 output of an
//    unfused launch.
// A single-pass CTA stages its epilogue tile in the (then idle) pipeline ring, see
// igemm_smem_bytes; the vector A loader walks (tap, channel chunk) incrementally, no divisions.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace cnnrt::cuda::conv_detail {

constexpr int kBK = 32;               // K per pipeline stage (halves), default config
constexpr int kMaxBK = 64;            // the BK64 config; packed K is padded to this
constexpr int kWeightRowAlign = 128;  // packed weight rows per group: at least a multiple
                                      // of this, and of every config's BN coverage

struct ConvParams {
  const __half* x = nullptr;
  const __half* w = nullptr;    // igemm: [groups][w_rows][w_k]; direct: [oc][kh][kw][cpg]
  const float* bias = nullptr;  // igemm: [groups][w_rows]; direct: [oc]
  __half* y = nullptr;
  int batch = 0;
  int in_h = 0, in_w = 0, in_cs = 0, in_c = 0;
  int conv_h = 0, conv_w = 0;
  int kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int groups = 1, cpg = 0;  // real input channels per group
  int cpg_chunks = 0;       // vector loader: channels per group / 8
  int k_real = 0;           // vector: K in 8-chunks; gather: K in elements
  int k_tiles = 0;          // of the launched config's BK (32 or 64)
  int w_k = 0, w_rows = 0;  // packed weight row stride (halves) and rows per group
  int n_limit = 0;          // columns per group to write (padded OC if groups == 1)
  int n_tiles = 0;          // N tiles per group
  int opg = 0;              // real output channels per group
  int out_c = 0, out_cs = 0;
  int relu = 0;
  // Pool (kernel 1 / stride 1 / pad 0 when absent; the direct kernel relies on that).
  int pk_h = 1, pk_w = 1, ps_h = 1, ps_w = 1, pp_h = 0, pp_w = 0;
  int out_h = 0, out_w = 0;  // final (pooled) extent
  int tile_ph = 1, tile_pw = 1, tile_th = 1, tile_tw = 1, tiles_y = 1, tiles_x = 1, passes = 1;
  // Row-streaming pool (pool_rows > 0): pass q computes conv-tile rows [q*pool_rows,
  // (q+1)*pool_rows) (pool_rows * tile_tw <= BM), the staging buffer is a ring of stage_rows
  // conv rows, and each pass pools the pooled rows its rows complete.  Staging then no longer
  // grows with the pass count, so one CTA can sweep a whole image (no halo recompute).
  int pool_rows = 0, stage_rows = 0;
  long long m_total = 0;  // no pool: batch * conv_h * conv_w
  // Split-K (non-pool instances only): CTA z covers k-tiles [z * split_k, (z + 1) * split_k)
  // and writes its raw fp32 sums to partial[z][m][n_limit] (groups == 1) instead of y.
  int split_k = 0;  // 0: no split, the kernel finishes the tile itself
  float* partial = nullptr;
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy; src_bytes == 0 zero-fills the destination without reading global memory.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Zeroes the halves of an 8-channel chunk whose channel index (first + i) is >= limit.
__device__ __forceinline__ uint4 zero_channels_from(uint4 v, int first, int limit) {
  if (first + 8 <= limit) return v;
  uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (first + i >= limit) w[i / 2] &= (i & 1) ? 0x0000ffffu : 0xffff0000u;
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Shared-memory layout: [cp.async ring][row table][staging, multi-pass only].  A single-pass
// CTA stages its fp16 tile in the ring itself: after the last cp_async_wait<0> + __syncthreads
// no copy is in flight and no warp reads the ring any more.  That takes the staging buffer off
// the footprint (128x128: 98 KB -> 63.5 KB), which is what lets 2-3 CTAs share an SM.  A
// multi-pass CTA keeps every pass's tile until the pool, while the ring is reused by the next
// pass, so its staging stays separate.
// bk: K per stage (32, or 64 for the BK64 config); smem rows are bk + 8 halves (80 / 144 B:
// both keep the 8 row addresses of an ldmatrix phase in 8 distinct 16-byte bank groups).
constexpr size_t igemm_ring_bytes(int bm, int bn, int stages, int bk = kBK) {
  return size_t(stages) * (bm + bn) * (bk + 8) * 2;
}
constexpr size_t igemm_pipeline_bytes(int bm, int bn, int stages, int bk = kBK) {
  return igemm_ring_bytes(bm, bn, stages, bk) + size_t(bm) * 16;
}
constexpr size_t igemm_staging_bytes(int bm, int bn, int passes) {
  return size_t(passes) * bm * (bn + 8) * 2;
}
constexpr size_t igemm_smem_bytes(int bm, int bn, int stages, int passes, int bk = kBK) {
  return igemm_pipeline_bytes(bm, bn, stages, bk) +
         (passes == 1 ? 0 : igemm_staging_bytes(bm, bn, passes));
}
// Row-streaming pool: a ring of stage_rows conv rows of tile_tw pixels (never aliased: the
// pipeline ring is busy with the next pass while earlier rows wait for their pool windows).
constexpr size_t igemm_stream_smem_bytes(int bm, int bn, int stages, int stage_rows, int tile_tw,
                                         int bk = kBK) {
  return igemm_pipeline_bytes(bm, bn, stages, bk) + size_t(stage_rows) * tile_tw * (bn + 8) * 2;
}

// Minimum resident CTAs promised to ptxas (caps registers per thread).  A 64x64 warp tile holds
// 128 fp32 accumulators per thread, so it gets the whole register file (1 CTA of 8 warps);
// smaller warp tiles keep 2 (8 warps) or 3 (4 warps) CTAs per SM.
constexpr int igemm_min_blocks(int bm, int bn, int warps_m, int warps_n) {
  return (bm / warps_m) * (bn / warps_n) >= 64 * 64 ? (warps_m * warps_n >= 8 ? 1 : 2)
                                                    : (warps_m * warps_n >= 8 ? 2 : 3);
}

template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, bool GATHER, bool POOL,
          int BK = kBK>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32, igemm_min_blocks(BM, BN, WARPS_M, WARPS_N))
    conv_igemm_kernel(const ConvParams p) {
  constexpr int kThreads = WARPS_M * WARPS_N * 32;
  constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  constexpr int MI = WM / 16, NI = WN / 8;
  static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile must be a multiple of 16x16");
  constexpr int kCh = BK / 8;         // 16-byte chunks per smem row
  constexpr int kRowHalves = BK + 8;  // padded smem row: 80 B (BK 32) / 144 B (BK 64)
  static_assert(BK == 32 || (BK == 64 && !GATHER), "BK 64: vector loader only");
  static_assert((BM * kCh) % kThreads == 0 && (BN * kCh) % kThreads == 0, "loader split");
  static_assert(kThreads % kCh == 0, "a thread's K chunk must be the same for all its rows");
  static_assert((BM * BK) % kThreads == 0, "gather split");
  constexpr int kAStage = BM * kRowHalves, kBStage = BN * kRowHalves;
  constexpr int kCRow = BN + 8;  // staging row (halves); +8 keeps half2 stores conflict-free
  static_assert(igemm_staging_bytes(BM, BN, 1) <= igemm_ring_bytes(BM, BN, STAGES, BK),
                "a single-pass staging tile must fit in the ring it aliases");

  extern __shared__ __align__(16) unsigned char smem_raw[];
  __half* s_a = reinterpret_cast<__half*>(smem_raw);
  __half* s_b = s_a + STAGES * kAStage;
  int4* s_rows = reinterpret_cast<int4*>(s_b + STAGES * kBStage);  // {image|-1, ih0, iw0, 0}
  // s_c is set below, once the pass count is known (aliases the ring when single-pass).

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;

  const int group = blockIdx.y / p.n_tiles;
  const int n0 = (blockIdx.y % p.n_tiles) * BN;  // column within the group
  const __half* w_tile = p.w + (size_t(group) * p.w_rows + n0) * p.w_k;
  const float* bias_tile = p.bias + size_t(group) * p.w_rows + n0;
  const int in_c0 = group * p.cpg;  // vector loader: first input channel of the group

  int image = 0, tile_y = 0, tile_x = 0, cy0 = 0, cx0 = 0;
  long long m0 = 0;
  if constexpr (POOL) {
    int t = blockIdx.x;
    tile_x = t % p.tiles_x;
    t /= p.tiles_x;
    tile_y = t % p.tiles_y;
    image = t / p.tiles_y;
    cy0 = tile_y * p.tile_ph * p.ps_h - p.pp_h;
    cx0 = tile_x * p.tile_pw * p.ps_w - p.pp_w;
  } else {
    m0 = (long long)blockIdx.x * BM;
  }
  const int passes = POOL ? p.passes : 1;
  const int stream_rows = POOL ? p.pool_rows : 0;  // > 0: row-streaming pool
  __half* s_c = passes == 1 ? s_a : reinterpret_cast<__half*>(s_rows + BM);
  // Staging pixel of conv-tile position (ly, lx): packed passes keep the whole tile, the
  // row-streaming mode a ring of stage_rows rows.
  auto stage_pixel = [&](int ly, int lx) {
    return (stream_rows > 0 ? ly % p.stage_rows : ly) * p.tile_tw + lx;
  };
  // K range of this CTA: everything, or one split-K slice (grid.z) of it.
  int kt_begin = 0, k_tiles = p.k_tiles;
  if constexpr (!POOL) {
    if (p.split_k > 0) {
      kt_begin = blockIdx.z * p.split_k;
      k_tiles = min(p.split_k, p.k_tiles - kt_begin);
    }
  }

  // ---- loaders ----------------------------------------------------------------------------
  auto load_b = [&](int slot, int kt) {
#pragma unroll
    for (int i = 0; i < BN * kCh / kThreads; ++i) {
      const int id = tid + i * kThreads, r = id / kCh, c = id % kCh;
      cp_async_16(smem_u32(s_b + slot * kBStage + r * kRowHalves + c * 8),
                  w_tile + size_t(r) * p.w_k + kt * BK + c * 8, 16);
    }
  };
  // kThreads is a multiple of kCh, so this thread's K chunk (kc = kt * kCh + c) is the same
  // for all its rows.  The loader is called for consecutive k-tiles only (prologue, then one per
  // main-loop iteration), so (tap row, tap column, channel chunk) advance incrementally: no
  // integer division per k-tile, only a seek at the start of each pass.
  const int a_c = tid % kCh;
  int a_kc = 0, a_c8 = 0, a_kh = 0, a_kw = 0;
  auto seek_a_vec = [&](int kt) {
    a_kc = kt * kCh + a_c;
    const int tap = a_kc / p.cpg_chunks;
    a_c8 = a_kc - tap * p.cpg_chunks;
    a_kh = tap / p.kw;
    a_kw = tap - a_kh * p.kw;
  };
  auto load_a_vec = [&](int slot) {
    const int c = a_c, c8 = a_c8;
    const bool k_ok = a_kc < p.k_real;  // past K: zero fill (the tap may run past kh)
    const int dy = a_kh * p.dh, dx = a_kw * p.dw;
    a_kc += kCh;  // advance to the next k-tile
    a_c8 += kCh;
    while (a_c8 >= p.cpg_chunks) {
      a_c8 -= p.cpg_chunks;
      if (++a_kw == p.kw) {
        a_kw = 0;
        ++a_kh;
      }
    }
#pragma unroll
    for (int i = 0; i < BM * kCh / kThreads; ++i) {
      const int r = tid / kCh + i * (kThreads / kCh);
      const int4 info = s_rows[r];
      const __half* src = p.x;  // never read when bytes == 0
      int bytes = 0;
      const int ih = info.y + dy, iw = info.z + dx;
      if (k_ok && info.x >= 0 && unsigned(ih) < unsigned(p.in_h) &&
          unsigned(iw) < unsigned(p.in_w)) {
        src = p.x + ((size_t(info.x) * p.in_h + ih) * p.in_w + iw) * p.in_cs + in_c0 + c8 * 8;
        bytes = 16;
      }
      cp_async_16(smem_u32(s_a + slot * kAStage + r * kRowHalves + c * 8), src, bytes);
    }
  };
  constexpr int kGatherPer = GATHER ? BM * BK / kThreads : 2;
  static_assert(kGatherPer % 2 == 0, "gathered halves are held in pairs");
  uint32_t gather_regs[kGatherPer / 2];  // two rows' halves per register: halves the registers
  auto gather_a = [&](int kt) {
    const int k = kt * BK + lane;
    const bool k_ok = k < p.k_real;
    const int tap = k_ok ? k / p.in_c : 0;
    const int ch = k - tap * p.in_c;
    const int r_kh = tap / p.kw, r_kw = tap - r_kh * p.kw;
    const int dy = r_kh * p.dh, dx = r_kw * p.dw;
    const unsigned short* xs = reinterpret_cast<const unsigned short*>(p.x);
#pragma unroll
    for (int i = 0; i < kGatherPer; ++i) {
      const int r = warp + i * (kThreads / 32);
      const int4 info = s_rows[r];
      const int ih = info.y + dy, iw = info.z + dx;
      uint32_t v = 0;
      if (k_ok && info.x >= 0 && unsigned(ih) < unsigned(p.in_h) && unsigned(iw) < unsigned(p.in_w))
        v = __ldg(xs + ((size_t(info.x) * p.in_h + ih) * p.in_w + iw) * p.in_cs + ch);
      if (i % 2 == 0)
        gather_regs[i / 2] = v;
      else
        gather_regs[i / 2] |= v << 16;
    }
  };
  auto store_gathered = [&](int slot) {
    unsigned short* dst = reinterpret_cast<unsigned short*>(s_a + slot * kAStage);
#pragma unroll
    for (int i = 0; i < kGatherPer; ++i)
      dst[(warp + i * (kThreads / 32)) * kRowHalves + lane] =
          static_cast<unsigned short>(gather_regs[i / 2] >> (16 * (i % 2)));
  };

  // ---- pool write-out: pooled rows [py0, py1) of the CTA's block, from the staging tile ----
  auto pool_out = [&](int py0, int py1) {
    constexpr int kChunks = BN / 8;
    const __half2 neg_inf = __float2half2_rn(-INFINITY);
    for (int id = tid; id < (py1 - py0) * p.tile_pw * kChunks; id += kThreads) {
      const int c = id % kChunks, t = id / kChunks;
      const int px = t % p.tile_pw, py = py0 + t / p.tile_pw;
      const int oy = tile_y * p.tile_ph + py, ox = tile_x * p.tile_pw + px;
      const int col = n0 + c * 8;
      if (oy >= p.out_h || ox >= p.out_w || col >= p.n_limit) continue;
      __half2 best[4] = {neg_inf, neg_inf, neg_inf, neg_inf};
      for (int i = 0; i < p.pk_h; ++i) {
        const int ly = py * p.ps_h + i, cy = cy0 + ly;
        if (cy < 0 || cy >= p.conv_h) continue;
        for (int j = 0; j < p.pk_w; ++j) {
          const int lx = px * p.ps_w + j, cx = cx0 + lx;
          if (cx < 0 || cx >= p.conv_w) continue;
          const uint4 v =
              *reinterpret_cast<const uint4*>(s_c + stage_pixel(ly, lx) * kCRow + c * 8);
          const uint32_t w4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            __half2 h;
            *reinterpret_cast<uint32_t*>(&h) = w4[q];
            best[q] = __hmax2(best[q], h);
          }
        }
      }
      uint4 out;
      out.x = *reinterpret_cast<uint32_t*>(&best[0]);
      out.y = *reinterpret_cast<uint32_t*>(&best[1]);
      out.z = *reinterpret_cast<uint32_t*>(&best[2]);
      out.w = *reinterpret_cast<uint32_t*>(&best[3]);
      const int ch = group * p.opg + col;
      out = zero_channels_from(out, ch, p.out_c);
      *reinterpret_cast<uint4*>(p.y + ((size_t(image) * p.out_h + oy) * p.out_w + ox) * p.out_cs +
                                ch) = out;
    }
  };
  // Row-streaming mode: pooled rows whose windows lie within the conv rows of passes 0..q.
  auto pooled_rows_after = [&](int q) {
    if (q + 1 >= passes) return p.tile_ph;
    const int done = min((q + 1) * stream_rows, p.tile_th);
    return done < p.pk_h ? 0 : min(p.tile_ph, (done - p.pk_h) / p.ps_h + 1);
  };

  for (int pass = 0; pass < passes; ++pass) {
    // ---- row table: which input window each A row reads --------------------------------
    for (int r = tid; r < BM; r += kThreads) {
      int4 info = make_int4(-1, 0, 0, 0);
      if constexpr (POOL) {
        int ly, lx;
        bool in_tile;
        if (stream_rows > 0) {
          ly = pass * stream_rows + r / p.tile_tw;
          lx = r % p.tile_tw;
          in_tile = r < stream_rows * p.tile_tw && ly < p.tile_th;
        } else {
          const int rg = pass * BM + r;
          ly = rg / p.tile_tw;
          lx = rg % p.tile_tw;
          in_tile = rg < p.tile_th * p.tile_tw;
        }
        if (in_tile) {
          const int cy = cy0 + ly, cx = cx0 + lx;
          if (cy >= 0 && cy < p.conv_h && cx >= 0 && cx < p.conv_w)
            info = make_int4(image, cy * p.sh - p.ph, cx * p.sw - p.pw, 0);
        }
      } else {
        const long long m = m0 + r;
        if (m < p.m_total) {
          const int cx = int(m % p.conv_w);
          const long long t = m / p.conv_w;
          const int cy = int(t % p.conv_h), n = int(t / p.conv_h);
          info = make_int4(n, cy * p.sh - p.ph, cx * p.sw - p.pw, 0);
        }
      }
      s_rows[r] = info;
    }
    __syncthreads();

    float acc[MI][NI][4];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[mi][ni][q] = 0.f;

    // ---- prologue ---------------------------------------------------------------------
    if constexpr (!GATHER) seek_a_vec(kt_begin);
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < k_tiles) {
        load_b(s, kt_begin + s);
        if constexpr (GATHER) {
          gather_a(kt_begin + s);
          store_gathered(s);
        } else {
          load_a_vec(s);
        }
      }
      cp_async_commit();
    }

    // ---- main loop ----------------------------------------------------------------------
    for (int kt = 0; kt < k_tiles; ++kt) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();
      const int k_next = kt + STAGES - 1;
      const int slot_next = k_next % STAGES;
      if (k_next < k_tiles) {
        load_b(slot_next, kt_begin + k_next);
        if constexpr (GATHER)
          gather_a(kt_begin + k_next);
        else
          load_a_vec(slot_next);
      }
      cp_async_commit();

      const int slot = kt % STAGES;
      const __half* a_tile = s_a + slot * kAStage;
      const __half* b_tile = s_b + slot * kBStage;
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        uint32_t af[MI][4], bf[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          const int row = warp_m * WM + mi * 16 + (lane & 15);
          const int col = kk * 16 + (lane >> 4) * 8;
          ldmatrix_x4(af[mi], smem_u32(a_tile + row * kRowHalves + col));
        }
#pragma unroll
        for (int nj = 0; nj < NI / 2; ++nj) {
          const int row = warp_n * WN + nj * 16 + (lane & 7) + ((lane >> 4) << 3);
          const int col = kk * 16 + ((lane >> 3) & 1) * 8;
          uint32_t r[4];
          ldmatrix_x4(r, smem_u32(b_tile + row * kRowHalves + col));
          bf[2 * nj][0] = r[0];
          bf[2 * nj][1] = r[1];
          bf[2 * nj + 1][0] = r[2];
          bf[2 * nj + 1][1] = r[3];
        }
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) mma_16816(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
      }
      if constexpr (GATHER) {
        if (k_next < k_tiles) store_gathered(slot_next);
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // ring and row table are reused by the next pass (or by the staging tile)

    if constexpr (!POOL) {
      if (p.partial) {  // split-K slice: raw fp32 sums straight from registers, no staging
        float* dst = p.partial + size_t(blockIdx.z) * size_t(p.m_total) * p.n_limit;
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) {
            const int col = n0 + warp_n * WN + ni * 8 + (lane & 3) * 2;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const long long m = m0 + warp_m * WM + mi * 16 + (lane >> 2) + 8 * h;
              if (m < p.m_total && col < p.n_limit)
                *reinterpret_cast<float2*>(dst + m * p.n_limit + col) =
                    make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
            }
          }
        return;  // uniform across the CTA: no barrier follows for anyone
      }
    }

    // ---- epilogue: bias + ReLU -> fp16 staging -----------------------------------------
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int local = warp_m * WM + mi * 16 + (lane >> 2) + 8 * h;  // row within the pass
        int row = pass * BM + local;
        if (POOL && stream_rows > 0) {  // ring slot; rows past the pass's conv rows are dropped
          const int ly = pass * stream_rows + local / p.tile_tw;
          row = local < stream_rows * p.tile_tw && ly < p.tile_th
                    ? stage_pixel(ly, local % p.tile_tw)
                    : -1;
        }
        if (row < 0) continue;
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
          const int col = warp_n * WN + ni * 8 + (lane & 3) * 2;
          float v0 = acc[mi][ni][2 * h] + bias_tile[col];
          float v1 = acc[mi][ni][2 * h + 1] + bias_tile[col + 1];
          if (p.relu) {
            v0 = fmaxf(v0, 0.f);
            v1 = fmaxf(v1, 0.f);
          }
          *reinterpret_cast<__half2*>(s_c + row * kCRow + col) = __floats2half2_rn(v0, v1);
        }
      }
    }
    if constexpr (POOL) {
      if (stream_rows > 0) {
        // Pool the pooled rows whose windows the rows so far complete.  The next pass only
        // writes ring slots of rows no pending pooled row needs (host: stage_rows), and its
        // row-table barrier orders these reads before its epilogue writes.
        const int py_begin = pass == 0 ? 0 : pooled_rows_after(pass - 1);
        const int py_end = pooled_rows_after(pass);
        __syncthreads();
        if (py_end > py_begin) pool_out(py_begin, py_end);
      }
    }
  }
  __syncthreads();

  // ---- write-out -----------------------------------------------------------------------------
  constexpr int kChunks = BN / 8;
  if constexpr (!POOL) {
    for (int id = tid; id < BM * kChunks; id += kThreads) {
      const int r = id / kChunks, c = id % kChunks;
      const long long m = m0 + r;
      const int col = n0 + c * 8;
      if (m >= p.m_total || col >= p.n_limit) continue;
      const int ch = group * p.opg + col;
      const uint4 v =
          zero_channels_from(*reinterpret_cast<const uint4*>(s_c + r * kCRow + c * 8), ch, p.out_c);
      *reinterpret_cast<uint4*>(p.y + m * p.out_cs + ch) = v;
    }
  } else {
    if (stream_rows == 0) pool_out(0, p.tile_ph);
  }
}

// Finish pass of the unfused pool variant (and of split-K when no finish tiling fits, e.g. a
// pool window of > kFinishMaxPixels pixels): one thread per output pixel x
// 8-channel chunk of y = maxpool(v), where v(n, cy, cx) is read from the workspace ws:
//  * FP32 (split-K): v = relu(sum over `splits` fp32 partial tiles [z][m][n_limit] + bias);
//    groups == 1, so the partial column is the output channel;
//  * fp16 (unfused pool): v = the finished fp16 conv output [m][out_cs] (bias + ReLU applied).
// Without a pool p has kernel 1 / stride 1 / pad 0 and out = conv extent, so the same loop is
// the identity.  The max is taken in fp32 and rounded once (rounding is monotone, so this equals
// the fused kernel's max of rounded values).  Grid-stride, 16-byte loads and stores.
template <bool FP32>
__global__ void __launch_bounds__(256)
    conv_finish_kernel(const ConvParams p, const void* ws, int splits) {
  const int chunks = p.out_cs / 8;
  const long long total = (long long)p.batch * p.out_h * p.out_w * chunks;
  const size_t split_stride = size_t(p.m_total) * p.n_limit;
  for (long long id = blockIdx.x * (long long)blockDim.x + threadIdx.x; id < total;
       id += (long long)gridDim.x * blockDim.x) {
    const int c8 = int(id % chunks);
    long long t = id / chunks;
    const int ox = int(t % p.out_w);
    t /= p.out_w;
    const int oy = int(t % p.out_h);
    const int n = int(t / p.out_h);
    const int col = c8 * 8;
    float best[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) best[j] = -INFINITY;
    float bias[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) bias[j] = FP32 ? p.bias[col + j] : 0.f;
    for (int i = 0; i < p.pk_h; ++i) {
      const int cy = oy * p.ps_h - p.pp_h + i;
      if (cy < 0 || cy >= p.conv_h) continue;
      for (int jx = 0; jx < p.pk_w; ++jx) {
        const int cx = ox * p.ps_w - p.pp_w + jx;
        if (cx < 0 || cx >= p.conv_w) continue;
        const long long m = ((long long)n * p.conv_h + cy) * p.conv_w + cx;
        float v[8];
        if constexpr (FP32) {
          const float* src = static_cast<const float*>(ws) + m * p.n_limit + col;
#pragma unroll
          for (int j = 0; j < 8; ++j) v[j] = bias[j];
          for (int z = 0; z < splits; ++z) {
            const float4 a = *reinterpret_cast<const float4*>(src + z * split_stride);
            const float4 b = *reinterpret_cast<const float4*>(src + z * split_stride + 4);
            v[0] += a.x;
            v[1] += a.y;
            v[2] += a.z;
            v[3] += a.w;
            v[4] += b.x;
            v[5] += b.y;
            v[6] += b.z;
            v[7] += b.w;
          }
          if (p.relu) {
#pragma unroll
            for (int j = 0; j < 8; ++j) v[j] = fmaxf(v[j], 0.f);
          }
        } else {
          const uint4 raw =
              *reinterpret_cast<const uint4*>(static_cast<const __half*>(ws) + m * p.out_cs + col);
          const uint32_t w4[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            __half2 h;
            *reinterpret_cast<uint32_t*>(&h) = w4[q];
            const float2 f = __half22float2(h);
            v[2 * q] = f.x;
            v[2 * q + 1] = f.y;
          }
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) best[j] = fmaxf(best[j], v[j]);
      }
    }
    uint32_t packed[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const __half2 h = __floats2half2_rn(best[2 * q], best[2 * q + 1]);
      packed[q] = *reinterpret_cast<const uint32_t*>(&h);
    }
    const uint4 out =
        zero_channels_from(make_uint4(packed[0], packed[1], packed[2], packed[3]), col, p.out_c);
    *reinterpret_cast<uint4*>(p.y + ((size_t(n) * p.out_h + oy) * p.out_w + ox) * p.out_cs + col) =
        out;
  }
}

// Split-K finish, tiled (replaces conv_finish_kernel<true> for split-K; round 3).  Why: the
// per-output-pixel loop of conv_finish_kernel re-summed all `splits` partials for every tap of
// every pool window (conv5 at batch 1: 9 taps x 18 slices = 162 dependent iterations per thread,
// 1152 threads on 5 SMs: ~30 us).  Here one CTA owns a block of PR x PC pooled pixels x
// kFinishChunks*8 channels of one image: its threads first reduce the covering conv region
// (TH x TW pixels, each conv pixel exactly once, float4 granularity, 8 slices in flight per
// thread) into fp32 shared memory with bias + ReLU, then take the window maxima from there.
// Without a pool p has kernel 1 / stride 1 / pad 0, so the region is the tile itself.
// Launch: grid (tiles_x * tiles_y * batch, ceil(out_cs / (8 * kFinishChunks))), shared memory
// finish_smem_bytes(th, tw); the host keeps th * tw small (<= kFinishMaxPixels).
constexpr int kFinishChunks = 4;  // 8-channel chunks per finish CTA (32 channels)
constexpr int kFinishMaxPixels = 96;
constexpr int kFinishThreads = 256;
constexpr int kFinishUnroll = 8;  // slices loaded per thread before they are summed
constexpr size_t finish_smem_bytes(int th, int tw) {
  return size_t(th) * tw * kFinishChunks * 8 * sizeof(float);
}

__global__ void __launch_bounds__(kFinishThreads)
    conv_splitk_finish_kernel(const ConvParams p, const float* ws, int splits) {
  extern __shared__ __align__(16) float s_v[];  // [tile_th][tile_tw][kFinishChunks * 8]
  constexpr int kQuads = kFinishChunks * 2;     // float4s per pixel
  int t = blockIdx.x;
  const int tile_x = t % p.tiles_x;
  t /= p.tiles_x;
  const int tile_y = t % p.tiles_y;
  const int n = t / p.tiles_y;
  const int col0 = blockIdx.y * kFinishChunks * 8;
  const int cy0 = tile_y * p.tile_ph * p.ps_h - p.pp_h;
  const int cx0 = tile_x * p.tile_pw * p.ps_w - p.pp_w;
  const size_t split_stride = size_t(p.m_total) * p.n_limit;

  // Phase 1: reduce the slices of every conv pixel of the region once.
  for (int id = threadIdx.x; id < p.tile_th * p.tile_tw * kQuads; id += blockDim.x) {
    const int q = id % kQuads, px = id / kQuads;
    const int ly = px / p.tile_tw, lx = px % p.tile_tw;
    const int cy = cy0 + ly, cx = cx0 + lx, col = col0 + q * 4;
    if (cy < 0 || cy >= p.conv_h || cx < 0 || cx >= p.conv_w || col >= p.n_limit) continue;
    const long long m = ((long long)n * p.conv_h + cy) * p.conv_w + cx;
    const float* src = ws + m * p.n_limit + col;
    float4 r = *reinterpret_cast<const float4*>(p.bias + col);
    int z = 0;
    for (; z + kFinishUnroll <= splits; z += kFinishUnroll) {  // independent loads in flight
      float4 v[kFinishUnroll];
#pragma unroll
      for (int u = 0; u < kFinishUnroll; ++u)
        v[u] = *reinterpret_cast<const float4*>(src + (z + u) * split_stride);
#pragma unroll
      for (int u = 0; u < kFinishUnroll; ++u) {
        r.x += v[u].x;
        r.y += v[u].y;
        r.z += v[u].z;
        r.w += v[u].w;
      }
    }
    for (; z < splits; ++z) {
      const float4 v = *reinterpret_cast<const float4*>(src + z * split_stride);
      r.x += v.x;
      r.y += v.y;
      r.z += v.z;
      r.w += v.w;
    }
    if (p.relu) {
      r.x = fmaxf(r.x, 0.f);
      r.y = fmaxf(r.y, 0.f);
      r.z = fmaxf(r.z, 0.f);
      r.w = fmaxf(r.w, 0.f);
    }
    *reinterpret_cast<float4*>(s_v + size_t(px) * kQuads * 4 + q * 4) = r;
  }
  __syncthreads();

  // Phase 2: window maxima (fp32, rounded once), 16-byte fp16 stores.
  for (int id = threadIdx.x; id < p.tile_ph * p.tile_pw * kFinishChunks; id += blockDim.x) {
    const int c8 = id % kFinishChunks, o = id / kFinishChunks;
    const int px = o % p.tile_pw, py = o / p.tile_pw;
    const int oy = tile_y * p.tile_ph + py, ox = tile_x * p.tile_pw + px;
    const int col = col0 + c8 * 8;
    if (oy >= p.out_h || ox >= p.out_w || col >= p.out_cs) continue;
    float best[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) best[j] = -INFINITY;
    for (int i = 0; i < p.pk_h; ++i) {
      const int ly = py * p.ps_h + i, cy = cy0 + ly;
      if (cy < 0 || cy >= p.conv_h) continue;
      for (int jx = 0; jx < p.pk_w; ++jx) {
        const int lx = px * p.ps_w + jx, cx = cx0 + lx;
        if (cx < 0 || cx >= p.conv_w) continue;
        const float* v = s_v + size_t(ly * p.tile_tw + lx) * kQuads * 4 + c8 * 8;
#pragma unroll
        for (int j = 0; j < 8; ++j) best[j] = fmaxf(best[j], v[j]);
      }
    }
    uint32_t packed[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const __half2 h = __floats2half2_rn(best[2 * q], best[2 * q + 1]);
      packed[q] = *reinterpret_cast<const uint32_t*>(&h);
    }
    const uint4 out =
        zero_channels_from(make_uint4(packed[0], packed[1], packed[2], packed[3]), col, p.out_c);
    *reinterpret_cast<uint4*>(p.y + ((size_t(n) * p.out_h + oy) * p.out_w + ox) * p.out_cs + col) =
        out;
  }
}

}  // namespace cnnrt::cuda::conv_detail
