// linear_int8_tma: the Hopper int8 linear on the TMA mainloop, split over K — host side (shape
// rule, tensor maps, batch tile and split choice, launch).  The kernel and its design note are
// kernels/cuda/conv/tma_linear_s8_kernel.cuh.
//
// DESIGN NOTE
// * Batch tile BN: 64, 128 or 256 rows, at most the smallest that holds the batch (so few rows of
//   B are zero fill), and a stage stays small: 24, 32 or 48 KB, hence 9, 6 or 4 stages in the
//   227 KB opt-in — the weight bytes in flight per SM (96-144 KB) cover DRAM's latency at ~3 TB/s
//   many times over.  Among those the cost model below picks: a smaller batch tile makes more
//   units, so fewer K slices and fewer partial sums, but each unit loads more (the weight is read
//   once per batch tile, from L2 after the first).
// * Split: units = out-feature tiles x batch tiles x K slices, the slices as many as keep the
//   units within one wave of the SMs, at most kMaxSplits and at least one k-tile each: each SM
//   streams its own part of the weight once.  AlexNet at 16-64: fc6 32 x 4 slices of 18
//   k-tiles, fc7 32 x 4 of 8, fc8 8 x 4 of 8; at 256 (the model's tiles) fc6 32 x 4 of 18 on
//   256 rows, fc7 64 x 2 of 16 on 128 rows, fc8 32 x 4 of 8 on 64 rows.  The slices' sums go to
//   the workspace ([splits][batch][out_stride] int32: 16 MB for fc6 at 256) and finish_s8_split
//   adds them and requantises.  The sums came back from DRAM, not L2 (run 42b: the weight
//   stream evicted them), 5-11 us per layer; since run 45g the weight's boxes are loaded with an
//   L2 evict-first policy (tma_mainloop.cuh's split-K branch), which keeps them: fc6 at 16 / 64 /
//   256 26.8 / 28.1 / 36.8 -> 23.7 / 26.1 / 34.8 us.  The kernel's design note lists the
//   reductions tried instead.
// * The cost model (first fit, H200, docs/PERFORMANCE.md run 49: AlexNet fc6 / fc7 / fc8 at 256
//   on 256-row tiles, 128 or 32 units, 29.4 / 23.0 / 18.5 us in `profile`): a wave costs its
//   unit's loads at ~75 GB/s per SM (kUnitSecondsPerByte: fc6's 864 KB units against fc7's 384
//   KB), and the partial sums their bytes at kPartialSecondsPerByte (fc7's 16 MB against fc8's 4
//   MB), plus a fixed cost the same for every tile.  `conv_lab --linear-s8` times every tile:
//   on the H200 (run 49c) the picks were within 1 us of the fastest tile at 64, 128 and 256 on
//   fc6-fc8, the 256-row tile (4 stages) never the fastest, and the modelled times 0.23-0.7x the
//   measured (the fixed cost left out), so only the ranking is used.  AlexNet int8 at 256: -9 us
//   (fc7 23 -> 19-20 us, fc8 18.5 -> 12-13).
// * The input map is encoded per input pointer and batch (~1 us) and cached by the caller
//   (tma::InputMaps), like the TMA convs'.
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/tma_encode.h"
#include "kernels/cuda/conv/tma_linear_s8_kernel.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/linear_s8_tma.h"

