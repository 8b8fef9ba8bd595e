// 2:4 sparse implicit-GEMM fp16 convolution on mma.sp (sm_80+): the host side — shape rule,
// weight compression into the kernel's two arrays, plan and launch.  The kernel and its design
// note (GEMM mapping, tile, metadata layout, shared memory): mma_sparse_kernel.cuh.
//
// Built once per layer: the weight checked 2:4 and compressed by the project's format
// (kernels/cpu/sparse24.h), then laid out in the kernel's K order — (tap, channel) over channels
// padded to 8, each k-tile of 64 dense K one 32-half slice of a row — with rows padded to whole
// 128-channel tiles (zero values, nibble {0, 1}) and the metadata repacked per (channel tile,
// k-tile) in the order the threads read it.  A pooled layer runs staged: the conv into the
// workspace (the pre-pool tensor, [batch, conv_h, conv_w, pad8(out_c)]), then maxpool_fp16.
// Fusing the pool would take igemm's pool tiling (pool_tiling.h) with this kernel's transposed
// staging; not done yet (docs/SPARSITY.md).
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "graph/passes_sparsity.h"
#include "kernels/cpu/sparse24.h"
#include "kernels/cuda/conv/mma_sparse.h"
#include "kernels/cuda/conv/mma_sparse_kernel.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/elementwise_fp16.h"
#include "kernels/cuda/pool_fp16.h"

