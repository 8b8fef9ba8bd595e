// 2:4 sparse fp16 linear layer for the CUDA backend: a weight-streaming GEMV for small batches
// that reads the kept half of a 2:4 weight plus its metadata (docs/SPARSITY.md, "GPU sparse
// linear"; the design note is atop linear_sparse24.cu).
//
// The packed layout ("slabs") and the maps between a kernel position and the PyTorch feature it
// stands for are __host__ __device__ here, so the host tests pin exactly the functions the kernel
// runs: which PyTorch group a slot holds, where in the NHWC-flattened x each of its 4 features
// lies, and the byte-permute that picks the two kept inputs.
//
// Activations as every fp16 kernel (runtime/cuda/cuda_registry.h): x [n][pad8(in)] fp16 — for a
// flattened [C, H, W] map in (h, w, c) order, C unpadded —, y [n][pad8(out)] fp16 with zeros in
// the padding lanes.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "graph/ir.h"
#include "kernels/cpu/sparse24.h"
#include "kernels/cuda/elementwise_fp16.h"

namespace cnnrt::cuda {

// n / divisor for n < 2^31 by a multiply-high, an add and a shift (Granlund & Montgomery, round-up
// multiplier): the input maps divide a slot by C (once per slab) or a feature by H·W (per input),
// where an integer division (no hardware divider: ~20 instructions) would eat most of a group's
// issue budget.
struct FastDiv {
  uint32_t divisor = 1, multiplier = 1, shift = 0;
  FastDiv() = default;
  explicit FastDiv(uint32_t d) : divisor(d) {  // host; 1 <= d <= 2^30
    while ((uint64_t{1} << shift) < d) ++shift;
    multiplier =
        static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  __host__ __device__ uint32_t operator()(uint32_t n) const {
#ifdef __CUDA_ARCH__
    const uint32_t high = __umulhi(n, multiplier);
#else
    const uint32_t high = static_cast<uint32_t>((uint64_t{n} * multiplier) >> 32);
#endif
    return (high + n) >> shift;  // no overflow: high <= n < 2^31
  }
};

// How the kernel finds the 4 inputs of a group in x (chosen from the input's shape):
//  * Vector: a plain vector, or a flatten whose (h, w, c) order equals PyTorch's (C or H·W is 1):
//    the group's 4 features are 4 consecutive halves (one 8-byte load).
//  * QuadMajor: a flatten of [C, H, W] with H·W % 4 == 0 and C ≥ 32: every group is 4
//    consecutive pixels of one channel.  Slots run over groups pixel-quad-major (slot t = q·C + c),
//    so the 32 lanes of a warp read 32 consecutive channels of the same pixel quad: a warp's load
//    of one input of its groups touches at most 3 64-byte segments of x (1 when all lanes pick the
//    same pixel).
//  * Gather: any other flatten (groups straddle channels, or C < 32): each feature's position
//    computed alone.
enum class Sparse24Input : int { Vector = 0, QuadMajor = 1, Gather = 2 };

constexpr int kSparse24SlabLanes = 32;                       // chunks of a full slab, one per lane
constexpr int kSparse24SlabGroups = 4 * kSparse24SlabLanes;  // 128 groups = 512 features
constexpr int kSparse24ChunkBytes = 16 + 2;                  // 4 groups: 8 kept halves + 4 nibbles
constexpr int kSparse24SlabBytes = kSparse24SlabLanes * kSparse24ChunkBytes;  // 576

// Everything the kernel needs to walk the packed weight and map slots to x (passed by value).
// A row is `slabs` slabs; slab s starts at s · 576 bytes and holds width(s) chunks (32, or 8/16/24
// for the last one): first width × 16 bytes of values — lane l's 16 bytes are its chunk: slot j
// (0..3) is the half2 (kept0, kept1) at byte 4j —, then width × 2 bytes of metadata — lane l's
// uint16 holds slot j's nibble at bits 4j (bits 0–1: index of kept0 in its group, 2–3: kept1).
struct Sparse24Geometry {
  int rows_pad = 0;     // rows stored: out rounded up to 8 (the extra rows are zero)
  int in_features = 0;  // real input features
  int x_stride = 0;     // halves between two samples of x: pad8(in)
  int groups = 0;       // real groups per row: ceil(in / 4); slots past it are zero padding
  int slabs = 0;        // per row: ceil(round_up(groups, 32) / 128)
  int last_width = kSparse24SlabLanes;
  int64_t row_bytes = 0;  // round_up(groups, 32) / 4 chunks × 18 bytes: a multiple of 16
  Sparse24Input input = Sparse24Input::Vector;
  int channels = 1, hw = 1;  // the flatten's C and H·W (QuadMajor, Gather)
  FastDiv div;               // by C (QuadMajor) or by H·W (Gather)

