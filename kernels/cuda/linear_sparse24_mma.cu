// 2:4 sparse fp16 linear for small batches on the sparse tensor cores (sm_80+): mma.sp GEMV.
//
// Regime.  At batch ≤ 8 a linear is bound by its weight bytes: a 2:4 weight streams its kept
// values and a nibble per group, 1.125 bytes per dense weight instead of 2, so the bound is 1.78×
// the dense GEMV (AlexNet fc6: 42.5 MB against 75.5).  The CUDA-core sparse GEMV
// (linear_sparse24.cu) spends ~19 instructions per group of 4 on picking and converting inputs;
// ncu found it latency-bound at 1.8 TB/s (docs/PERFORMANCE.md runs 22-23): the issue slots
// that should keep loads in flight went to the math.  Here the math is the tensor core's: one
// mma.sp.m16n8k32 consumes 512 bytes of kept weights (16 rows × K 32) with the batch as N (8
// columns; at batch 1, 7 of them are wasted, which costs nothing since the tensor pipe idles
// anyway).  Per 512 bytes a lane issues one 16-byte weight load, an eighth of a metadata load,
// one ldmatrix of x, one shuffle and one MMA: the instruction stream no longer limits the loads.
//
// Layout (linear_sparse24_mma.h): fragments packed in lane order at build time, so each load is
// a coalesced 512-byte warp read straight into the MMA's A registers, no shared memory; a chunk
// (8 K steps, 4.5 KB) is 9 such loads, the ninth the chunk's metadata.
//
// x: staged per block in shared memory in the CUDA-core kernel's slot order (linear_sparse24_
// stage.cuh; the fc6 flatten's transpose is 4 loads per 8 slots; a vector's slot order is its own,
// so it is one cp.async copy issued before the weight loads), one row per sample of the pass,
// rows chunks × 256 + 8 halves apart so ldmatrix's 8 rows (samples) fall in distinct banks; K
// past the real groups is zeroed (zero weights times stale shared memory could be NaN).  The B
// fragment is one ldmatrix.x4 of the [sample][K 32] tile (row lane & 7, column 8 (lane >> 3));
// lanes of samples the pass lacks point at its last sample (their output columns are dropped).
//
// Work split: a block of 8 warps owns 8 / S row tiles; a row tile's chunks are cut into S
// contiguous ranges, one per warp (S from sparse24_mma_choose_split: ≥ 16 warps per SM wanted,
// each with a chunk or more).  A warp issues its first two chunks' loads (9 KB) before x is
// staged and keeps two chunks in flight after (two register buffers with constant indices, ≤ 128
// registers: 2 blocks an SM).  Its 16 × 8 partial sums meet the other S - 1 in shared memory; one
// thread per (row, sample) adds the fp32 bias, applies ReLU (NaN kept) and writes fp16.  A pass
// holds up to 8 samples (fewer where their staged x would not fit a block's shared memory);
// larger batches loop over passes inside the launch, streaming the weight again (above 8 the
// sparse tensor-core GEMMs are the tool, not this kernel).
//
// Predicted (H100, batch 1, in the network): ~4-5 µs of fixed cost per GEMV (launch, first DRAM
// round trip, tail: the dense GEMV's fc8 takes 8 µs for 8 MB) plus the stream at the dense GEMV's
// ~3 TB/s: fc6 ~19 µs (1.6× the dense GEMV's 30), fc7 ~11 µs (1.45×).
// Measured (docs/PERFORMANCE.md run 44): fc6 20.2 µs, fc7 12.3 µs (1.49×, 1.29× the dense GEMV;
// the CUDA-core kernel: 24.5, 12.7); ncu from a cold L2: 20.7 / 11.6 µs against the dense 29.0 /
// 15.0, at 64 % / 49 % of peak DRAM bandwidth where the dense fc6 reaches 78 %.  Tried, not
// kept (same run): 16 warps a block, one chunk in flight (32 warps an SM at ≤ 64 registers) —
// fc6 +0.5-1 µs; prefetch.global.L2 of a warp's whole range at the start — fc6 +1 µs, the
// network slower.  What limits it is the stream's efficiency at this size (ramp and tail weigh a
// 20 µs kernel), not the instruction issue the CUDA-core kernel was bound by.
// Run 45 (bench/gemv_sparse_lab, L2 flushed): a probe that only streams the packed bytes with this
// grid and loads in flight (no x, no MMA, no epilogue) runs fc6 / fc7 in 21.2 / 12.3 µs (2.0 /
// 1.5 TB/s; the dense GEMV 2.25 / 1.8), the kernel 23.1 / 14.0: the grid's stream itself is most
// of the gap to the bytes' bound, the kernel's own work ~1.5 µs.  A vector x (fc7, fc8) is copied
// by cp.async *before* the first weight loads, so its L2 round trip is not queued behind them
// (fc7 in the network 12.2-12.4 → 11.8-11.9 µs, lab 14.0 → 13.6); the same for a flatten (a raw
// cp.async copy, then the transposing stage from shared memory behind a second barrier) cost fc6
// +1.2 µs in the network and was not kept.
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/gemv_common.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/linear_sparse24_mma.h"
#include "kernels/cuda/linear_sparse24_stage.cuh"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {

