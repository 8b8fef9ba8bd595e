// The host side the two TMA convs share (conv_fp16_tma: tma_conv.cu, conv_int8_tma: tma_s8.cu):
// the shape limits of the im2col box, the tile shapes and the wave model, the ring's shared
// memory, the tensor maps (the driver's encoders, looked up once through the runtime's
// cudaGetDriverEntryPointByVersion, so cnnrt links no libcuda), the per-context cache of input
// maps and the kernel images' start-up checks.  Written once because the two convs are one
// mainloop (tma_mainloop.cuh) with two element types: what it needs from the host is the same.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

namespace cnnrt::cuda::tma {

// ---- shape limits, tiles, schedule ----------------------------------------------------------

// What the mainloop serves whatever the element: groups 1, dilation 1 (the im2col box has no
// dilation), kernel up to 64 x 64 (the tap offsets are 16-bit, the K loop walks kh * kw taps)
// and traversal strides 1-8 (the im2col map's element strides).
constexpr bool conv_limits_ok(int groups, int dilation_h, int dilation_w, int kernel_h,
                              int kernel_w, int stride_h, int stride_w) {
  return groups == 1 && dilation_h == 1 && dilation_w == 1 && kernel_h >= 1 && kernel_h <= 64 &&
         kernel_w >= 1 && kernel_w <= 64 && stride_h >= 1 && stride_h <= 8 && stride_w >= 1 &&
         stride_w <= 8;
}
// A corner of the 4-D im2col map's bounding box lies in [-128, 127].
constexpr bool corner_ok(int v) { return v >= -128 && v <= 127; }

// A tile shape and its per-tile efficiency: conv_fp16_tma's lab throughput at batch 256 relative
// to the best tile (docs/kernels/conv_fp16_tma.md).  The int8 instance runs the same tiles (all
// but 256x96) and the same wave model.  256x96 serves fp16's pooled AlexNet conv2 and its speed is
// a guess (tma_conv.cu).
// The BN = 64 tiles serve out_c <= 64 (conv1's space-to-depth form: 64 channels in and out, K =
// 576) without computing a half-empty 128-wide tile.  Their speeds are guesses, not measured: an
// m64n64k16 wgmma reads as many shared-memory bytes of A as of B (2 KB each) for half the MACs of
// an n128 one, so at N = 64 the operand reads alone take the SM's 128 B/clk of shared memory at
// the tensor pipe's rate and the TMA's writes into the ring come on top (per MAC, 1.6x the shared
// memory traffic of 128x256): 0.7 for 256x64; 128x64 another 0.82x of that (128x128 against
// 256x128 in the lab), 0.6.
struct TileShape {
  int bm, bn;
  double speed;
  const char* name;
};
inline constexpr TileShape kTileShapes[] = {
    {128, 128, 0.78, "128x128"}, {128, 192, 1.0, "128x192"}, {128, 256, 1.0, "128x256"},
    {256, 128, 0.95, "256x128"}, {256, 96, 0.9, "256x96"},   {256, 64, 0.7, "256x64"},
    {128, 64, 0.6, "128x64"},
};

// The wave model's constants (conv_fp16_tma's fused-or-staged cost model, tma_conv.cu's design
// note; the sparse instance's too): per-SM throughput of a speed-1.0 fp16 tile (the lab's conv2 on
// 128x192, 12 waves in 0.174 ms), the staged pool pass's bandwidth and its launch.
inline constexpr double kSmFlops = 5.4e12;
inline constexpr double kPoolBandwidth = 2.8e12;
inline constexpr double kPoolLaunchSeconds = 2e-6;
// The staged form's pool pass: the pre-pool tensor read, the pooled one written, one launch.
inline double staged_pool_seconds(size_t pre_pool_bytes, size_t pooled_bytes) {
  return double(pre_pool_bytes + pooled_bytes) / kPoolBandwidth + kPoolLaunchSeconds;
}

// The names of a family's tile table (entries whose `name` is a TileShape's), in table order:
// the stable index of a pinned tile.
template <class Tile, size_t N>
std::vector<std::string> tile_names_of(const Tile (&tiles)[N]) {
  std::vector<std::string> names;
  for (const Tile& t : tiles) names.push_back(t.name);
  return names;
}
// A pinned tile index outside [0, count) as a cnnrt::Error ("kernel: no tile N").
void check_tile(const char* kernel, int variant, int count);

// Dynamic shared memory of a TMA conv's ring: `stages` stages of bm A rows + bn B rows of
// row_bytes (the k-tile row: 128, or 64 for int8's 64-byte swizzle), plus 1024 bytes of slack to
// align the ring to the swizzle atom.  The kernels' TmaRing::kSmem is this.
constexpr size_t ring_smem_bytes(int bm, int bn, int stages, int row_bytes) {
  return 1024 + size_t(stages) * size_t(bm + bn) * size_t(row_bytes);
}

// Output tiles (units) of an m_rows x n GEMM in bm x bn tiles; the persistent grid's CTAs (one
// per SM at most: 1 CTA fits an SM) and its waves, the wave model's unit of time.
inline long long tile_units(long long m_rows, int bm, int n, int bn) {
  return (m_rows + bm - 1) / bm * ((n + bn - 1) / bn);
}
inline int persistent_ctas(long long units, int sms) {
  return int(std::min<long long>(units, sms));
}
inline double waves(long long units, int sms) { return double((units + sms - 1) / sms); }
// The int8 TMA kernels' tile choice: the fewest waves weighted by the tile's area over its
// measured speed, the first tile on ties.  units_of(t) is tile t's unit count at the batch.
template <class Tile, size_t N, class UnitsOf>
int cheapest_tile(const Tile (&tiles)[N], int sms, UnitsOf units_of) {
  int best = 0;
  double best_cost = 0;
  for (int t = 0; t < int(N); ++t) {
    const double cost = waves(units_of(t), sms) * tiles[t].bm * tiles[t].bn / tiles[t].speed;
    if (t == 0 || cost < best_cost) {
      best = t;
      best_cost = cost;
    }
  }
  return best;
}

// ---- tensor maps ----------------------------------------------------------------------------

using EncodeIm2col = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                  const cuuint64_t*, const cuuint64_t*, const int*, const int*,
                                  cuuint32_t, cuuint32_t, const cuuint32_t*, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion,
                                  CUtensorMapFloatOOBfill);
