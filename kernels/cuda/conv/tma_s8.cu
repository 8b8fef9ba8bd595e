// conv_int8_tma: the TMA-fed, warp-specialised, persistent Hopper int8 conv — host side (shape
// rule, tensor maps, tile choice, launch).  The kernel is tma_s8_kernel.cuh: the int8 instance of
// tma_mainloop.cuh's mainloop, which conv_fp16_tma instantiates too; the host code the two share
// (limits, tile shapes, wave model, maps, image checks) is tma_encode.h.  Measurements in
// docs/kernels/conv_int8_tma.md.
//
// DESIGN NOTE
// * Why: conv_int8_wgmma runs the old cp.async mainloop (all 256 threads gather 16-byte chunks)
//   at ~25 % of the int8 peak on AlexNet, and fp16 moved to the TMA mainloop (conv_fp16_tma,
//   ~670 TFLOP/s): int8, whose peak is twice fp16's, must have the same mainloop to stay ahead.
//   So this is conv_fp16_tma's mainloop with int8 elements (tma_mainloop.cuh's TmaS8<KB>): one
//   producer thread, an im2col box of 128 pixels x KB channels and a KB x BN weight box per
//   k-tile, 2 consumer warpgroups of wgmma.
// * K layout is the int8 GEMM family's (r, s, c) with c over the NHWC/16 channel stride, the
//   weight rows the entry already packs for conv_s8_igemm / conv_s8_wgmma ([out_c][k_pad], zeros
//   in padding channels), so no repacking.  KB (bytes = channels per k-tile row): 128 with the
//   128-byte swizzle when in_stride % 128 == 0 (conv4/conv5), else 64 with the 64-byte swizzle
//   (in_stride % 128 == 64: AlexNet conv2 64, conv3 192 channels) — a 128-channel box there would
//   multiply zero channels (conv3: a third more MMA work).  KB 64 halves the bytes per stage, so
//   those instances carry twice the stages (same ring bytes) and 2 instead of 4 k32 wgmma per
//   mbarrier round trip.
// * Padding: the im2col bounding box, lower corner {-pad_w, -pad_h}; the upper corner is derived
//   from out_h / out_w ((out-1)·stride - in - pad + 1: the number of traversal positions must be
//   exactly out), so whatever bottom/right padding the graph implies (TF-SAME, ONNX asymmetric)
//   is expressed; taps outside the image and pixels past the last image are TMA zero fill.
// * Epilogue from the int32 registers: acc + bias_q, requantize (int8 out) or dequantize (fp32
//   out) of epilogue_s8.cuh — the one float step every int8 kernel shares with the CPU reference,
//   so results are the reference's bit for bit.  int8 out: per 64 columns a quad transpose + two
//   byte permutes per word give every lane 16 consecutive bytes (one 16-byte store, a quad
//   writes 64 contiguous bytes); fp32 out (the graph output only): float2 pairs.  Channels
//   out_c..out_stride-1 are written as zeros.
// * Tiles and the default choice are conv_fp16_tma's (tma::kTileShapes but 256x96: fewest waves
//   x tile area / speed), with twice the stages at KB 64.  The BN = 64 tiles (256x64, 128x64;
//   speeds guessed, tma_encode.h) serve conv1's space-to-depth form (64-byte channel stride, 64
//   out: conv_int8_s2d's TMA GEMM, int8_entries.cpp) and any out_c <= 64 without padding
//   columns.
// * The tensor maps and the kernel images' checks are tma_encode.h's, as for conv_fp16_tma.
// * Fused MaxPool (POOL instances: 128x256 and 256x128, KB 128 and paired rows, int8 out; issue
//   10: conv5's separate pool pass was 12.5 of its 66.9 us at batch 256).  conv_fp16_tma's
//   tiling, shared (tma_pool_tiling.h): a tile owns whole pooled rows, computes the BM conv
//   pixels from the first conv row under its first pooled row (one im2col box per 128 rows: the
//   mainloop unchanged), tiles packed greedily across image boundaries with a period of whole
//   images; halo rows are recomputed, never combined across CTAs.  The epilogue requantises
//   exactly as the unpooled one (the same bytes: requantised_tile), stages the whole BM x BN
//   int8 tile after the ring (32 KB: the 4-stage rings of both tiles are 193 KB, so ring +
//   staging is 225 KB and no stage is given up; 16-byte units XOR-swizzled by row parity, so
//   the quarter-warp stores and the window loads touch every bank once), and both consumer
//   warpgroups reduce every (pooled pixel, 16 channels) with __vmaxs4 over the window's cells
//   inside the conv output, one 16-byte store each.  Max commutes with the monotone
//   requantisation and clamp, so the result is the reference's conv -> requantise -> maxpool bit
//   for bit; padding lanes are the max of staged zeros.  AlexNet conv5 (13x13, pool 3/2 -> 6x6):
//   8 pooled rows per 256-row tile (3 tiles per 4 images), 192 M tiles at batch 256 against 169
//   unpooled, the same 3 waves on 132 SMs with both n tiles; 128x256 holds 3-4 pooled rows (427
//   M tiles, 4 waves).  Only those two tiles: BN 192 / 64 waste columns or stages on the layers
//   that have a pool, and 128x128's 7 stages leave no room for the staging.  fp32 outputs (the
//   graph output) keep the staged pool: the fused reduction is on int8 bytes.
// * Fused or staged (plan(batch), once per context; conv_fp16_tma's rule in time): fused = the
//   pooled tiling's units on the best pooled tile, staged = the default (unpooled) tile's units
//   plus tma::staged_pool_seconds (the pre-pool tensor read, the pooled one written, a launch);
//   a kernel takes ceil(units / SMs) waves of 2 * BM * BN * K / (speed * kSmOps) (kSmOps 8.5e12
//   for 128 bytes of K per k-tile, 6.0e12 for 64-byte blocks: AlexNet conv2-conv5 at batch 256,
//   H100).  Modelled, batch 256: conv5 fused 256x128 52 us against staged 52 + 7; conv2
//   (27x27, out_c 192, paired rows) staged 128x192 157 + 18 us against fused 256x128 239 (two n
//   tiles of 128 for 192 channels: a third of the MMA work on padding columns, and 4 pooled rows
//   per 9 conv rows: an eighth recomputed): conv2 stays staged, at batch 64 too (on 192x192
//   since run 49: 150 + 18 us).  The entry
//   (runtime/cuda/int8_entries.cpp) skips its pool pass and the pre-pool workspace for a fused
//   plan; pinned tiles run fused where they can (the fp16 entries' rule: conv_int8_tma_<tile>
//   serves a pooled conv only on a tile that fuses it), conv_int8_tma_staged pins the staged form.
//   Measured (docs/PERFORMANCE.md run 45c, H100): conv5 fused 0.0638 ms at 256 against 0.0636
//   staged (whose pool pass run 45a had just made faster: ~8 us, not 12.5) — the fused epilogue,
//   not overlapped with the next tile's MMAs, costs what the pass did; the network 2.9 us
//   faster (no pool launch, no 11 MB pre-pool tensor).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/tma_encode.h"
#include "kernels/cuda/conv/tma_pool_tiling.h"
#include "kernels/cuda/conv/tma_s8.h"
#include "kernels/cuda/conv/tma_s8_kernel.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/launch.h"

