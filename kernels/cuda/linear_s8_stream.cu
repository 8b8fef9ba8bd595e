// The streaming int8 linear (linear_s8_stream.h): batches 9..256, the weights as the MMA's M.
//
// DESIGN NOTE
// * What bounds it: at these batches a linear's weight ([out][k_pad] int8: AlexNet fc6 37.7 MB)
//   is read once and its activations ([batch][in_stride], <= 2.4 MB) many times from L2, so the
//   kernel is a weight stream with MMAs on the side — fc6 at batch 64 is 4.8 GOP, ~5 µs of
//   tensor work against ~13 µs of DRAM.  cuBLASLt's int8 GEMM reached ~1 TB/s there.
// * Mapping: Yᵀ = W · Xᵀ — out features are the M of mma.sync.m16n8k32.s32.s8.s8 (A: weight rows,
//   K-major as packed), samples the N (B: activation rows, K-major as stored), so a 16-row A
//   fragment is 16 weight rows and no tile is wasted on a batch of 64.  CTA tile 128 out
//   features x 64 samples, 8 warps of 32 x 32 (mma_s8_tile.cuh's warp tile, conv_s8_igemm's
//   too), K in 64-byte tiles through a kStages-deep cp.async ring (92 KB: two CTAs per SM, each
//   with up to 40 KB of weight in flight: what a DRAM stream needs per SM at ~1 µs latency).
// * Split-K: CTAs = batch tiles x out blocks x K slices, at most one wave of two per SM (fc6 at
//   64: 32 x 8; linear_s8_stream_splits).
//   Each slice adds its exact int32 sums into a zeroed [batch][out_stride] workspace with atomic
//   adds — integer addition is associative, so the order the slices land in cannot change a bit
//   — and finish_s8 (the cuBLASLt path's epilogue: bias, requantise or dequantise, padding lanes
//   zero) writes y.  Three launches: memset, GEMM, finish.
// * Grid order: batch tiles fastest, so the CTAs that read one weight block run side by side and
//   its second and later reads hit L2.
// * The weight is streamed from its own packed copy (linear_s8_stream_pack, once at build): per
//   block of 128 out features and per k-tile, the 128 rows' 64 bytes as one contiguous 8 KB tile
//   (rows past out_c zero), so a warp's loads are 512 contiguous bytes and a CTA's K slice one
//   sequential run.  Reading the [out][k_pad] rows in place, a CTA took 64-byte pieces of 128
//   rows 9 KB apart per k-tile: 1.2 TB/s on fc6 at batch 64 (run 40f), 1.3 with an L2::256B
//   prefetch hint (40g).
// * Measured (H100, docs/PERFORMANCE.md runs 40f-i): bit for bit the integer reference (harness,
//   AlexNet's int8 output at 64 and 256), memcheck and racecheck clean, but slower than
//   cuBLASLt's int8 GEMM on fc6 / fc7 (fc6 at 64: 29-31 against 20-24 µs, at 256: 73-77 against
//   43), faster only on fc8.  ncu (fc6 at 64): 1.69 TB/s, DRAM 51 %, L2 67 %, 1.9 CTAs per SM,
//   one issue per 3.6 cycles, 72 % of cycles with no eligible warp — latency-bound with 4 warps
//   per scheduler, where cuBLASLt's TMA kernel (64 CTAs of 64x64x128) moved 2.02 TB/s.  Next
//   step: the weight tiles by TMA bulk copies into an mbarrier ring (one issuing thread, no
//   per-thread 16-byte requests), as the conv mainloop does.
// * Zero fill (cp.async src-size 0): samples past the batch and K past the activation's
//   in_stride (the weight's k_pad may be longer; its columns there are zero); the packed weight
//   holds zeros for rows past out_c.
#include <algorithm>
#include <cstdint>
#include <string>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/mma_s8_tile.cuh"
#include "kernels/cuda/conv/ptx.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/linear_s8_stream.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace {

using s8_tile::kBK;
using s8_tile::kRowBytes;
using s8_tile::kSegs;

