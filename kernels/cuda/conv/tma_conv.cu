// conv_fp16_tma: the TMA-fed, warp-specialised, persistent Hopper conv — host side (shape rule,
// weight upload, tensor maps, tile choice, launch).  The kernel is tma_kernel.cuh; the lab it
// came from (and that still runs it: bench/conv_tma_lab.cu) and every measurement are in
// docs/kernels/conv_fp16_tma.md.
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
// * Tiles (variant = index): 128x128 (7 stages), 128x192 (5), 128x256 (4), 256x128 (4); 1 CTA per
//   SM (225 / 201 / 193 / 193 KB of ring).  The lab's 2-CTA multicast variants ran on par or
//   behind, so the library does not carry them (the kernel still takes CL for the lab).
// * Default tile (plan(batch)): units = ceil(M/BM) * ceil(out_c/BN) on a persistent grid of
//   min(units, SMs) CTAs; cost = ceil(units / SMs) * BM * BN / speed, speed the lab's per-tile
//   efficiency at batch 256 relative to the best (128x128 0.78, 256x128 0.95, others 1.0).  It
//   picks every lab winner: conv2 (out_c 192) 128x192, conv3 (384) 256x128, conv4/conv5 (256)
//   128x256, at batch 64 and 256.  The padded columns of a tile that does not divide out_c are
//   counted as work (BN 192 on out_c 256 computes 384 columns: measured 2x slower).
// * Epilogue from the accumulator registers: bias and the clamp in fp32 -> fp16, quad transpose,
//   16-byte stores; a residual is added to the rounded pair by epilogue::add_residual and the
//   clamp follows the add (the family's convention, conv_family.md).  No fused MaxPool: the ring
//   is busy with the next tile when the epilogue runs, and a pool needs a staging tile of whole
//   conv rows; such layers keep conv_fp16_wgmma.
// * setmaxnreg: 128 x 40 + 256 x 232 registers fit the 64 K register file only if the kernel
//   starts at exactly 168 per thread (launch bounds 384, 1); the constructor checks the loaded
//   image's count, since an inc that cannot be satisfied would hang.
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <mutex>
#include <string>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/tma_conv.h"
#include "kernels/cuda/conv/tma_kernel.cuh"
#include "kernels/cuda/conv/wgmma.h"
#include "kernels/cuda/conv/wgmma_common.h"
#include "kernels/cuda/cuda_check.h"

namespace cnnrt::cuda {

namespace {

using tma_detail::TmaConvParams;
using tma_detail::TmaTile;

struct TileInfo {
  int bm, bn, stages;
  double speed;  // lab throughput at batch 256 relative to the best tile (design note)
  const char* name;
};
constexpr TileInfo kTiles[] = {
    {128, 128, 7, 0.78, "128x128"},
    {128, 192, 5, 1.0, "128x192"},
    {128, 256, 4, 1.0, "128x256"},
    {256, 128, 4, 0.95, "256x128"},
};
constexpr int kTileCount = sizeof(kTiles) / sizeof(kTiles[0]);
constexpr int kBnWidths[] = {128, 192, 256};  // weight map box heights

using KernelFn = void (*)(CUtensorMap, CUtensorMap, TmaConvParams);

template <int T, bool RES>
KernelFn kernel_instance() {
  constexpr TileInfo t = kTiles[T];
  return tma_detail::conv_tma_kernel<t.bm, t.bn, t.stages, 1, RES>;
}
KernelFn kernel_of(int tile, bool residual) {
  switch (tile) {
    case 0:
      return residual ? kernel_instance<0, true>() : kernel_instance<0, false>();
    case 1:
      return residual ? kernel_instance<1, true>() : kernel_instance<1, false>();
    case 2:
      return residual ? kernel_instance<2, true>() : kernel_instance<2, false>();
    default:
      return residual ? kernel_instance<3, true>() : kernel_instance<3, false>();
  }
}
size_t smem_of(int tile) {
  const TileInfo& t = kTiles[tile];
  return 1024 + size_t(t.stages) * size_t(t.bm + t.bn) * 128;
}
static_assert(TmaTile<128, 128, 7, 1>::kSmem == 1024 + 7 * 256 * 128, "smem_of mirrors TmaTile");

// ---- driver entry points (no -lcuda: through the runtime) -------------------------------------
using EncodeIm2col = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                  const cuuint64_t*, const cuuint64_t*, const int*, const int*,
                                  cuuint32_t, cuuint32_t, const cuuint32_t*, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion,
                                  CUtensorMapFloatOOBfill);
using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                 const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
struct Encoders {
  EncodeIm2col im2col = nullptr;
  EncodeTiled tiled = nullptr;
};

void* driver_entry(const char* symbol) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  CNNRT_CUDA_CHECK(cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || fn == nullptr)
    throw Error(std::string("conv_fp16_tma: the CUDA driver has no ") + symbol);
  return fn;
}
const Encoders& encoders() {
  static const Encoders e = [] {
    Encoders r;
    r.im2col = reinterpret_cast<EncodeIm2col>(driver_entry("cuTensorMapEncodeIm2col"));
    r.tiled = reinterpret_cast<EncodeTiled>(driver_entry("cuTensorMapEncodeTiled"));
    return r;
  }();
  return e;
}
void check_encode(CUresult status, const char* what) {
  if (status != CUDA_SUCCESS)
    throw Error(std::string("conv_fp16_tma: ") + what + " failed (CUresult " +
                std::to_string(int(status)) + ")");
}

