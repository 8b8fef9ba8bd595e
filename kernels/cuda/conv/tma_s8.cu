// conv_int8_tma: the TMA-fed, warp-specialised, persistent Hopper int8 conv — host side (shape
// rule, tensor maps, tile choice, launch).  The kernel is tma_s8_kernel.cuh; measurements in
// docs/kernels/conv_int8_tma.md.
//
// DESIGN NOTE
// * Why: conv_int8_wgmma runs the old cp.async mainloop (all 256 threads gather 16-byte chunks)
//   at ~25 % of the int8 peak on AlexNet, and fp16 moved to the TMA mainloop (conv_fp16_tma,
//   ~670 TFLOP/s): int8, whose peak is twice fp16's, must have the same mainloop to stay ahead.
//   So this is conv_fp16_tma's kernel with int8 elements: one producer thread, an im2col box of
//   128 pixels x KB channels and a KB x BN weight box per k-tile, 2 consumer warpgroups of wgmma.
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
// * Tiles and the default choice are conv_fp16_tma's (fewest waves x tile area / speed).
// * The driver's tensor-map encoders are reached through cudaGetDriverEntryPointByVersion (no
//   -lcuda), as tma_conv.cu does.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <mutex>
#include <string>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/tma_encode.h"
#include "kernels/cuda/conv/tma_s8.h"
#include "kernels/cuda/conv/tma_s8_kernel.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_traits.h"

namespace cnnrt::cuda {

namespace {

using tma_s8_detail::TmaS8Params;
using tma_s8_detail::TmaS8Tile;

struct TileInfo {
  int bm, bn, stages128, stages64;
  double speed;  // conv_fp16_tma's lab throughput at batch 256 relative to the best tile
  const char* name;
};
constexpr TileInfo kTiles[] = {
    {128, 128, 7, 12, 0.78, "128x128"},
    {128, 192, 5, 10, 1.0, "128x192"},
    {128, 256, 4, 8, 1.0, "128x256"},
    {256, 128, 4, 8, 0.95, "256x128"},
};
constexpr int kTileCount = sizeof(kTiles) / sizeof(kTiles[0]);

using KernelFn = void (*)(CUtensorMap, CUtensorMap, TmaS8Params);

template <int T, int KB, bool F>
KernelFn instance() {
  constexpr TileInfo t = kTiles[T];
  return tma_s8_detail::conv_tma_s8_kernel < t.bm, t.bn, KB == 128 ? t.stages128 : t.stages64, KB,
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
    default:
      return instance<3, KB, F>();
  }
}
KernelFn kernel_of(int tile, int kb, bool float_out) {
  if (kb == 128)
    return float_out ? kernel_of_tile<128, true>(tile) : kernel_of_tile<128, false>(tile);
  return float_out ? kernel_of_tile<64, true>(tile) : kernel_of_tile<64, false>(tile);
}
int stages_of(int tile, int kb) {
  return kb == 128 ? kTiles[tile].stages128 : kTiles[tile].stages64;
}
size_t smem_of(int tile, int kb) {
  const TileInfo& t = kTiles[tile];
  return 1024 + size_t(stages_of(tile, kb)) * size_t(t.bm + t.bn) * kb;
}
static_assert(TmaS8Tile<128, 128, 12, 64>::kSmem == 1024 + 12 * 256 * 64, "smem_of mirrors it");

// setmaxnreg's budget holds only when every instance starts at exactly kEntryRegs registers.
void check_register_counts() {
  static std::once_flag once;
  static std::string problem;
  std::call_once(once, [] {
    for (int t = 0; t < kTileCount; ++t)
      for (int kb : {64, 128})
        for (bool f : {false, true}) {
          cudaFuncAttributes attr;
          CNNRT_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel_of(t, kb, f)));
          if (attr.numRegs != tma_detail::kEntryRegs)
            problem = std::string("tile ") + kTiles[t].name + " starts at " +
                      std::to_string(attr.numRegs) + " registers, setmaxnreg needs " +
                      std::to_string(tma_detail::kEntryRegs);
        }
  });
  if (!problem.empty()) throw Error("conv_int8_tma: " + problem);
}

// The im2col box's upper corner along one axis: out positions exactly (design note).
int upper_corner(int in, int out, int stride, int pad) { return (out - 1) * stride - in - pad + 1; }
bool corner_ok(int v) { return v >= -128 && v <= 127; }
int k_bytes_of(const S8Conv& conv) { return conv.in_stride % 128 == 0 ? 128 : 64; }

}  // namespace

bool tma_s8_serves(const S8Conv& c) {
  if (c.groups != 1 || c.dil_h != 1 || c.dil_w != 1) return false;
  if (c.in_stride <= 0 || c.in_stride % 64 != 0 || c.in_c > c.in_stride) return false;
  if (c.kh < 1 || c.kh > 64 || c.kw < 1 || c.kw > 64) return false;
  if (c.stride_h < 1 || c.stride_h > 8 || c.stride_w < 1 || c.stride_w > 8) return false;
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

class ConvS8TmaImpl {
 public:
  S8Conv conv;
  TmaS8Params base;
  int kb = 128;
  int sms = 132;
  CUtensorMap w_maps[3];  // box heights 128, 192, 256
  const CUtensorMap& w_map(int bn) const { return w_maps[bn == 128 ? 0 : bn == 192 ? 1 : 2]; }
};

bool ConvS8Tma::device_supported() { return wgmma_s8_device_supported(); }

const std::vector<std::string>& ConvS8Tma::tile_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const TileInfo& t : kTiles) n.push_back(t.name);
    return n;
  }();
  return names;
}

