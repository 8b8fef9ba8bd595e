// conv_fp16_sparse24_tma: the 2:4 sparse instance of the TMA conv mainloop — host side (shape
// rule, weight check and compression, metadata packing, tensor maps, tile choice, launch).  The
// kernel is tma_sparse_kernel.cuh; the host code it shares with conv_fp16_tma / conv_int8_tma
// (limits, wave model, map encoding, image checks) is tma_encode.h.
//
// DESIGN NOTE
// * Why: the cp.async sparse conv (conv_fp16_sparse24_wgmma) ran 0.90-1.47x the old dense wgmma
//   conv on AlexNet conv2-conv5 (docs/SPARSITY.md), and the dense TMA conv now runs 2.1-3x that
//   dense kernel, so 2:4 weights only pay on the GPU again if the sparse MMA sits on the same
//   TMA mainloop: this is that instance (issue 9 item 2, issue 11 item 3).
// * Built once per layer: the weight is checked 2:4 and compressed by the project's format
//   (kernels/cpu/sparse24.h: its error names the layer, output channel, tap and channels), whose
//   kept pairs are already in this kernel's K order (tap, channel group; in_c % 64 leaves no
//   padding): the A matrix is [out_c][K / 2] fp16, one tiled map per BM (box 32 halves x BM
//   rows, 64-byte swizzle).  The metadata is repacked in the order the consumer threads read it
//   (tma_sparse_kernel.cuh): [k-tile][m64 block][32 quad rows][t % 2][kk] 32-bit words, 512 bytes
//   per block and k-tile, blocks padded to a multiple of 4 (256 channels) with the valid nibble
//   {0, 1}; each supplying consumer thread copies its words of a k-tile into a private
//   shared-memory slot by cp.async six k-tiles ahead (tma_mainloop.cuh).
//   weight_bytes() = K / 2 halves + K / 16 bytes of metadata (+ padding blocks) per channel +
//   the fp32 bias.
// * Tiles, channels x pixels (BM x BN), 1 CTA per SM: 128x256 (5 stages of 40 KB), 256x128 (6 of
//   32 KB), 128x128 (8 of 24 KB), each + 16 KB of epilogue staging (8 warps x 2 KB) + 7 metadata
//   slots (7 / 14 / 7 KB: tma_mainloop.cuh): 224 / 223 / 216 KB.  BM is 128 or 256 because each
//   consumer warpgroup holds BM / 2 channels in whole m64 blocks; BM x BN / 256 accumulators per
//   consumer thread must stay <= 128 of setmaxnreg's 232 registers (the dense instances' rule), so
//   256x256 does not fit and 128x256 / 256x128 are the largest tiles; 128x128 is for grids that the
//   large tiles leave short of a wave.  out_c 192 (AlexNet conv2) computes 256 channels on either
//   (75 %); 384 (conv3) is three 128-channel tiles; 256 (conv4, conv5) fits both exactly.
// * Default tile (plan(batch)): conv_fp16_tma's wave model, ceil(units / SMs) x 2 BM BN K /
//   (speed x kSmFlops x kSparseGain).  kSparseGain (1.3) is a prediction, not a measurement
//   (docs/kernels/conv_fp16_sparse_tma.md): it only scales estimated_us; the tile choice depends
//   on the speeds (128x128 0.78 as in the dense table, the large tiles 1.0).
// * A fused MaxPool runs staged, as conv_fp16_tma's staged form: the conv into the step's
//   workspace (the pre-pool tensor), then maxpool_fp16; a fused pool would need the staging of
//   both the transpose and the pool windows beside a ring that is already full.
// * supports() refuses every shape the maps cannot describe (ConvFp16Tma's conv rule), so the
//   registry falls back instead of failing at launch; the constructor checks the register count
//   of every image (setmaxnreg: exactly 168 at entry) like the other TMA convs.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "graph/passes_sparsity.h"
#include "kernels/cpu/sparse24.h"
#include "kernels/cuda/conv/tma_encode.h"
#include "kernels/cuda/conv/tma_sparse.h"
#include "kernels/cuda/conv/tma_sparse_kernel.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/elementwise_fp16.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pool_fp16.h"

