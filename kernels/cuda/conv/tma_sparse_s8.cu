// conv_int8_sparse24_tma: the 2:4 sparse int8 instance of the TMA conv mainloop — host side
// (shape rule, weight check and compression, metadata packing, tensor maps, tile choice,
// launch).  The kernel is tma_sparse_s8_kernel.cuh; the host code it shares with the other TMA
// convs (limits, wave model, map encoding, image checks) is tma_encode.h.
//
// DESIGN NOTE
// * Why: the int8 family runs its convs on conv_int8_tma (the dense int8 instance) and the fp16
//   2:4 layers on conv_fp16_sparse24_tma (the sparse fp16 instance, 1.18-1.24x the dense fp16 TMA
//   conv on AlexNet conv3 / conv4); a 2:4 model quantised to int8 had no sparse kernel.  This is
//   that instance (issue 11 item 3), the int8 arithmetic of conv_s8.h (bit for bit the integer
//   reference) on wgmma.mma_async.sp m64nNk64 .s32.s8.s8.
// * Built once per layer: the int8 weight (the reference's per-channel quantisation of the
//   pruned fp32 weight) is checked 2:4 and compressed by the project's format
//   (kernels/cpu/sparse24.h on its exact float image: its error names the layer, output channel,
//   tap and channels), then laid out in this kernel's K: per tap, in_stride / 4 groups of two
//   kept int8 — the groups past ceil(in_c / 4) (the NHWC/16 padding channels, zeros in the
//   activations) keep zeros with the valid nibble {0, 1}.  The A matrix is [out_c][K / 2] int8,
//   one tiled map per BM (box KB / 2 x BM, the KB / 2-byte swizzle).  The metadata is repacked in
//   the order the consumer threads read it (tma_sparse_s8_pack.h's pack_metadata; the kernel's
//   design note has the layout, verified on an H100 in run 38e), a CPU
//   test decoding it back to the dense weight: [k-tile][m64 block][thread
//   0-127][kk] 32-bit words, blocks padded to a multiple of 4 (256 channels) with the valid
//   nibble; each consumer thread copies its words of a k-tile into a private shared-memory
//   slot by cp.async up to six k-tiles ahead (tma_mainloop.cuh).
//   weight_bytes() = K / 2 + K / 8 bytes per channel (+ padding blocks) + bias_q + multipliers.
// * KB (channels per k-tile) as conv_int8_tma: 128 where in_stride % 128 == 0 (A rows of 64 kept
//   bytes, 64-byte swizzle, two wgmma.sp per m64 block), else 64 (A rows of 32 bytes, 32-byte
//   swizzle, one wgmma.sp): AlexNet conv3 (192 channels) multiplies no zero channels.
// * Tiles, channels x pixels (BM x BN), 1 CTA per SM: 128x256 and 256x128, the largest whose
//   BM x BN / 256 = 128 accumulators per consumer thread fit setmaxnreg's 232 (the fp16
//   instance's reasoning); stages fill the ring (KB 128: 5 of 40 KB, 6 of 32 KB; KB 64: 10 of
//   20 KB, 12 of 16 KB) beside 8 KB of epilogue staging and the metadata slots.  No 128x128: it is
//   fp16's tile for grids the large ones leave short of a wave; left out here to halve the build (8
//   images, not 12). out_c 384 (AlexNet conv3) is three 128-channel tiles, 256 (conv4, conv5) one
//   or two.
// * Default tile (plan(batch)): conv_int8_tma's rule, fewest waves x tile area / speed (both
//   tiles speed 1.0 until measured).
// * supports() is tma_s8_serves (the maps conv_int8_tma's mainloop can describe), so the
//   registry falls back instead of failing at launch; the constructor checks the register count
//   of every image (setmaxnreg: exactly 168 at entry) like the other TMA convs.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "graph/passes_sparsity.h"
#include "kernels/cpu/sparse24.h"
#include "kernels/cuda/conv/tma_encode.h"
#include "kernels/cuda/conv/tma_sparse_s8.h"
#include "kernels/cuda/conv/tma_sparse_s8_kernel.cuh"
#include "kernels/cuda/conv/tma_sparse_s8_pack.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/elementwise_fp16.h"  // DeviceArray
#include "kernels/cuda/launch.h"

