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
#include <algorithm>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/tma_encode.h"
#include "kernels/cuda/conv/tma_s8.h"
#include "kernels/cuda/conv/tma_s8_kernel.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_traits.h"

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
struct TileInfo : tma::TileShape {
  int stages128, stages64;
};
constexpr tma::TileShape kInt8Tile256x128 = {256, 128, 1.02, "256x128"};
constexpr TileInfo kTiles[] = {
    {tma::kTileShapes[0], 7, 12}, {tma::kTileShapes[1], 5, 10}, {tma::kTileShapes[2], 4, 8},
    {kInt8Tile256x128, 4, 8},     {tma::kTileShapes[5], 5, 10}, {tma::kTileShapes[6], 8, 16},
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
    default:
      return instance<5, KB, F>();
  }
}
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
size_t smem_of(int tile, int kb) {
  const TileInfo& t = kTiles[tile];
  return tma::ring_smem_bytes(t.bm, t.bn, stages_of(tile, kb), k_tile_bytes(kb));
}
static_assert(TmaS8Tile<128, 128, 12, 64>::kSmem == 1024 + 12 * 256 * 64, "smem_of mirrors it");
static_assert(TmaS8Tile<128, 192, 5, kPairedRows>::kSmem == 1024 + 5 * 320 * 128,
              "paired rows: 128 bytes of K per stage row");

// The instances whose k-tile rows are one of `kbs` bytes, each with int8 and fp32 output.
std::vector<tma::KernelImage> kernel_images(std::initializer_list<int> kbs) {
  std::vector<tma::KernelImage> images;
  for (int t = 0; t < kTileCount; ++t)
    for (int kb : kbs)
      for (bool f : {false, true})
        images.push_back(
            {reinterpret_cast<const void*>(kernel_of(t, kb, f)), kTiles[t].name, smem_of(t, kb)});
  return images;
}
// setmaxnreg's budget holds only when every instance starts at exactly kEntryRegs registers.
void check_register_counts() {
  static const std::string problem =
      tma::register_problem(kernel_images({64, 128, kPairedRows}), tma_detail::kEntryRegs);
  if (!problem.empty()) throw Error("conv_int8_tma: " + problem);
}

// The im2col box's upper corner along one axis: out positions exactly (design note).
int upper_corner(int in, int out, int stride, int pad) { return (out - 1) * stride - in - pad + 1; }
using tma::corner_ok;
// The default k-tile rows: 128 bytes where the channel stride allows, else the 64-byte blocks
// paired (docs/PERFORMANCE.md run 43).
int k_bytes_of(const S8Conv& conv) { return conv.in_stride % 128 == 0 ? 128 : kPairedRows; }

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

CUtensorMap tma_s8_input_map(const char* kernel, const S8Conv& c, const void* x, int batch,
                             int kb) {
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
                                 kb};
  return tma::encode_im2col_map(kernel, x, g);
}

class ConvS8TmaImpl {
 public:
  S8Conv conv;
  TmaS8Params base;
  int kb = 128;
  int sms = 132;
  CUtensorMap w_maps[kBnWidthCount];  // per kBnWidths
  const CUtensorMap& w_map(int bn) const { return w_maps[bn_map_index(bn)]; }
};

bool ConvS8Tma::device_supported() { return wgmma_s8_device_supported(); }

const std::vector<std::string>& ConvS8Tma::tile_names() {
  static const std::vector<std::string> names = tma::tile_names_of(kTiles);
  return names;
}

ConvS8Tma::ConvS8Tma(const S8Conv& conv, int k_bytes) : impl_(std::make_unique<ConvS8TmaImpl>()) {
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
  const DeviceTraits& device = device_traits();
  m.sms = std::max(device.sms, 1);
  for (int t = 0; t < kTileCount; ++t)
    if (device.smem_optin < smem_of(t, m.kb) + 256)
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

ConvS8TmaPlan ConvS8Tma::plan(int batch, int variant) const {
  const ConvS8TmaImpl& m = *impl_;
  tma::check_tile("conv_int8_tma", variant, kTileCount);
  const TileInfo& t = kTiles[variant];
  const long long rows = (long long)std::max(batch, 1) * m.conv.out_h * m.conv.out_w;
  ConvS8TmaPlan plan;
  plan.variant = variant;
  plan.name = std::string("tma_s8_") + t.name +
              (m.kb == kPairedRows ? std::string("_k64x2") : "_k" + std::to_string(m.kb)) + "_s" +
              std::to_string(stages_of(variant, m.kb));
  plan.units = tma::tile_units(rows, t.bm, m.conv.out_c, t.bn);
  plan.ctas = tma::persistent_ctas(plan.units, m.sms);
  return plan;
}

ConvS8TmaPlan ConvS8Tma::plan(int batch) const {
  return plan(batch,
              tma::cheapest_tile(kTiles, impl_->sms, [&](int t) { return plan(batch, t).units; }));
}

ConvS8TmaInput ConvS8Tma::encode_input(const void* x, int batch) const {
  const ConvS8TmaImpl& m = *impl_;
  ConvS8TmaInput input;
  input.x = x;
  input.batch = batch;
  input.map = tma_s8_input_map("conv_int8_tma", m.conv, x, batch, box_bytes(m.kb));
  return input;
}

void ConvS8Tma::forward(int variant, const ConvS8TmaInput& input, void* y,
                        cudaStream_t stream) const {
  const ConvS8TmaImpl& m = *impl_;
  const ConvS8TmaPlan plan = this->plan(input.batch, variant);
  if (plan.units == 0 || input.batch <= 0) return;
  const TileInfo& t = kTiles[variant];
  TmaS8Params p = m.base;
  p.y = y;
  p.m = int((long long)input.batch * m.conv.out_h * m.conv.out_w);
  p.n_tiles = (m.conv.out_c + t.bn - 1) / t.bn;
  p.units = int(plan.units);
  kernel_of(
      variant, m.kb,
      m.conv.float_output)<<<plan.ctas, tma_s8_detail::kThreads, smem_of(variant, m.kb), stream>>>(
      input.map, m.w_map(t.bn), p);
  CNNRT_CUDA_CHECK_LAUNCH();
}

}  // namespace cnnrt::cuda