using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                 const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeIm2col / cuTensorMapEncodeTiled; a driver without them is a cnnrt::Error.
EncodeIm2col encode_im2col();
EncodeTiled encode_tiled();

// A failed encode as a cnnrt::Error naming the kernel and the map ("kernel: what failed (...)").
void check_encode(const char* kernel, CUresult status, const char* what);

// The swizzle whose span is a k-tile row of row_bytes (128, 64, or 32: the int8 sparse conv's
// compressed weight rows): the K-major layout the wgmma descriptors read (tma_mainloop.cuh's
// desc_of).
CUtensorMapSwizzle swizzle_of(int row_bytes);

// The weight's tiled map: `rows` rows of k elements, row_pitch bytes apart; boxes of row_elems
// (one k-tile row of row_bytes) x box_rows (the tile's BN).  Checked (cnnrt::Error).
// `what` names the map in the error (the window conv's input slab is such a map too).
void encode_weight_map(const char* kernel, CUtensorMap* map, CUtensorMapDataType type,
                       const void* weight, size_t k, size_t rows, size_t row_pitch, int row_elems,
                       int box_rows, int row_bytes,
                       const char* what = "cuTensorMapEncodeTiled (weight)");

// The activations' im2col map over an NHWC tensor (`channels` = the channel stride, elements of
// elem_bytes): boxes of 128 output pixels x row_elems channels; the bounding box of tap-(0,0)
// positions from `lower` to `upper` (W, H: its corners), traversal strides stride_w / stride_h.
// Taps outside the image and pixels past the last image are the TMA's zero fill.
struct Im2colGeometry {
  CUtensorMapDataType type;
  int elem_bytes;
  int channels, width, height, batch;
  int lower[2], upper[2];
  int stride_w, stride_h;
  int row_elems, row_bytes;
  int box_pixels = 128;  // pixels per box (the M rows one box brings): 128, or 192 (int8's 192x192)
};
CUtensorMap encode_im2col_map(const char* kernel, const void* x, const Im2colGeometry& g);

// A context's encoded input maps (its KernelPlan::state), newest first.  The runtime hands a step
// its input pointer only at run(), so a map is encoded the first time a pointer and batch come
// (at the context's creation: its first forward) and looked up after; a graph replay does not
// call run() at all.  `Input` has `x` and `batch` members; `encode(x, batch)` makes one.
template <typename Input>
class InputMaps {
 public:
  template <typename Encode>
  Input find_or_encode(const void* x, int batch, const Encode& encode) const {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t i = 0;
    while (i < maps_.size() && (maps_[i].x != x || maps_[i].batch != batch)) ++i;
    if (i == maps_.size()) {
      if (maps_.size() == kMax) maps_.pop_back();
      maps_.insert(maps_.begin(), encode(x, batch));
      i = 0;
    }
    return maps_[i];
  }

 private:
  static constexpr size_t kMax = 8;  // bound buffers (run_async) may bring a few more pointers
  mutable std::mutex mutex_;
  mutable std::vector<Input> maps_;
};

// ---- kernel images --------------------------------------------------------------------------

// One instance of a TMA conv kernel: its entry, the tile it runs (for messages) and the dynamic
// shared memory it launches with.
struct KernelImage {
  const void* fn;
  const char* tile;
  size_t smem;
};
// setmaxnreg's budget holds only when an image starts at exactly entry_regs registers (an inc
// that cannot be satisfied hangs): "" when every image does, else what is wrong (the last
// offender).  Reads the loaded images' attributes: call once per process per family.
std::string register_problem(const std::vector<KernelImage>& images, int entry_regs);
// Opts every image into its dynamic shared memory (above the 48 KB default).
void opt_in_smem(const std::vector<KernelImage>& images);

}  // namespace cnnrt::cuda::tma
