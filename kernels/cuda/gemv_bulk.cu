// Batch-1/2 fp16 GEMV that streams the weight with bulk copies (Hopper, sm_90a image).
//
// DESIGN NOTE
// * Why: at batch 1 AlexNet's fc6 / fc7 / fc8 are ~half of the forward (docs/PERFORMANCE.md run
//   36c: 29-30 / 15 / 6 µs under ncu), each bound by its weight's bytes.  The register GEMV of
//   linear_fp16.cu streams them at 2.2-2.6 TB/s with thousands of warps each issuing 16-byte loads
//   of its own rows; this kernel lets the copy engine (cp.async.bulk, the non-tensor TMA) move
//   the bytes instead: one thread per block issues multi-KB copies into a ring of shared-memory
//   stages, and the block's warps only read shared memory and do the math.  No load instructions
//   per weight byte, 48-64 KB in flight per SM (Little's law needs ~25 KB at 3.3 TB/s × ~1 µs).
// * Work split: one block per SM, each a contiguous range of rows (rows × cols_pad fp16 values,
//   row-major: one contiguous byte range per block), so the copies are long sequential reads.
//   The rows are dealt out evenly (AlexNet fc6: 4096 rows on 132 SMs, 31-32 each, 3 % of
//   imbalance).  A row is cut into `pieces` chunks of at most kMaxChunk bytes, equal but for a
//   shorter last one (fc6's 18 KB rows: 3 × 6 KB; fc7 / fc8: one 8 KB chunk), so a chunk never
//   straddles two rows.
// * Pipeline: kStages slots of kMaxChunk bytes with one "full" mbarrier each (the producer's
//   expect_tx + the copy's complete_tx).  Per chunk every thread waits on its slot's barrier,
//   dots its 16-byte vectors against x (staged in shared memory once per block: fc6 at batch 2
//   is 36 KB), and the block meets at one __syncthreads; then thread 0 refills the slot with the
//   chunk kStages ahead.  The barrier per chunk (~6-8 KB, a few hundred cycles of math) keeps the
//   refill simple; the kStages - 1 copies already in flight keep DRAM busy across it.
// * A row's last chunk: each warp's sums go to shared memory (a buffer per row parity, so the
//   next row's sums never overwrite ones not yet read), and after the barrier thread b adds the
//   8 warps', the bias and the ReLU for sample b.  fp32 accumulation; fp16 or fp32 output as the
//   register GEMV (the graph's last linear writes fp32 itself).
// * Limits: batch <= kBulkMaxBatch (2: x and the ring fit twice in an SM's shared memory only
//   up to there for fc6), cols_pad * 2 * batch of x in shared memory next to the ring, a
//   compute capability 9.0 device with the sm_90a image (the same probe as the wgmma convs).
//   Elsewhere gemv_bulk_supported() is false and the entry keeps the register GEMV.
#include <cuda_fp16.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/tma_mainloop.cuh"
#include "kernels/cuda/conv/wgmma.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/gemv_bulk.h"

namespace cnnrt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kStages = 8;
constexpr int kMaxChunk = 8192;  // bytes per chunk (a multiple of 16)
// Shared memory: the ring, then x, then the row sums [2][kWarps][batch] and the barriers.
constexpr size_t kRingBytes = size_t(kStages) * kMaxChunk;

__host__ __device__ constexpr size_t x_bytes(int cols_pad, int batch) {
  return size_t(cols_pad) * sizeof(__half) * batch;
}
size_t smem_bytes(int cols_pad, int batch) {
  return kRingBytes + x_bytes(cols_pad, batch) + 2 * kWarps * kBulkMaxBatch * sizeof(float) +
         kStages * sizeof(uint64_t);
}

// Chunks per row: the fewest pieces of at most kMaxChunk bytes.
int pieces_of(int cols_pad) {
  const int row_bytes = cols_pad * int(sizeof(__half));
  return (row_bytes + kMaxChunk - 1) / kMaxChunk;
}

