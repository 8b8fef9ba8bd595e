// Warp-specialised Hopper wgmma implicit-GEMM fp16 convolution (+ bias + activation).  sm_90a only.
//
// Why: conv_fp16_wgmma.cu reaches ~300 TFLOP/s on AlexNet conv3/conv4 (H200, batch 256) where
// cuDNN reaches 331/535.  Its limits: all 256 threads both issue cp.async and run wgmma, with a
// __syncthreads per k-tile, so the tensor cores idle while the whole CTA goes through the barrier
// and the gather's address arithmetic; and its 128x128 tile moves (128 + 128) * 128 B = 32 KB
// through L2 -> shared memory per 128x128x64 MMA step.  This kernel:
//   * splits the CTA into 3 warpgroups (384 threads): warpgroup 0 produces (gathers A, loads B
//     with cp.async), warpgroups 1-2 consume (wgmma only).  No CTA-wide barrier in the main loop;
//     stages are handed over through mbarriers, so loads and MMAs overlap fully;
//   * offers 128x256 (each consumer m64n256, 128 fp32 accumulators per thread) and 256x128 (each
//     consumer two m64n128) tiles besides 128x128: per 64-deep k-tile, 48 KB of operands feed
//     2*128*256*64 FLOP, i.e. 1/3 less L2 and shared-memory traffic per FLOP than 128x128.
//     setmaxnreg moves registers from the producer (down to 40) to the consumers (up to 232).
//
// GEMM view and layouts: exactly conv_fp16_wgmma's.  M = batch * conv_h * conv_w output pixels,
// N = out_c, K = kh * kw * in_c in (kh, kw, c) order.  NHWC fp16 input with in_c % 8 == 0; A rows
// are gathered through a per-CTA row table ({image | -1, ih0, iw0}), one 16-byte cp.async per
// (row, 8-channel chunk) of a k-tile, zero-filled (src-size 0) for padding taps, rows past M and
// the K tail.  B = the prepacked weight [w_rows][w_k] fp16, K zero-padded to a multiple of 64 and
// rows zero-padded to a multiple of 256 (so any BN tile reads real memory; columns >= out_c are
// computed on zeros and never stored).  Shared memory: canonical K-major 128-byte-swizzle layout
// (row r at r * 128 B, 16-byte chunk c at chunk c ^ (r % 8), tiles 1024-byte aligned), descriptor
// SBO = 1024 B, swizzle mode 128B; the 4 k16 steps of a k-tile advance the start by 32 B.
//
// Pipeline (STAGES slots; full[s] and empty[s] mbarriers per slot):
//   producer thread (all 128 of warpgroup 0), for k-tile kt = 0 .. k_tiles + LAG - 1:
//     if kt < k_tiles: if kt >= STAGES, wait empty[kt % S] (the consumers retired tile kt - S);
//                      issue its cp.asyncs for tile kt into slot kt % S;
//     commit (an empty group past the last tile keeps the group arithmetic uniform);
//     if kt >= LAG:    cp.async.wait_group LAG   -> this thread's copies of tile kt-LAG landed
//                      fence.proxy.async.shared::cta -> they are visible to the async proxy
//                      mbarrier.arrive full[(kt-LAG) % S]  (release; count 128 = every producer)
//   consumer warpgroup, for kt = 0 .. k_tiles - 1:
//     wait full[kt % S] (acquire); wgmma.fence; 4 k16 steps of wgmma; commit; wait_group 1 ->
//     the group of tile kt-1 has retired, so lane 0 of each consumer warp arrives on
//     empty[(kt-1) % S] (count 8 = every consumer warp; a warp arrives only after its own
//     wait_group, so the slot is free once all 8 have).
//   Phases: tile kt is the (kt / S)-th use of slot s = kt % S.  full[s] completes once per use,
//   so the consumer of tile kt waits for completion number kt / S: parity (kt / S) & 1.  empty[s]
//   completes once per release; the producer refilling slot s with tile kt (kt >= S) needs the
//   release of tile kt - S, completion number kt / S - 1: parity ((kt / S) & 1) ^ 1.  A barrier
//   never runs two phases ahead of its waiter: full[s] cannot complete for tile kt + S before
//   the producer saw empty[s] for tile kt, which needs the consumers to have waited on tile kt;
//   symmetrically for empty[s].
//   Deadlock freedom: when the producer waits for the release of tile kt - S it has published
//   every tile <= kt - 1 - LAG, and the consumers release tile j while processing j + 1, so
//   tiles <= kt - 2 - LAG get released without further producer progress.  kt - S <= kt - 2 - LAG
//   holds for LAG = S - 2.  The tail loop publishes the last LAG tiles; every one of the 128
//   producer threads arrives for every tile (zero-fill loads included), and no branch skips an
//   arrival.  The release of the last tile is never awaited and not made.
//   Why the producer lags LAG tiles instead of waiting per tile: cp.async completes in order per
//   thread, so waiting with LAG groups still in flight keeps LAG tiles (~1 us of MMA) of loads
//   outstanding per thread while it publishes the oldest.
//
// Epilogue: consumers wait_group 0, then a named barrier over the 256 consumer threads (bar 1;
// the producer warpgroup has exited) guarantees no wgmma reads the ring any more; accumulators
// (m64nN layout: warp w of a warpgroup owns rows 16w..16w+15; register 4j + 2h + {0,1} holds row
// lane/4 + 8h, columns 8j + 2(lane%4) + {0,1}) + bias, clamp, fp16, staged in the drained ring
// (row stride BN + 8 halves: conflict-free half2 stores), barrier, 16-byte row stores guarded by
// the M tail and out_c.
//
// Registers: __launch_bounds__(384, 1) caps the kernel at 168 registers per thread = 64512 per
// CTA; the producer drops to 40 and the consumers rise to 232: 128*40 + 256*232 = 64512.
// setmaxnreg.inc waits until the pool holds the registers, so the CTA must have been launched
// with 168 per thread: the host checks cudaFuncAttributes::numRegs before any launch.
//
// Build: device code only under __CUDA_ARCH_FEAT_SM90_ALL (CMake adds the sm_90a image for this
// file), other images trap; device_supported() reuses ConvFp16Wgmma's probe of the same build.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/epilogue.cuh"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/conv/wgmma.h"
#include "kernels/cuda/conv/wgmma_common.h"
#include "kernels/cuda/conv/wgmma_ws.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace wgmma_ws_detail {