namespace cnnrt::cuda {

namespace {

using tma_sparse_s8_detail::kernel_order;
using tma_sparse_s8_detail::KernelOrder;
using tma_sparse_s8_detail::pack_metadata;
using tma_sparse_s8_detail::TmaSparseS8;
using tma_sparse_s8_detail::TmaSparseS8Epilogue;
using tma_sparse_s8_detail::TmaSparseS8Params;

constexpr const char* kKernel = "conv_int8_sparse24_tma";

struct SparseS8Tile {
  int bm, bn;               // output channels, output pixels
  int stages128, stages64;  // ring stages at KB 128 / 64
  double speed;             // relative per-tile throughput (design note: not measured)
  const char* name;
};
constexpr SparseS8Tile kTiles[] = {
    {128, 256, 5, 10, 1.0, "128x256"},
    {256, 128, 6, 12, 1.0, "256x128"},
};
constexpr int kTileCount = sizeof(kTiles) / sizeof(kTiles[0]);

template <int T, int KB>
constexpr int stages_of() {
  return KB == 128 ? kTiles[T].stages128 : kTiles[T].stages64;
}
template <int T, int KB>
constexpr size_t smem_of_tile() {
  constexpr SparseS8Tile t = kTiles[T];
  constexpr size_t kStaging = TmaSparseS8Epilogue<t.bm, t.bn, false>::kStaging;
  return tma_detail::TmaRing<TmaSparseS8<KB>, t.bm, t.bn, stages_of<T, KB>(), kStaging>::kSmem +
         kStaging;
}
// 227 KB of opt-in shared memory on an H100, of which the kernel's static part (the barriers,
// padded to the 1024-byte alignment of the dynamic part) takes 2 KB (cuobjdump -res-usage:
// SHARED 2048); the metadata slots take what is left up to there (tma_mainloop.cuh).
constexpr size_t kSmemBudget = 227 * 1024 - 2048;
static_assert(smem_of_tile<0, 128>() <= kSmemBudget && smem_of_tile<1, 128>() <= kSmemBudget &&
                  smem_of_tile<0, 64>() <= kSmemBudget && smem_of_tile<1, 64>() <= kSmemBudget,
              "every tile's ring and staging fit beside the static shared memory");
size_t smem_of(int tile, int kb) {
  if (kb == 128) return tile == 0 ? smem_of_tile<0, 128>() : smem_of_tile<1, 128>();
  return tile == 0 ? smem_of_tile<0, 64>() : smem_of_tile<1, 64>();
}
int stages_of(int tile, int kb) {
  return kb == 128 ? kTiles[tile].stages128 : kTiles[tile].stages64;
}

using KernelFn = void (*)(CUtensorMap, CUtensorMap, TmaSparseS8Params);
template <int T, int KB, bool F>
KernelFn instance() {
  constexpr SparseS8Tile t = kTiles[T];
  return tma_sparse_s8_detail::conv_tma_sparse_s8_kernel<t.bm, t.bn, stages_of<T, KB>(), KB, F>;
}
template <int KB, bool F>
KernelFn kernel_of_tile(int tile) {
  return tile == 0 ? instance<0, KB, F>() : instance<1, KB, F>();
}
KernelFn kernel_of(int tile, int kb, bool float_out) {
  if (kb == 128)
    return float_out ? kernel_of_tile<128, true>(tile) : kernel_of_tile<128, false>(tile);
  return float_out ? kernel_of_tile<64, true>(tile) : kernel_of_tile<64, false>(tile);
}

// The instances of k-tile width kb, each with int8 and fp32 output.
std::vector<tma::KernelImage> kernel_images(std::initializer_list<int> kbs) {
  std::vector<tma::KernelImage> images;
  for (int t = 0; t < kTileCount; ++t)
    for (int kb : kbs)
      for (bool f : {false, true})
        images.push_back(
            {reinterpret_cast<const void*>(kernel_of(t, kb, f)), kTiles[t].name, smem_of(t, kb)});
  return images;
}
void check_register_counts() {
  static const std::string problem =
      tma::register_problem(kernel_images({64, 128}), tma_detail::kEntryRegs);
  if (!problem.empty()) throw Error(std::string(kKernel) + ": " + problem);
}

int k_bytes_of(const S8Conv& conv) { return conv.in_stride % 128 == 0 ? 128 : 64; }

DeviceArray upload(const void* host, size_t bytes) {
  DeviceArray array(bytes);
  array.upload(host, bytes);
  return array;
}

}  // namespace

class ConvS8Sparse24TmaImpl {
 public:
  S8Conv conv;
  TmaSparseS8Params base;  // everything but y, m, m_tiles, units
  int kb = 128;
  int sms = 132;
  DeviceArray values, meta, bias, multiplier;
  CUtensorMap w_maps[2];  // BM 128, 256
  const CUtensorMap& w_map(int bm) const { return w_maps[bm == 256]; }
};

bool ConvS8Sparse24Tma::supports(const S8Conv& conv) { return tma_s8_serves(conv); }

bool ConvS8Sparse24Tma::device_supported() { return ConvS8Tma::device_supported(); }

const std::vector<std::string>& ConvS8Sparse24Tma::tile_names() {
  static const std::vector<std::string> names = tma::tile_names_of(kTiles);
  return names;
}

ConvS8Sparse24Tma::ConvS8Sparse24Tma(const S8Conv& conv, const int8_t* weight, const int32_t* bias,
                                     const float* multiplier, const std::string& layer)
    : impl_(std::make_unique<ConvS8Sparse24TmaImpl>()) {
  ConvS8Sparse24TmaImpl& m = *impl_;
  m.conv = conv;
  if (!supports(conv))
    throw Error(layer + ": " + kKernel +
                ": unsupported conv (needs groups 1, dilation 1, channel stride % 64 == 0, "
                "kernel <= 64, stride <= 8, padding within the im2col box)");
  if (!device_supported())
    throw Error(layer + ": " + kKernel +
                " needs a compute capability 9.0 device and the sm_90a build");
  if (weight == nullptr || bias == nullptr || multiplier == nullptr)
    throw Error(layer + ": " + kKernel + ": no weight, bias or multipliers");
  m.kb = k_bytes_of(conv);
  const int taps = conv.kh * conv.kw;
  TmaSparseS8Params& p = m.base;
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
  p.k_tiles = taps * p.c_blocks;
  p.meta_blocks = (conv.out_c + 255) / 256 * 4;
  p.lo = conv.lo;
  p.hi = conv.hi;
  p.float_lo = conv.float_lo;
  p.float_hi = conv.float_hi;
  const DeviceTraits& device = device_traits();
  m.sms = std::max(device.sms, 1);
  for (int t = 0; t < kTileCount; ++t)
    if (device.smem_optin < smem_of(t, m.kb))
      throw Error(layer + ": " + kKernel + ": the device offers too little shared memory");

  // The project's 2:4 format on the int8 values' exact float image: throws naming the layer,
  // output channel, tap and channels.
  const size_t count = size_t(conv.out_c) * conv.in_c * taps;
  const std::vector<float> as_float(weight, weight + count);
  const sparse24::Compressed c = sparse24::compress(
      as_float.data(), sparsity::WeightShape{conv.out_c, conv.in_c, taps}, layer);
  const KernelOrder k = kernel_order(c, conv.out_c, taps, conv.in_stride);
  const int groups_per_row = taps * conv.in_stride / 4;
  const std::vector<uint32_t> packed =
      pack_metadata(k, conv.out_c, groups_per_row, m.kb, p.k_tiles, p.meta_blocks);
  m.values = upload(k.values.data(), k.values.size());
  m.meta = upload(packed.data(), packed.size() * sizeof(uint32_t));
  m.bias = upload(bias, size_t(conv.out_c) * sizeof(int32_t));
  m.multiplier = upload(multiplier, size_t(conv.out_c) * sizeof(float));
  p.meta = static_cast<const uint8_t*>(m.meta.get());
  p.bias = static_cast<const int32_t*>(m.bias.get());
  p.multiplier = static_cast<const float*>(m.multiplier.get());
  if (plan_only()) return;  // a described target: sizes only, no maps, no attributes

  check_register_counts();
  tma::opt_in_smem(kernel_images({m.kb}));
  const size_t k_half = size_t(taps) * conv.in_stride / 2;
  for (int bm : {128, 256})
    tma::encode_weight_map(kKernel, &m.w_maps[bm == 256], CU_TENSOR_MAP_DATA_TYPE_UINT8,
                           m.values.get(), k_half, size_t(conv.out_c), k_half, m.kb / 2, bm,
                           m.kb / 2);
}

ConvS8Sparse24Tma::~ConvS8Sparse24Tma() = default;

ConvS8Sparse24TmaPlan ConvS8Sparse24Tma::plan(int batch, int variant) const {
  const ConvS8Sparse24TmaImpl& m = *impl_;
  tma::check_tile(kKernel, variant, kTileCount);
  const SparseS8Tile& t = kTiles[variant];
  const long long pixels = (long long)std::max(batch, 1) * m.conv.out_h * m.conv.out_w;
  ConvS8Sparse24TmaPlan plan;
  plan.variant = variant;
  plan.name = std::string("tma_sp_s8_") + t.name + "_k" + std::to_string(m.kb) + "_s" +
              std::to_string(stages_of(variant, m.kb));
  plan.units = tma::tile_units(pixels, t.bn, m.conv.out_c, t.bm);
  plan.ctas = tma::persistent_ctas(plan.units, m.sms);
  return plan;
}

ConvS8Sparse24TmaPlan ConvS8Sparse24Tma::plan(int batch) const {
  return plan(batch,
              tma::cheapest_tile(kTiles, impl_->sms, [&](int t) { return plan(batch, t).units; }));
}

ConvS8TmaInput ConvS8Sparse24Tma::encode_input(const void* x, int batch) const {
  const ConvS8Sparse24TmaImpl& m = *impl_;
  ConvS8TmaInput input;
  input.x = x;
  input.batch = batch;
  input.map = tma_s8_input_map(kKernel, m.conv, x, batch, m.kb);  // B here
  return input;
}

void ConvS8Sparse24Tma::forward(int variant, const ConvS8TmaInput& input, void* y,
                                cudaStream_t stream) const {
  const ConvS8Sparse24TmaImpl& m = *impl_;
  const ConvS8Sparse24TmaPlan plan = this->plan(input.batch, variant);
  if (plan.units == 0 || input.batch <= 0) return;
  const SparseS8Tile& t = kTiles[variant];
  TmaSparseS8Params p = m.base;
  p.y = y;
  p.m = int((long long)input.batch * m.conv.out_h * m.conv.out_w);
  p.m_tiles = (m.conv.out_c + t.bm - 1) / t.bm;
  p.units = int(plan.units);
  launch_kernel(kernel_of(variant, m.kb, m.conv.float_output), plan.ctas,
                tma_sparse_s8_detail::kThreads, smem_of(variant, m.kb), stream, input.map,
                m.w_map(t.bm), p);
}

size_t ConvS8Sparse24Tma::weight_bytes() const {
  return impl_->values.bytes() + impl_->meta.bytes() + impl_->bias.bytes() +
         impl_->multiplier.bytes();
}

int ConvS8Sparse24Tma::k_tile_channels() const { return impl_->kb; }

}  // namespace cnnrt::cuda