// Every instance starts at exactly kEntryRegs registers (design note); checked once.
void check_register_counts() {
  static std::once_flag once;
  static std::string problem;
  std::call_once(once, [] {
    for (int t = 0; t < kTileCount; ++t)
      for (bool res : {false, true}) {
        cudaFuncAttributes attr;
        CNNRT_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel_of(t, res)));
        if (attr.numRegs != tma_detail::kEntryRegs)
          problem = std::string("tile ") + kTiles[t].name + " starts at " +
                    std::to_string(attr.numRegs) + " registers, setmaxnreg needs " +
                    std::to_string(tma_detail::kEntryRegs);
      }
  });
  if (!problem.empty()) throw Error("conv_fp16_tma: " + problem);
}

}  // namespace

class ConvFp16TmaImpl {
 public:
  ConvShape shape;
  TmaConvParams base;  // everything but y, residual, m and the grid
  int sms = 132;
  __half* w = nullptr;
  float* bias = nullptr;
  size_t bytes = 0;
  CUtensorMap w_maps[3];  // per kBnWidths
  ~ConvFp16TmaImpl() {
    cudaFree(w);  // destructors never throw; a failed free leaks at worst
    cudaFree(bias);
  }
  const CUtensorMap& w_map(int bn) const { return w_maps[bn == 128 ? 0 : bn == 192 ? 1 : 2]; }
};

bool ConvFp16Tma::supports(const ConvShape& s) {
  const ConvAttrs& a = s.conv;
  if (s.pool || !conv_shape_problem(s).empty()) return false;
  if (a.groups != 1 || a.dilation_h != 1 || a.dilation_w != 1) return false;
  if (s.in_c % 64 != 0 || s.out_c % 8 != 0 || a.out_channels != s.out_c) return false;
  if (a.stride_h < 1 || a.stride_h > 8 || a.stride_w < 1 || a.stride_w > 8) return false;
  if (a.kernel_h < 1 || a.kernel_h > 64 || a.kernel_w < 1 || a.kernel_w > 64) return false;
  // The im2col bounding box's corners lie in [-128, 127] for a 4-D map.
  auto corner_ok = [](int v) { return v >= -128 && v <= 127; };
  if (a.pad_h < 0 || a.pad_w < 0 || a.pad_h_extra < -a.pad_h || a.pad_w_extra < -a.pad_w)
    return false;
  if (!corner_ok(-a.pad_h) || !corner_ok(-a.pad_w) ||
      !corner_ok(a.pad_bottom() - (a.kernel_h - 1)) || !corner_ok(a.pad_right() - (a.kernel_w - 1)))
    return false;
  // M and the element offsets stay within int.
  const long long pixels = (long long)s.conv_h * s.conv_w, in_pixels = (long long)s.in_h * s.in_w;
  return pixels > 0 && pixels * s.out_c < INT_MAX / 64 && in_pixels * s.in_c < INT_MAX / 64;
}

bool ConvFp16Tma::device_supported() { return ConvFp16Wgmma::device_supported(); }

const std::vector<std::string>& ConvFp16Tma::tile_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const TileInfo& t : kTiles) n.push_back(t.name);
    return n;
  }();
  return names;
}