constexpr int kBK = 64;  // halves per k-tile: one 128-byte swizzled row
constexpr int kThreads = 384;
constexpr int kProducerThreads = 128;
constexpr int kConsumerThreads = 256;
constexpr int kProducerRegs = 40;
constexpr int kConsumerRegs = 232;
constexpr int kLaunchRegs = 168;  // 65536 / 384 rounded down to a multiple of 8
static_assert(kProducerThreads * kProducerRegs + kConsumerThreads * kConsumerRegs <=
                  kThreads * kLaunchRegs,
              "setmaxnreg.inc would wait forever for registers the CTA does not own");
constexpr int kWRowAlign = 256;  // weight rows padded to the largest BN

// The shared geometry (wgmma_common.h); weight and bias rows padded to kWRowAlign.
using WsParams = WgmmaConvParams;

constexpr size_t stage_bytes(int bm, int bn) { return size_t(bm + bn) * 128; }
constexpr size_t smem_bytes(int bm, int bn, int stages) {
  // alignment slack, the ring, the row table, full[] and empty[] barriers
  return 1024 + size_t(stages) * stage_bytes(bm, bn) + size_t(bm) * 16 + size_t(stages) * 16;
}

// The tiles built: STAGES fills ~192 KB of ring (one CTA per SM either way).
struct TileConfig {
  int bm, bn, stages;
};
constexpr TileConfig kTiles[] = {{128, 128, 6}, {128, 256, 4}, {256, 128, 4}};
constexpr int kNumTiles = sizeof(kTiles) / sizeof(kTiles[0]);
static_assert(smem_bytes(128, 128, 6) <= 227 * 1024 && smem_bytes(128, 256, 4) <= 227 * 1024 &&
                  smem_bytes(256, 128, 4) <= 227 * 1024,
              "over the 227 KB a Hopper CTA may opt in to");