constexpr int kBM = 128, kBN = 64;  // out features, samples per CTA
constexpr int kStages = 6, kThreads = 256;
constexpr int kWarpsN = 2, kMI = kBM / (kThreads / 32 / kWarpsN) / 16;  // 4 x 2 warps, MI 2
constexpr int kStageA = kBM * kRowBytes, kStageB = kBN * kRowBytes;
constexpr int kSmem = kStages * (kStageA + kStageB);
constexpr int kMinTilesPerSplit = 8;   // 512 bytes of K per slice at least
constexpr int kTileBytes = kBM * kBK;  // one packed weight tile: 128 rows x 64 bytes
static_assert(kBM * kSegs == 2 * kThreads && kBN * kSegs == kThreads, "loader roles below");
static_assert(kMI == 2, "warp tile 32 x 32");

__global__ void __launch_bounds__(kThreads, 2)  // two CTAs per SM (design note)
    linear_s8_stream_kernel(const S8Conv p, const int8_t* __restrict__ packed,
                            const int8_t* __restrict__ x, int batch, int* __restrict__ sums,
                            int tiles_per_split) {
  pdl_wait();
  extern __shared__ __align__(128) int8_t smem[];
  const uint32_t ring_a = ptx::smem_u32(smem);
  const uint32_t ring_b = ring_a + kStages * kStageA;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / kWarpsN, warp_n = warp % kWarpsN;
  const int b0 = blockIdx.x * kBN, o0 = blockIdx.y * kBM;

  // Loader roles: segment tid % 4 of weight rows tid / 4 and tid / 4 + 64 (bytes tid·16 and
  // 4096 + tid·16 of the packed tile), activation row tid / 4.
  const int seg = tid % kSegs, row = tid / kSegs;
  const int8_t* a_tiles = packed + static_cast<int64_t>(blockIdx.y) * (p.k_pad / kBK) * kTileBytes;
  const int b = b0 + row;
  const int8_t* b_src = b < batch ? x + static_cast<int64_t>(b) * p.in_stride + seg * 16 : nullptr;
  auto load_tile = [&](int slot, int kt) {
    const int k = kt * kBK + seg * 16;
    const int8_t* tile = a_tiles + static_cast<int64_t>(kt) * kTileBytes + tid * 16;
#pragma unroll
    for (int i = 0; i < 2; ++i)
      ptx::cp_async_16(ring_a + slot * kStageA + (row + 64 * i) * kRowBytes + seg * 16,
                       tile + i * (kTileBytes / 2), 16);
    const bool real = b_src != nullptr && k < p.in_stride;
    ptx::cp_async_16(ring_b + slot * kStageB + row * kRowBytes + seg * 16,
                     real ? b_src + kt * kBK : x, real ? 16 : 0);
  };

  int acc[kMI][4][4] = {};
  const int first = blockIdx.z * tiles_per_split;
  const int tiles = min(p.k_pad / kBK - first, tiles_per_split);
  s8_tile::cp_async_ring<kStages>(first, tiles, load_tile, [&](int slot) {
    s8_tile::warp_k_tile<kMI>(ring_a + slot * kStageA, ring_b + slot * kStageB, warp_m * kMI * 16,
                              warp_n * 32, lane, acc);
  });

  // acc[mi][ni][2h + e]: out feature o0 + warp row 16 mi + g + 8h, sample b0 + 8 ni + 2t + e.
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int o = o0 + (warp_m * kMI + mi) * 16 + g + 8 * h;
      if (o >= p.out_c) continue;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int sample = b0 + warp_n * 32 + ni * 8 + 2 * t + e;
          if (sample < batch)
            atomicAdd(sums + static_cast<int64_t>(sample) * p.out_stride + o,
                      acc[mi][ni][2 * h + e]);
        }
    }
}

// packed[(block · k_tiles + kt) · 8192 + r · 64 + c] = weight[block · 128 + r][kt · 64 + c], zero
// for rows past out_c: one thread per 16 bytes.
__global__ void pack_kernel(const S8Conv p, int8_t* __restrict__ packed, int64_t chunks) {
  pdl_wait();
  const int k_tiles = p.k_pad / kBK;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < chunks;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t tile = i / (kTileBytes / 16);
    const int within = static_cast<int>(i % (kTileBytes / 16));
    const int r = within / kSegs, c = (within % kSegs) * 16;
    const int64_t block = tile / k_tiles;
    const int kt = static_cast<int>(tile % k_tiles);
    const int64_t o = block * kBM + r;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (o < p.out_c) v = *reinterpret_cast<const uint4*>(p.weight + o * p.k_pad + kt * kBK + c);
    reinterpret_cast<uint4*>(packed)[i] = v;
  }
}