ConvFp16Tma::ConvFp16Tma(const ConvShape& shape_in, const float* weight, const float* bias)
    : impl_(std::make_unique<ConvFp16TmaImpl>()) {
  ConvFp16TmaImpl& m = *impl_;
  m.shape = shape_in;
  m.shape.derive();
  const ConvShape& s = m.shape;
  if (!supports(s))
    throw Error(
        "conv_fp16_tma: unsupported shape (needs groups 1, dilation 1, in_c % 64 == 0, out_c % 8 "
        "== 0, kernel <= 64, stride <= 8, padding within the im2col box, no fused pool)");
  if (!device_supported())
    throw Error("conv_fp16_tma: needs a compute capability 9.0 device and the sm_90a build");
  if (weight == nullptr) throw Error("conv_fp16_tma: no weight");
  const ConvAttrs& a = s.conv;
  TmaConvParams& p = m.base;
  p.out_c = s.out_c;
  p.conv_h = s.conv_h;
  p.conv_w = s.conv_w;
  p.sh = a.stride_h;
  p.sw = a.stride_w;
  p.pad_top = a.pad_h;
  p.pad_left = a.pad_w;
  p.kw = a.kernel_w;
  p.c_blocks = s.in_c / tma_detail::kBK;
  p.k_tiles = a.kernel_h * a.kernel_w * p.c_blocks;
  p.act = epilogue_clamp_of(s);
  const DeviceTraits& device = device_traits();
  m.sms = std::max(device.sms, 1);
  for (int t = 0; t < kTileCount; ++t)
    if (device.smem_optin < smem_of(t))
      throw Error("conv_fp16_tma: the device offers too little shared memory per block");

  // KRSC = the K-major [out_c][K] matrix the weight map tiles (K % 64 == 0: no padding).
  const int k = a.kernel_h * a.kernel_w * s.in_c;
  m.bytes = upload_wgmma_weights(s, weight, bias, k, s.out_c, &m.w, &m.bias);
  p.bias = m.bias;
  if (plan_only()) return;  // a described target: sizes only, no maps, no attributes

  check_register_counts();
  for (int t = 0; t < kTileCount; ++t)
    for (bool res : {false, true})
      CNNRT_CUDA_CHECK(cudaFuncSetAttribute(kernel_of(t, res),
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(smem_of(t))));
  for (int i = 0; i < 3; ++i) {
    const cuuint64_t dims[2] = {cuuint64_t(k), cuuint64_t(s.out_c)};
    const cuuint64_t strides[1] = {cuuint64_t(k) * sizeof(__half)};
    const cuuint32_t box[2] = {cuuint32_t(tma_detail::kBK), cuuint32_t(kBnWidths[i])};
    const cuuint32_t element_strides[2] = {1, 1};
    check_encode(
        encoders().tiled(&m.w_maps[i], CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, m.w, dims, strides, box,
                         element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "cuTensorMapEncodeTiled (weight)");
  }
}

ConvFp16Tma::~ConvFp16Tma() = default;

ConvFp16TmaPlan ConvFp16Tma::plan(int batch, int variant) const {
  const ConvFp16TmaImpl& m = *impl_;
  if (variant < 0 || variant >= kTileCount)
    throw Error("conv_fp16_tma: no tile " + std::to_string(variant));
  const TileInfo& t = kTiles[variant];
  const long long rows = (long long)std::max(batch, 1) * m.shape.conv_h * m.shape.conv_w;
  ConvFp16TmaPlan plan;
  plan.variant = variant;
  plan.name = std::string("tma_") + t.name + "_s" + std::to_string(t.stages);
  plan.units = (rows + t.bm - 1) / t.bm * ((m.shape.out_c + t.bn - 1) / t.bn);
  plan.ctas = int(std::min<long long>(plan.units, m.sms));
  return plan;
}

ConvFp16TmaPlan ConvFp16Tma::plan(int batch) const {
  const ConvFp16TmaImpl& m = *impl_;
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

ConvFp16TmaInput ConvFp16Tma::encode_input(const void* x, int batch) const {
  const ConvFp16TmaImpl& m = *impl_;
  const ConvShape& s = m.shape;
  const ConvAttrs& a = s.conv;
  ConvFp16TmaInput input;
  input.x = x;
  input.batch = batch;
  const cuuint64_t dims[4] = {cuuint64_t(s.in_c), cuuint64_t(s.in_w), cuuint64_t(s.in_h),
                              cuuint64_t(std::max(batch, 1))};
  const cuuint64_t strides[3] = {cuuint64_t(s.in_c) * sizeof(__half),
                                 cuuint64_t(s.in_w) * s.in_c * sizeof(__half),
                                 cuuint64_t(s.in_h) * s.in_w * s.in_c * sizeof(__half)};
  // Corners in tensor-dimension order (W, H): the box of tap-(0,0) positions.
  const int lower[2] = {-a.pad_w, -a.pad_h};
  const int upper[2] = {a.pad_right() - (a.kernel_w - 1), a.pad_bottom() - (a.kernel_h - 1)};
  const cuuint32_t element_strides[4] = {1, cuuint32_t(a.stride_w), cuuint32_t(a.stride_h), 1};
  check_encode(
      encoders().im2col(&input.map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, const_cast<void*>(x), dims,
                        strides, lower, upper, tma_detail::kBK, 128, element_strides,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
      "cuTensorMapEncodeIm2col (input)");
  return input;
}

void ConvFp16Tma::forward(int variant, const ConvFp16TmaInput& input, const void* residual, void* y,
                          cudaStream_t stream) const {
  const ConvFp16TmaImpl& m = *impl_;
  if ((residual != nullptr) != m.shape.residual)
    throw Error("conv_fp16_tma: a residual must be given exactly when the layer fuses one");
  const ConvFp16TmaPlan plan = this->plan(input.batch, variant);
  if (plan.units == 0) return;
  const TileInfo& t = kTiles[variant];
  TmaConvParams p = m.base;
  p.y = static_cast<__half*>(y);
  p.residual = static_cast<const __half*>(residual);
  p.m = int((long long)std::max(input.batch, 1) * m.shape.conv_h * m.shape.conv_w);
  p.n_tiles = (m.shape.out_c + t.bn - 1) / t.bn;
  p.units = int(plan.units);
  kernel_of(variant,
            residual != nullptr)<<<plan.ctas, tma_detail::kThreads, smem_of(variant), stream>>>(
      input.map, m.w_map(t.bn), p);
  CNNRT_CUDA_CHECK_LAUNCH();
}

size_t ConvFp16Tma::weight_bytes() const { return impl_->bytes; }

}  // namespace cnnrt::cuda