#ifdef CNNRT_WGMMA_DEVICE
using namespace ptx;

// One CTA of conv_wgmma_ws_kernel: the shared-memory carve-up and the two roles.
template <int BM, int BN, int STAGES>
struct WsCta {
  static_assert(BM == 128 || BM == 256, "each consumer owns BM / 2 rows in m64 blocks");
  static_assert(BN == 128 || BN == 256, "Mma<BN> instances");
  static_assert(BM * BN <= 128 * 256, "at most 128 accumulators per consumer thread");
  static_assert(STAGES >= 3, "LAG = STAGES - 2 must be >= 1");
  static constexpr int kConsumerWarps = kConsumerThreads / 32;  // arrivals per empty[] phase
  static constexpr int kConsumerBarrier = 1;  // named barrier of the 256 consumer threads
  static constexpr int kAStage = BM * 128, kStage = (BM + BN) * 128;
  static constexpr int kLag = STAGES - 2;  // tiles a producer thread keeps in flight
  static constexpr int kMT = BM / 128;     // m64 blocks per consumer warpgroup
  static constexpr int kAcc = BN / 2;      // fp32 accumulators per m64nBN block per thread
  static constexpr int kCRow = BN + 8;     // staging row (halves)
  static_assert(BM * kCRow * 2 <= STAGES * kStage, "the fp16 staging tile aliases the ring");

  const WsParams& p;
  uint32_t ring;
  unsigned char* ring_ptr;
  int4* s_rows;                  // {image|-1, ih0, iw0, 0}
  uint32_t full_bar, empty_bar;  // STAGES x 8 bytes each, after the row table
  int tid, warp, lane, wg;       // wg 0: producer; 1, 2: consumers
  int m0, n0;

  __device__ __forceinline__ WsCta(const WsParams& params, unsigned char* smem_raw) : p(params) {
    const uint32_t raw_base = smem_u32(smem_raw);
    ring = (raw_base + 1023u) & ~1023u;  // swizzle atoms need 1024-byte alignment
    ring_ptr = smem_raw + (ring - raw_base);
    s_rows = reinterpret_cast<int4*>(ring_ptr + STAGES * kStage);
    full_bar = smem_u32(s_rows + BM);
    empty_bar = full_bar + STAGES * 8;
    tid = threadIdx.x;
    warp = tid >> 5;
    lane = tid & 31;
    wg = warp >> 2;
    m0 = blockIdx.x * BM;
    n0 = blockIdx.y * BN;
  }

  // Row table (everyone helps; only the producer reads it; rows past M gather zeros) and the
  // barriers; then the last CTA-wide barrier.
  __device__ __forceinline__ void setup() {
    const epilogue::RowGeometry g{p.conv_h, p.conv_w, p.sh, p.sw, p.ph, p.pw};
    epilogue::fill_row_table<BM, kThreads, false>(
        s_rows, tid, g, PoolTile{}, 0, epilogue::PoolBlock{0, 0, 0, 0, 0}, m0, p.m_total);
    if (tid == 0) {
#pragma unroll
      for (int s = 0; s < STAGES; ++s) {
        mbarrier_init(full_bar + 8 * s, kProducerThreads);
        mbarrier_init(empty_bar + 8 * s, kConsumerWarps);
      }
    }
    __syncthreads();
  }