#ifdef CNNRT_WGMMA_DEVICE
// Chunk i of a block: its row (from the block's first), where it starts in the row and how many
// 16-byte vectors it has (equal pieces but for a shorter last one).
struct Chunk {
  int row, first_vector, vectors;
};
__device__ __forceinline__ Chunk chunk_of(int i, int pieces, int row_vectors) {
  const int per_piece = (row_vectors + pieces - 1) / pieces;
  const int first = (i % pieces) * per_piece;
  return {i / pieces, first, min(per_piece, row_vectors - first)};
}

__device__ __forceinline__ void dot8(const uint4& w, const uint4& xv, float& acc) {
  const __half2* wh = reinterpret_cast<const __half2*>(&w);
  const __half2* xh = reinterpret_cast<const __half2*>(&xv);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 a = __half22float2(wh[j]), b = __half22float2(xh[j]);
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
  }
}
#endif

// Block b: rows [row_begin(b), row_begin(b + 1)) of the weight; see the design note.
template <int kBatch, typename Out>
__global__ void __launch_bounds__(kThreads, 1)
    gemv_bulk_kernel(const __half* __restrict__ weight, const float* __restrict__ bias,
                     const __half* __restrict__ x, Out* __restrict__ y, int rows, int cols_pad,
                     int y_stride, int pieces, bool relu) {
#ifdef CNNRT_WGMMA_DEVICE
  using namespace ptx;
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* ring = smem;
  __half* xs = reinterpret_cast<__half*>(smem + kRingBytes);
  float* sums = reinterpret_cast<float*>(smem + kRingBytes + x_bytes(cols_pad, kBatch));
  uint64_t* full = reinterpret_cast<uint64_t*>(sums + 2 * kWarps * kBulkMaxBatch);
  const uint32_t ring_addr = smem_u32(ring), full_addr = smem_u32(full);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int row0 = int((long long)rows * blockIdx.x / gridDim.x);
  const int row1 = int((long long)rows * (blockIdx.x + 1) / gridDim.x);
  const int row_vectors = cols_pad / 8;
  const int chunks = (row1 - row0) * pieces;
  const uint4* src = reinterpret_cast<const uint4*>(weight) + size_t(row0) * row_vectors;
  // Thread 0: the copy of chunk i into its slot, announced to the slot's barrier.
  auto issue = [&](int i) {
    const Chunk c = chunk_of(i, pieces, row_vectors);
    const uint32_t bar = full_addr + 8 * (i % kStages);
    tma_detail::mbar_expect_tx(bar, c.vectors * 16);
    tma_detail::bulk_load(ring_addr + (i % kStages) * kMaxChunk,
                          src + size_t(c.row) * row_vectors + c.first_vector, c.vectors * 16, bar);
  };

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) mbarrier_init(full_addr + 8 * s, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    for (int s = 0; s < kStages && s < chunks; ++s) issue(s);
  }
  // x for every sample, while the first copies are in flight (read through L2: every block
  // reads it).
  const int x_vectors = cols_pad / 8 * kBatch;
  for (int v = tid; v < x_vectors; v += kThreads)
    reinterpret_cast<uint4*>(xs)[v] = __ldg(reinterpret_cast<const uint4*>(x) + v);
  __syncthreads();  // x staged, barriers initialised

  float acc[kBatch];
#pragma unroll
  for (int b = 0; b < kBatch; ++b) acc[b] = 0.f;
  for (int i = 0; i < chunks; ++i) {
    const int slot = i % kStages;
    mbarrier_wait_parity(full_addr + 8 * slot, (i / kStages) & 1);
    const Chunk c = chunk_of(i, pieces, row_vectors);
    const uint4* w = reinterpret_cast<const uint4*>(ring + slot * kMaxChunk);
    const uint4* xv = reinterpret_cast<const uint4*>(xs) + c.first_vector;
    for (int v = tid; v < c.vectors; v += kThreads) {
      const uint4 wv = w[v];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) dot8(wv, xv[b * (cols_pad / 8) + v], acc[b]);
    }
    const bool row_end = i % pieces == pieces - 1;
    const int parity = c.row & 1;
    if (row_end) {
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        float s = acc[b];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) sums[(parity * kWarps + warp) * kBulkMaxBatch + b] = s;
        acc[b] = 0.f;
      }
    }
    __syncthreads();  // slot i % kStages read by every thread; the row's warp sums stored
    if (tid == 0 && i + kStages < chunks) issue(i + kStages);
    if (row_end && tid < kBatch) {
      const int row = row0 + c.row;
      if (row < y_stride) {
        float out = bias[row];
        for (int w8 = 0; w8 < kWarps; ++w8)
          out += sums[(parity * kWarps + w8) * kBulkMaxBatch + tid];
        if (relu) out = (out > 0.0f || out != out) ? out : 0.0f;  // keeps NaN, as the GEMV
        Out* const at = y + static_cast<int64_t>(tid) * y_stride + row;
        if constexpr (std::is_same_v<Out, float>)
          *at = out;
        else
          *at = __float2half_rn(out);
      }
    }
  }
