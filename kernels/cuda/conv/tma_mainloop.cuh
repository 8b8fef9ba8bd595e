// The TMA-fed, warp-specialised, persistent implicit-GEMM conv mainloop of Hopper (sm_90a),
// written once for every element type: conv_fp16_tma (tma_kernel.cuh), conv_int8_tma
// (tma_s8_kernel.cuh) and the 2:4 sparse conv_fp16_sparse24_tma (tma_sparse_kernel.cuh) are
// instances of tma_conv_mainloop with their own element traits and epilogue;
// docs/kernels/conv_fp16_tma.md, conv_int8_tma.md and conv_fp16_sparse_tma.md have the
// measurements.
//
// DESIGN NOTE
// * Why one template: the int8 kernel began as a copy of the fp16 loop (issue 9 item 2), and the
//   two must not drift: the ring / mbarrier protocol, the register split and the scheduler are
//   where a slip hangs the GPU, so they exist once.  What varies is what an element is, which the
//   traits say, and what happens to the accumulators, which the epilogue type does.
// * The loop: A (activations) arrive by TMA im2col loads (one box of 128 output pixels x one
//   k-tile row per 128 rows of the tile; the filter tap (r, s) is the box's im2col offset {s, r}),
//   B (the K-major [out_c][K] weight) by a TMA tiled load, both swizzled into a ring of STAGES
//   stages guarded by full (1 arrival + the stage's tx bytes) and empty (one arrival per consumer
//   warpgroup, of every CTA of a cluster) mbarriers.  384 threads: warpgroup 0 is the producer
//   (setmaxnreg 40, one thread issues every TMA), warpgroups 1-2 the consumers (setmaxnreg 232:
//   the accumulators of a 128 x 256 tile), each BM / 2 rows x BN, which only issue wgmma, keep one
//   wgmma group in flight (wait_group 1, then release the previous stage) and run the epilogue
//   from registers.  Persistent grid, static scheduler (unit += number of clusters), units
//   ordered n fastest, so the producer loads the next tile while the consumers store this one.
// * Element traits E (TmaDense<T, Acc, RowBytes> below: TmaF16Rows<RB>, TmaS8<KB>): Acc, the
//   accumulator type (float / int32); kRowBytes, the bytes of a k-tile row = the swizzle span
//   (128, or 64 where the channels are 32 mod 64 halves / 64 mod 128 int8); kTileElems, the
//   elements of that row (the TMA coordinate step along K: 64 or 32 halves, KB int8); the
//   descriptors and the layout depend on bytes only, so the 64-byte fp16 rows are the int8
//   64-byte rows' code with k16 instead of k32 wgmma; mma_k_tile<BN, MI>(acc, a, b), the wgmma of
//   one k-tile from the stage's A and B addresses (fp16 m64nNk16, int8 m64nNk32 .s32.s8.s8: both 32
//   bytes of K per instruction, so kRowBytes / 32 of them per m64 block, +32 bytes of descriptor
//   each).
// * Epilogue type Epi: first_row(p, m_blk), the first output pixel of M block m_blk (what the
//   producer's im2col boxes start at: m_blk * BM, or a fused pool's tile table), and
//   store<MI>(acc, p, unit), run by both consumer warpgroups once the unit's last wgmma has
//   retired and its last stage is released (TmaUnit: the tile, this thread's place in it and the
//   shared memory after the ring, which a fused pool's or the sparse transpose's staging uses).
//   Weights as A, first_row is not asked for: the boxes start at the unit's pixel block.
// * Parameters P: any struct with the GEMM geometry below (duck-typed, as wg_mainloop's): conv_h,
//   conv_w, sh, sw, pad_top, pad_left, kw, c_blocks (channel stride / kTileElems), k_tiles
//   (kh * kw * c_blocks), n_tiles, units.  The two families keep their own structs (their field
//   order is the kernels' parameter layout, and the lab fills TmaConvParams by name).
// * Register budget: 128 x 40 + 256 x 232 = 64512 <= 65536 only when the kernel starts at exactly
//   168 registers per thread (launch bounds 384, 1); an inc that cannot be satisfied would hang,
//   so each family's host code checks every image's count (tma::register_problem).
// * Three consumer warpgroups (CONSUMERS = 3, int8's 192x192 tile; tma_roles.h has the roles):
//   each consumer one m64 block x all BN columns, empty barriers of three arrivals, A as one
//   im2col box of 192 pixels per block (kBoxPixels).  Why: docs/kernels/conv_int8_tma.md.
// * Weights as A (the 2:4 sparse instance, conv_fp16_sparse24_tma: tma_sparse_kernel.cuh).  Only
//   operand A of wgmma.mma_async.sp may be 2:4, so the weights become A (M = out_c) and the im2col
//   boxes B (N = pixels).  Traits with kWeightsAreA = true declare, besides the above:
//   - kARowBytes (64: the kept halves of a 64-K k-tile row, 64-byte swizzle) and kWeightTileElems
//     (32: the weight box's K step); the stage is BM x kARowBytes + BN x kRowBytes bytes
//     (TmaRing, also the expect_tx: the producer's weight box and BN / 128 im2col boxes);
//   - Meta<MI> (a consumer thread's metadata registers of one k-tile), kMetaThreadBytes and
//     kMetaSuppliers (the bytes per m64 block and k-tile of each of the CTA's threads that
//     supply metadata to wgmma.sp, and how many do: fp16 128, lanes 0-1 of each quad under
//     sparsity selector 0; int8 all 256), meta_supplier_index(), meta_source<BM, MI>(p, m_blk,
//     cw), copy_meta<MI>(slot, src), load_meta(meta, slot), mma_k_tile(acc, a, b, meta) and
//     keep_alive(meta, p, addr).
//   - The metadata does not pass through the ring.  Each supplier copies its own words of
//     k-tile kt from global memory into a private shared-memory slot (slot kt % (D + 1) of
//     D + 1 after the ring) with cp.async D k-tiles ahead, one commit group per k-tile (empty where
//     there is nothing to copy, so cp.async.wait_group D - 1 always means "k-tile kt's words are
//     in"), reads them back with ld.shared before the wgmma fence, and issues k-tile kt + D's copy
//     right after k-tile kt's wgmma (into the slot k-tile kt - 1 read).  D (TmaRing::
//     kMetaDistance) is the most, up to 6, whose slots fit beside the ring and the epilogue's
//     staging: 6, or 5 for int8's 256x128 at 128-byte k-tiles.  Why (docs/PERFORMANCE.md run
//     39): with a bulk copy into each stage read by every thread (until run 39), compute-
//     sanitizer racecheck reported every copy / ld.shared pair, proxy fences or not, since it
//     does not take an mbarrier hand-off as ordering; a slot only its own thread writes and
//     reads has nothing to order across threads or proxies.  Plain loads into registers lost
//     to a scoreboard (ptxas gives them one and the wgmma fence drains it, newest load
//     included: +22 % on conv4 at batch 256); slots two k-tiles ahead lost +17 % there (the
//     bulk copy had travelled STAGES k-tiles ahead), four +6 %, six +4 %.  wgmma.sp reads its
//     metadata register asynchronously, so the consumer runs two k-tiles per iteration with an
//     even and an odd register set and keeps the previous set alive (a store ptxas cannot
//     drop) until the wait that retires its group;
//   - P::m_tiles (channel tiles): units are ordered m fastest, the unit's pixel block is n0.
//   The dense traits declare kWeightsAreA = false and kARowBytes = kRowBytes, and take the same
//   code as before (the consumer's k-tile is one lambda both call; the dense ones
//   with an empty NoMeta).  Every trait also says kMeta (2:4 metadata to supply: the sparse
//   ones) and kSplitN: weights as A with the consumer warpgroups splitting N instead of M (each
//   all BM channels x BN / 2 pixels: TmaRing::kMI / kWN), for out_c too narrow to give each
//   warpgroup its own m64 blocks — the dense weights-as-A instance (tma_wa_kernel.cuh, the lab's
//   "wa" tiles; docs/PERFORMANCE.md run 41a).  The epilogue of the sparse instance transposes the
//   [channel][pixel] accumulators through per-warp staging; a pooled layer runs staged
//   (tma_sparse.cu).
// * Split K (traits with kSplitK: the int8 linear, tma_linear_s8_kernel.cuh).  A linear at batch
//   16-256 is a skinny GEMM whose weight is read once (M = out features as A, N = the batch as
//   B): few output tiles and a long K, so the units are (channel tile, batch tile, K slice),
//   the slice slowest (unit_k_range), and the producer loads B as one tiled box of BN rows of
//   the [batch][K] input (no im2col: BN need not be whole boxes of 128).  The epilogue writes
//   the slice's raw int32 sums; a pass after the kernel adds the slices (exact) and requantises.
#pragma once