void check_linear(const S8Conv& linear) {
  if (linear.groups != 1 || linear.kh != 1 || linear.kw != 1 || linear.in_h != 1 ||
      linear.in_w != 1 || linear.out_h != 1 || linear.out_w != 1 || linear.in_stride % 16 != 0 ||
      linear.k_pad % kBK != 0 || linear.k_pad < linear.in_stride || linear.out_c < 1 ||
      linear.out_stride < linear.out_c || linear.weight == nullptr)
    throw Error("linear_s8_stream: invalid linear description");
}

}  // namespace

size_t linear_s8_stream_packed_bytes(const S8Conv& linear) {
  return static_cast<size_t>((linear.out_c + kBM - 1) / kBM) * (linear.k_pad / kBK) * kTileBytes;
}

void linear_s8_stream_pack(const S8Conv& linear, void* packed, cudaStream_t stream) {
  check_linear(linear);
  if (packed == nullptr) throw Error("linear_s8_stream_pack: no destination");
  const int64_t chunks = static_cast<int64_t>(linear_s8_stream_packed_bytes(linear) / 16);
  const int blocks = static_cast<int>(std::min<int64_t>((chunks + 255) / 256, 1 << 16));
  launch_kernel(pack_kernel, blocks, 256, 0, stream, linear, static_cast<int8_t*>(packed), chunks);
}

int linear_s8_stream_splits(const S8Conv& linear, int batch, int sms) {
  const int64_t ctas =
      static_cast<int64_t>((std::max(batch, 1) + kBN - 1) / kBN) * ((linear.out_c + kBM - 1) / kBM);
  const int tiles = linear.k_pad / kBK;
  // At most one wave of two CTAs per SM: a second, part-filled wave doubles the time.
  int64_t splits = 2 * static_cast<int64_t>(std::max(sms, 1)) / ctas;
  splits = std::min<int64_t>(splits, tiles / kMinTilesPerSplit);
  return static_cast<int>(std::max<int64_t>(splits, 1));
}

size_t linear_s8_stream_workspace_bytes(const S8Conv& linear, int batch) {
  const size_t bytes = static_cast<size_t>(std::max(batch, 0)) * linear.out_stride * sizeof(int);
  return (bytes + 255) / 256 * 256;
}

void linear_s8_stream(const S8Conv& linear, const void* packed, const void* x, void* y, int batch,
                      int splits, void* workspace, cudaStream_t stream) {
  check_linear(linear);
  if (batch <= 0) return;
  if (splits < 1 || packed == nullptr || workspace == nullptr || x == nullptr || y == nullptr)
    throw Error(
        "linear_s8_stream: needs splits >= 1, the packed weight, a workspace, an input and an "
        "output");
  // The attribute is per kernel and process: set once (thread-safe static initialisation).
  static const cudaError_t configured = cudaFuncSetAttribute(
      linear_s8_stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  CNNRT_CUDA_CHECK(configured);
  auto* sums = static_cast<int*>(workspace);
  CNNRT_CUDA_CHECK(cudaMemsetAsync(
      sums, 0, static_cast<size_t>(batch) * linear.out_stride * sizeof(int), stream));
  const int tiles = linear.k_pad / kBK, per_split = (tiles + splits - 1) / splits;
  const dim3 grid(static_cast<unsigned>((batch + kBN - 1) / kBN),
                  static_cast<unsigned>((linear.out_c + kBM - 1) / kBM),
                  static_cast<unsigned>((tiles + per_split - 1) / per_split));
  launch_kernel(linear_s8_stream_kernel, grid, kThreads, kSmem, stream, linear,
                static_cast<const int8_t*>(packed), static_cast<const int8_t*>(x), batch, sums,
                per_split);
  finish_s8(linear, sums, batch, y, stream);
}

}  // namespace cnnrt::cuda