namespace cnnrt::cuda {

namespace {

using tma_sparse_detail::TmaSparseEpilogue;
using tma_sparse_detail::TmaSparseF16;
using tma_sparse_detail::TmaSparseParams;

constexpr const char* kKernel = "conv_fp16_sparse24_tma";

struct SparseTile {
  int bm, bn, stages;  // output channels, output pixels, ring stages
  double speed;        // relative per-tile throughput (design note)
  const char* name;
};
constexpr SparseTile kTiles[] = {
    {128, 256, 5, 1.0, "128x256"},
    {256, 128, 6, 1.0, "256x128"},
    {128, 128, 8, 0.78, "128x128"},
};
constexpr int kTileCount = sizeof(kTiles) / sizeof(kTiles[0]);
// Predicted sparse / dense throughput of a tile at equal shape (the design note's guess; it
// scales estimated_us only).  Measured on the H100 (docs/PERFORMANCE.md run 37b): 1.18-1.24 on
// AlexNet conv3/conv4 at batch 256, model / measured 0.78-1.06 over every tile and layer.
constexpr double kSparseGain = 1.3;
constexpr int kMetaBlockBytes = TmaSparseF16::kMetaBlockBytes;

template <int T>
constexpr size_t smem_of_tile() {
  constexpr SparseTile t = kTiles[T];
  constexpr size_t kStaging = TmaSparseEpilogue<t.bm, t.bn, false>::kStaging;
  return tma_detail::TmaRing<TmaSparseF16, t.bm, t.bn, t.stages, kStaging>::kSmem + kStaging;
}
// 227 KB of opt-in shared memory on an H100, of which the kernel's static part (the barriers,
// padded to the 1024-byte alignment of the dynamic part) takes 2 KB (cuobjdump -res-usage:
// SHARED 2048); the metadata slots take what is left up to there (tma_mainloop.cuh).
constexpr size_t kSmemBudget = 227 * 1024 - 2048;
static_assert(smem_of_tile<0>() <= kSmemBudget && smem_of_tile<1>() <= kSmemBudget &&
                  smem_of_tile<2>() <= kSmemBudget,
              "every tile's ring and staging fit beside the static shared memory");
size_t smem_of(int tile) {
  return tile == 0 ? smem_of_tile<0>() : tile == 1 ? smem_of_tile<1>() : smem_of_tile<2>();
}

using KernelFn = void (*)(CUtensorMap, CUtensorMap, TmaSparseParams);
template <int T, bool RES>
KernelFn kernel_instance() {
  constexpr SparseTile t = kTiles[T];
  return tma_sparse_detail::conv_tma_sparse_kernel<t.bm, t.bn, t.stages, RES>;
}
KernelFn kernel_of(int tile, bool residual) {
  switch (tile) {
    case 0:
      return residual ? kernel_instance<0, true>() : kernel_instance<0, false>();
    case 1:
      return residual ? kernel_instance<1, true>() : kernel_instance<1, false>();
    default:
      return residual ? kernel_instance<2, true>() : kernel_instance<2, false>();
  }
}

// Every instance: each tile plain and with a residual.
std::vector<tma::KernelImage> kernel_images() {
  std::vector<tma::KernelImage> images;
  for (int t = 0; t < kTileCount; ++t)
    for (bool residual : {false, true})
      images.push_back(
          {reinterpret_cast<const void*>(kernel_of(t, residual)), kTiles[t].name, smem_of(t)});
  return images;
}
void check_register_counts() {
  static const std::string problem = tma::register_problem(kernel_images(), tma_detail::kEntryRegs);
  if (!problem.empty()) throw Error(std::string(kKernel) + ": " + problem);
}

// The metadata in the consumer threads' order (design note and tma_sparse_kernel.cuh): word
// [kt][block][quad_row][half][kk] = bits 0-15 the nibbles of row block * 64 + 16 (quad_row / 8) +
// quad_row % 8, groups 16 kt + 8 kk + 4 half .. +3 (group j at bits 4j), bits 16-31 row + 8.
// Rows past out_c (the padding blocks) hold the valid nibble {0, 1}.
std::vector<uint32_t> pack_metadata(const sparse24::Compressed& c, int out_c, int k_tiles,
                                    int blocks) {
  const int words = c.meta_words_per_row();
  auto nibble = [&](int row, int group) -> uint32_t {
    if (row >= out_c) return 0x4;  // first index 0, second 1
    return uint32_t(c.meta[size_t(row) * words + group / 4] >> (4 * (group % 4))) & 0xFu;
  };
  auto nibbles16 = [&](int row, int group0) {
    uint32_t v = 0;
    for (int j = 0; j < 4; ++j) v |= nibble(row, group0 + j) << (4 * j);
    return v;
  };
  std::vector<uint32_t> out(size_t(k_tiles) * blocks * (kMetaBlockBytes / 4));
  size_t at = 0;
  for (int kt = 0; kt < k_tiles; ++kt)
    for (int b = 0; b < blocks; ++b)
      for (int quad_row = 0; quad_row < 32; ++quad_row)  // warp * 8 + lane / 4
        for (int half = 0; half < 2; ++half)             // lane % 2: groups 0-3 or 4-7
          for (int kk = 0; kk < 2; ++kk) {               // the k-tile's two k32 instructions
            const int row = b * 64 + (quad_row / 8) * 16 + quad_row % 8;
            const int group0 = kt * 16 + 8 * kk + 4 * half;
            out[at++] = nibbles16(row, group0) | nibbles16(row + 8, group0) << 16;
          }
  return out;
}

// Modelled seconds of `units` tiles of `t` for shape `s`: waves x tile time.
double modelled_seconds(const ConvShape& s, const SparseTile& t, long long units, int sms) {
  const double k = double(s.conv.kernel_h) * s.conv.kernel_w * s.in_c;
  return tma::waves(units, sms) * 2.0 * t.bm * t.bn * k / (t.speed * tma::kSmFlops * kSparseGain);
}

}  // namespace

class ConvFp16Sparse24TmaImpl {
 public:
  ConvShape shape;
  TmaSparseParams base;  // everything but y, residual, m and the grid
  int sms = 132;
  DeviceArray values, meta, bias;
  CUtensorMap w_maps[2];  // BM 128, 256
  const CUtensorMap& w_map(int bm) const { return w_maps[bm == 256]; }
};

bool ConvFp16Sparse24Tma::supports(const ConvShape& s) {
  if (!conv_shape_problem(s).empty()) return false;
  // The conv alone is conv_fp16_tma's rule (what the maps can describe); a pool runs staged:
  // never with a residual, and windows the unfused pool serves (pad at most half the window).
  ConvShape conv = s;
  conv.pool.reset();
  // ... with 64-channel k-tiles only: conv_fp16_tma's 64-byte rows (in_c % 64 == 32) have no
  // sparse instance (its A rows are 32 kept halves of a 64-K k-tile).
  if (!ConvFp16Tma::supports(conv) || s.in_c % 64 != 0) return false;
  if (s.pool &&
      (s.residual || s.pool->pad_h * 2 > s.pool->kernel_h || s.pool->pad_w * 2 > s.pool->kernel_w))
    return false;
  return true;
}

bool ConvFp16Sparse24Tma::device_supported() { return ConvFp16Tma::device_supported(); }

const std::vector<std::string>& ConvFp16Sparse24Tma::tile_names() {
  static const std::vector<std::string> names = tma::tile_names_of(kTiles);
  return names;
}

ConvFp16Sparse24Tma::ConvFp16Sparse24Tma(const ConvShape& shape_in, const float* weight,
                                         const float* bias, const std::string& layer)
    : impl_(std::make_unique<ConvFp16Sparse24TmaImpl>()) {
  ConvFp16Sparse24TmaImpl& m = *impl_;
  m.shape = shape_in;
  m.shape.derive();
  const ConvShape& s = m.shape;
  if (!supports(s))
    throw Error(layer + ": " + kKernel +
                ": unsupported shape (needs groups 1, dilation 1, in_c % 64 == 0, out_c % 8 == 0, "
                "kernel <= 64, stride <= 8, padding within the im2col box, no residual with a "
                "pool)");
  if (!device_supported())
    throw Error(layer + ": " + kKernel +
                " needs a compute capability 9.0 device and the sm_90a build");
  if (weight == nullptr) throw Error(layer + ": " + kKernel + ": no weight");
  const int taps = s.conv.kernel_h * s.conv.kernel_w, k = taps * s.in_c;
  TmaSparseParams& p = m.base;
  fill_tma_conv_geometry(s, TmaSparseF16::kTileElems, p);
  p.meta_blocks = (s.out_c + 255) / 256 * 4;
  const DeviceTraits& device = device_traits();
  m.sms = std::max(device.sms, 1);
  for (int t = 0; t < kTileCount; ++t)
    if (device.smem_optin < smem_of(t))
      throw Error(layer + ": " + kKernel + ": the device offers too little shared memory");

  // The project's 2:4 format: throws naming the layer, output channel, tap and channels.
  const sparse24::Compressed c =
      sparse24::compress(weight, sparsity::WeightShape{s.out_c, s.in_c, taps}, layer);
  if (c.values.size() != size_t(s.out_c) * (k / 2))
    throw Error(layer + ": " + kKernel + ": unexpected compressed size");
  m.values = upload_as_fp16(c.values);
  const std::vector<uint32_t> packed = pack_metadata(c, s.out_c, p.k_tiles, p.meta_blocks);
  m.meta = DeviceArray(packed.size() * sizeof(uint32_t));
  m.meta.upload(packed.data(), m.meta.bytes());
  std::vector<float> b(s.out_c, 0.f);
  if (bias != nullptr) std::copy(bias, bias + s.out_c, b.begin());
  m.bias = upload_fp32(b);
  p.meta = static_cast<const uint8_t*>(m.meta.get());
  p.bias = static_cast<const float*>(m.bias.get());
  if (plan_only()) return;  // a described target: sizes only, no maps, no attributes

  check_register_counts();
  tma::opt_in_smem(kernel_images());
  for (int bm : {128, 256})
    tma::encode_weight_map(kKernel, &m.w_maps[bm == 256], CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                           m.values.get(), size_t(k / 2), size_t(s.out_c),
                           size_t(k / 2) * sizeof(__half), TmaSparseF16::kWeightTileElems, bm,
                           TmaSparseF16::kARowBytes);
}

ConvFp16Sparse24Tma::~ConvFp16Sparse24Tma() = default;

ConvFp16Sparse24TmaPlan ConvFp16Sparse24Tma::plan(int batch, int variant) const {
  const ConvFp16Sparse24TmaImpl& m = *impl_;
  tma::check_tile(kKernel, variant, kTileCount);
  const SparseTile& t = kTiles[variant];
  const size_t b = size_t(std::max(batch, 1)), c = size_t(m.shape.out_c);
  const long long pixels = (long long)b * m.shape.conv_h * m.shape.conv_w;
  ConvFp16Sparse24TmaPlan plan;
  plan.variant = variant;
  plan.name = std::string("tma_sp_") + t.name + "_s" + std::to_string(t.stages);
  plan.units = tma::tile_units(pixels, t.bn, m.shape.out_c, t.bm);
  plan.ctas = tma::persistent_ctas(plan.units, m.sms);
  plan.estimated_us = 1e6 * modelled_seconds(m.shape, t, plan.units, m.sms);
  if (m.shape.pool) {  // staged: the pre-pool tensor, then the pool pass
    plan.staged = true;
    plan.workspace_bytes = size_t(pixels) * c * sizeof(__half);
    const size_t pooled_bytes = b * m.shape.out_h * m.shape.out_w * c * sizeof(__half);
    plan.estimated_us += 1e6 * tma::staged_pool_seconds(plan.workspace_bytes, pooled_bytes);
    plan.name += "+maxpool";
  }
  return plan;
}

ConvFp16Sparse24TmaPlan ConvFp16Sparse24Tma::plan(int batch) const {
  ConvFp16Sparse24TmaPlan best = plan(batch, 0);
  for (int t = 1; t < kTileCount; ++t) {
    const ConvFp16Sparse24TmaPlan p = plan(batch, t);
    if (p.estimated_us < best.estimated_us) best = p;
  }
  return best;
}

ConvFp16TmaInput ConvFp16Sparse24Tma::encode_input(const void* x, int batch) const {
  // conv_fp16_tma's map: boxes of 128 pixels x 64 channels, 128-byte swizzle (the B operand here).
  return encode_fp16_im2col(kKernel, impl_->shape, impl_->shape.in_c, TmaSparseF16::kTileElems,
                            TmaSparseF16::kRowBytes, x, batch);
}

void ConvFp16Sparse24Tma::forward(int variant, const ConvFp16TmaInput& input, const void* residual,
                                  void* y, cudaStream_t stream, void* workspace) const {
  const ConvFp16Sparse24TmaImpl& m = *impl_;
  if ((residual != nullptr) != m.shape.residual)
    throw Error(std::string(kKernel) +
                ": a residual must be given exactly when the layer fuses one");
  tma::check_tile(kKernel, variant, kTileCount);
  const bool staged = m.shape.pool.has_value();
  if (staged && workspace == nullptr)
    throw Error(std::string(kKernel) + ": a pooled layer needs its workspace (staged pool)");
  const SparseTile& t = kTiles[variant];
  const int batch = std::max(input.batch, 1);
  TmaSparseParams p = m.base;
  p.m = int((long long)batch * m.shape.conv_h * m.shape.conv_w);
  p.m_tiles = (m.shape.out_c + t.bm - 1) / t.bm;
  const long long units = tma::tile_units(p.m, t.bn, m.shape.out_c, t.bm);
  if (units == 0) return;
  p.units = int(units);
  p.y = static_cast<__half*>(staged ? workspace : y);
  p.residual = static_cast<const __half*>(residual);
  const int ctas = tma::persistent_ctas(units, m.sms);
  launch_kernel(kernel_of(variant, residual != nullptr), ctas, tma_sparse_detail::kThreads,
                smem_of(variant), stream, input.map, m.w_map(t.bm), p);
  if (staged)
    maxpool_fp16(workspace, y, batch, m.shape.out_c, m.shape.conv_h, m.shape.conv_w, *m.shape.pool,
                 m.shape.out_h, m.shape.out_w, stream);
}

size_t ConvFp16Sparse24Tma::weight_bytes() const {
  return impl_->values.bytes() + impl_->meta.bytes() + impl_->bias.bytes();
}

}  // namespace cnnrt::cuda