namespace {

constexpr int kWarps = 8;              // per block
constexpr int kTargetWarpsPerSm = 16;  // streaming warps wanted per SM (2 blocks of ≤ 128 regs)
constexpr int kPartialFloats = kSpMmaTileRows * kSpMmaMaxPass;  // a warp's 16 × 8 sums
constexpr size_t kPartialBytes = size_t(kWarps) * kPartialFloats * sizeof(float);

struct Chunk {
  uint4 a[kSpMmaChunkSteps];  // A fragments of the 8 steps
  uint4 meta;                 // 4 metadata words (linear_sparse24_mma.h: which steps)
};

__device__ __forceinline__ void load_chunk(Chunk& chunk, const uint8_t* tile, int c, int lane,
                                           uint64_t policy) {
  const uint4* p =
      reinterpret_cast<const uint4*>(tile + Sparse24MmaGeometry::step_offset(c, 0, lane));
#pragma unroll
  for (int s = 0; s < kSpMmaChunkSteps; ++s) chunk.a[s] = load_streaming(p + s * 32, policy);
  chunk.meta = load_streaming(p + kSpMmaChunkSteps * 32, policy);
}

// A vector x's copy into shared memory (its slot order is x's own): `samples` rows of x_stride
// halves into xs (rows x_row halves apart) by cp.async — no registers, so it is issued before the
// first weight loads and its L2 round trip is not queued behind them (design note) — as one
// commit group.
__device__ __forceinline__ void copy_vector_x(const __half* x, int x_stride, __half* xs, int x_row,
                                              int samples) {
  const int vectors = x_stride / 8;
  for (int v = threadIdx.x; v < samples * vectors; v += blockDim.x) {
    const int b = v / vectors, i = v - b * vectors;
    ptx::cp_async_16(ptx::smem_u32(xs + b * x_row + 8 * i), x + b * x_stride + 8 * i, 16);
  }
  ptx::cp_async_commit();
}

// The 8 MMAs of one chunk.  x_addr: this lane's ldmatrix row address for the chunk's step 0.
__device__ __forceinline__ void mma_chunk(float (&acc)[4], const Chunk& chunk, uint32_t x_addr) {
#pragma unroll
  for (int s = 0; s < kSpMmaChunkSteps; ++s) {
    uint32_t b[4];
    ptx::ldmatrix_x4(b, x_addr + s * kSpMmaStepGroups * 4 * 2);  // K 32 = 64 bytes a step
    // Steps 0-3: lanes 0 and 1 of a quad hold their word; steps 4-7: lanes 2 and 3 do.
    const uint32_t own = sparse24_stage::word_of(chunk.meta, s & 3);
    const uint32_t e = s < 4 ? own : __shfl_xor_sync(0xffffffffu, own, 2);
    const uint32_t a[4] = {chunk.a[s].x, chunk.a[s].y, chunk.a[s].z, chunk.a[s].w};
    ptx::mma_sp_16832(acc, a, b, e);
  }
}

template <Sparse24Input kInput>
__global__ void __launch_bounds__(kWarps * 32, 2)
    sparse24_mma_gemv_kernel(const uint8_t* __restrict__ weight, const float* __restrict__ bias,
                             const __half* __restrict__ x, __half* __restrict__ y,
                             const Sparse24MmaGeometry g, int batch, int pass, int split, bool relu,
                             bool evict_first) {
  extern __shared__ __align__(16) uint8_t smem[];
  float* partial = reinterpret_cast<float*>(smem);               // [kWarps][16 rows][8 samples]
  __half* xs = reinterpret_cast<__half*>(smem + kPartialBytes);  // [pass][x_row]

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int tiles_per_block = kWarps / split;
  const int slice = warp % split;
  const int tile = blockIdx.x * tiles_per_block + warp / split;
  const bool live = tile < g.row_tiles;
  const int c_begin = slice * g.chunks / split, c_end = (slice + 1) * g.chunks / split;
  const uint8_t* tile_w = weight + int64_t(live ? tile : 0) * g.tile_bytes;
  const int k_halves = g.chunks * kSpMmaChunkGroups * 4;
  const int filled = sparse24_stage::staged_halves(g.map);

  // Chunks c and c + 1 in flight at the top of each step of the loop below.  The first pass's
  // first two are loaded before the wait (pdl.cuh: weights, which no kernel writes), so their
  // DRAM latency overlaps the kernel before this one.
  const uint64_t policy = stream_l2_policy(evict_first);
  Chunk buf[2];
  if (live && c_begin < c_end) load_chunk(buf[0], tile_w, c_begin, lane, policy);
  if (live && c_begin + 1 < c_end) load_chunk(buf[1], tile_w, c_begin + 1, lane, policy);
  pdl_wait();
  pdl_launch_dependents();  // the next layer's GEMV may start streaming (pdl.cuh)

  for (int first = 0; first < batch; first += pass) {
    const int samples = min(pass, batch - first);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const __half* x_pass = x + int64_t(first) * g.map.x_stride;
    // A vector x is copied by cp.async (it lands while the weights stream); a flatten's staging
    // permutes through registers after the first two chunks' loads, whose DRAM latency covers it.
    if constexpr (kInput == Sparse24Input::Vector)
      copy_vector_x(x_pass, g.map.x_stride, xs, g.x_row, samples);
    if (first > 0 && live && c_begin < c_end) load_chunk(buf[0], tile_w, c_begin, lane, policy);
    if (first > 0 && live && c_begin + 1 < c_end)
      load_chunk(buf[1], tile_w, c_begin + 1, lane, policy);
    if constexpr (kInput == Sparse24Input::Vector)
      ptx::cp_async_wait<0>();
    else
      sparse24_stage::stage_x<kInput>(g.map, x_pass, xs, samples, g.x_row);
    const int tail = k_halves - filled;  // zero K past what stage_x wrote, 2 halves a thread
    for (int v = threadIdx.x; v < samples * (tail / 2); v += blockDim.x) {
      const int b = v / (tail / 2), i = v - b * (tail / 2);
      reinterpret_cast<uint32_t*>(xs + b * g.x_row + filled)[i] = 0u;
    }
    __syncthreads();  // x staged (the previous pass's reads ended at its last barrier)

    if (live) {
      const int row = min(lane & 7, samples - 1);  // ldmatrix row = sample
      const uint32_t x_addr = ptx::smem_u32(xs + row * g.x_row + 8 * (lane >> 3));
      constexpr uint32_t kChunkX = kSpMmaChunkGroups * 4 * 2;  // bytes of x a chunk reads
      for (int c = c_begin; c < c_end; c += 2) {               // constant buffer indices: no moves
        mma_chunk(acc, buf[0], x_addr + c * kChunkX);
        if (c + 2 < c_end) load_chunk(buf[0], tile_w, c + 2, lane, policy);
        if (c + 1 < c_end) {
          mma_chunk(acc, buf[1], x_addr + (c + 1) * kChunkX);
          if (c + 3 < c_end) load_chunk(buf[1], tile_w, c + 3, lane, policy);
        }
      }
    }
    // acc: rows g and g + 8 of the tile, samples 2t and 2t + 1 (the D fragment).
    const int gr = lane >> 2, t = lane & 3;
    float* mine = partial + warp * kPartialFloats;
    mine[gr * kSpMmaMaxPass + 2 * t] = acc[0];
    mine[gr * kSpMmaMaxPass + 2 * t + 1] = acc[1];
    mine[(gr + 8) * kSpMmaMaxPass + 2 * t] = acc[2];
    mine[(gr + 8) * kSpMmaMaxPass + 2 * t + 1] = acc[3];
    __syncthreads();

    // One thread per (tile of the block, row, sample): the S slices' sums, bias, ReLU.
    for (int o = threadIdx.x; o < tiles_per_block * kSpMmaTileRows * samples; o += blockDim.x) {
      const int local = o / (kSpMmaTileRows * samples), r = o / samples % kSpMmaTileRows;
      const int b = o % samples;
      const int out_row = (blockIdx.x * tiles_per_block + local) * kSpMmaTileRows + r;
      if (out_row >= g.map.rows_pad) continue;  // rows of the last tile past pad8(out)
      float sum = bias[out_row];
      for (int s = 0; s < split; ++s)
        sum += partial[(local * split + s) * kPartialFloats + r * kSpMmaMaxPass + b];
      if (relu) sum = (sum > 0.0f || sum != sum) ? sum : 0.0f;  // keeps NaN
      y[int64_t(first + b) * g.map.rows_pad + out_row] = __float2half_rn(sum);
    }
    __syncthreads();  // xs and partial are reused by the next pass
  }
}

const void* kernel_for(Sparse24Input input) {
  switch (input) {
    case Sparse24Input::Vector:
      return reinterpret_cast<const void*>(sparse24_mma_gemv_kernel<Sparse24Input::Vector>);
    case Sparse24Input::QuadMajor:
      return reinterpret_cast<const void*>(sparse24_mma_gemv_kernel<Sparse24Input::QuadMajor>);
    default:
      return reinterpret_cast<const void*>(sparse24_mma_gemv_kernel<Sparse24Input::Gather>);
  }
}

// Bytes of one staged sample of x (x_row does not depend on the rows or the flatten).
size_t staged_row_bytes(int in_features) {
  return sparse24_mma_geometry(1, in_features, {}).staged_x_bytes(1);
}

}  // namespace

