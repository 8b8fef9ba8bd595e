// conv_fp16_tma: the TMA-fed, warp-specialised, persistent Hopper conv — host side (shape rule,
// weight upload, tensor maps, tile choice, launch).  The kernel is tma_kernel.cuh: the fp16
// instance of tma_mainloop.cuh's mainloop (conv_int8_tma is the int8 one) with fp16's epilogues;
// the host code the two share (limits, tile shapes, wave model, maps, image checks) is
// tma_encode.h.  The lab it came from (and that still runs the kernel: bench/conv_tma_lab.cu) and
// every measurement are in docs/kernels/conv_fp16_tma.md.
//
// DESIGN NOTE
// * Why: conv_fp16_wgmma gathers A with one 16-byte cp.async per (row, tap, 8-channel chunk) from
//   all 256 threads and runs 196-306 TFLOP/s on AlexNet conv2-5 (H100).  Here ONE producer thread
//   issues a whole k-tile with 2-3 TMA instructions: A through the im2col mode of
//   cp.async.bulk.tensor (per filter tap (r, s) and 64-channel block: 128 consecutive output
//   pixels x 64 channels, the tap given as the im2col offsets {s, r}), B through a tiled map over
//   the KRSC weight ([out_c][K], K = kh*kw*in_c: no repacking beyond fp16).  Both land 128-byte
//   swizzled, the K-major layout wgmma's descriptors read, so the two consumer warpgroups only
//   issue wgmma.  Lab: 625-673 TFLOP/s at batch 256 on conv2-conv5 (conv + ReLU).
// * Padding and stride are the im2col map's: stride = its traversal strides, padding = its pixel
//   bounding box, lower corner {-pad_left, -pad_top}, upper {pad_right - (kw-1), pad_bottom -
//   (kh-1)} (asymmetric padding costs nothing); taps outside the image and pixels past the last
//   image are the TMA's zero fill.  The corners must lie in [-128, 127] (4-D im2col), the tap
//   offsets in 16 bits and the traversal stride in 1..8: supports() checks exactly that.
// * The im2col map holds the input's address and batch, so it is encoded per (x, batch): the
//   registry entry encodes it on a context's first run with that input and keeps it in the
//   context's prepared state (KernelPlan::state), so run() then only launches; the weight maps
//   (one per tile width) are encoded once at construction.  Maps travel as __grid_constant__
//   parameters, so CUDA-graph capture records them by value.
// * Tiles (variant = index): 128x128 (7 stages), 128x192 (5), 128x256 (4), 256x128 (4), 256x96
//   (4), 256x64 (5), 128x64 (8); 1 CTA per SM (225 / 201 / 193 / 193 / 177 / 201 / 193 KB of
//   ring).  The lab's 2-CTA multicast variants ran on par or behind, so the library does not
//   carry them (the kernel still takes CL for the lab).  The BN = 64 tiles came for conv1's
//   space-to-depth form (64 -> 64 channels: every wider tile computes padding columns there;
//   docs/kernels/conv_fp16_tma.md, "conv1"); their speeds are guesses (tma_encode.h).
// * Default tile (plan(batch)): units = ceil(M/BM) * ceil(out_c/BN) on a persistent grid of
//   min(units, SMs) CTAs; cost = ceil(units / SMs) * BM * BN / speed, speed the lab's per-tile
//   efficiency at batch 256 relative to the best (128x128 0.78, 256x128 0.95, others 1.0).  It
//   picks every lab winner: conv2 (out_c 192) 128x192, conv3 (384) 256x128, conv4/conv5 (256)
//   128x256, at batch 64 and 256.  The padded columns of a tile that does not divide out_c are
//   counted as work (BN 192 on out_c 256 computes 384 columns: measured 2x slower).
// * Epilogue from the accumulator registers: bias and the clamp in fp32 -> fp16, quad transpose,
//   16-byte stores; a residual is added to the rounded pair by epilogue::add_residual and the
//   clamp follows the add (the family's convention, conv_family.md).
// * Fused MaxPool (POOL instances, tiles 128x192, 128x256, 256x128 and 256x96): a tile owns
//   whole pooled rows and computes the BM consecutive conv pixels from the first conv row under
//   its first pooled row — still one im2col box per 128 rows, the mainloop unchanged.  The host
//   packs pooled rows greedily into tiles (as many as the BM pixels cover, across image
//   boundaries, since the box runs on into the next image) until a tile ends with an image: a
//   period of whole images, its tile table in TmaPoolTiling (tma_pool_tiling.h: the tiling and
//   its planner, shared with conv_int8_tma's fused pool); windows that overlap two tiles
//   (pool 3 / stride 2 shares a conv row) are recomputed, never combined across CTAs, so the
//   result is exact and deterministic.  The epilogue stages kPoolChunk columns of the tile
//   (bias + clamp -> fp16, after the ring: the ring already holds the next tile) and both
//   consumer warpgroups reduce the windows from it (named barrier).  AlexNet conv5 (13x13,
//   pool 3/2): 8 pooled rows per 256-row tile (18 of 19 conv rows used); conv2 (27x27): 9
//   conv rows per 256-row tile, hence the 256x96 tile (out_c 192 = two exact n tiles of 96;
//   a 128-row tile holds only one pooled row's 3 x 27 pixels).  The ring is busy when the
//   epilogue runs, so the staging is extra shared memory: 128x128 s7 has none left.
// * Fused or staged (a fused MaxPool; plan(batch) chooses once per context): the fused tiling
//   recomputes halo rows (conv2 at BM 256: 19 % of the rows) and needs tiles whose height holds
//   whole pooled rows (256x96 for conv2: a slow tile), so the alternative runs the unpooled
//   instance of the best unpooled tile into a workspace (the pre-pool tensor) and then the
//   family's maxpool_fp16 (max is exact: the same fp16 values as the fused epilogue's __hmax2).
//   Cost model, in time: a tile takes 2 * BM * BN * K / (speed * kSmFlops) (kSmFlops = 5.4e12
//   FLOP/s per SM: the lab's conv2 on 128x192, 12 waves in 0.174 ms), a kernel ceil(units / SMs)
//   tiles; staged adds (pre-pool bytes read + pooled bytes written) / kPoolBandwidth (2.8e12 B/s)
//   + kPoolLaunch (2 us).  H100, batch 256: conv2 fused 256x96 0.226 ms (measured 0.251) against
//   staged 128x192 0.175 + 0.034 = 0.208 (measured 0.227-0.231); conv5 fused 256x128 0.088
//   (0.089) against staged 0.084 + 0.012 = 0.096 (0.096), so conv2 runs staged and conv5 fused
//   (batch 64 too; docs/kernels/conv_fp16_tma.md).  The staged workspace is the pre-pool tensor
//   (conv2 at batch 256: 72 MB of arena).
// * setmaxnreg: 128 x 40 + 256 x 232 registers fit the 64 K register file only if the kernel
//   starts at exactly 168 per thread (launch bounds 384, 1); the constructor checks the loaded
//   images' counts (tma::register_problem), since an inc that cannot be satisfied would hang.
// * 64-byte rows (in_c % 64 == 32: channel-pruned AlexNet's conv2 in 32 / conv3 in 96, and any
//   32 + 64j).  A 128-byte k-tile (64 channels) would need the channels padded to 64j + 64 with
//   zero weights; instead every tile has a second instance with k-tile rows of 32 halves in 64
//   bytes (TmaF16Rows<64>, tma_conv_k64.cu): the 64-byte swizzle on the im2col box (128 pixels x
//   32 channels) and the weight box (32 x BN), two wgmma k16 per m64 block and k-tile, twice the
//   stages (the same ring bytes; tma_conv_instances.cuh).  The KRSC weight and the maps' layout
//   are unchanged (a 32-element K box is one tap's 32-channel block), so only the box size, the
//   swizzle and c_blocks = in_c / 32 differ; the device code is the int8 instance's 64-byte rows
//   (TmaS8<64>, measured bit for bit on the H100) with fp16 wgmma.  in_c % 64 == 0 keeps the
//   128-byte instances exactly (their PTX is unchanged by the row parameter).  Cost: a 64-byte
//   k-tile does half the MMA work per TMA round trip, and conv_int8_tma's 64-byte instances
//   (the same k-tiles to the byte) took about as long per k-tile as fp16's 128-byte ones, ~1.7 ns
//   per box row (im2col pixel or weight row): the model charges each 64-byte k-tile
//   max(its MACs at the tile's speed, (bm + bn) x 1.7 ns) (kRowSeconds).  Unmeasured for fp16.
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/tma_conv.h"
#include "kernels/cuda/conv/tma_conv_instances.cuh"
#include "kernels/cuda/conv/tma_encode.h"
#include "kernels/cuda/conv/tma_kernel.cuh"
#include "kernels/cuda/conv/wgmma.h"
#include "kernels/cuda/conv/wgmma_common.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pool_fp16.h"