namespace cnnrt::cuda {

namespace {

using tma_s8_detail::kPairedRows;
using tma_s8_detail::TmaS8Params;
using tma_s8_detail::TmaS8Tile;

// The shared tile shapes (tma_encode.h; all but fp16's pooled-conv2 tile 256x96) with the stages
// of each k-tile row: KB 64 halves the bytes of a stage, so twice the stages fill the same ring.
// The BN = 64 tiles serve out_c <= 64 (conv1's space-to-depth form) without padding columns.
// 256x128 carries int8's own speed: where it ties 128x256 on waves (AlexNet conv4 / conv5 at
// batch 64 and 256) it ran 2-4 % faster in int8 (`conv_lab --s8`, docs/PERFORMANCE.md run 40a),
// where fp16's lab had it 5 % slower.
// pool: the tile has fused-MaxPool instances (int8 out, 128 bytes of K per k-tile: KB 128 and
// the paired rows; design note, "Fused MaxPool"): 128x256 and 256x128, whose rings leave room
// for the 32 KB staging at their stage counts.
// 128x192 takes 4 stages (8 at KB 64), not the 5 its ring would hold: AlexNet conv2 (paired
// rows, 13 k-tiles a unit) ran 11 % faster at batch 64 and 7-8 % at 256 with 4, and 3 was
// between the two, while 256x128 lost 3-10 % at 3 (docs/PERFORMANCE.md run 48e).
struct TileInfo : tma::TileShape {
  int stages128, stages64;
  bool pool;
};
// 192x192 is int8's own: three consumer warpgroups of one m64n192 block each (tma_mainloop.cuh's
// TmaRoles<3>, 512 threads), one im2col box of 192 pixels per block (ConvS8TmaInput::map192), a
// stage of 48 KB as 256x128's, so 4 stages (8 at KB 64); 4.7 M MACs per 128-byte k-tile against
// 256x128's 4.2 M (11 % fewer bytes per MAC) and three wgmma streams.  It fits out_c 192 and 384
// (AlexNet conv2, conv3).  Its speed is measured (`conv_lab --s8`, H200, docs/PERFORMANCE.md run
// 49): AlexNet conv2 (paired rows) ran 1.05x / 1.065x faster than on 128x192 at batch 256 / 64 on
// the same area of waves, and conv3 3 % slower than 256x128 (which it would need 1.15 to beat on
// its larger last wave), so 1.05: the wave model takes it where it ties 128x192 on waves.
constexpr tma::TileShape kInt8Tile256x128 = {256, 128, 1.02, "256x128"};
constexpr tma::TileShape kInt8Tile192x192 = {192, 192, 1.05, "192x192"};
constexpr TileInfo kTiles[] = {
    {tma::kTileShapes[0], 7, 12, false}, {tma::kTileShapes[1], 4, 8, false},
    {tma::kTileShapes[2], 4, 8, true},   {kInt8Tile256x128, 4, 8, true},
    {tma::kTileShapes[5], 5, 10, false}, {tma::kTileShapes[6], 8, 16, false},
    {kInt8Tile192x192, 4, 8, false},
};
static_assert(kInt8Tile256x128.bm == tma::kTileShapes[3].bm &&
                  kInt8Tile256x128.bn == tma::kTileShapes[3].bn,
              "the same tile as the shared table's 256x128 (its pinned entry's name)");
constexpr int kTileCount = sizeof(kTiles) / sizeof(kTiles[0]);
constexpr int kBnWidths[] = {128, 192, 256, 64};  // weight map box heights
constexpr int kBnWidthCount = sizeof(kBnWidths) / sizeof(kBnWidths[0]);
int bn_map_index(int bn) {
  int i = 0;
  while (i + 1 < kBnWidthCount && kBnWidths[i] != bn) ++i;
  return i;
}

using KernelFn = void (*)(CUtensorMap, CUtensorMap, TmaS8Params);
using PooledKernelFn = void (*)(CUtensorMap, CUtensorMap, tma_s8_detail::TmaS8PoolParams);

// KB: 64, 128 or kPairedRows (128 bytes of K per k-tile: stages128).
template <int T, int KB, bool F>
KernelFn instance() {
  constexpr TileInfo t = kTiles[T];
  return tma_s8_detail::conv_tma_s8_kernel < t.bm, t.bn, KB == 64 ? t.stages64 : t.stages128, KB,
         F > ;
}
template <int KB, bool F>
KernelFn kernel_of_tile(int tile) {
  switch (tile) {
    case 0:
      return instance<0, KB, F>();
    case 1:
      return instance<1, KB, F>();
    case 2:
      return instance<2, KB, F>();
    case 3:
      return instance<3, KB, F>();
    case 4:
      return instance<4, KB, F>();
    case 5:
      return instance<5, KB, F>();
    default:
      return instance<6, KB, F>();
  }
}
static_assert(sizeof(kTiles) / sizeof(kTiles[0]) == 7, "one kernel_of_tile case per tile");
// The threads of tile t's instances (384, or 512 for 192x192's three consumers).
int threads_of(int tile) { return tma_detail::threads_for_rows(kTiles[tile].bm); }
// Whether tile t reads the whole-tile input map (ConvS8TmaInput::map192) rather than 128 pixels a
// box.
bool reads_map192(int tile) { return tma_detail::im2col_box_pixels(kTiles[tile].bm) == 192; }
// The fused-pool instances: the two tiles with TileInfo::pool, KB 128 or paired rows, int8 out.
constexpr int kPool128x256 = 2, kPool256x128 = 3;
constexpr bool pooled_tiles_match_the_table() {
  int pooled = 0;
  for (const TileInfo& t : kTiles) pooled += t.pool ? 1 : 0;
  return pooled == 2 && kTiles[kPool128x256].pool && kTiles[kPool256x128].pool;
}
static_assert(pooled_tiles_match_the_table(), "one pooled_kernel_of case per pooled tile");
template <int T, int KB>
PooledKernelFn pooled_instance() {
  constexpr TileInfo t = kTiles[T];
  return tma_s8_detail::conv_tma_s8_pool_kernel<t.bm, t.bn, t.stages128, KB>;
}
PooledKernelFn pooled_kernel_of(int tile, int kb) {
  if (kb == kPairedRows)
    return tile == kPool128x256 ? pooled_instance<kPool128x256, kPairedRows>()
                                : pooled_instance<kPool256x128, kPairedRows>();
  return tile == kPool128x256 ? pooled_instance<kPool128x256, 128>()
                              : pooled_instance<kPool256x128, 128>();
}
// Whether tile `tile` has a fused-pool instance with k-tile rows `kb`.
bool has_pooled_instance(int tile, int kb) { return kTiles[tile].pool && kb != 64; }

KernelFn kernel_of(int tile, int kb, bool float_out) {
  if (kb == 128)
    return float_out ? kernel_of_tile<128, true>(tile) : kernel_of_tile<128, false>(tile);
  if (kb == kPairedRows)
    return float_out ? kernel_of_tile<kPairedRows, true>(tile)
                     : kernel_of_tile<kPairedRows, false>(tile);
  return float_out ? kernel_of_tile<64, true>(tile) : kernel_of_tile<64, false>(tile);
}
int stages_of(int tile, int kb) {
  return kb == 64 ? kTiles[tile].stages64 : kTiles[tile].stages128;
}
// The bytes of K per k-tile (a stage holds BM + BN rows of them), and per im2col box row (a
// paired k-tile's two boxes hold 64 each).
int k_tile_bytes(int kb) { return kb == 64 ? 64 : 128; }
int box_bytes(int kb) { return kb == 128 ? 128 : 64; }
// The ring, plus the fused pool's staging (the whole BM x BN int8 tile) for a pooled instance.
size_t smem_of(int tile, int kb, bool pooled = false) {
  const TileInfo& t = kTiles[tile];
  return tma::ring_smem_bytes(t.bm, t.bn, stages_of(tile, kb), k_tile_bytes(kb)) +
         (pooled ? size_t(t.bm) * t.bn : 0);
}
static_assert(tma_s8_detail::kPoolStaging<256, 128> == 256 * 128, "smem_of mirrors it");
// The pooled tiles' rings with their staging within the 227 KB opt-in, less 2 KB for the
// kernel's static part (the mbarriers, aligned: ptxas reports 1 KB) — at their unpooled stage
// counts.
static_assert(TmaS8Tile<256, 128, 4, 128>::kSmem + tma_s8_detail::kPoolStaging<256, 128> <=
                      227 * 1024 - 2048 &&
                  TmaS8Tile<128, 256, 4, kPairedRows>::kSmem +
                          tma_s8_detail::kPoolStaging<128, 256> <=
                      227 * 1024 - 2048,
              "ring + staging fit the opt-in");
static_assert(TmaS8Tile<128, 128, 12, 64>::kSmem == 1024 + 12 * 256 * 64, "smem_of mirrors it");
static_assert(TmaS8Tile<128, 192, 5, kPairedRows>::kSmem == 1024 + 5 * 320 * 128,
              "paired rows: 128 bytes of K per stage row");
static_assert(TmaS8Tile<192, 192, 4, kPairedRows>::kSmem == 1024 + 4 * 384 * 128 &&
                  TmaS8Tile<192, 192, 8, 64>::kSmem == 1024 + 8 * 384 * 64,
              "192x192: 48 KB stages");

// The instances whose k-tile rows are one of `kbs` bytes, each with int8 and fp32 output, and
// the fused-pool ones where the tile has them; those of tiles with `consumers` consumer
// warpgroups only, or (0) of every tile.
std::vector<tma::KernelImage> kernel_images(std::initializer_list<int> kbs, int consumers = 0) {
  std::vector<tma::KernelImage> images;
  for (int t = 0; t < kTileCount; ++t) {
    if (consumers != 0 && tma_detail::consumers_for_rows(kTiles[t].bm) != consumers) continue;
    for (int kb : kbs) {
      for (bool f : {false, true})
        images.push_back(
            {reinterpret_cast<const void*>(kernel_of(t, kb, f)), kTiles[t].name, smem_of(t, kb)});
      if (has_pooled_instance(t, kb))
        images.push_back({reinterpret_cast<const void*>(pooled_kernel_of(t, kb)), kTiles[t].name,
                          smem_of(t, kb, true)});
    }
  }
  return images;
}
// setmaxnreg's budget holds only when every instance starts at exactly its roles' kEntryRegs
// (168 with two consumer warpgroups, 128 with three).
void check_register_counts() {
  static const std::string problem = [] {
    const std::string two = tma::register_problem(kernel_images({64, 128, kPairedRows}, 2),
                                                  tma_detail::TmaRoles<2>::kEntryRegs);
    return two.empty() ? tma::register_problem(kernel_images({64, 128, kPairedRows}, 3),
                                               tma_detail::TmaRoles<3>::kEntryRegs)
                       : two;
  }();
  if (!problem.empty()) throw Error("conv_int8_tma: " + problem);
}

// The im2col box's upper corner along one axis: out positions exactly (design note).
int upper_corner(int in, int out, int stride, int pad) { return (out - 1) * stride - in - pad + 1; }
using tma::corner_ok;
// The default k-tile rows: 128 bytes where the channel stride allows, else the 64-byte blocks
// paired (docs/PERFORMANCE.md run 43).
int k_bytes_of(const S8Conv& conv) { return conv.in_stride % 128 == 0 ? 128 : kPairedRows; }

// The wave model in time (design note, "Fused or staged"): per-SM int8 throughput of a speed-1.0
// tile with 128 bytes of K per k-tile (AlexNet conv4 / conv5 at batch 256 on 256x128, H100:
// 9.0 / 8.2e12 op/s) and with 64-byte blocks (conv2 on 128x192, conv3 on 256x128, paired:
// 5.9 / 6.4e12; the 64-byte rows take it too).
constexpr double kSmOps128 = 8.5e12, kSmOps64 = 6.0e12;
double tile_seconds(const S8Conv& c, const TileInfo& t, int kb) {
  const double k = double(c.kh) * c.kw * c.in_stride;
  return 2.0 * t.bm * t.bn * k / (t.speed * (kb == 128 ? kSmOps128 : kSmOps64));
}

using tma_detail::TmaPoolTiling;
TmaPoolTiling window_of(const NhwcPool& pool) {
  return tma::pool_window(pool.out_h, pool.out_w, pool.kh, pool.kw, pool.stride_h, pool.stride_w,
                          pool.pad_h, pool.pad_w);
}
// The fused pool's tiling of `pool` after `conv` for tiles of bm rows: nothing where the pool
// cannot run fused (an fp32 output, a window that may hold no conv cell, a pool of another
// tensor, one pooled row's windows wider than bm pixels).
std::optional<TmaPoolTiling> pool_tiling_for(const S8Conv& conv, const NhwcPool& pool, int bm) {
  const TmaPoolTiling w = window_of(pool);
  if (conv.float_output || !tma::pool_window_ok(w) || pool.c != conv.out_c ||
      pool.h != conv.out_h || pool.w != conv.out_w)
    return std::nullopt;
  return tma::pool_tiling_of(conv.out_h, conv.out_w, w, bm);
}

}  // namespace

bool tma_s8_serves(const S8Conv& c) {
  if (!tma::conv_limits_ok(c.groups, c.dil_h, c.dil_w, c.kh, c.kw, c.stride_h, c.stride_w))
    return false;
  if (c.in_stride <= 0 || c.in_stride % 64 != 0 || c.in_c > c.in_stride) return false;
  if (c.pad_h < 0 || c.pad_w < 0 || c.in_h < 1 || c.in_w < 1 || c.out_h < 1 || c.out_w < 1)
    return false;
  if (c.k_total != c.kh * c.kw * c.in_stride || c.k_pad < c.k_total || c.k_pad % 64 != 0)
    return false;
  if (c.out_c < 1 || c.out_stride != (c.float_output ? (c.out_c + 7) / 8 * 8 : padded16(c.out_c)))
    return false;
  if (!corner_ok(-c.pad_h) || !corner_ok(-c.pad_w) ||
      !corner_ok(upper_corner(c.in_h, c.out_h, c.stride_h, c.pad_h)) ||
      !corner_ok(upper_corner(c.in_w, c.out_w, c.stride_w, c.pad_w)))
    return false;
  // Every tap-(0,0) position the traversal visits lies in the box, and the M index fits an int.
  const long long pixels = (long long)c.out_h * c.out_w;
  return pixels * c.out_stride < INT_MAX / 1024;
}

CUtensorMap tma_s8_input_map(const char* kernel, const S8Conv& c, const void* x, int batch, int kb,
                             int box_pixels) {
  // Corners in tensor-dimension order (W, H).
  const tma::Im2colGeometry g = {CU_TENSOR_MAP_DATA_TYPE_UINT8,
                                 1,
                                 c.in_stride,
                                 c.in_w,
                                 c.in_h,
                                 std::max(batch, 1),
                                 {-c.pad_w, -c.pad_h},
                                 {upper_corner(c.in_w, c.out_w, c.stride_w, c.pad_w),
                                  upper_corner(c.in_h, c.out_h, c.stride_h, c.pad_h)},
                                 c.stride_w,
                                 c.stride_h,
                                 kb,
                                 kb,
                                 box_pixels};
  return tma::encode_im2col_map(kernel, x, g);
}

class ConvS8TmaImpl {
 public:
  S8Conv conv;
  TmaS8Params base;
  int kb = 128;
  int sms = 132;
  std::optional<NhwcPool> pool;
  std::optional<TmaPoolTiling> pool_tiling[2];  // fused pool: tiles of 128 / 256 rows
  CUtensorMap w_maps[kBnWidthCount];            // per kBnWidths
  const CUtensorMap& w_map(int bn) const { return w_maps[bn_map_index(bn)]; }
  const std::optional<TmaPoolTiling>& tiling(int bm) const { return pool_tiling[bm == 256]; }
  // Whether tile t runs the pool fused: a pooled instance with these k-tile rows and a tiling.
  bool fuses(int t) const { return has_pooled_instance(t, kb) && tiling(kTiles[t].bm).has_value(); }
};

bool ConvS8Tma::device_supported() { return wgmma_s8_device_supported(); }

bool ConvS8Tma::runs_small_batches(const S8Conv& conv) {
  return (long long)conv.kh * conv.kw * conv.in_stride <= kSmallBatchMaxK;
}

bool ConvS8Tma::tile_fuses_pool(const S8Conv& conv, const NhwcPool& pool, int tile) {
  return tile >= 0 && tile < kTileCount && has_pooled_instance(tile, k_bytes_of(conv)) &&
         pool_tiling_for(conv, pool, kTiles[tile].bm).has_value();
}

const std::vector<std::string>& ConvS8Tma::tile_names() {
  static const std::vector<std::string> names = tma::tile_names_of(kTiles);
  return names;
}

ConvS8Tma::ConvS8Tma(const S8Conv& conv, int k_bytes, const std::optional<NhwcPool>& pool)
    : impl_(std::make_unique<ConvS8TmaImpl>()) {
  ConvS8TmaImpl& m = *impl_;
  m.conv = conv;
  if (!tma_s8_serves(conv))
    throw Error(
        "conv_int8_tma: unsupported conv (needs groups 1, dilation 1, channel stride % 64 == 0, "
        "kernel <= 64, stride <= 8, padding within the im2col box)");
  if (!device_supported())
    throw Error("conv_int8_tma: needs a compute capability 9.0 device and the sm_90a build");
  if (k_bytes != 0 && k_bytes != 64 && !(k_bytes == 128 && conv.in_stride % 128 == 0))
    throw Error("conv_int8_tma: k-tile rows of " + std::to_string(k_bytes) +
                " bytes do not fit a channel stride of " + std::to_string(conv.in_stride));
  m.kb = k_bytes != 0 ? k_bytes : k_bytes_of(conv);
  TmaS8Params& p = m.base;
  p.bias = conv.bias;
  p.multiplier = conv.multiplier;
  p.out_c = conv.out_c;
  p.out_stride = conv.out_stride;
  p.conv_h = conv.out_h;
  p.conv_w = conv.out_w;
  p.sh = conv.stride_h;
  p.sw = conv.stride_w;
  p.pad_top = conv.pad_h;
  p.pad_left = conv.pad_w;
  p.kw = conv.kw;
  p.c_blocks = conv.in_stride / box_bytes(m.kb);
  p.a_blocks = conv.kh * conv.kw * p.c_blocks;
  p.k_tiles = m.kb == kPairedRows ? (p.a_blocks + 1) / 2 : p.a_blocks;
  p.lo = conv.lo;
  p.hi = conv.hi;
  p.float_lo = conv.float_lo;
  p.float_hi = conv.float_hi;
  m.pool = pool;
  if (pool && m.kb != 64) {
    m.pool_tiling[0] = pool_tiling_for(conv, *pool, 128);
    m.pool_tiling[1] = pool_tiling_for(conv, *pool, 256);
  }
  const DeviceTraits& device = device_traits();
  m.sms = std::max(device.sms, 1);
  for (int t = 0; t < kTileCount; ++t)
    if (device.smem_optin < smem_of(t, m.kb, has_pooled_instance(t, m.kb)) + 256)
      throw Error("conv_int8_tma: the device offers too little shared memory per block");
  if (plan_only()) return;  // a described target: no maps, no attributes

  check_register_counts();
  tma::opt_in_smem(kernel_images({m.kb}));
  for (int i = 0; i < kBnWidthCount; ++i)
    tma::encode_weight_map("conv_int8_tma", &m.w_maps[i], CU_TENSOR_MAP_DATA_TYPE_UINT8,
                           conv.weight, size_t(conv.k_total), size_t(conv.out_c),
                           size_t(conv.k_pad), k_tile_bytes(m.kb), kBnWidths[i],
                           k_tile_bytes(m.kb));
}

ConvS8Tma::~ConvS8Tma() = default;

namespace {
// Tile `tile`'s plan at `batch`, fused with the pool or the conv alone; estimated_us the wave
// model's time of the kernel (waves x tile time).
ConvS8TmaPlan plan_tile(const ConvS8TmaImpl& m, int batch, int tile, bool fused) {
  const TileInfo& t = kTiles[tile];
  ConvS8TmaPlan plan;
  plan.variant = fused ? ConvS8Tma::kFusedVariant + tile : tile;
  plan.name = std::string("tma_s8_") + t.name +
              (m.kb == kPairedRows ? std::string("_k64x2") : "_k" + std::to_string(m.kb)) + "_s" +
              std::to_string(stages_of(tile, m.kb)) + (fused ? "_fusedpool" : "");
  if (fused) {
    plan.units = tma::pool_m_tiles(*m.tiling(t.bm), batch) * ((m.conv.out_c + t.bn - 1) / t.bn);
  } else {
    const long long rows = (long long)std::max(batch, 1) * m.conv.out_h * m.conv.out_w;
    plan.units = tma::tile_units(rows, t.bm, m.conv.out_c, t.bn);
  }
  plan.ctas = tma::persistent_ctas(plan.units, m.sms);
  plan.fused_pool = fused;
  plan.estimated_us = 1e6 * tma::waves(plan.units, m.sms) * tile_seconds(m.conv, t, m.kb);
  return plan;
}
// The conv alone on the wave model's tile: the fewest waves x tile area / speed (the measured
// default of every unpooled conv; tma_encode.h's cheapest_tile).
ConvS8TmaPlan unpooled_plan(const ConvS8TmaImpl& m, int batch) {
  const int tile =
      tma::cheapest_tile(kTiles, m.sms, [&](int t) { return plan_tile(m, batch, t, false).units; });
  return plan_tile(m, batch, tile, false);
}
}  // namespace

ConvS8TmaPlan ConvS8Tma::plan(int batch, int variant) const {
  const ConvS8TmaImpl& m = *impl_;
  tma::check_tile("conv_int8_tma", variant, kTileCount);
  return plan_tile(m, batch, variant, m.fuses(variant));
}

bool ConvS8Tma::fuses_pool() const {
  for (int t = 0; t < kTileCount; ++t)
    if (impl_->fuses(t)) return true;
  return false;
}

ConvS8TmaPlan ConvS8Tma::plan_fused(int batch) const {
  const ConvS8TmaImpl& m = *impl_;
  if (!m.pool) throw Error("conv_int8_tma: plan_fused() of a conv without a pool");
  ConvS8TmaPlan best;
  bool found = false;
  for (int t = 0; t < kTileCount; ++t) {
    if (!m.fuses(t)) continue;
    const ConvS8TmaPlan p = plan_tile(m, batch, t, true);
    if (!found || p.estimated_us < best.estimated_us) best = p;
    found = true;
  }
  if (!found) throw Error("conv_int8_tma: no tile runs this conv's pool fused");
  return best;
}

ConvS8TmaPlan ConvS8Tma::plan_staged(int batch) const {
  const ConvS8TmaImpl& m = *impl_;
  if (!m.pool) throw Error("conv_int8_tma: plan_staged() of a conv without a pool");
  ConvS8TmaPlan p = unpooled_plan(m, batch);
  const size_t b = size_t(std::max(batch, 1)),
               row = size_t(m.conv.out_stride) * (m.conv.float_output ? sizeof(float) : 1);
  p.estimated_us += 1e6 * tma::staged_pool_seconds(b * m.conv.out_h * m.conv.out_w * row,
                                                   b * size_t(m.pool->out_h) * m.pool->out_w * row);
  return p;
}

ConvS8TmaPlan ConvS8Tma::plan(int batch) const {
  const ConvS8TmaImpl& m = *impl_;
  if (!m.pool) return unpooled_plan(m, batch);
  if (!fuses_pool()) return plan_staged(batch);
  const ConvS8TmaPlan fused = plan_fused(batch), staged = plan_staged(batch);
  return staged.estimated_us < fused.estimated_us ? staged : fused;
}

ConvS8TmaInput ConvS8Tma::encode_input(const void* x, int batch) const {
  const ConvS8TmaImpl& m = *impl_;
  ConvS8TmaInput input;
  input.x = x;
  input.batch = batch;
  input.map = tma_s8_input_map("conv_int8_tma", m.conv, x, batch, box_bytes(m.kb));
  input.map192 = tma_s8_input_map("conv_int8_tma", m.conv, x, batch, box_bytes(m.kb),
                                  tma_detail::im2col_box_pixels(192));
  return input;
}

void ConvS8Tma::forward(int variant, const ConvS8TmaInput& input, void* y,
                        cudaStream_t stream) const {
  const ConvS8TmaImpl& m = *impl_;
  const bool fused = is_fused(variant);
  const int tile = fused ? variant - kFusedVariant : variant;
  tma::check_tile("conv_int8_tma", tile, kTileCount);
  const TileInfo& t = kTiles[tile];
  if (fused && !m.fuses(tile))
    throw Error(std::string("conv_int8_tma: tile ") + t.name + " does not fuse this conv's pool");
  if (input.batch <= 0) return;
  const ConvS8TmaPlan plan = plan_tile(m, input.batch, tile, fused);
  if (plan.units == 0) return;
  TmaS8Params p = m.base;
  p.y = y;
  p.m = int((long long)input.batch * m.conv.out_h * m.conv.out_w);
  p.n_tiles = (m.conv.out_c + t.bn - 1) / t.bn;
  p.units = int(plan.units);
  const size_t smem = smem_of(tile, m.kb, fused);
  if (fused) {
    tma_s8_detail::TmaS8PoolParams pooled;
    static_cast<TmaS8Params&>(pooled) = p;
    pooled.pool = *m.tiling(t.bm);
    pooled.pool.rows_total = input.batch * m.pool->out_h;
    launch_kernel(pooled_kernel_of(tile, m.kb), plan.ctas, threads_of(tile), smem, stream,
                  input.map, m.w_map(t.bn), pooled);
  } else {
    launch_kernel(kernel_of(tile, m.kb, m.conv.float_output), plan.ctas, threads_of(tile), smem,
                  stream, reads_map192(tile) ? input.map192 : input.map, m.w_map(t.bn), p);
  }
}

}  // namespace cnnrt::cuda