  // Producer warpgroup: cp.async of every k-tile into its slot, publishing tile kt - LAG after
  // issuing tile kt (design note).  Thread owns 16-byte chunk ld_c of rows ld_r0 + 16 i (A and
  // B); all its rows share row % 8, hence one swizzled chunk offset.
  __device__ __forceinline__ void produce() {
    setmaxnreg_dec<kProducerRegs>();
    const int ld_c = tid & 7, ld_r0 = tid >> 3;
    const uint32_t ld_off = uint32_t(ld_r0) * 128 + (uint32_t(ld_c ^ (ld_r0 & 7)) << 4);
    const __half* w_src = p.w + size_t(n0 + ld_r0) * p.w_k + ld_c * 8;
    const size_t w_step = size_t(16) * p.w_k;  // 16 weight rows
    // (tap row, tap column, channel chunk) of this thread's K chunk, advanced per k-tile.
    int a_kc = ld_c;
    int a_kh, a_kw, a_c8;
    {
      const int tap = a_kc / p.c_chunks;
      a_c8 = a_kc - tap * p.c_chunks;
      a_kh = tap / p.kw;
      a_kw = tap - a_kh * p.kw;
    }
    for (int kt = 0; kt < p.k_tiles + kLag; ++kt) {
      if (kt < p.k_tiles) {
        const int s = kt % STAGES;
        // Slot s last held tile kt - STAGES: wait for its release (completion kt/S - 1).
        if (kt >= STAGES) mbarrier_wait_parity(empty_bar + 8 * s, ((kt / STAGES) & 1) ^ 1);
        const uint32_t a_dst = ring + s * kStage + ld_off;
        const uint32_t b_dst = a_dst + kAStage;
        const __half* b_src = w_src + size_t(kt) * kBK;
#pragma unroll
        for (int i = 0; i < BN / 16; ++i) cp_async_16(b_dst + i * 16 * 128, b_src + i * w_step, 16);

        const bool k_ok = a_kc < p.k_chunks;  // past K: zero fill (the tap may run past kh)
        const int dy = a_kh, dx = a_kw;
        const __half* x_c = p.x + a_c8 * 8;
        a_kc += kBK / 8;
        a_c8 += kBK / 8;
        while (a_c8 >= p.c_chunks) {
          a_c8 -= p.c_chunks;
          if (++a_kw == p.kw) {
            a_kw = 0;
            ++a_kh;
          }
        }
#pragma unroll 4
        for (int i = 0; i < BM / 16; ++i) {
          const int4 info = s_rows[ld_r0 + 16 * i];
          const int ih = info.y + dy, iw = info.z + dx;
          const __half* src = p.x;  // never read when bytes == 0
          int bytes = 0;
          if (k_ok && info.x >= 0 && unsigned(ih) < unsigned(p.in_h) &&
              unsigned(iw) < unsigned(p.in_w)) {
            src = x_c + ((size_t(info.x) * p.in_h + ih) * p.in_w + iw) * p.in_c;
            bytes = 16;
          }
          cp_async_16(a_dst + i * 16 * 128, src, bytes);
        }
      }
      cp_async_commit();  // past the last tile: an empty group, completes at once
      if (kt >= kLag) {
        // Publish tile kt - LAG: its group is the (LAG+1)-th newest, so waiting until at most
        // LAG groups are pending means it has landed (this thread's part of it).
        cp_async_wait<kLag>();
        fence_proxy_async_shared();  // generic-proxy writes -> visible to wgmma's async proxy
        mbarrier_arrive(full_bar + 8 * ((kt - kLag) % STAGES));
      }
    }
  }