ConvS8Tma::ConvS8Tma(const S8Conv& conv) : impl_(std::make_unique<ConvS8TmaImpl>()) {
  ConvS8TmaImpl& m = *impl_;
  m.conv = conv;
  if (!tma_s8_serves(conv))
    throw Error(
        "conv_int8_tma: unsupported conv (needs groups 1, dilation 1, channel stride % 64 == 0, "
        "kernel <= 64, stride <= 8, padding within the im2col box)");
  if (!device_supported())
    throw Error("conv_int8_tma: needs a compute capability 9.0 device and the sm_90a build");
  m.kb = k_bytes_of(conv);
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
  p.c_blocks = conv.in_stride / m.kb;
  p.k_tiles = conv.kh * conv.kw * p.c_blocks;
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
  for (int t = 0; t < kTileCount; ++t)
    for (bool f : {false, true})
      CNNRT_CUDA_CHECK(cudaFuncSetAttribute(kernel_of(t, m.kb, f),
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(smem_of(t, m.kb))));
  const CUtensorMapSwizzle swizzle =
      m.kb == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  const int heights[3] = {128, 192, 256};
  for (int i = 0; i < 3; ++i) {
    const cuuint64_t dims[2] = {cuuint64_t(conv.k_total), cuuint64_t(conv.out_c)};
    const cuuint64_t strides[1] = {cuuint64_t(conv.k_pad)};
    const cuuint32_t box[2] = {cuuint32_t(m.kb), cuuint32_t(heights[i])};
    const cuuint32_t element_strides[2] = {1, 1};
    tma::check_encode(
        "conv_int8_tma",
        tma::encode_tiled()(&m.w_maps[i], CU_TENSOR_MAP_DATA_TYPE_UINT8, 2,
                            const_cast<int8_t*>(conv.weight), dims, strides, box, element_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "cuTensorMapEncodeTiled (weight)");
  }
}

ConvS8Tma::~ConvS8Tma() = default;

ConvS8TmaPlan ConvS8Tma::plan(int batch, int variant) const {
  const ConvS8TmaImpl& m = *impl_;
  if (variant < 0 || variant >= kTileCount)
    throw Error("conv_int8_tma: no tile " + std::to_string(variant));
  const TileInfo& t = kTiles[variant];
  const long long rows = (long long)std::max(batch, 1) * m.conv.out_h * m.conv.out_w;
  ConvS8TmaPlan plan;
  plan.variant = variant;
  plan.name = std::string("tma_s8_") + t.name + "_k" + std::to_string(m.kb) + "_s" +
              std::to_string(stages_of(variant, m.kb));
  plan.units = (rows + t.bm - 1) / t.bm * ((m.conv.out_c + t.bn - 1) / t.bn);
  plan.ctas = int(std::min<long long>(plan.units, m.sms));
  return plan;
}

ConvS8TmaPlan ConvS8Tma::plan(int batch) const {
  const ConvS8TmaImpl& m = *impl_;
  int best = 0;
  double best_cost = 0;
  for (int t = 0; t < kTileCount; ++t) {
    const long long units = plan(batch, t).units;
    const double waves = double((units + m.sms - 1) / m.sms);
    const double cost = waves * kTiles[t].bm * kTiles[t].bn / kTiles[t].speed;
    if (t == 0 || cost < best_cost) {
      best = t;
      best_cost = cost;
    }
  }
  return plan(batch, best);
}

ConvS8TmaInput ConvS8Tma::encode_input(const void* x, int batch) const {
  const ConvS8TmaImpl& m = *impl_;
  const S8Conv& c = m.conv;
  ConvS8TmaInput input;
  input.x = x;
  input.batch = batch;
  const cuuint64_t dims[4] = {cuuint64_t(c.in_stride), cuuint64_t(c.in_w), cuuint64_t(c.in_h),
                              cuuint64_t(std::max(batch, 1))};
  const cuuint64_t strides[3] = {cuuint64_t(c.in_stride), cuuint64_t(c.in_w) * c.in_stride,
                                 cuuint64_t(c.in_h) * c.in_w * c.in_stride};
  const int lower[2] = {-c.pad_w, -c.pad_h};  // tensor-dimension order (W, H)
  const int upper[2] = {upper_corner(c.in_w, c.out_w, c.stride_w, c.pad_w),
                        upper_corner(c.in_h, c.out_h, c.stride_h, c.pad_h)};
  const cuuint32_t element_strides[4] = {1, cuuint32_t(c.stride_w), cuuint32_t(c.stride_h), 1};
  tma::check_encode(
      "conv_int8_tma",
      tma::encode_im2col()(&input.map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, const_cast<void*>(x), dims,
                           strides, lower, upper, cuuint32_t(m.kb), 128, element_strides,
                           CU_TENSOR_MAP_INTERLEAVE_NONE,
                           m.kb == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
      "cuTensorMapEncodeIm2col (input)");
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