int sparse24_mma_max_pass(int in_features) {
  const DeviceTraits& traits = device_traits();
  if (traits.cc() < 80 || in_features < 1) return 0;
  const size_t room = traits.smem_optin > kPartialBytes ? traits.smem_optin - kPartialBytes : 0;
  return int(std::min<size_t>(kSpMmaMaxPass, room / staged_row_bytes(in_features)));
}

Sparse24MmaWeights::Sparse24MmaWeights(const HostSparse24Mma& host)
    : geometry_(host.geometry), weight_(host.weight.size()), bias_(upload_fp32(host.bias)) {
  max_pass_ = sparse24_mma_max_pass(geometry_.map.in_features);
  if (max_pass_ < 1)
    throw Error("linear_fp16_sparse24_mma: needs an sm_80+ GPU and " +
                std::to_string(geometry_.staged_x_bytes(1)) +
                " bytes of shared memory for one sample of x");
  weight_.upload(host.weight.data(), host.weight.size());
  if (plan_only()) return;
  // The limit only permits: each launch asks for what its pass needs.
  const size_t most = kPartialBytes + geometry_.staged_x_bytes(max_pass_);
  CNNRT_CUDA_CHECK(cudaFuncSetAttribute(kernel_for(geometry_.map.input),
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(most)));
}