namespace cnnrt::cuda {

namespace {

using tma_linear_detail::kBM;
using tma_linear_detail::TmaLinearS8Params;

struct BatchTile {
  int bn, stages;
};
constexpr BatchTile kBatchTiles[] = {{64, 9}, {128, 6}, {256, 4}};
constexpr int kBatchTileCount = sizeof(kBatchTiles) / sizeof(kBatchTiles[0]);
constexpr int kKTileBytes = 128;
// At most this many K slices: each adds batch x out_stride int32 that the finishing pass reads
// back (fc8 at 256 in 16 slices: 16 MB for a 4 MB weight, 9 us; docs/PERFORMANCE.md run 42b).
constexpr int kMaxSplits = 4;

using KernelFn = void (*)(CUtensorMap, CUtensorMap, TmaLinearS8Params);
template <int T>
KernelFn instance() {
  return tma_linear_detail::linear_tma_s8_kernel<kBatchTiles[T].bn, kBatchTiles[T].stages>;
}
KernelFn kernel_of(int tile) {
  return tile == 0 ? instance<0>() : tile == 1 ? instance<1>() : instance<2>();
}
template <int T>
constexpr size_t smem_of() {
  return tma_linear_detail::TmaLinearS8Ring<kBatchTiles[T].bn, kBatchTiles[T].stages>::kSmem;
}
size_t smem_of(int tile) {
  return tile == 0 ? smem_of<0>() : tile == 1 ? smem_of<1>() : smem_of<2>();
}
static_assert(smem_of<0>() == 1024 + 9 * (128 + 64) * 128, "the ring: stages x (A + B) rows");

std::vector<tma::KernelImage> kernel_images() {
  static const char* const names[] = {"128x64", "128x128", "128x256"};
  std::vector<tma::KernelImage> images;
  for (int t = 0; t < kBatchTileCount; ++t)
    images.push_back({reinterpret_cast<const void*>(kernel_of(t)), names[t], smem_of(t)});
  return images;
}

// The smallest batch tile that holds `batch` (the largest for batches above 256).
int batch_tile_of(int batch) {
  int t = 0;
  while (t + 1 < kBatchTileCount && kBatchTiles[t].bn < batch) ++t;
  return t;
}

constexpr double kUnitSecondsPerByte = 1.0 / 75e9, kPartialSecondsPerByte = 0.375e-6 / 1e6;

}  // namespace

class LinearS8TmaImpl {
 public:
  S8Conv linear;
  int sms = 132;
  int k_tiles = 0;
  CUtensorMap w_map;
};

// (A described target's plan has no device weight: the shape decides, as on the device.)
bool linear_s8_tma_serves(const S8Conv& c) {
  return c.groups == 1 && c.in_h == 1 && c.in_w == 1 && c.out_h == 1 && c.out_w == 1 && c.kh == 1 &&
         c.kw == 1 && c.in_c >= 1 && c.in_stride == padded16(c.in_c) && c.k_total == c.in_stride &&
         c.k_pad >= c.k_total && c.k_pad % 64 == 0 && c.out_c >= 1 &&
         c.out_stride == (c.float_output ? (c.out_c + 7) / 8 * 8 : padded16(c.out_c)) &&
         (c.weight != nullptr || plan_only()) && (long long)c.out_stride * 256 < INT_MAX / 64;
}

bool LinearS8Tma::device_supported() { return wgmma_s8_device_supported(); }

LinearS8Tma::LinearS8Tma(const S8Conv& linear) : impl_(std::make_unique<LinearS8TmaImpl>()) {
  LinearS8TmaImpl& m = *impl_;
  m.linear = linear;
  if (!linear_s8_tma_serves(linear))
    throw Error(
        "linear_int8_tma: unsupported linear (needs a 1x1 int8 GEMM description: K = "
        "pad16(in features), weight rows of k_pad % 64 == 0 bytes)");
  if (!device_supported())
    throw Error("linear_int8_tma: needs a compute capability 9.0 device and the sm_90a build");
  m.k_tiles = (linear.in_stride + kKTileBytes - 1) / kKTileBytes;
  m.sms = std::max(device_traits().sms, 1);
  for (int t = 0; t < kBatchTileCount; ++t)
    if (device_traits().smem_optin < smem_of(t) + 256)
      throw Error("linear_int8_tma: the device offers too little shared memory per block");
  if (plan_only()) return;  // a described target: no maps, no attributes
  static const std::string problem = tma::register_problem(kernel_images(), tma_detail::kEntryRegs);
  if (!problem.empty()) throw Error("linear_int8_tma: " + problem);
  tma::opt_in_smem(kernel_images());
  // A: [out_c][k_pad] rows, boxes of 128 bytes of K x kBM rows; K past in_stride and rows past
  // out_c are the TMA's zero fill.
  tma::encode_weight_map("linear_int8_tma", &m.w_map, CU_TENSOR_MAP_DATA_TYPE_UINT8, linear.weight,
                         size_t(linear.in_stride), size_t(linear.out_c), size_t(linear.k_pad),
                         kKTileBytes, kBM, kKTileBytes);
}

LinearS8Tma::~LinearS8Tma() = default;

int LinearS8Tma::tile_count() { return kBatchTileCount; }

LinearS8TmaPlan LinearS8Tma::plan(int batch, int tile) const {
  const LinearS8TmaImpl& m = *impl_;
  if (tile < 0) {  // the cost model's pick among the tiles up to the one that holds the batch
    LinearS8TmaPlan best;
    for (int t = 0; t <= batch_tile_of(std::max(batch, 1)); ++t) {
      const LinearS8TmaPlan p = plan(batch, t);
      if (t == 0 || p.estimated_us < best.estimated_us) best = p;
    }
    return best;
  }
  tma::check_tile("linear_int8_tma", tile, kBatchTileCount);
  LinearS8TmaPlan plan;
  plan.batch = std::max(batch, 1);
  plan.tile = tile;
  plan.bn = kBatchTiles[plan.tile].bn;
  plan.m_tiles = (m.linear.out_c + kBM - 1) / kBM;
  plan.n_tiles = (plan.batch + plan.bn - 1) / plan.bn;
  const int tiles = plan.m_tiles * plan.n_tiles;
  const int wanted = std::max(1, std::min({m.k_tiles, m.sms / std::max(tiles, 1), kMaxSplits}));
  plan.k_per_split = (m.k_tiles + wanted - 1) / wanted;
  plan.splits = (m.k_tiles + plan.k_per_split - 1) / plan.k_per_split;
  plan.units = tiles * plan.splits;
  plan.ctas = tma::persistent_ctas(plan.units, m.sms);
  const size_t sums = size_t(plan.splits) * plan.batch * m.linear.out_stride * sizeof(int32_t);
  plan.workspace_bytes = (sums + 255) / 256 * 256;
  const double unit_bytes = double(plan.k_per_split) * (kBM + plan.bn) * kKTileBytes;
  plan.estimated_us = 1e6 * (tma::waves(plan.units, m.sms) * unit_bytes * kUnitSecondsPerByte +
                             double(sums) * kPartialSecondsPerByte);
  plan.name =
      "tma_s8_linear_128x" + std::to_string(plan.bn) + " split-k " + std::to_string(plan.splits);
  return plan;
}

LinearS8TmaInput LinearS8Tma::encode_input(const void* x, int batch, int tile) const {
  const LinearS8TmaImpl& m = *impl_;
  tma::check_tile("linear_int8_tma", tile, kBatchTileCount);
  LinearS8TmaInput input;
  input.x = x;
  input.batch = batch;
  tma::encode_weight_map("linear_int8_tma", &input.map, CU_TENSOR_MAP_DATA_TYPE_UINT8, x,
                         size_t(m.linear.in_stride), size_t(std::max(batch, 1)),
                         size_t(m.linear.in_stride), kKTileBytes, kBatchTiles[tile].bn, kKTileBytes,
                         "cuTensorMapEncodeTiled (input)");
  input.tile = tile;
  return input;
}

void LinearS8Tma::forward(const LinearS8TmaPlan& plan, const LinearS8TmaInput& input, void* y,
                          void* workspace, cudaStream_t stream) const {
  const LinearS8TmaImpl& m = *impl_;
  if (input.batch <= 0) return;
  if (input.batch != plan.batch || input.tile != plan.tile)
    throw Error("linear_int8_tma: run at a batch or batch tile the plan was not made for");
  if (workspace == nullptr) throw Error("linear_int8_tma: run without its workspace");
  TmaLinearS8Params p;
  p.partial = static_cast<int*>(workspace);
  p.batch = plan.batch;
  p.out_stride = m.linear.out_stride;
  p.m_tiles = plan.m_tiles;
  p.n_tiles = plan.n_tiles;
  p.k_tiles = m.k_tiles;
  p.k_per_split = plan.k_per_split;
  p.units = plan.units;
  launch_kernel(kernel_of(plan.tile), plan.ctas, tma_linear_detail::kThreads, smem_of(plan.tile),
                stream, input.map, m.w_map, p);
  finish_s8_split(m.linear, p.partial, plan.splits, plan.batch, y, stream);
}

}  // namespace cnnrt::cuda