  __host__ __device__ int width(int slab) const {
    return slab == slabs - 1 ? last_width : kSparse24SlabLanes;
  }
  // The slot (position along the row's K) of lane `lane`, slot j of slab `slab` of width `width`:
  // consecutive lanes hold consecutive slots, so x is read coalesced.
  __host__ __device__ static int slot(int slab, int width, int lane, int j) {
    return slab * kSparse24SlabGroups + j * width + lane;
  }
  // The PyTorch group (features 4g..4g+3) stored at slot t, or -1 past the real groups.
  __host__ __device__ int group_of_slot(int t) const {
    if (t >= groups) return -1;
    if (input != Sparse24Input::QuadMajor) return t;
    const int quad = static_cast<int>(div(static_cast<uint32_t>(t)));
    const int channel = t - quad * channels;
    return channel * (hw / 4) + quad;
  }
  // Position in one sample of x of element i (0..3) of slot t's group, or -1 where the slot is
  // padding or the feature is past in (x taken as 0).  The CUDA flatten rule
  // (linear_source_column): PyTorch feature f = c·H·W + p sits at p·C + c.
  __host__ __device__ int x_index(int t, int i) const {
    if (t >= groups) return -1;
    if (input == Sparse24Input::QuadMajor) return quad_major_x(t, i);
    if (input == Sparse24Input::Gather) return gather_x(t, i);
    return 4 * t + i;  // < pad8(in): x's padding is zero
  }
  // The same per input kind, for a real slot t (the kernel knows its kind at compile time).
  __host__ __device__ int quad_major_x(int t, int i) const {
    const int quad = static_cast<int>(div(static_cast<uint32_t>(t)));
    const int channel = t - quad * channels;
    return (4 * quad + i) * channels + channel;
  }
  __host__ __device__ int gather_x(int t, int i) const {
    const int feature = 4 * t + i;
    if (feature >= in_features) return -1;
    const int channel = static_cast<int>(div(static_cast<uint32_t>(feature)));
    return (feature - channel * hw) * channels + channel;
  }
};

// The kernel's walk over one lane's 4 slots of a slab in QuadMajor order: slot t0 + j · step
// (step ≤ 32 ≤ C) is channel c + j · step of pixel quad q, wrapping at most once into the next
// quad; x_base = 4q · C + c follows (a wrap adds 3C), so a slab costs one FastDiv, not four.
struct QuadMajorWalk {
  int channel = 0, x_base = 0;  // x_base: the position of the group's first pixel in x
  __host__ __device__ QuadMajorWalk(const Sparse24Geometry& g, int t0) {
    const int quad = static_cast<int>(g.div(static_cast<uint32_t>(t0)));
    channel = t0 - quad * g.channels;
    x_base = 4 * quad * g.channels + channel;
  }
  __host__ __device__ void advance(const Sparse24Geometry& g, int step) {
    channel += step;
    x_base += step;
    const bool wrap = channel >= g.channels;
    channel -= wrap ? g.channels : 0;
    x_base += wrap ? 3 * g.channels : 0;
  }
};

// The byte-permute selector that moves halves i0 and i1 of the 8 bytes {hi:lo} (4 halves) into the
// low and high half of the result, from a nibble i0 | i1 << 2: byte pair (2i, 2i + 1) per half.
__host__ __device__ inline uint32_t sparse24_selector(uint32_t nibble) {
  return 0x1010u + 0x22u * (nibble & 3u) + 0x880u * (nibble & 0xCu);
}
// The two inputs a group's kept weights multiply, as one half2 (low: kept0's input): halves
// (i0, i1) of the group's 4 inputs {hi:lo}.  One prmt on the device.
__host__ __device__ inline uint32_t sparse24_pick(uint32_t lo, uint32_t hi, uint32_t nibble) {
  const uint32_t selector = sparse24_selector(nibble);
#ifdef __CUDA_ARCH__
  return __byte_perm(lo, hi, selector);
#else
  const uint64_t bytes = (uint64_t{hi} << 32) | lo;  // __byte_perm's semantics, for the host tests
  uint32_t out = 0;
  for (int k = 0; k < 4; ++k)
    out |= static_cast<uint32_t>((bytes >> (8 * ((selector >> (4 * k)) & 7u))) & 0xFFu) << (8 * k);
  return out;
#endif
}

// The geometry of an [out, in] weight reading `flattened_source` ([C, H, W] of an NHWC flatten,
// or {} for a plain vector).  Throws Error when C·H·W != in.
Sparse24Geometry sparse24_geometry(int out_features, int in_features,
                                   const Shape& flattened_source);

// The packed weight on the host: geometry, rows_pad × row_bytes bytes, fp32 bias [rows_pad] (zeros
// where the layer has none and in the padding).
struct HostSparse24 {
  Sparse24Geometry geometry;
  std::vector<uint8_t> weight;
  std::vector<float> bias;
};

// Repacks a compressed linear weight (taps 1, channels = in) into slabs, values rounded to fp16;
// bias: [rows] or nullptr.  Rows run in parallel on the host's cores.  Throws Error on a
// conv-shaped or inconsistent weight.
HostSparse24 pack_sparse24(const sparse24::Compressed& weight, const float* bias,
                           const Shape& flattened_source);

// The packed weight and bias on the device (sizes only while planning for a described target).
class Sparse24Weights {
 public:
  explicit Sparse24Weights(const HostSparse24& host);
  const Sparse24Geometry& geometry() const { return geometry_; }
  const void* weight() const { return weight_.get(); }
  const float* bias() const { return static_cast<const float*>(bias_.get()); }
  size_t bytes() const { return weight_.bytes() + bias_.bytes(); }  // what the kernel reads
  // Batch-1 passes stage x in shared memory in slot order (the design note's "Staged x"): decided
  // once here, from the device's shared memory per SM — only where 4 blocks still fit an SM.
  bool stages_x() const { return stages_x_; }

 private:
  Sparse24Geometry geometry_;
  DeviceArray weight_, bias_;
  bool stages_x_ = false;
};

// Samples of x one pass of the kernel keeps in registers; larger batches loop inside the kernel.
constexpr int kSparse24MaxBatchPass = 8;

// How many warps share one row's slabs (1, 2, 4 or 8) for `batch` samples on `sm_count` SMs: as
// gemv_choose_split, in slabs instead of 512-byte chunks.
int sparse24_choose_split(const Sparse24Geometry& geometry, int64_t batch, int sm_count);

// y = x · Wᵀ + b (ReLU when `relu`) for any batch, in one launch: the kernel loops over the batch
// in passes of at most kSparse24MaxBatchPass samples (each pass streams the weight again).  x and
// y must not alias.  split: 1, 2, 4 or 8 (0: sparse24_choose_split on the current device).
// stage_x false: a batch-1 pass reads x from global memory even where weights.stages_x() (tests:
// both paths against one reference).
void gemv_sparse24_fp16(const Sparse24Weights& weights, bool relu, const void* x, void* y,
                        int64_t batch, cudaStream_t stream, int split = 0, bool stage_x = true);

}  // namespace cnnrt::cuda