  // Consumer warpgroup: wgmma over every k-tile, releasing each slot after the next tile's MMAs
  // are issued (wait_group 1).  Ends with every wgmma retired.
  __device__ __forceinline__ void consume(float (&acc)[kMT][kAcc]) {
    setmaxnreg_inc<kConsumerRegs>();
    const int cw = wg - 1;  // consumer 0 or 1: rows cw * BM/2 .. +BM/2
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int i = 0; i < kAcc; ++i) acc[mt][i] = 0.f;
      fence_operands(acc[mt]);
    }
    for (int kt = 0; kt < p.k_tiles; ++kt) {
      const int s = kt % STAGES;
      mbarrier_wait_parity(full_bar + 8 * s, (kt / STAGES) & 1);  // completion number kt / S
      const uint32_t a_base = ring + s * kStage + cw * (BM / 2) * 128;
      const uint32_t b_base = ring + s * kStage + kAStage;
      const uint64_t desc_a = make_desc(a_base), desc_b = make_desc(b_base);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {  // +32 bytes per k16 step = +2 in the start field
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)  // next m64 block: +64 rows * 128 B = +512 (16-B units)
          Mma<BN>::run(acc[mt], desc_a + 2 * kk + mt * 512, desc_b + 2 * kk);
      }
      wgmma_commit();
      wgmma_wait<1>();  // the group of tile kt - 1 has retired in this warp
      if (kt > 0 && lane == 0) mbarrier_arrive(empty_bar + 8 * ((kt - 1) % STAGES));
    }
    wgmma_wait<0>();
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) fence_operands(acc[mt]);
  }

  // Both consumers have retired every wgmma and every tile's cp.asyncs landed (each full[]
  // phase was waited for): the ring is free for staging.  Bias + activation -> fp16 staging,
  // then 16-byte row stores guarded by the M tail and out_c (padded weight rows).
  __device__ __forceinline__ void epilogue_out(const float (&acc)[kMT][kAcc]) {
    named_barrier_sync(kConsumerBarrier, kConsumerThreads);
    const int cw = wg - 1;
    __half* const s_c = reinterpret_cast<__half*>(ring_ptr);
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      const int row0 = cw * (BM / 2) + mt * 64 + (warp & 3) * 16 + (lane >> 2);
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int col = j * 8 + (lane & 3) * 2;
        const float b0 = p.bias[n0 + col], b1 = p.bias[n0 + col + 1];
#pragma unroll
        for (int h = 0; h < 2; ++h)
          epilogue::stage_pair(s_c + (row0 + 8 * h) * kCRow + col, acc[mt][4 * j + 2 * h],
                               acc[mt][4 * j + 2 * h + 1], b0, b1, p.act);
      }
    }
    named_barrier_sync(kConsumerBarrier, kConsumerThreads);
    const epilogue::TileOutput o{p.y, p.out_c, n0, p.out_c - n0, p.out_c};
    epilogue::store_rows<BM, BN, kConsumerThreads, true, false>(s_c, tid - kProducerThreads, m0,
                                                                p.m_total, o);
  }
};
#endif  // CNNRT_WGMMA_DEVICE

template <int BM, int BN, int STAGES>
__global__ void __launch_bounds__(kThreads, 1) conv_wgmma_ws_kernel(const WsParams p) {
  pdl_wait();
#ifdef CNNRT_WGMMA_DEVICE
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  WsCta<BM, BN, STAGES> cta(p, smem_raw);
  cta.setup();
  if (cta.wg == 0) {
    cta.produce();
    return;  // every tile published; all this thread's cp.asyncs have completed
  }
  float acc[BM / 128][BN / 2];
  cta.consume(acc);
  cta.epilogue_out(acc);
#else
  __trap();  // not the sm_90a image: device_supported() keeps this from ever being launched
#endif
}

}  // namespace wgmma_ws_detail

using wgmma_ws_detail::kNumTiles;
using wgmma_ws_detail::kTiles;
using wgmma_ws_detail::WsParams;

class ConvFp16WgmmaWsImpl {
 public:
  ConvShape shape;
  WsParams base;  // everything but x, y and the batch
  int sms = 132;
  __half* w = nullptr;
  float* bias = nullptr;
  size_t bytes = 0;
  ~ConvFp16WgmmaWsImpl() {
    cudaFree(w);  // destructors never throw; a failed free here leaks at worst
    cudaFree(bias);
  }
};