namespace cnnrt::cuda {

namespace {

using tma_detail::TmaConvParams;
using tma_detail::TmaPoolTiling;
using tma_detail::TmaTile;

using tma_f16::kTileCount;
using tma_f16::kTiles;
using tma_f16::TileInfo;
constexpr int kBnWidths[] = {128, 192, 256, 96, 64};  // weight map box heights: every bn
constexpr int kBnWidthCount = sizeof(kBnWidths) / sizeof(kBnWidths[0]);

// The instance of `tile`, epilogue `kind` (tma_f16::Kind) and k-tile rows of row_bytes.
tma_f16::KernelFn kernel_of(int tile, int kind, int row_bytes) {
  return row_bytes == 64 ? tma_f16::kernel_of_rows64(tile, kind)
                         : tma_f16::kernel_of_rows<128>(tile, kind);
}
size_t pool_staging_of(int bm) { return size_t(bm) * ((bm == 256 ? 32 : 64) + 8) * 2; }
// The same for both row sizes: twice the stages of half the bytes (tma_f16::stages_of).
size_t smem_of(int tile, int kind, int row_bytes) {
  const TileInfo& t = kTiles[tile];
  return tma::ring_smem_bytes(t.bm, t.bn, tma_f16::stages_of(t, row_bytes), row_bytes) +
         (kind == tma_f16::kPooled ? pool_staging_of(t.bm) : 0);
}
static_assert(TmaTile<256, 128, 4, 1>::kStaging == 256 * 40 * 2 &&
                  TmaTile<128, 192, 5, 1>::kStaging == 128 * 72 * 2 &&
                  TmaTile<128, 192, 10, 1, 64>::kStaging == 128 * 72 * 2,
              "pool_staging_of mirrors TmaTile");
static_assert(TmaTile<128, 192, 10, 1, 64>::kSmem == TmaTile<128, 192, 5, 1>::kSmem,
              "64-byte rows: the 128-byte ring's bytes");
// The fused-or-staged cost model's constants (design note; tma_encode.h).
using tma::kSmFlops;
// The 64-byte rows' feed floor: seconds per k-tile row (im2col pixel or weight row) per k-tile,
// from conv_int8_tma's 64-byte instances (docs/kernels/conv_int8_tma.md, H100), whose k-tiles
// are these to the byte (same boxes, rows, barriers and tensor time: two k32 int8 = two k16
// fp16): conv2 <128,192> 0.563 us per k-tile (169 us, 12 units of 25), conv3 <256,128> 0.64 us
// (69 us, 4 units of 27): 1.76 and 1.67 ns per row, about the time of a 128-byte fp16 k-tile of
// the same tile — the feed, not the tensor pipe, sets a 64-byte k-tile's time.
constexpr double kRowSeconds = 1.7e-9;
// The weight map whose box is bn rows tall.  A tile whose width has no map would load boxes of
// another height than its stage holds (run 37f: a 256x32 tile took the 64-row map and its copies
// overran the ring), so that is a build error: kTiles is checked against kBnWidths.
constexpr int bn_map_index(int bn) {
  for (int i = 0; i < kBnWidthCount; ++i)
    if (kBnWidths[i] == bn) return i;
  return -1;
}
constexpr bool every_tile_has_a_weight_map() {
  for (const TileInfo& t : kTiles)
    if (bn_map_index(t.bn) < 0) return false;
  return true;
}
static_assert(every_tile_has_a_weight_map(), "a tile width without a weight map (kBnWidths)");

// The fused pool's tiling of shape `s` for tiles of bm rows (tma_pool_tiling.h, shared with
// conv_int8_tma); nothing without a pool or when one pooled row's windows span more than bm
// pixels.
std::optional<TmaPoolTiling> pool_tiling_of(const ConvShape& s, int bm) {
  if (!s.pool) return std::nullopt;
  const PoolAttrs& a = *s.pool;
  return tma::pool_tiling_of(s.conv_h, s.conv_w,
                             tma::pool_window(s.out_h, s.out_w, a.kernel_h, a.kernel_w, a.stride_h,
                                              a.stride_w, a.pad_h, a.pad_w),
                             bm);
}
using tma::pool_m_tiles;

// The instances with k-tile rows of one of `row_bytes`: each tile plain and with a residual, and
// pooled where it has a pooled instance.
std::vector<tma::KernelImage> kernel_images(std::initializer_list<int> row_bytes) {
  std::vector<tma::KernelImage> images;
  for (int rb : row_bytes)
    for (int t = 0; t < kTileCount; ++t)
      for (int kind = 0; kind < (kTiles[t].pool ? 3 : 2); ++kind)
        images.push_back({reinterpret_cast<const void*>(kernel_of(t, kind, rb)), kTiles[t].name,
                          smem_of(t, kind, rb)});
  return images;
}
// Every instance, both row sizes, starts at exactly kEntryRegs registers (design note); checked
// once per process.
void check_register_counts() {
  static const std::string problem =
      tma::register_problem(kernel_images({128, 64}), tma_detail::kEntryRegs);
  if (!problem.empty()) throw Error("conv_fp16_tma: " + problem);
}

}  // namespace

class ConvFp16TmaImpl {
 public:
  ConvShape shape;
  int stored_in_c = 0;  // channels per pixel of the input tensor (<= shape.in_c; the rest: zeros)
  int row_bytes = 128;  // k-tile row: 128 (in_c % 64 == 0) or 64 (in_c % 64 == 32)
  int row_elems = 64;   // halves per k-tile row: the TMA coordinate step along K and channels
  TmaConvParams base;   // everything but y, residual, m and the grid
  int sms = 132;
  __half* w = nullptr;
  float* bias = nullptr;
  size_t bytes = 0;
  CUtensorMap w_maps[kBnWidthCount];            // per kBnWidths
  std::optional<TmaPoolTiling> pool_tiling[2];  // fused pool: tiles of 128 / 256 rows
  ~ConvFp16TmaImpl() {
    cudaFree(w);  // destructors never throw; a failed free leaks at worst
    cudaFree(bias);
  }
  const CUtensorMap& w_map(int bn) const { return w_maps[bn_map_index(bn)]; }
  const std::optional<TmaPoolTiling>& tiling(int bm) const { return pool_tiling[bm == 256]; }
};

// The k-tile row of in_c channels (design note, "64-byte rows"): 128 bytes (64 halves) where
// in_c % 64 == 0 — every shape the kernel served before, unchanged — else 64 (32 halves).
int row_bytes_of(int in_c) { return in_c % 64 == 0 ? 128 : 64; }

// Whether tile `t` serves shape `s`'s fused pool (always true without one).
bool tile_serves(const ConvShape& s, int t) {
  return !s.pool || (kTiles[t].pool && pool_tiling_of(s, kTiles[t].bm).has_value());
}

bool ConvFp16Tma::supports(const ConvShape& s) {
  const ConvAttrs& a = s.conv;
  if (!conv_shape_problem(s).empty()) return false;
  // A fused pool: no residual with it, and a tile whose pooled tiling exists.
  if (s.pool) {
    if (s.residual || s.pool->pad_h * 2 > s.pool->kernel_h || s.pool->pad_w * 2 > s.pool->kernel_w)
      return false;
    ConvShape derived = s;
    derived.derive();
    bool any = false;
    for (int t = 0; t < kTileCount; ++t) any = any || tile_serves(derived, t);
    if (!any) return false;
  }
  if (!tma::conv_limits_ok(a.groups, a.dilation_h, a.dilation_w, a.kernel_h, a.kernel_w, a.stride_h,
                           a.stride_w))
    return false;
  // in_c % 64 == 0: 128-byte k-tile rows; in_c % 64 == 32: 64-byte rows (row_bytes_of).
  if (s.in_c % 32 != 0 || s.out_c % 8 != 0 || a.out_channels != s.out_c) return false;
  // The im2col bounding box's corners lie in [-128, 127] for a 4-D map.
  using tma::corner_ok;
  if (a.pad_h < 0 || a.pad_w < 0 || a.pad_h_extra < -a.pad_h || a.pad_w_extra < -a.pad_w)
    return false;
  if (!corner_ok(-a.pad_h) || !corner_ok(-a.pad_w) ||
      !corner_ok(a.pad_bottom() - (a.kernel_h - 1)) || !corner_ok(a.pad_right() - (a.kernel_w - 1)))
    return false;
  // M and the element offsets stay within int.
  const long long pixels = (long long)s.conv_h * s.conv_w, in_pixels = (long long)s.in_h * s.in_w;
  return pixels > 0 && pixels * s.out_c < INT_MAX / 64 && in_pixels * s.in_c < INT_MAX / 64;
}

bool ConvFp16Tma::supports(const ConvShape& shape, int tile) {
  if (tile < 0 || tile >= kTileCount || !supports(shape)) return false;
  ConvShape s = shape;
  s.derive();
  return tile_serves(s, tile);
}

bool ConvFp16Tma::device_supported() { return ConvFp16Wgmma::device_supported(); }

const std::vector<std::string>& ConvFp16Tma::tile_names() {
  static const std::vector<std::string> names = tma::tile_names_of(kTiles);
  return names;
}

ConvFp16Tma::ConvFp16Tma(const ConvShape& shape_in, const float* weight, const float* bias,
                         int stored_in_c)
    : impl_(std::make_unique<ConvFp16TmaImpl>()) {
  ConvFp16TmaImpl& m = *impl_;
  m.shape = shape_in;
  m.shape.derive();
  const ConvShape& s = m.shape;
  if (!supports(s))
    throw Error(
        "conv_fp16_tma: unsupported shape (needs groups 1, dilation 1, in_c % 32 == 0, out_c % 8 "
        "== 0, kernel <= 64, stride <= 8, padding within the im2col box, a fused pool's windows "
        "within a tile)");
  m.row_bytes = row_bytes_of(s.in_c);
  m.row_elems = m.row_bytes / int(sizeof(__half));
  m.stored_in_c = stored_in_c == 0 ? s.in_c : stored_in_c;
  if (m.stored_in_c % 8 != 0 || m.stored_in_c > s.in_c || m.stored_in_c <= s.in_c - m.row_elems)
    throw Error("conv_fp16_tma: " + std::to_string(m.stored_in_c) +
                " stored input channels for in_c " + std::to_string(s.in_c) +
                " (needs a multiple of 8 within the last " + std::to_string(m.row_elems) +
                "-channel block)");
  if (!device_supported())
    throw Error("conv_fp16_tma: needs a compute capability 9.0 device and the sm_90a build");
  if (weight == nullptr) throw Error("conv_fp16_tma: no weight");
  const ConvAttrs& a = s.conv;
  TmaConvParams& p = m.base;
  fill_tma_conv_geometry(s, m.row_elems, p);
  if (s.pool) {
    m.pool_tiling[0] = pool_tiling_of(s, 128);
    m.pool_tiling[1] = pool_tiling_of(s, 256);
  }
  const DeviceTraits& device = device_traits();
  m.sms = std::max(device.sms, 1);
  for (int t = 0; t < kTileCount; ++t)
    if (device.smem_optin < smem_of(t, kTiles[t].pool ? tma_f16::kPooled : 0, m.row_bytes))
      throw Error("conv_fp16_tma: the device offers too little shared memory per block");

  // KRSC = the K-major [out_c][K] matrix the weight map tiles: K in (r, s, c) order, so with
  // in_c a multiple of the row's halves every k-tile (a box of row_elems along K) is one tap's
  // channel block, whichever the row size — no padding, no repacking.
  const int k = a.kernel_h * a.kernel_w * s.in_c;
  m.bytes = upload_wgmma_weights(s, weight, bias, k, s.out_c, &m.w, &m.bias);
  p.bias = m.bias;
  if (plan_only()) return;  // a described target: sizes only, no maps, no attributes

  check_register_counts();
  tma::opt_in_smem(kernel_images({m.row_bytes}));
  for (int i = 0; i < kBnWidthCount; ++i)
    tma::encode_weight_map("conv_fp16_tma", &m.w_maps[i], CU_TENSOR_MAP_DATA_TYPE_FLOAT16, m.w,
                           size_t(k), size_t(s.out_c), size_t(k) * sizeof(__half), m.row_elems,
                           kBnWidths[i], m.row_bytes);
}

ConvFp16Tma::~ConvFp16Tma() = default;

namespace {
// Modelled seconds of `plan` (units of tile `t`) for shape `s`: waves x tile time.
// 128-byte rows: the tile's MACs at its speed (unchanged).  64-byte rows: each k-tile at least
// (bm + bn) x kRowSeconds, the feed floor (design note, "64-byte rows").
double modelled_seconds(const ConvShape& s, const TileInfo& t, long long units, int sms,
                        int row_bytes) {
  const double k = double(s.conv.kernel_h) * s.conv.kernel_w * s.in_c;
  double tile = 2.0 * t.bm * t.bn * k / (t.speed * kSmFlops);
  if (row_bytes == 64) {
    const double k_tiles = k / (row_bytes / int(sizeof(__half)));
    tile = std::max(tile, k_tiles * (t.bm + t.bn) * kRowSeconds);
  }
  return tma::waves(units, sms) * tile;
}
}  // namespace

ConvFp16TmaPlan ConvFp16Tma::plan(int batch, int variant) const {
  const ConvFp16TmaImpl& m = *impl_;
  tma::check_tile("conv_fp16_tma", variant, kTileCount);
  const TileInfo& t = kTiles[variant];
  const long long rows = (long long)std::max(batch, 1) * m.shape.conv_h * m.shape.conv_w;
  ConvFp16TmaPlan plan;
  plan.variant = variant;
  // 64-byte rows say so ("_k64", as conv_int8_tma's names do); 128-byte names are unchanged.
  plan.name = std::string("tma_") + t.name + (m.row_bytes == 64 ? "_k64" : "") + "_s" +
              std::to_string(tma_f16::stages_of(t, m.row_bytes));
  const long long n_tiles = (m.shape.out_c + t.bn - 1) / t.bn;
  if (m.shape.pool) {
    // Tiles without a pooled instance still report their tiling's size (the entry's fallback
    // threshold counts 128-row tiles); forward() refuses them.
    const std::optional<TmaPoolTiling>& tiling = m.tiling(t.bm);
    plan.units = tiling ? pool_m_tiles(*tiling, batch) * n_tiles : 0;
  } else {
    plan.units = tma::tile_units(rows, t.bm, m.shape.out_c, t.bn);
  }
  plan.ctas = tma::persistent_ctas(plan.units, m.sms);
  // The model's time of this tile as pinned (a fused pool: its pooled instance), so the lab can
  // set it beside the measured one; best_tile() re-derives it for the staged form's conv.
  plan.estimated_us = 1e6 * modelled_seconds(m.shape, t, plan.units, m.sms, m.row_bytes);
  return plan;
}

// The fastest modelled tile: pooled = with its fused-pool instance, else among the unpooled
// candidates (for a pooled shape: the staged form's conv into the pre-pool tensor).
static ConvFp16TmaPlan best_tile(const ConvFp16Tma& conv, const ConvFp16TmaImpl& m, int batch,
                                 bool pooled) {
  ConvFp16TmaPlan best;
  bool found = false;
  ConvShape unpooled = m.shape;
  unpooled.pool.reset();
  for (int t = 0; t < kTileCount; ++t) {
    if (pooled ? !(kTiles[t].pool && m.tiling(kTiles[t].bm)) : !kTiles[t].unpooled_default)
      continue;
    ConvFp16TmaPlan p = conv.plan(batch, t);
    if (!pooled && m.shape.pool) {  // the staged conv: unpooled tiles over every conv pixel
      const long long rows = (long long)std::max(batch, 1) * m.shape.conv_h * m.shape.conv_w;
      p.units = tma::tile_units(rows, kTiles[t].bm, m.shape.out_c, kTiles[t].bn);
      p.ctas = tma::persistent_ctas(p.units, m.sms);
    }
    p.estimated_us =
        1e6 * modelled_seconds(pooled ? m.shape : unpooled, kTiles[t], p.units, m.sms, m.row_bytes);
    if (!found || p.estimated_us < best.estimated_us) {
      best = p;
      found = true;
    }
  }
  return best;
}

ConvFp16TmaPlan ConvFp16Tma::plan_fused(int batch) const {
  if (!impl_->shape.pool) throw Error("conv_fp16_tma: plan_fused() of a conv without a pool");
  return best_tile(*this, *impl_, batch, true);
}

ConvFp16TmaPlan ConvFp16Tma::plan_staged(int batch) const {
  const ConvFp16TmaImpl& m = *impl_;
  if (!m.shape.pool) throw Error("conv_fp16_tma: plan_staged() of a conv without a pool");
  ConvFp16TmaPlan p = best_tile(*this, m, batch, false);
  const size_t b = size_t(std::max(batch, 1)), c = size_t(m.shape.out_c);
  p.workspace_bytes = b * m.shape.conv_h * m.shape.conv_w * c * sizeof(__half);
  const size_t pooled_bytes = b * m.shape.out_h * m.shape.out_w * c * sizeof(__half);
  p.estimated_us += 1e6 * tma::staged_pool_seconds(p.workspace_bytes, pooled_bytes);
  p.variant += kStagedVariant;
  p.name += "+maxpool";
  p.staged = true;
  return p;
}

ConvFp16TmaPlan ConvFp16Tma::plan(int batch) const {
  if (!impl_->shape.pool) return best_tile(*this, *impl_, batch, false);
  const ConvFp16TmaPlan fused = plan_fused(batch), staged = plan_staged(batch);
  return staged.estimated_us < fused.estimated_us ? staged : fused;
}

ConvFp16TmaInput encode_fp16_im2col(const char* kernel, const ConvShape& s, int stored_in_c,
                                    int row_elems, int row_bytes, const void* x, int batch) {
  const ConvAttrs& a = s.conv;
  ConvFp16TmaInput input;
  input.x = x;
  input.batch = batch;
  // Corners in tensor-dimension order (W, H): the box of tap-(0,0) positions.
  const tma::Im2colGeometry g = {
      CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      int(sizeof(__half)),
      stored_in_c,  // the channels past it read as zeros (the map's out-of-bounds fill)
      s.in_w,
      s.in_h,
      std::max(batch, 1),
      {-a.pad_w, -a.pad_h},
      {a.pad_right() - (a.kernel_w - 1), a.pad_bottom() - (a.kernel_h - 1)},
      a.stride_w,
      a.stride_h,
      row_elems,
      row_bytes};
  input.map = tma::encode_im2col_map(kernel, x, g);
  return input;
}

ConvFp16TmaInput ConvFp16Tma::encode_input(const void* x, int batch) const {
  const ConvFp16TmaImpl& m = *impl_;
  return encode_fp16_im2col("conv_fp16_tma", m.shape, m.stored_in_c, m.row_elems, m.row_bytes, x,
                            batch);
}

void ConvFp16Tma::forward(int variant, const ConvFp16TmaInput& input, const void* residual, void* y,
                          cudaStream_t stream, void* workspace) const {
  const ConvFp16TmaImpl& m = *impl_;
  if ((residual != nullptr) != m.shape.residual)
    throw Error("conv_fp16_tma: a residual must be given exactly when the layer fuses one");
  const bool staged = variant >= kStagedVariant;
  const int tile = staged ? variant - kStagedVariant : variant;
  if (tile < 0 || tile >= kTileCount)
    throw Error("conv_fp16_tma: no variant " + std::to_string(variant));
  const TileInfo& t = kTiles[tile];
  const bool pooled = m.shape.pool.has_value() && !staged;
  if (staged && !m.shape.pool) throw Error("conv_fp16_tma: a staged variant needs a fused pool");
  if (staged && workspace == nullptr)
    throw Error("conv_fp16_tma: the staged pool variant needs its workspace");
  if (pooled && !(t.pool && m.tiling(t.bm)))
    throw Error(std::string("conv_fp16_tma: tile ") + t.name + " does not serve this fused pool");
  const int batch = std::max(input.batch, 1);
  TmaConvParams p = m.base;
  p.m = int((long long)batch * m.shape.conv_h * m.shape.conv_w);
  p.n_tiles = (m.shape.out_c + t.bn - 1) / t.bn;
  long long units = 0;
  if (pooled) {
    units = this->plan(input.batch, tile).units;
    p.pool = *m.tiling(t.bm);
    p.pool.rows_total = batch * m.shape.out_h;
  } else {
    units = tma::tile_units(p.m, t.bm, m.shape.out_c, t.bn);
  }
  if (units == 0) return;
  p.y = static_cast<__half*>(staged ? workspace : y);
  p.residual = static_cast<const __half*>(residual);
  p.units = int(units);
  const int ctas = tma::persistent_ctas(units, m.sms);
  const int kind = pooled ? tma_f16::kPooled : residual != nullptr ? tma_f16::kResidual : 0;
  launch_kernel(kernel_of(tile, kind, m.row_bytes), ctas, tma_detail::kThreads,
                smem_of(tile, kind, m.row_bytes), stream, input.map, m.w_map(t.bn), p);
  if (staged)
    maxpool_fp16(workspace, y, batch, m.shape.out_c, m.shape.conv_h, m.shape.conv_w, *m.shape.pool,
                 m.shape.out_h, m.shape.out_w, stream);
}

size_t ConvFp16Tma::weight_bytes() const { return impl_->bytes; }

}  // namespace cnnrt::cuda