#include <cuda.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/conv/tma_encode.h"
#include "kernels/cuda/conv/tma_ptx.cuh"
#include "kernels/cuda/conv/tma_roles.h"

namespace cnnrt::cuda::tma_detail {

// A metadata supplier's bytes per k-tile and m64 block, and the suppliers per CTA (both 0 for
// dense traits: no metadata).
template <class E, bool = E::kMeta>
struct MetaSupply {
  static constexpr int kBytes = 0, kSuppliers = 0;
};
template <class E>
struct MetaSupply<E, true> {
  static constexpr int kBytes = E::kMetaThreadBytes, kSuppliers = E::kMetaSuppliers;
};
// Weights as A: how many k-tiles ahead a consumer thread copies its metadata, kMetaDistance + 1
// slots (design note): the most, up to 6, whose slots fit beside the ring and the epilogue's
// staging in the 227 KB opt-in less 2 KB for the kernel's static part; at least 2.
constexpr int meta_distance(size_t ring_and_staging, size_t slot) {
  constexpr size_t kBudget = 227 * 1024 - 2048;
  for (int d = 6; d > 2; --d)
    if (ring_and_staging + size_t(d + 1) * slot <= kBudget) return d;
  return 2;
}
// The staging bytes of epilogue Epi (what a weights-as-A instance's metadata slots share the
// opt-in with; dense instances have no slots).
template <class E, class Epi>
constexpr size_t epi_staging() {
  if constexpr (E::kWeightsAreA)
    return Epi::kStaging;
  else
    return 0;
}

// A stage's A blocks per k-tile: 2 for the paired int8 traits (TmaS8Pairs, tma_s8_kernel.cuh:
// two 64-byte blocks of K, each its own im2col box, side by side in the stage), else 1.
template <class E, class = void>
struct ABlocks {
  static constexpr int value = 1;
};
template <class E>
struct ABlocks<E, std::void_t<decltype(E::kABlocks)>> {
  static constexpr int value = E::kABlocks;
};

// The ring of element traits E: per stage BM A rows of kARowBytes and BN B rows of kRowBytes
// (dense traits: kARowBytes = kRowBytes), every stage 1024-byte aligned (the swizzle atoms'), so
// the dynamic shared memory is 1024 bytes of slack + the ring; weights as A, then the consumer
// threads' kMetaDistance + 1 metadata slots (kMetaSlot bytes each: [block][supplier][bytes],
// design note); an epilogue's staging comes after them (TmaUnit::after_ring).
template <class E, int BM, int BN, int STAGES, size_t STAGING = 0, int CONSUMERS = 2>
struct TmaRing {
  static constexpr uint32_t kA = BM * E::kARowBytes * ABlocks<E>::value, kB = BN * E::kRowBytes,
                            kStage = kA + kB;
  // m64 blocks and columns per consumer warpgroup: the CONSUMERS split M (BM / CONSUMERS rows
  // each, all BN columns), or, weights as A with kSplitN, N (all BM channels, BN / 2 pixels each).
  static constexpr int kMI = E::kSplitN ? BM / 64 : BM / (64 * CONSUMERS);
  static constexpr int kWN = E::kSplitN ? BN / 2 : BN;
  static_assert(E::kSplitN || BM % (64 * CONSUMERS) == 0, "whole m64 blocks per consumer");
  static constexpr uint32_t kMetaSlot = kMI * MetaSupply<E>::kSuppliers * MetaSupply<E>::kBytes;
  static constexpr int kMetaDistance =
      meta_distance(1024 + size_t(STAGES) * kStage + STAGING, kMetaSlot);
  static constexpr int kMetaSlots = E::kMeta ? kMetaDistance + 1 : 0;
  static constexpr size_t kSmem = 1024 + size_t(STAGES) * kStage + kMetaSlots * kMetaSlot;
  // The im2col operand's boxes per stage (per block of a paired k-tile): A (BM rows) or, weights
  // as A, B (BN); tma_roles.h's box size.
  static constexpr int kBoxPixels = E::kWeightsAreA ? 128 : im2col_box_pixels(BM);
  static constexpr int kBoxes = (E::kWeightsAreA ? BN : BM) / kBoxPixels;
  static_assert(kStage % 1024 == 0, "every stage's swizzle atoms stay 1024-byte aligned");
  static_assert(E::kWeightsAreA || kSmem == tma::ring_smem_bytes(BM, BN, STAGES, E::kRowBytes),
                "the dense ring is the shared host-side formula");
};

// One output tile as the consumer hands it to the epilogue.
struct TmaUnit {
  int m_blk, n0;        // M block (of BM rows, or a pooled tiling's tile) and first column
  int cw, warp, lane;   // consumer warpgroup (0, 1: rows cw * BM / 2 ..), warp in it, lane
  uint8_t* after_ring;  // dynamic shared memory past the ring (a fused pool's staging)
  int ks = 0;           // split-K slice (kSplitK instances; 0 otherwise)
};

#ifdef CNNRT_WGMMA_DEVICE
using namespace cnnrt::cuda::ptx;

// K-major shared-memory descriptor of a swizzled row layout of RowBytes: 128 B (ptx::make_desc,
// 8-row groups 1024 B apart), 64 B (layout type 2, 8-row groups 512 B apart) or 32 B (layout
// type 3, 8-row groups 256 B apart: the int8 sparse instance's A rows of 32 kept bytes).
template <int RowBytes>
__device__ __forceinline__ uint64_t desc_of(uint32_t smem_addr) {
  if constexpr (RowBytes == 128) {
    return make_desc(smem_addr);
  } else {
    static_assert(RowBytes == 64 || RowBytes == 32, "k-tile rows of 32, 64 or 128 bytes");
    constexpr uint64_t kLayout = RowBytes == 64 ? 2 : 3;
    return uint64_t((smem_addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) |
           (uint64_t((8 * RowBytes) >> 4) << 32) | (kLayout << 62);
  }
}

// The wgmma of element type T (one per output width BN, run(acc, desc_a, desc_b)): fp16
// m64nNk16 .f32.f16.f16, int8 m64nNk32 .s32.s8.s8; both take 32 bytes of K per instruction.
template <class T, int BN>
struct DenseMma;
template <int BN>
struct DenseMma<__half, BN> : Mma<BN> {};
template <int BN>
struct DenseMma<int8_t, BN> : MmaS8<BN> {};

// The wgmma of one dense k-tile: per 32 bytes of K, one instruction per m64 block (block i's A
// rows start 64 * RowBytes further); the blocks inside so consecutive instructions share B.
template <class MMA, int RowBytes, int MI, class Acc, int N>
__device__ __forceinline__ void dense_k_tile(Acc (&acc)[MI][N], uint32_t a, uint32_t b) {
#pragma unroll
  for (int k = 0; k < RowBytes / 32; ++k)
#pragma unroll
    for (int i = 0; i < MI; ++i)
      MMA::run(acc[i], desc_of<RowBytes>(a + i * 64 * RowBytes + k * 32),
               desc_of<RowBytes>(b + k * 32));
}
#endif  // CNNRT_WGMMA_DEVICE

// Dense element traits: elements of T, accumulators of AccT, k-tile rows of RowBytes (the swizzle
// span), both operands K-major from the stage.
template <class T, class AccT, int RowBytes>
struct TmaDense {
  using Acc = AccT;
  static constexpr int kRowBytes = RowBytes, kTileElems = RowBytes / int(sizeof(T));
  // The roles of the dense instances: im2col activations are A, weights B, no metadata.
  static constexpr bool kWeightsAreA = false, kSplitN = false, kMeta = false, kSplitK = false;
  static constexpr int kARowBytes = RowBytes;
#ifdef CNNRT_WGMMA_DEVICE
  template <int BN, int MI>
  static __device__ __forceinline__ void mma_k_tile(Acc (&acc)[MI][BN / 2], uint32_t a,
                                                    uint32_t b) {
    dense_k_tile<DenseMma<T, BN>, RowBytes>(acc, a, b);
  }
#endif
};
// fp16: RB / 2 halves per RB-byte row, fp32 accumulators.  RB 128 (64 halves) where in_c % 64
// == 0; RB 64 (32 halves, two k16 wgmma per m64 block and k-tile) where in_c % 64 == 32, so no
// zero channels are multiplied (tma_conv.cu's design note).
template <int RB>
using TmaF16Rows = TmaDense<__half, float, RB>;
using TmaF16 = TmaF16Rows<128>;
// int8: KB int8 per KB-byte row (KB 128 or 64: tma_s8.cu), int32 accumulators (exact and
// order-free).
template <int KB>
using TmaS8 = TmaDense<int8_t, int, KB>;

#ifdef CNNRT_WGMMA_DEVICE
// Unit u's tile: its M block and first N column.  Dense: M = pixels, units ordered n (channel
// tiles) fastest; weights as A: M = channels, and units ordered m (channel tiles) fastest, so in
// both the CTAs working at one time share their im2col boxes through L2.
template <class E, int BN, int CL, class P>
__device__ __forceinline__ void unit_coords(const P& p, int u, uint32_t rank, int& m_blk, int& n0) {
  if constexpr (E::kSplitK) {
    m_blk = u % p.m_tiles;
    n0 = (u / p.m_tiles % p.n_tiles) * BN;
  } else if constexpr (E::kWeightsAreA) {
    m_blk = u % p.m_tiles;
    n0 = (u / p.m_tiles) * BN;
  } else {
    m_blk = (u / p.n_tiles) * CL + int(rank);
    n0 = (u % p.n_tiles) * BN;
  }
}

// Split K (kSplitK instances): unit u's slice of K, slice ks = u / (m_tiles * n_tiles) (the
// slowest index), k-tiles [k0, k1); every slice has at least one k-tile (the host's split).
template <class E, class P>
__device__ __forceinline__ void unit_k_range(const P& p, int u, int& ks, int& k0, int& k1) {
  if constexpr (E::kSplitK) {
    ks = u / (p.m_tiles * p.n_tiles);
    k0 = ks * p.k_per_split;
    k1 = min(p.k_tiles, k0 + p.k_per_split);
  } else {
    ks = 0;
    k0 = 0;
    k1 = p.k_tiles;
  }
}

// An empty metadata register set: what the dense instances pass where a sparse k-tile passes its
// metadata registers.
struct NoMeta {};

// The whole kernel body: BM x BN tiles of element traits E, a ring of STAGES, clusters of CL CTAs
// along M (each loads 1 / CL of the weight tile and multicasts it; the lab's variants, the
// library runs CL 1), the epilogue Epi, CONSUMERS consumer warpgroups.  Called by a __global__
// function with __launch_bounds__(TmaRoles<CONSUMERS>::kThreads, 1) and TmaRing::kSmem (+ the
// epilogue's staging) dynamic shared memory.
template <class E, int BM, int BN, int STAGES, int CL, class Epi, int CONSUMERS = 2, class P>
__device__ __forceinline__ void tma_conv_mainloop(const CUtensorMap& tmap_x,
                                                  const CUtensorMap& tmap_w, const P& p) {
  using C = TmaRing<E, BM, BN, STAGES, epi_staging<E, Epi>(), CONSUMERS>;
  using Roles = TmaRoles<CONSUMERS>;
  static_assert(CONSUMERS == 2 || (!E::kWeightsAreA && !E::kSplitK && CL == 1),
                "three consumers: dense im2col-as-A tiles without a cluster");
  using Acc = typename E::Acc;
  // kWA: the roles (weights are A, im2col boxes B); kSparse: 2:4 metadata to supply (the
  // sparse instances, which are also kWA).
  constexpr bool kWA = E::kWeightsAreA, kSparse = E::kMeta;
  static_assert(!kWA || (CL == 1 && (BN % 128 == 0 || E::kSplitK)),
                "weights as A: no cluster, whole im2col boxes");
  static_assert(!E::kSplitK || (kWA && !kSparse && !E::kSplitN && BN <= 256),
                "split K: dense weights as A, B one tiled box of at most 256 rows");
  static_assert(!kSparse || kWA, "2:4 metadata belongs to weights as A");
  static_assert(!E::kSplitN || (kWA && BM % 64 == 0 && BN <= 512),
                "split N: weights as A, whole m64 blocks, at most n256 per warpgroup");
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full_bar[STAGES], empty_bar[STAGES];
  const uint32_t ring = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const int wg = threadIdx.x / 128;
  const uint32_t rank = CL > 1 ? cluster_rank() : 0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbarrier_init(smem_u32(&full_bar[s]), 1);
      mbarrier_init(smem_u32(&empty_bar[s]), CONSUMERS * CL);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if (CL > 1)
    cluster_sync_all();
  else
    __syncthreads();
  const int first = blockIdx.x / CL, step = gridDim.x / CL;

  if (wg == 0) {  // ---------------- producer warpgroup: one thread issues every TMA
    setmaxnreg_dec<Roles::kProducerRegs>();
    if (threadIdx.x == 0) {
      int stage = 0;
      uint32_t phase = 0;
      // Pixels per image of the im2col boxes (split K has none: B is a tiled box of rows).
      const int pix = [&] {
        if constexpr (E::kSplitK)
          return 1;
        else
          return p.conv_h * p.conv_w;
      }();
      for (int u = first; u < p.units; u += step) {
        int m_blk, n0;
        unit_coords<E, BN, CL>(p, u, rank, m_blk, n0);
        if constexpr (E::kSplitK) {
          // A GEMM (the linear): per k-tile of the unit's slice, BM weight rows and the BN rows
          // of B ([n][K], K-major) as two tiled boxes.
          int ks, k0, k1;
          unit_k_range<E>(p, u, ks, k0, k1);
          // The weight is read once: evict it first, keeping the partial sums in L2.
          const uint64_t stream_policy = l2_evict_first_policy();
          for (int kt = k0; kt < k1; ++kt) {
            mbarrier_wait_parity(smem_u32(&empty_bar[stage]), phase ^ 1);
            const uint32_t fb = smem_u32(&full_bar[stage]);
            mbar_expect_tx(fb, C::kStage);
            const uint32_t a_dst = ring + stage * C::kStage;
            tma_load_2d_hint(a_dst, &tmap_w, kt * E::kWeightTileElems, m_blk * BM, fb,
                             stream_policy);
            tma_load_2d(a_dst + C::kA, &tmap_x, kt * E::kTileElems, n0, fb);
            if (++stage == STAGES) {
              stage = 0;
              phase ^= 1;
            }
          }
        } else {
          // The first output pixel of the unit's im2col boxes: its M block's (dense; a fused
          // pool's tile table) or its N block's (weights as A).
          int m_first;
          if constexpr (kWA)
            m_first = n0;
          else
            m_first = Epi::first_row(p, m_blk);
          int aw[C::kBoxes], ah[C::kBoxes], an[C::kBoxes];
#pragma unroll
          for (int i = 0; i < C::kBoxes; ++i) {
            const int m = m_first + C::kBoxPixels * i, img = m / pix, rem = m - img * pix;
            const int oy = rem / p.conv_w, ox = rem - oy * p.conv_w;
            aw[i] = ox * p.sw - p.pad_left;
            ah[i] = oy * p.sh - p.pad_top;
            an[i] = img;
          }
          int cb = 0, r = 0, s = 0;  // the k-tile's channel block and tap, advanced incrementally
          for (int kt = 0; kt < p.k_tiles; ++kt) {
            mbarrier_wait_parity(smem_u32(&empty_bar[stage]), phase ^ 1);
            const uint32_t fb = smem_u32(&full_bar[stage]);
            mbar_expect_tx(fb, C::kStage);
            const uint32_t a_dst = ring + stage * C::kStage, b_dst = a_dst + C::kA;
            if constexpr (kWA) {
              // A: the BM (compressed) weight rows of the k-tile; B: the im2col boxes of the BN
              // pixels: both counted in kStage (the consumers load the metadata themselves).
              tma_load_2d(a_dst, &tmap_w, kt * E::kWeightTileElems, m_blk * BM, fb);
#pragma unroll
              for (int i = 0; i < C::kBoxes; ++i)
                tma_load_im2col(b_dst + i * 128 * E::kRowBytes, &tmap_x, cb * E::kTileElems, aw[i],
                                ah[i], an[i], uint16_t(s), uint16_t(r), fb);
            } else if constexpr (ABlocks<E>::value == 2) {
              // Two 64-byte blocks of K, each an im2col box into its half of A; an odd last
              // block's partner repeats it (its weights are zero fill).
#pragma unroll
              for (int half = 0; half < 2; ++half) {
#pragma unroll
                for (int i = 0; i < C::kBoxes; ++i)
                  tma_load_im2col(
                      a_dst + half * BM * E::kARowBytes + i * C::kBoxPixels * E::kARowBytes,
                      &tmap_x, cb * E::kABlockElems, aw[i], ah[i], an[i], uint16_t(s), uint16_t(r),
                      fb);
                if (half == 0 && 2 * kt + 1 < p.a_blocks && ++cb == p.c_blocks) {
                  cb = 0;
                  if (++s == p.kw) {
                    s = 0;
                    ++r;
                  }
                }
              }
              tma_load_2d(b_dst, &tmap_w, kt * E::kTileElems, n0, fb);
            } else {
#pragma unroll
              for (int i = 0; i < C::kBoxes; ++i)
                tma_load_im2col(a_dst + i * C::kBoxPixels * E::kRowBytes, &tmap_x,
                                cb * E::kTileElems, aw[i], ah[i], an[i], uint16_t(s), uint16_t(r),
                                fb);
              if (CL == 1)
                tma_load_2d(b_dst, &tmap_w, kt * E::kTileElems, n0, fb);
              else
                tma_load_2d_mc(b_dst + rank * (C::kB / CL), &tmap_w, kt * E::kTileElems,
                               n0 + int(rank) * (BN / CL), fb, uint16_t((1u << CL) - 1));
            }
            if (++cb == p.c_blocks) {
              cb = 0;
              if (++s == p.kw) {
                s = 0;
                ++r;
              }
            }
            if (++stage == STAGES) {
              stage = 0;
              phase ^= 1;
            }
          }
        }
      }
    }
  } else {  // ---------------- consumer warpgroups: wgmma, then the epilogue from registers
    setmaxnreg_inc<Roles::kConsumerRegs>();
    const int cw = wg - 1, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    Acc acc[C::kMI][C::kWN / 2];
    int stage = 0;
    uint32_t phase = 0;
    // One thread per warpgroup releases a stage: no thread reads the ring (the sparse metadata
    // goes through each thread's own slot), so the stage is free once the wgmma that read it has
    // retired.
    auto release = [&](int st) {
      if (threadIdx.x % 128 == 0) {
        if (CL == 1)
          mbarrier_arrive(smem_u32(&empty_bar[st]));
        else
          for (int c = 0; c < CL; ++c) mbar_arrive_cluster(smem_u32(&empty_bar[st]), uint32_t(c));
      }
    };
    // Weights as A: this thread's metadata slots (k-tile kt's words in slot kt % kMetaSlots) if
    // it supplies metadata (meta_supplier < 0: its registers are not read), and the copies of a
    // unit's first C::kMetaDistance k-tiles, one cp.async group each (empty ones where there is
    // nothing to copy, so that k-tile kt's group is always C::kMetaDistance - 1 groups from the
    // newest; design note).  meta_src: this thread's words of the unit's k-tile 0, k-tile kt
    // meta_step * kt on.
    [[maybe_unused]] const int meta_supplier = [] {
      if constexpr (kSparse)
        return E::meta_supplier_index();
      else
        return -1;
    }();
    [[maybe_unused]] const uint32_t meta_slots =
        ring + STAGES * C::kStage + uint32_t(meta_supplier) * uint32_t(MetaSupply<E>::kBytes);
    [[maybe_unused]] const size_t meta_step = [&] {
      if constexpr (kSparse)
        return size_t(p.meta_blocks) * E::kMetaBlockBytes;
      else
        return size_t(0);
    }();
    auto copy_first_meta = [&](int u) {
      if constexpr (kSparse) {
        const uint8_t* src = nullptr;
        if (u < p.units && meta_supplier >= 0) {
          int m_blk, n0;
          unit_coords<E, BN, CL>(p, u, rank, m_blk, n0);
          src = E::template meta_source<BM, C::kMI>(p, m_blk, cw);
        }
#pragma unroll
        for (int kt = 0; kt < C::kMetaDistance; ++kt) {
          if (src != nullptr && kt < p.k_tiles)
            E::template copy_meta<C::kMI>(meta_slots + kt * C::kMetaSlot, src + meta_step * kt);
          cp_async_commit();
        }
        return src;
      } else {
        return static_cast<const uint8_t*>(nullptr);
      }
    };
    [[maybe_unused]] const uint8_t* meta_src = copy_first_meta(first);
    for (int u = first; u < p.units; u += step) {
      int m_blk, n0;
      unit_coords<E, BN, CL>(p, u, rank, m_blk, n0);
#pragma unroll
      for (int i = 0; i < C::kMI; ++i)
#pragma unroll
        for (int j = 0; j < C::kWN / 2; ++j) acc[i][j] = Acc(0);
      int prev = -1;
      // One k-tile from the stage: its wgmma group, then retire the previous k-tile's group (one
      // stays in flight) and release that stage.  Weights as A: `meta` is the register set this
      // k-tile's wgmma.sp reads (from its slot, before the fence, as an operand), `older` the
      // previous k-tile's, which its group reads asynchronously up to the wait: keep_alive holds
      // it there so that `meta` cannot have been given its registers.  k-tile kt + kMetaDistance's
      // words are copied once this k-tile's group is issued (into the slot k-tile kt - 1 read),
      // so that the address work is off the path from the wait to the next group (design note).
      auto k_tile = [&](auto& meta, const auto& older, int kt, int slot_index) {
        mbarrier_wait_parity(smem_u32(&full_bar[stage]), phase);
        // The warpgroup's operands: its BM / 2 A rows and all of B, or (split N) all of A and
        // its BN / 2 B rows.
        const uint32_t a =
            ring + stage * C::kStage + (E::kSplitN ? 0 : cw * (BM / CONSUMERS) * E::kARowBytes);
        const uint32_t b =
            ring + stage * C::kStage + C::kA + (E::kSplitN ? cw * C::kWN * E::kRowBytes : 0);
        if constexpr (kSparse) {
          cp_async_wait<C::kMetaDistance - 1>();  // k-tile kt's group (later ones may be in flight)
          if (meta_supplier >= 0)
            E::template load_meta<C::kMI>(meta, meta_slots + slot_index * C::kMetaSlot);
        }
#pragma unroll
        for (int i = 0; i < C::kMI; ++i) fence_operands(acc[i]);
        wgmma_fence();
        if constexpr (kSparse)
          E::template mma_k_tile<BN, C::kMI>(acc, a, b, meta);
        else if constexpr (ABlocks<E>::value == 2)
          E::template mma_k_tile<C::kWN, C::kMI, BM>(acc, a, b);  // the halves BM rows apart
        else
          E::template mma_k_tile<C::kWN, C::kMI>(acc, a, b);
        wgmma_commit();
        if constexpr (kSparse) {
          if (kt + C::kMetaDistance < p.k_tiles && meta_supplier >= 0)
            E::template copy_meta<C::kMI>(
                meta_slots + (slot_index == 0 ? C::kMetaDistance : slot_index - 1) * C::kMetaSlot,
                meta_src + meta_step * (kt + C::kMetaDistance));
          cp_async_commit();
        }
#pragma unroll
        for (int i = 0; i < C::kMI; ++i) fence_operands(acc[i]);
        wgmma_wait<1>();
        if constexpr (kSparse) E::keep_alive(older, p, ring);
        if (prev >= 0) release(prev);
        prev = stage;
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1;
        }
      };
      if constexpr (kSparse) {
        // Two metadata register sets, even and odd k-tiles (wgmma.sp reads them asynchronously);
        // slot kt % kMetaSlots, tracked without a division.
        typename E::template Meta<C::kMI> even{}, odd{};
        int slot_index = 0;
        for (int kt = 0; kt < p.k_tiles; kt += 2) {
          k_tile(even, odd, kt, slot_index);
          slot_index = slot_index == C::kMetaDistance ? 0 : slot_index + 1;
          if (kt + 1 == p.k_tiles) break;
          k_tile(odd, even, kt + 1, slot_index);
          slot_index = slot_index == C::kMetaDistance ? 0 : slot_index + 1;
        }
        wgmma_wait<0>();
        E::keep_alive(even, p, ring);
        E::keep_alive(odd, p, ring);
        meta_src = copy_first_meta(u + step);  // in flight during this unit's epilogue
      } else {
        NoMeta none;
        int ks, k0, k1;
        unit_k_range<E>(p, u, ks, k0, k1);
        for (int kt = k0; kt < k1; ++kt) k_tile(none, none, kt, 0);
        wgmma_wait<0>();
      }
#pragma unroll
      for (int i = 0; i < C::kMI; ++i) fence_operands(acc[i]);
      release(prev);
      int unit_ks, unused_k0, unused_k1;
      unit_k_range<E>(p, u, unit_ks, unused_k0, unused_k1);
      const TmaUnit unit{
          m_blk,
          n0,
          cw,
          warp,
          lane,
          smem_raw + (ring - smem_u32(smem_raw)) + STAGES * C::kStage + C::kMetaSlots * C::kMetaSlot,
          unit_ks};
      Epi::store(acc, p, unit);
    }
  }
  if (CL > 1) cluster_sync_all();  // no CTA leaves while its peer may still arrive on its barriers
}
#endif  // CNNRT_WGMMA_DEVICE

}  // namespace cnnrt::cuda::tma_detail