namespace {

long long ceil_div_ll(long long a, long long b) { return (a + b - 1) / b; }

long long tile_ctas(const ConvFp16WgmmaWsImpl& m, int tile, int batch) {
  const long long m_total = (long long)batch * m.shape.conv_h * m.shape.conv_w;
  return ceil_div_ll(m_total, kTiles[tile].bm) * ceil_div_ll(m.shape.out_c, kTiles[tile].bn);
}

// Relative per-CTA time of each tile (kTiles order), in 128x128 tiles of work times an
// efficiency factor.  Per 64-deep k-tile the wgmma operand reads from shared memory are
// 128x128: 48 KB for 2 MFLOP; 128x256: 80 KB for 4 MFLOP; 256x128: 96 KB for 4 MFLOP (each
// consumer reads B once per m64 block), and L2 -> shared traffic is 32/48/48 KB.  Assumed worth
// 15% (128x256) and 10% (256x128) until measured (docs/kernels/conv_fp16_wgmma_ws.md).
constexpr double kTileTime[] = {1.0, 2 * 0.85, 2 * 0.90};

// Cost model: one CTA per SM at a time (~195 KB of shared memory each), every CTA of a tile
// config runs the same K loop, so time ~ waves * per-CTA time, waves = ceil(ctas / sms), and the
// per-CTA time scales with the tile area times kTileTime's efficiency factor.  N padding (BN not
// dividing out_c) shows up as extra CTAs / area.  Ties: larger BN (A gathered fewer times), then
// larger BM (B read fewer times).
int choose_tile(const ConvFp16WgmmaWsImpl& m, int batch) {
  int best = 0;
  double best_cost = -1;
  for (int t = 0; t < kNumTiles; ++t) {
    const double waves = double(ceil_div_ll(tile_ctas(m, t, batch), m.sms));
    const double cost = waves * kTileTime[t];
    const bool better = best_cost < 0 || cost < best_cost - 1e-9 ||
                        (cost <= best_cost + 1e-9 &&
                         (kTiles[t].bn > kTiles[best].bn ||
                          (kTiles[t].bn == kTiles[best].bn && kTiles[t].bm > kTiles[best].bm)));
    if (better) {
      best = t;
      best_cost = cost;
    }
  }
  return best;
}

template <int T>
constexpr auto kernel_of() {
  return wgmma_ws_detail::conv_wgmma_ws_kernel<kTiles[T].bm, kTiles[T].bn, kTiles[T].stages>;
}
template <int T>
size_t smem_of() {
  return wgmma_ws_detail::smem_bytes(kTiles[T].bm, kTiles[T].bn, kTiles[T].stages);
}

// Shared-memory opt-in and the register check of the setmaxnreg budget (design note).
template <int T>
void prepare_kernel(size_t optin) {
  if (smem_of<T>() > optin)
    throw Error("conv_fp16_wgmma_ws: the device offers too little shared memory per block");
  if (plan_only()) return;  // a described target: the attribute and the image are the GPU's
  CNNRT_CUDA_CHECK(cudaFuncSetAttribute(kernel_of<T>(), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem_of<T>())));
  cudaFuncAttributes attr;
  CNNRT_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel_of<T>()));
  if (attr.numRegs < wgmma_ws_detail::kLaunchRegs)
    throw Error("conv_fp16_wgmma_ws: kernel built with " + std::to_string(attr.numRegs) +
                " registers per thread, the setmaxnreg budget needs " +
                std::to_string(wgmma_ws_detail::kLaunchRegs));
}

template <int T>
void launch(long long m_tiles, int n_tiles, const WsParams& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(m_tiles), static_cast<unsigned>(n_tiles));
  launch_kernel(kernel_of<T>(), grid, wgmma_ws_detail::kThreads, smem_of<T>(), stream, p);
}

std::string tile_name(int t) {
  return "wgmma_ws_" + std::to_string(kTiles[t].bm) + "x" + std::to_string(kTiles[t].bn) + "x" +
         std::to_string(wgmma_ws_detail::kBK) + "_s" + std::to_string(kTiles[t].stages);
}

}  // namespace

bool ConvFp16WgmmaWs::supports(const ConvShape& s) {
  // Plain convs only: the pooled ones stay with conv_fp16_wgmma.
  return !s.pool && wgmma_conv_shape_ok(s);
}

bool ConvFp16WgmmaWs::device_supported() {
  // Same build rule (sm_90a per-file gencode) as conv_fp16_wgmma.cu, so its probe answers for
  // this file's image too.
  return ConvFp16Wgmma::device_supported();
}

