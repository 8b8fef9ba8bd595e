// 2:4 sparse implicit-GEMM fp16 convolution on mma.sp (sm_80+): the host side — shape rule,
// weight compression into the kernel's two arrays, plan and launch.  The kernel and its design
// note (GEMM mapping, tile, metadata layout, shared memory): mma_sparse_kernel.cuh.
//
// Built once per layer: the weight checked 2:4, compressed and packed (mma_sparse_pack.cpp: the
// kernel's K order, rows padded to whole 128-channel tiles, the metadata in the order the
// threads read it) and uploaded.  A pooled layer runs staged: the conv into the workspace (the
// pre-pool tensor, [batch, conv_h, conv_w, pad8(out_c)]), then maxpool_fp16.
// Fusing the pool would take igemm's pool tiling (pool_tiling.h) with this kernel's transposed
// staging; not done yet (docs/SPARSITY.md).
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/mma_sparse.h"
#include "kernels/cuda/conv/mma_sparse_kernel.cuh"
#include "kernels/cuda/conv/mma_sparse_pack.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/elementwise_fp16.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pool_fp16.h"

namespace cnnrt::cuda {

using mma_sp_detail::kBC;
using mma_sp_detail::kBN;
using mma_sp_detail::kKTile;

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
  fill_conv_window(s, p);
  p.in_cs = padded_channels(s.in_c);
  p.dh = a.dilation_h;
  p.dw = a.dilation_w;
  p.groups = 1;
  p.cpg = s.in_c;
  p.opg = s.out_c;
  p.cpg_chunks = p.in_cs / 8;
  p.k_real = p.kh * p.kw * p.cpg_chunks;  // K in 8-channel chunks (igemm's vector loader)
  p.k_tiles = mma_sp_detail::k_tiles_of(s);
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
  m.channel_tiles = mma_sp_detail::channel_tiles_of(s);
  p.w_rows = m.channel_tiles * kBC;

  const mma_sp_detail::MmaSpWeights packed = mma_sp_detail::pack_mma_sp_weights(s, weight, layer);
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
  launch_kernel(kernel_of(m.stages), grid, mma_sp_detail::kThreads,
                mma_sp_detail::smem_bytes(m.stages), stream, p);
  if (staged)
    maxpool_fp16(workspace, y, batch, m.shape.out_c, m.shape.conv_h, m.shape.conv_w, *m.shape.pool,
                 m.shape.out_h, m.shape.out_w, stream);
}

size_t ConvFp16Sparse24Mma::weight_bytes() const {
  return impl_->values.bytes() + impl_->meta.bytes() + impl_->bias.bytes();
}

}  // namespace cnnrt::cuda