int sparse24_mma_choose_split(const Sparse24MmaGeometry& geometry, int sm_count) {
  if (geometry.row_tiles < 1 || geometry.chunks < 1 || sm_count < 1)
    throw Error("sparse24_mma_choose_split: invalid shape row_tiles=" +
                std::to_string(geometry.row_tiles) + " chunks=" + std::to_string(geometry.chunks));
  const int64_t target = int64_t(sm_count) * kTargetWarpsPerSm;
  int split = 1;
  while (split < kWarps && int64_t(geometry.row_tiles) * split < target &&
         split * 2 <= geometry.chunks)
    split *= 2;
  return split;
}

void gemv_sparse24_mma_fp16(const Sparse24MmaWeights& weights, bool relu, const void* x, void* y,
                            int64_t batch, cudaStream_t stream, int split, bool evict_first) {
  if (x == y) throw Error("gemv_sparse24_mma_fp16: input and output must not alias");
  if (split != 0 && split != 1 && split != 2 && split != 4 && split != 8)
    throw Error("gemv_sparse24_mma_fp16: split must be 0 (auto), 1, 2, 4 or 8, got " +
                std::to_string(split));
  if (batch <= 0) return;
  if (batch > (int64_t{1} << 30)) throw Error("gemv_sparse24_mma_fp16: batch too large");
  const Sparse24MmaGeometry& g = weights.geometry();
  const int s = split != 0 ? split : sparse24_mma_choose_split(g, current_sm_count());
  // Samples per pass: the batch spread evenly over the fewest passes the shared memory allows.
  const int64_t passes = (batch + weights.max_pass() - 1) / weights.max_pass();
  const int pass = static_cast<int>((batch + passes - 1) / passes);
  const int tiles_per_block = kWarps / s;
  const int blocks = (g.row_tiles + tiles_per_block - 1) / tiles_per_block;
  const size_t smem = kPartialBytes + g.staged_x_bytes(pass);
  const auto* w = static_cast<const uint8_t*>(weights.weight());
  const auto* xh = static_cast<const __half*>(x);
  auto* yh = static_cast<__half*>(y);
  const int n = static_cast<int>(batch);
  switch (g.map.input) {
    case Sparse24Input::Vector:
      launch_kernel(sparse24_mma_gemv_kernel<Sparse24Input::Vector>, blocks, kWarps * 32, smem,
                    stream, w, weights.bias(), xh, yh, g, n, pass, s, relu, evict_first);
      break;
    case Sparse24Input::QuadMajor:
      launch_kernel(sparse24_mma_gemv_kernel<Sparse24Input::QuadMajor>, blocks, kWarps * 32, smem,
                    stream, w, weights.bias(), xh, yh, g, n, pass, s, relu, evict_first);
      break;
    case Sparse24Input::Gather:
      launch_kernel(sparse24_mma_gemv_kernel<Sparse24Input::Gather>, blocks, kWarps * 32, smem,
                    stream, w, weights.bias(), xh, yh, g, n, pass, s, relu, evict_first);
      break;
  }
}

}  // namespace cnnrt::cuda