ConvFp16WgmmaWs::ConvFp16WgmmaWs(const ConvShape& shape_in, const float* weight, const float* bias)
    : impl_(std::make_unique<ConvFp16WgmmaWsImpl>()) {
  ConvFp16WgmmaWsImpl& m = *impl_;
  m.shape = shape_in;
  m.shape.derive();
  const ConvShape& s = m.shape;
  if (!supports(s))
    throw Error(
        "conv_fp16_wgmma_ws: unsupported shape (needs groups 1, dilation 1, in_c % 8 == 0, "
        "out_c % 64 == 0, no fused pool)");
  if (!device_supported())
    throw Error("conv_fp16_wgmma_ws: needs a compute capability 9.0 device and the sm_90a build");
  if (weight == nullptr) throw Error("conv_fp16_wgmma_ws: no weight");
  WsParams& p = m.base;
  fill_wgmma_conv_params(s, wgmma_ws_detail::kBK, p);

  const DeviceTraits& device = device_traits();  // the GPU's, or a plan target's
  const size_t optin = device.smem_optin;
  m.sms = std::max(device.sms, 1);
  prepare_kernel<0>(optin);
  prepare_kernel<1>(optin);
  prepare_kernel<2>(optin);

  // Rows padded to the largest BN, so every tile reads real (zero) memory past out_c.
  const int w_rows = (s.out_c + wgmma_ws_detail::kWRowAlign - 1) / wgmma_ws_detail::kWRowAlign *
                     wgmma_ws_detail::kWRowAlign;
  m.bytes = upload_wgmma_weights(s, weight, bias, p.w_k, w_rows, &m.w, &m.bias);
  p.w = m.w;
  p.bias = m.bias;
}

ConvFp16WgmmaWs::~ConvFp16WgmmaWs() = default;

ConvFp16WgmmaWsPlan ConvFp16WgmmaWs::plan(int batch) const {
  const int b = std::max(batch, 1);
  const int t = choose_tile(*impl_, b);
  return {t, tile_name(t), tile_ctas(*impl_, t, b)};
}

std::optional<ConvFp16WgmmaWsPlan> ConvFp16WgmmaWs::plan_tile(int batch, int bm, int bn) const {
  for (int t = 0; t < kNumTiles; ++t)
    if (kTiles[t].bm == bm && kTiles[t].bn == bn)
      return ConvFp16WgmmaWsPlan{t, tile_name(t), tile_ctas(*impl_, t, std::max(batch, 1))};
  return std::nullopt;
}

long long ConvFp16WgmmaWs::max_ctas(int batch) const {
  return batch <= 0 ? 0 : tile_ctas(*impl_, 0, batch);  // kTiles[0] is the 128x128 tile
}

void ConvFp16WgmmaWs::forward(int variant, const void* x, void* y, int batch,
                              cudaStream_t stream) const {
  const ConvFp16WgmmaWsImpl& m = *impl_;
  if (batch <= 0) return;
  if (variant < 0 || variant >= kNumTiles)
    throw Error("conv_fp16_wgmma_ws: variant " + std::to_string(variant) + " out of range");
  const long long m_total = (long long)batch * m.shape.conv_h * m.shape.conv_w;
  if (m_total > (1LL << 30))
    throw Error("conv_fp16_wgmma_ws: batch " + std::to_string(batch) +
                " too large for int indexing");
  WsParams p = m.base;
  p.x = static_cast<const __half*>(x);
  p.y = static_cast<__half*>(y);
  p.m_total = static_cast<int>(m_total);
  const long long m_tiles = ceil_div_ll(m_total, kTiles[variant].bm);
  const int n_tiles = static_cast<int>(ceil_div_ll(m.shape.out_c, kTiles[variant].bn));
  if (variant == 0)
    launch<0>(m_tiles, n_tiles, p, stream);
  else if (variant == 1)
    launch<1>(m_tiles, n_tiles, p, stream);
  else
    launch<2>(m_tiles, n_tiles, p, stream);
}

size_t ConvFp16WgmmaWs::weight_bytes() const { return impl_->bytes; }

}  // namespace cnnrt::cuda
