// 2:4 sparse fp16 linear on the sparse tensor cores for small batches: a weight-streaming GEMV
// whose inner product is one mma.sp m16n8k32 per 512 bytes of kept weights, the batch as the
// MMA's N (design note atop linear_sparse24_mma.cu; docs/SPARSITY.md, "GPU sparse linear").
//
// It reuses the CUDA-core GEMV's input map (Sparse24Geometry, linear_sparse24.h): the K order is
// the same slot order, so x is staged in shared memory exactly as that kernel stages it.  The
// packed layout here is its own: fragments in the order the lanes hold them.  The layout's
// constants and byte offsets are __host__ __device__ so the CPU tests decode the packed weight
// with the functions the kernel runs.
//
// Activations as every fp16 kernel: x [n][pad8(in)] fp16 (a flatten in (h, w, c) order),
// y [n][pad8(out)] fp16 with zeros in the padding lanes.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/linear_sparse24.h"

namespace cnnrt::cuda {

constexpr int kSpMmaTileRows = 16;   // mma.sp M: rows of one row tile
constexpr int kSpMmaStepGroups = 8;  // mma.sp K 32 = 8 groups of 4
constexpr int kSpMmaChunkSteps = 8;  // K steps per chunk
constexpr int kSpMmaChunkGroups = kSpMmaChunkSteps * kSpMmaStepGroups;  // 64 groups, K 256
constexpr int kSpMmaStepBytes = 32 * 16;  // one A fragment: 16 B a lane
constexpr int kSpMmaChunkBytes = (kSpMmaChunkSteps + 1) * kSpMmaStepBytes;  // + metadata: 4608
constexpr int kSpMmaMaxPass = 8;  // mma.sp N: samples per pass

// A packed weight: row tile r (rows 16r..16r+15) is `chunks` chunks of 4608 bytes, contiguous.
// Chunk c: steps 0..7 (slots 64c + 8s .. +7), each 512 bytes in lane order, then 512 bytes of
// metadata in lane order.  Lane l = 4g + t of step s holds the A fragment of mma.sp m16n8k32
// (PTX ISA "Matrix fragments for sparse mma.m16n8k32 with .f16"): 4 half2, the kept pairs of
// (row g, group t), (row g + 8, group t), (row g, group 4 + t), (row g + 8, group 4 + t) of the
// step.  Metadata word w (0..3) of lane 4g + t: the word step 4 (t / 2) + w needs from a lane of
// role t % 2 (sparsity selector 0: lanes 0 and 1 of each quad), i.e. bits 0-15 the nibbles of row
// g for groups 4 (t % 2) .. +3 of that step (group j at bits 4 (j % 4)), bits 16-31 the same for
// row g + 8.  Lanes 2 and 3 hold steps 4-7 so that one 16-byte load a lane carries a chunk's
// 512 bytes; the kernel hands them to lanes 0 and 1 with one shuffle per step.
struct Sparse24MmaGeometry {
  Sparse24Geometry map;    // the slot order and input map (rows_pad: pad8(out), the rows y holds)
  int row_tiles = 0;       // ceil(out / 16)
  int chunks = 0;          // per row tile: ceil(groups / 64)
  int64_t tile_bytes = 0;  // chunks × 4608
  int x_row = 0;           // halves between two staged samples: chunks × 256 + 8 (bank spread)

  // Byte offset, inside a row tile, of lane `lane`'s 16 bytes of step `step` (0..7) of chunk c,
  // and of its metadata.
  __host__ __device__ static int64_t step_offset(int chunk, int step, int lane) {
    return int64_t(chunk) * kSpMmaChunkBytes + step * kSpMmaStepBytes + 16 * lane;
  }
  __host__ __device__ static int64_t meta_offset(int chunk, int lane) {
    return step_offset(chunk, kSpMmaChunkSteps, lane);
  }
  size_t staged_x_bytes(int samples) const { return size_t(samples) * x_row * 2; }
};

Sparse24MmaGeometry sparse24_mma_geometry(int out_features, int in_features,
                                          const Shape& flattened_source);

// The packed weight on the host: geometry, row_tiles × tile_bytes bytes, fp32 bias [pad8(out)]
// (zeros where the layer has none and in the padding).
struct HostSparse24Mma {
  Sparse24MmaGeometry geometry;
  std::vector<uint8_t> weight;
  std::vector<float> bias;
};

// Repacks a compressed linear weight (taps 1) into row tiles, values rounded to fp16; bias:
// [rows] or nullptr.  Padding (rows past out, groups past in) is zero with the valid nibble
// {0, 1}.  Throws Error on a conv-shaped or inconsistent weight.
HostSparse24Mma pack_sparse24_mma(const sparse24::Compressed& weight, const float* bias,
                                  const Shape& flattened_source);

// Samples one pass stages, for a layer of `in_features` on the current device: up to 8 while
// their staged x fits one block's shared memory; 0 when not even one sample does (then the
// kernel cannot serve the layer), and 0 below sm_80 (no mma.sp).
int sparse24_mma_max_pass(int in_features);

// The packed weight and bias on the device (sizes only while planning for a described target).
class Sparse24MmaWeights {
 public:
  explicit Sparse24MmaWeights(const HostSparse24Mma& host);
  const Sparse24MmaGeometry& geometry() const { return geometry_; }
  const void* weight() const { return weight_.get(); }
  size_t weight_matrix_bytes() const { return weight_.bytes(); }
  const float* bias() const { return static_cast<const float*>(bias_.get()); }
  size_t bytes() const { return weight_.bytes() + bias_.bytes(); }  // what the kernel reads
  int max_pass() const { return max_pass_; }

 private:
  Sparse24MmaGeometry geometry_;
  DeviceArray weight_, bias_;
  int max_pass_ = 0;
};

// How many warps share one row tile's chunks (1, 2, 4 or 8) on `sm_count` SMs: enough warps to
// keep the weight stream in flight, at least one chunk each.
int sparse24_mma_choose_split(const Sparse24MmaGeometry& geometry, int sm_count);

// y = x · Wᵀ + b (ReLU when `relu`) for any batch, in one launch: passes of up to max_pass()
// samples (each pass streams the weight again).  x and y must not alias.  split: 1, 2, 4 or 8
// (0: sparse24_mma_choose_split on the current device).  evict_first: the weight's loads go
// first out of L2 (KernelArgs::stream_evict_first).
void gemv_sparse24_mma_fp16(const Sparse24MmaWeights& weights, bool relu, const void* x, void* y,
                            int64_t batch, cudaStream_t stream, int split = 0,
                            bool evict_first = false);

}  // namespace cnnrt::cuda