namespace cnnrt::cuda {

using mma_sp_detail::kBC;
using mma_sp_detail::kBN;
using mma_sp_detail::kKTile;
using mma_sp_detail::kMetaStage;

class ConvFp16Sparse24MmaImpl {
 public:
  ConvShape shape;
  mma_sp_detail::SpConvParams base;  // everything but x, y, residual and the batch
  int channel_tiles = 0;
  int stages = mma_sp_detail::kMaxStages;  // the ring depth the device's shared memory allows
  DeviceArray values, meta, bias;
};

namespace {

constexpr const char* kKernel = "conv_fp16_sparse24_mma";

int ceil_div(long long a, int b) { return int((a + b - 1) / b); }

auto kernel_of(int stages) {
  return stages == mma_sp_detail::kMaxStages
             ? mma_sp_detail::conv_mma_sp_kernel<mma_sp_detail::kMaxStages>
             : mma_sp_detail::conv_mma_sp_kernel<mma_sp_detail::kMinStages>;
}

// The compressed weight in the kernel's two arrays: values [channel_tiles * 128][w_row] (fp32
// here, uploaded as fp16) and the metadata words [channel tiles][k-tiles][kMetaStage].
struct PackedSparse {
  std::vector<float> values;
  std::vector<uint32_t> meta;
};

PackedSparse pack_sparse(const ConvShape& s, const float* weight, int k_tiles, int channel_tiles,
                         const std::string& layer) {
  const int taps = s.conv.kernel_h * s.conv.kernel_w;
  // Throws naming the layer, output channel, tap and channels when the weight is not 2:4.
  const sparse24::Compressed c =
      sparse24::compress(weight, sparsity::WeightShape{s.out_c, s.in_c, taps}, layer);
  const int real_per_tap = c.shape.groups_per_tap();       // ceil(in_c / 4)
  const int groups_per_tap = padded_channels(s.in_c) / 4;  // the kernel's K: channels to 8
  const int groups = k_tiles * (kKTile / 4), w_row = k_tiles * (kKTile / 2);
  const int rows = channel_tiles * kBC;
  PackedSparse out;
  out.values.assign(size_t(rows) * w_row, 0.f);
  // Unused groups (channel padding, the K tail, the rows past out_c): zero values and the valid
  // nibble {0, 1} (two equal indices are undefined on the hardware).
  std::vector<uint8_t> nibble(size_t(rows) * groups, uint8_t(0 | 1 << 2));
  const int real_groups = c.shape.groups_per_row();
  for (int o = 0; o < s.out_c; ++o)
    for (int g = 0; g < real_groups; ++g) {
      const int tap = g / real_per_tap, k_group = tap * groups_per_tap + g % real_per_tap;
      for (int j = 0; j < 2; ++j)
        out.values[size_t(o) * w_row + 2 * k_group + j] =
            c.values[(size_t(o) * real_groups + g) * 2 + j];
      nibble[size_t(o) * groups + k_group] =
          uint8_t(c.meta[size_t(o) * c.meta_words_per_row() + g / 4] >> (4 * (g % 4)) & 0xF);
    }
  // Per thread (design note of mma_sparse_kernel.cuh): bits 0-15 the 4 nibbles of row r,
  // bits 16-31 those of row r + 8.
  auto nibbles16 = [&](int row, int group0) {
    uint32_t v = 0;
    for (int j = 0; j < 4; ++j) v |= uint32_t(nibble[size_t(row) * groups + group0 + j]) << (4 * j);
    return v;
  };
  out.meta.resize(size_t(channel_tiles) * k_tiles * kMetaStage);
  size_t at = 0;
  for (int ct = 0; ct < channel_tiles; ++ct)
    for (int kt = 0; kt < k_tiles; ++kt)
      for (int mtile = 0; mtile < kBC / 16; ++mtile)
        for (int g = 0; g < 8; ++g)             // lane / 4
          for (int half = 0; half < 2; ++half)  // lane % 2: groups 0-3 or 4-7 of the step
            for (int kk = 0; kk < 2; ++kk) {    // the k-tile's two steps of K 32
              const int row = ct * kBC + mtile * 16 + g;
              const int group0 = kt * (kKTile / 4) + 8 * kk + 4 * half;
              out.meta[at++] = nibbles16(row, group0) | nibbles16(row + 8, group0) << 16;
            }
  return out;
}

}  // namespace

bool ConvFp16Sparse24Mma::supports(const ConvShape& s) {
  if (!conv_shape_problem(s).empty() || s.conv.groups != 1) return false;
  // A pool runs staged through maxpool_fp16: never with a residual (a residual layer has no
  // pool), windows whose padding is at most half the window.
  if (s.pool &&
      (s.residual || s.pool->pad_h * 2 > s.pool->kernel_h || s.pool->pad_w * 2 > s.pool->kernel_w))
    return false;
  return true;
}

// sm_80+ with room for the 3-deep ring (every sm_80+ GPU offers a block 99 KB or more).
bool ConvFp16Sparse24Mma::device_supported() {
  const DeviceTraits& device = device_traits();
  return device.cc() >= 80 &&
         device.smem_optin >= mma_sp_detail::smem_bytes(mma_sp_detail::kMinStages);
}

ConvFp16Sparse24Mma::ConvFp16Sparse24Mma(const ConvShape& shape_in, const float* weight,
                                         const float* bias, const std::string& layer)
    : impl_(std::make_unique<ConvFp16Sparse24MmaImpl>()) {
  ConvFp16Sparse24MmaImpl& m = *impl_;
  m.shape = shape_in;
  m.shape.derive();
  const ConvShape& s = m.shape;
  if (!supports(s))
    throw Error(layer + ": " + kKernel +
                ": unsupported shape (needs a valid conv with groups 1; a pool without a "
                "residual, padded by at most half its window)");
  if (!device_supported())
    throw Error(layer + ": " + kKernel + " needs a compute capability 8.0 or later device");
  if (weight == nullptr) throw Error(layer + ": " + kKernel + ": no weight");
  m.stages = device_traits().smem_optin >= mma_sp_detail::smem_bytes(mma_sp_detail::kMaxStages)
                 ? mma_sp_detail::kMaxStages
                 : mma_sp_detail::kMinStages;

  const ConvAttrs& a = s.conv;
  mma_sp_detail::SpConvParams& p = m.base;
  p.in_h = s.in_h;
  p.in_w = s.in_w;
  p.in_c = s.in_c;
  p.in_cs = padded_channels(s.in_c);
  p.conv_h = s.conv_h;
  p.conv_w = s.conv_w;
  p.kh = a.kernel_h;
  p.kw = a.kernel_w;
  p.sh = a.stride_h;
  p.sw = a.stride_w;
  p.ph = a.pad_h;  // top / left; the bottom / right padding only shapes conv_h / conv_w
  p.pw = a.pad_w;
  p.dh = a.dilation_h;
  p.dw = a.dilation_w;
  p.groups = 1;
  p.cpg = s.in_c;
  p.opg = s.out_c;
  p.cpg_chunks = p.in_cs / 8;
  p.k_real = p.kh * p.kw * p.cpg_chunks;  // K in 8-channel chunks (igemm's vector loader)
  p.k_tiles = ceil_div((long long)p.k_real * 8, kKTile);
  p.w_k = p.k_tiles * kKTile;
  p.w_row = p.w_k / 2;
  p.out_c = s.out_c;
  p.out_cs = padded_channels(s.out_c);
  p.n_limit = p.out_cs;  // write the padding channels too (zeros)
  p.act = epilogue_clamp_of(s);
  if (s.residual) {  // the clamp follows the residual add (igemm's rule)
    p.residual_act = p.act;
    p.act = EpilogueClamp{};
  }
  m.channel_tiles = ceil_div(s.out_c, kBC);
  p.w_rows = m.channel_tiles * kBC;

  const PackedSparse packed = pack_sparse(s, weight, p.k_tiles, m.channel_tiles, layer);
  m.values = upload_as_fp16(packed.values);
  m.meta = DeviceArray(packed.meta.size() * sizeof(uint32_t));
  m.meta.upload(packed.meta.data(), m.meta.bytes());
  std::vector<float> b(size_t(p.w_rows), 0.f);
  if (bias != nullptr) std::copy(bias, bias + s.out_c, b.begin());
  m.bias = upload_fp32(b);
  p.w = static_cast<const __half*>(m.values.get());
  p.meta = static_cast<const uint4*>(m.meta.get());
  p.bias = static_cast<const float*>(m.bias.get());
  if (!plan_only())
    CNNRT_CUDA_CHECK(cudaFuncSetAttribute(kernel_of(m.stages),
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(mma_sp_detail::smem_bytes(m.stages))));
}

ConvFp16Sparse24Mma::~ConvFp16Sparse24Mma() = default;

ConvFp16Sparse24MmaPlan ConvFp16Sparse24Mma::plan(int batch) const {
  const ConvFp16Sparse24MmaImpl& m = *impl_;
  const long long b = std::max(batch, 1);
  const long long pixels = b * m.shape.conv_h * m.shape.conv_w;
  ConvFp16Sparse24MmaPlan plan;
  plan.name = "mma_sp_" + std::to_string(kBC) + "x" + std::to_string(kBN) + "x" +
              std::to_string(kKTile) + "_s" + std::to_string(m.stages);
  plan.ctas = (long long)ceil_div(pixels, kBN) * m.channel_tiles;
  if (m.shape.pool) {
    plan.workspace_bytes = size_t(pixels) * size_t(m.base.out_cs) * sizeof(__half);
    plan.name += "+maxpool";
  }
  return plan;
}

void ConvFp16Sparse24Mma::forward(int variant, const void* x, const void* residual, void* y,
                                  int batch, cudaStream_t stream, void* workspace) const {
  const ConvFp16Sparse24MmaImpl& m = *impl_;
  if (variant != 0) throw Error(std::string(kKernel) + ": unknown variant");
  if ((residual != nullptr) != m.shape.residual)
    throw Error(std::string(kKernel) +
                ": a residual must be given exactly when the layer fuses one");
  const bool staged = m.shape.pool.has_value();
  if (staged && workspace == nullptr)
    throw Error(std::string(kKernel) + ": a pooled layer needs its workspace (staged pool)");
  if (batch <= 0) return;
  mma_sp_detail::SpConvParams p = m.base;
  p.x = static_cast<const __half*>(x);
  p.y = static_cast<__half*>(staged ? workspace : y);
  p.residual = static_cast<const __half*>(residual);
  p.batch = batch;
  p.m_total = (long long)batch * m.shape.conv_h * m.shape.conv_w;
  const dim3 grid(static_cast<unsigned>(ceil_div(p.m_total, kBN)),
                  static_cast<unsigned>(m.channel_tiles));
  kernel_of(
      m.stages)<<<grid, mma_sp_detail::kThreads, mma_sp_detail::smem_bytes(m.stages), stream>>>(p);
  CNNRT_CUDA_CHECK_LAUNCH();
  if (staged)
    maxpool_fp16(workspace, y, batch, m.shape.out_c, m.shape.conv_h, m.shape.conv_w, *m.shape.pool,
                 m.shape.out_h, m.shape.out_w, stream);
}

size_t ConvFp16Sparse24Mma::weight_bytes() const {
  return impl_->values.bytes() + impl_->meta.bytes() + impl_->bias.bytes();
}

}  // namespace cnnrt::cuda