#else
  __trap();  // never launched: gemv_bulk_supported() is false without the sm_90a image
#endif
}

template <int kBatch, typename Out>
void launch(const GemmWeights& w, bool relu, const void* x, void* y, int y_stride,
            cudaStream_t stream) {
  const size_t smem = smem_bytes(w.cols_pad(), kBatch);
  static const cudaError_t configured = cudaFuncSetAttribute(
      gemv_bulk_kernel<kBatch, Out>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      int(kRingBytes + x_bytes(kGemvBulkMaxCols, kBatch) + 2 * kWarps * kBulkMaxBatch * 4 +
          kStages * 8));
  CNNRT_CUDA_CHECK(configured);
  const int blocks = std::min(device_traits().sms, w.rows_pad());
  gemv_bulk_kernel<kBatch, Out><<<blocks, kThreads, smem, stream>>>(
      static_cast<const __half*>(w.weight()), w.bias_fp32(), static_cast<const __half*>(x),
      static_cast<Out*>(y), w.rows_pad(), w.cols_pad(), y_stride, pieces_of(w.cols_pad()), relu);
  CNNRT_CUDA_CHECK_LAUNCH();
}

template <typename Out>
void run(const GemmWeights& w, bool relu, const void* x, void* y, int64_t batch, int y_stride,
         cudaStream_t stream, const char* what) {
  if (!gemv_bulk_supported(w.rows_pad(), w.cols_pad(), batch))
    throw Error(std::string(what) + ": not served (batch " + std::to_string(batch) + ", " +
                std::to_string(w.rows_pad()) + "x" + std::to_string(w.cols_pad()) +
                ", or no sm_90a device)");
  if (x == y) throw Error(std::string(what) + ": input and output must not alias");
  if (y_stride < 1 || y_stride > w.rows_pad())
    throw Error(std::string(what) + ": " + std::to_string(y_stride) +
                " outputs per sample, the weight has " + std::to_string(w.rows_pad()));
  if (batch == 1)
    launch<1, Out>(w, relu, x, y, y_stride, stream);
  else
    launch<2, Out>(w, relu, x, y, y_stride, stream);
}

}  // namespace

bool gemv_bulk_supported(int rows_pad, int cols_pad, int64_t batch) {
  if (batch < 1 || batch > kBulkMaxBatch || rows_pad < 1 || cols_pad < 8) return false;
  if (cols_pad > kGemvBulkMaxCols || cols_pad % 8 != 0) return false;
  if (smem_bytes(cols_pad, int(batch)) > device_traits().smem_optin) return false;
  return ConvFp16Wgmma::device_supported();
}

void gemv_bulk_fp16(const GemmWeights& weights, bool relu, const void* x, void* y, int64_t batch,
                    cudaStream_t stream) {
  run<__half>(weights, relu, x, y, batch, weights.rows_pad(), stream, "gemv_bulk_fp16");
}

void gemv_bulk_fp16_to_fp32(const GemmWeights& weights, bool relu, const void* x, float* y,
                            int64_t batch, int out_features, cudaStream_t stream) {
  run<float>(weights, relu, x, y, batch, out_features, stream, "gemv_bulk_fp16_to_fp32");
}

}  // namespace cnnrt::cuda
