// Hopper wgmma implicit-GEMM fp16 convolution: the host side (shape rule, device probe, weight
// upload, the pool-tiling plan, the launch).  The kernel and its design note are in
// wgmma_kernel.cuh; docs/kernels/conv_fp16_wgmma.md has the measurements.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/pool_tiling.h"
#include "kernels/cuda/conv/wgmma.h"
#include "kernels/cuda/conv/wgmma_common.h"
#include "kernels/cuda/conv/wgmma_kernel.cuh"
#include "kernels/cuda/conv/wgmma_pool_plan.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"

namespace cnnrt::cuda {

namespace wgmma_detail {
// Defined here, not in wgmma_kernel.cuh: that header is also compiled into wgmma_s8.cu, and a
// non-template kernel defined in both would be a duplicate symbol at link time.
__global__ void wgmma_probe_kernel(int* has_wgmma) {
#ifdef CNNRT_WGMMA_DEVICE
  *has_wgmma = 1;
#else
  *has_wgmma = 0;
#endif
}
}  // namespace wgmma_detail

using wgmma_detail::WgmmaParams;

class ConvFp16WgmmaImpl {
 public:
  ConvShape shape;
  WgmmaParams base;  // everything but x, y, the batch and (pool) the tiling
  int bn = 128;
  int stages = wgmma_detail::kStages;  // 3 for short-K narrow layers (kShortStages below)
  int sms = 132;                       // SM count of the device at construction
  size_t smem_optin = 0;               // largest dynamic shared memory per CTA
  size_t smem_per_sm = 0;              // shared memory per SM (occupancy)
  // Pool: every feasible tiling (batch independent, built once: plan() is a short loop, and a
  // plan's variant is an index here) and the single-pass reference (fewest CTAs, then smallest
  // conv tile).
  std::vector<WgmmaTiling> tilings;
  int single = -1;
  __half* w = nullptr;
  float* bias = nullptr;
  size_t bytes = 0;
  bool pool() const { return shape.pool.has_value(); }
  ~ConvFp16WgmmaImpl() {
    cudaFree(w);  // destructors never throw; a failed free here leaks at worst
    cudaFree(bias);
  }
};

namespace {

// Row streaming only from 16 k-tiles of 64 (wgmma_pool_plan.h says why).
constexpr int kMinStreamKTiles = 16;

// Fills m.tilings and m.single (constructor).
void enumerate_pool_tilings(ConvFp16WgmmaImpl& m) {
  WgmmaPoolSmem smem;
  smem.single = wgmma_detail::smem_bytes(m.bn, m.stages);
  smem.streamed = [bn = m.bn, stages = m.stages](int stage_rows, int tile_tw) {
    return wgmma_detail::stream_smem_bytes(bn, stages, stage_rows, tile_tw);
  };
  smem.optin = m.smem_optin;
  smem.per_sm = m.smem_per_sm;
  m.tilings = enumerate_wgmma_pool_tilings(m.shape.out_h, m.shape.out_w, m.base.pool,
                                           wgmma_detail::kBM, smem, &m.single, "conv_fp16_wgmma");
}

int choose_pool_tiling(const ConvFp16WgmmaImpl& m, int batch) {
  return choose_wgmma_pool_tiling(m.tilings, m.single, m.shape.out_c / m.bn, m.base.k_tiles,
                                  kMinStreamKTiles, m.sms, batch);
}

std::string kernel_name(const ConvFp16WgmmaImpl& m) {
  return "wgmma_128x" + std::to_string(m.bn) + "x64_s" + std::to_string(m.stages);
}

ConvFp16WgmmaPlan plan_of(const ConvFp16WgmmaImpl& m, int variant, int batch) {
  ConvFp16WgmmaPlan plan;
  plan.variant = variant;
  plan.name = kernel_name(m);
  const long long n_tiles = m.shape.out_c / m.bn;
  if (!m.pool()) {
    const long long m_total = (long long)batch * m.shape.conv_h * m.shape.conv_w;
    plan.ctas = (m_total + wgmma_detail::kBM - 1) / wgmma_detail::kBM * n_tiles;
    return plan;
  }
  const PoolTile& t = m.tilings[variant].tile;
  plan.ctas = (long long)batch * t.tiles_y * t.tiles_x * n_tiles;
  plan.passes = t.passes;
  plan.name += "_pool" + std::to_string(t.tile_ph) + "x" + std::to_string(t.tile_pw);
  if (t.passes > 1)
    plan.name += "_stream" + std::to_string(t.passes) + "x" + std::to_string(t.pass_rows) + "r";
  return plan;
}

// Short K (<= kShortKTiles k-tiles of 64) on a narrow tile (BN <= 64): 3 stages instead of 4.
// Such a layer (AlexNet's space-to-depth conv1: 7 k-tiles) is a CTA that barely reaches a steady
// state — the pipeline's fill and the pooled epilogue are most of its time — so the lever is more
// CTAs per SM to overlap them: 3 stages take BN 64 from 99 to 75 KB (3 per SM instead of 2; 72
// registers fit 3 × 256 threads).
constexpr int kShortStages = 3;
constexpr int kShortKTiles = 8;

// The kernel instance of a layer: BN, stages, fused pool or not, and CLAMP for an activation with
// an upper bound (ReLU6, Clip) — identity / ReLU layers run the instance without the fminf, whose
// cost in this epilogue measured 2% of AlexNet (H100 A/B, issue 7).
template <int BN, int STAGES, bool POOL, bool CLAMP>
constexpr auto kernel_of() {
  return wgmma_detail::conv_wgmma_kernel<BN, STAGES, POOL, CLAMP>;
}
template <int BN, int STAGES = wgmma_detail::kStages>
auto kernel_of(bool pool, bool clamp) {
  if (pool)
    return clamp ? kernel_of<BN, STAGES, true, true>() : kernel_of<BN, STAGES, true, false>();
  return clamp ? kernel_of<BN, STAGES, false, true>() : kernel_of<BN, STAGES, false, false>();
}
auto kernel_of(int bn, int stages, bool pool, bool clamp) {
  if (stages == kShortStages)
    return bn == 64 ? kernel_of<64, kShortStages>(pool, clamp)
                    : kernel_of<32, kShortStages>(pool, clamp);
  return bn == 128   ? kernel_of<128>(pool, clamp)
         : bn == 192 ? kernel_of<192>(pool, clamp)
         : bn == 64  ? kernel_of<64>(pool, clamp)
         : bn == 96  ? kernel_of<96>(pool, clamp)
                     : kernel_of<32>(pool, clamp);
}
// The instance forward() launches: with a residual the staged values are unclamped (p.act off,
// the clamp follows the add in the write-out), so the instance without the fminf serves.
bool upper_clamp(const ConvShape& s) {
  return s.clamps() && s.activation.hi < INFINITY && !s.residual;
}

}  // namespace

bool ConvFp16Wgmma::supports(const ConvShape& s) {
  // The common rule (the ConvFp16 fallback's check also validates the pool attributes: pad <=
  // kernel / 2, non-empty output); one pool window must fit the 128 rows.
  if (!wgmma_conv_shape_ok(s, 32)) return false;
  // The narrow tiles (out_c % 64 != 0: BN 96 / 32) only where K's padding to the 64-wide k-tile
  // is at most K / 8: on EfficientNet-Lite0's 1x1 convs 16 -> 96 (K 16 in a k-tile of 64) and
  // 80 -> 480 (K 80 in 128) they ran 1.65x and 1.12x slower than conv_fp16_igemm at batch 256
  // (H100, docs/PERFORMANCE.md run 22), while the channel-pruned AlexNet's conv1 (K 432 in 448)
  // and conv2 (800 in 832) gain.  Shapes 64 divides keep the rule they were measured under.
  if (s.out_c % 64 != 0) {
    const long long k = (long long)s.conv.kernel_h * s.conv.kernel_w * s.in_c;
    const long long padded = (k + wgmma_detail::kBK - 1) / wgmma_detail::kBK * wgmma_detail::kBK;
    if (8 * padded > 9 * k) return false;
  }
  if (s.pool) {
    const PoolAttrs& pa = *s.pool;
    if (pa.kernel_h * pa.kernel_w > wgmma_detail::kBM || s.out_h <= 0 || s.out_w <= 0) return false;
  }
  return true;
}

bool ConvFp16Wgmma::device_supported() {
  if (plan_only()) return device_traits().wgmma_image;  // a described target: no probe
  static const bool supported = [] {
    int device = 0;
    cudaDeviceProp prop;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
      cudaGetLastError();  // leave no sticky error behind for the caller
      return false;
    }
    if (prop.major != 9 || prop.minor != 0) return false;
    // Which image did the driver load for this fatbinary?  Only the sm_90a one has wgmma.
    int* flag = nullptr;
    int has_wgmma = 0;
    bool ok = cudaMalloc(&flag, sizeof(int)) == cudaSuccess;
    if (ok) {
      wgmma_detail::wgmma_probe_kernel<<<1, 1>>>(flag);
      ok = cudaGetLastError() == cudaSuccess &&
           cudaMemcpy(&has_wgmma, flag, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
      cudaFree(flag);
    }
    cudaGetLastError();
    return ok && has_wgmma == 1;
  }();
  return supported;
}

ConvFp16Wgmma::ConvFp16Wgmma(const ConvShape& shape_in, const float* weight, const float* bias)
    : impl_(std::make_unique<ConvFp16WgmmaImpl>()) {
  ConvFp16WgmmaImpl& m = *impl_;
  m.shape = shape_in;
  m.shape.derive();
  const ConvShape& s = m.shape;
  if (!supports(s))
    throw Error(
        "conv_fp16_wgmma: unsupported shape (needs groups 1, dilation 1, "
        "in_c % 8 == 0, out_c % 32 == 0 (% 64 unless K pads by <= 1/8), a valid pool window of "
        "<= 128 pixels)");
  if (!device_supported())
    throw Error("conv_fp16_wgmma: needs a compute capability 9.0 device and the sm_90a build");
  if (weight == nullptr) throw Error("conv_fp16_wgmma: no weight");
  // 128 where it divides (conv3/conv4, measured); 192 serves out_c = 192 (conv2) in one N tile,
  // so the A gather is done once per pixel instead of three times; else 64; then the narrow
  // tiles for channel counts 64 does not divide (a channel-pruned AlexNet: conv1 at 32, conv2
  // at 96): 96 where it divides (a third of the gathers of 32), else 32.
  m.bn = s.out_c % 128 == 0   ? 128
         : s.out_c % 192 == 0 ? 192
         : s.out_c % 64 == 0  ? 64
         : s.out_c % 96 == 0  ? 96
                              : 32;

  WgmmaParams& p = m.base;
  fill_wgmma_conv_params(s, wgmma_detail::kBK, p);
  if (m.bn <= 64 && p.k_tiles <= kShortKTiles) m.stages = kShortStages;
  p.out_h = s.out_h;
  p.out_w = s.out_w;
  p.pool = pool_window_of(s.pool);
  const DeviceTraits& device = device_traits();  // the GPU's, or a plan target's
  m.sms = std::max(device.sms, 1);
  m.smem_optin = device.smem_optin;
  m.smem_per_sm = device.smem_per_sm;
  if (m.smem_optin < wgmma_detail::smem_bytes(m.bn, m.stages))
    throw Error("conv_fp16_wgmma: the device offers too little shared memory per block");
  if (m.pool()) enumerate_pool_tilings(m);

  m.bytes = upload_wgmma_weights(s, weight, bias, p.w_k, s.out_c, &m.w, &m.bias);
  p.w = m.w;
  p.bias = m.bias;
  // Pool: the row-streaming tilings need up to the device limit; the attribute only permits,
  // occupancy follows the size each launch asks for.
  const size_t limit = m.pool() ? m.smem_optin : wgmma_detail::smem_bytes(m.bn, m.stages);
  if (!plan_only())
    CNNRT_CUDA_CHECK(cudaFuncSetAttribute(kernel_of(m.bn, m.stages, m.pool(), upper_clamp(s)),
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(limit)));
}

ConvFp16Wgmma::~ConvFp16Wgmma() = default;

ConvFp16WgmmaPlan ConvFp16Wgmma::plan(int batch) const {
  const ConvFp16WgmmaImpl& m = *impl_;
  const int b = std::max(batch, 1);
  return plan_of(m, m.pool() ? choose_pool_tiling(m, b) : 0, b);
}

std::optional<ConvFp16WgmmaPlan> ConvFp16Wgmma::plan_pool_block(int batch, int ph, int pw) const {
  const ConvFp16WgmmaImpl& m = *impl_;
  if (!m.pool()) return std::nullopt;
  for (size_t i = 0; i < m.tilings.size(); ++i)
    if (m.tilings[i].tile.tile_ph == ph && m.tilings[i].tile.tile_pw == pw)
      return plan_of(m, int(i), std::max(batch, 1));
  return std::nullopt;  // every feasible block is in the list
}

void ConvFp16Wgmma::forward(int variant, const void* x, void* y, int batch,
                            cudaStream_t stream) const {
  forward(variant, x, nullptr, y, batch, stream);
}

void ConvFp16Wgmma::forward(int variant, const void* x, const void* residual, void* y, int batch,
                            cudaStream_t stream) const {
  const ConvFp16WgmmaImpl& m = *impl_;
  WgmmaParams p = m.base;
  const WgmmaLaunch launch =
      set_wgmma_launch("conv_fp16_wgmma", m.shape, m.tilings, wgmma_detail::kBM,
                       wgmma_detail::smem_bytes(m.bn, m.stages), variant, x, residual, y, batch, p);
  if (launch.grid_x == 0) return;
  const dim3 grid(launch.grid_x, static_cast<unsigned>(m.shape.out_c / m.bn));
  launch_kernel(kernel_of(m.bn, m.stages, m.pool(), upper_clamp(m.shape)), grid,
                wgmma_detail::kThreads, launch.smem, stream, p);
}

size_t ConvFp16Wgmma::weight_bytes() const { return impl_->bytes; }

}  // namespace cnnrt::cuda
