// The mma.sync conv's kernels and their host glue: the tile-config table (each config's kernel
// instances), shape validation and weight prepacking at construction, the launch table's
// occupancies, and the launches themselves (forward runs the planned launch, nothing else).
// The kernels live in igemm_kernel.cuh (tensor cores), igemm_finish.cuh (second kernel of the
// workspace variants) and direct.cuh (fallback); the planner in igemm_plan.cpp;
// docs/kernels/conv_fp16.md explains the design.
//
// Paths, fixed at construction from the shape:
//   igemm         groups == 1 with C > 4, or groups > 1 with C/groups and OC/groups multiples of 8
//   igemm_gather  groups == 1 with C <= 4 (AlexNet conv1): K over the real channels
//   direct        everything else (depthwise, odd grouped convs)
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/direct.cuh"
#include "kernels/cuda/conv/igemm_finish.cuh"
#include "kernels/cuda/conv/igemm_impl.h"
#include "kernels/cuda/conv/igemm_kernel.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise_fp16.h"
#include "kernels/cuda/launch.h"

namespace cnnrt::cuda {

using conv_detail::ConvParams;
using namespace igemm_host;

namespace {

using KernelFn = void (*)(ConvParams);

// `if constexpr`, not a ?: -- taking the address in a discarded ?: branch still instantiates.
template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, bool POOL, bool ENABLED>
KernelFn gather_kernel() {
  if constexpr (ENABLED)
    return &conv_detail::conv_igemm_kernel<BM, BN, WARPS_M, WARPS_N, STAGES, true, POOL>;
  else
    return nullptr;
}

struct ConfigEntry {
  TileConfig info;
  KernelFn fn[2][2];  // [gather][pool]
};

// WITH_GATHER = false leaves the few-channel instances out (nullptr): large tiles are for deep
// layers, and every instance costs CI compile time for three archs.
template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, bool WITH_GATHER = true,
          int BK = conv_detail::kBK>
ConfigEntry make_config(double efficiency, double latency_us, const char* name) {
  using conv_detail::conv_igemm_kernel;
  static_assert(BK == conv_detail::kBK || !WITH_GATHER, "the gather loader is BK 32 only");
  return {{BM, BN, WARPS_M * WARPS_N * 32, STAGES, BK, efficiency, latency_us, name, WITH_GATHER},
          {{&conv_igemm_kernel<BM, BN, WARPS_M, WARPS_N, STAGES, false, false, BK>,
            &conv_igemm_kernel<BM, BN, WARPS_M, WARPS_N, STAGES, false, true, BK>},
           {gather_kernel<BM, BN, WARPS_M, WARPS_N, STAGES, false, WITH_GATHER>(),
            gather_kernel<BM, BN, WARPS_M, WARPS_N, STAGES, true, WITH_GATHER>()}}};
}

const ConfigEntry* config_entries(int* count) {
  static const ConfigEntry configs[] = {
      // efficiency / latency refitted to the second H200 conv_lab run (docs: "Round 3"):
      // efficiency from conv3/conv4 at batch 256 (throughput bound), latency = the marginal
      // time per k-tile of a lone CTA at batch 1 (conv4 minus conv3, 54 k-tiles apart).
      make_config<128, 128, 2, 4, 3>(1.15, 0.63, "128x128"),  // 8 warps, warp tile 64x32
      make_config<128, 64, 2, 2, 4>(0.90, 0.64, "128x64"),    // 4 warps, warp tile 64x32
      make_config<64, 64, 2, 2, 4>(0.77, 0.37, "64x64"),      // 4 warps, warp tile 32x32
      // 8 warps, warp tile 64x64, 1 CTA/SM (255 registers), 4 stages.
      make_config<256, 128, 4, 2, 4, false>(1.17, 1.10, "256x128"),
      // 4 warps, warp tile 64x48: N = 96 divides 192 (conv2) and 384 (conv3), where 128-wide
      // tiles waste 25% / 0%.  64x48 reads 112 smem rows per 48 MMA columns (64x32: 96 per 32),
      // 3 CTAs/SM (170 registers).  Efficiency / latency are estimates between 128x64 and
      // 128x128 until measured.
      make_config<128, 96, 2, 2, 4, false>(1.0, 0.64, "128x96"),
      // 128x128 with BK = 64: half the barriers / commits / waits per MMA; 144-byte smem rows,
      // 3 stages = 112 KB -> 2 CTAs/SM (same as BK 32, which is register-bound at 2).  Vector
      // loader only.  Estimate: +5% efficiency, a k-tile (twice the K) takes ~1.6x as long alone.
      make_config<128, 128, 2, 4, 3, false, 64>(1.2, 1.0, "128x128 bk64"),
  };
  *count = int(sizeof(configs) / sizeof(configs[0]));
  return configs;
}

KernelFn kernel_of(int config, bool gather, bool pool) {
  int count = 0;
  return config_entries(&count)[config].fn[gather ? 1 : 0][pool ? 1 : 0];
}

constexpr int kDirectThreads = 256;
constexpr int kFlatFinishThreads = 256;  // conv_finish_kernel (unfused pool)

Path choose_path(const ConvShape& s) {
  const int groups = s.conv.groups;
  if (groups == 1) return s.in_c <= 4 ? Path::IgemmGather : Path::Igemm;
  const int cpg = s.in_c / groups, opg = s.out_c / groups;
  return (cpg % 8 == 0 && opg % 8 == 0) ? Path::Igemm : Path::Direct;
}

template <typename T>
T* upload(const std::vector<T>& host) {
  T* device = nullptr;
  if (plan_only()) return device;  // planning for a described target: sizes only
  CNNRT_CUDA_CHECK(cudaMalloc(&device, host.size() * sizeof(T)));
  CNNRT_CUDA_CHECK(
      cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return device;
}

// Everything but pointers, batch and tiling.
ConvParams base_params(const ConvShape& s, Path path) {
  const ConvAttrs& a = s.conv;
  ConvParams p;
  fill_conv_window(s, p);
  p.in_cs = padded_channels(s.in_c);
  p.dh = a.dilation_h;
  p.dw = a.dilation_w;
  p.groups = a.groups;
  p.cpg = s.in_c / a.groups;
  p.opg = s.out_c / a.groups;
  p.cpg_chunks = (p.cpg + 7) / 8;
  p.out_c = s.out_c;
  p.out_cs = padded_channels(s.out_c);
  p.act = epilogue_clamp_of(s);
  if (s.residual) {  // the clamp follows the residual add (forward sets p.residual)
    p.residual_act = p.act;
    p.act = EpilogueClamp{};
  }
  p.pool = pool_window_of(s.pool);
  p.out_h = s.out_h;
  p.out_w = s.out_w;
  if (path == Path::IgemmGather) {
    p.k_real = p.kh * p.kw * s.in_c;
    p.k_tiles = ceil_div(p.k_real, conv_detail::kBK);
  } else {
    p.k_real = p.kh * p.kw * p.cpg_chunks;
    p.k_tiles = ceil_div((long long)p.k_real * 8, conv_detail::kBK);
  }
  // Packed K padded to the largest BK, so every config's last k-tile reads real zeros.
  p.w_k = ceil_div(p.k_tiles, conv_detail::kMaxBK / conv_detail::kBK) * conv_detail::kMaxBK;
  p.n_limit = a.groups == 1 ? p.out_cs : p.opg;
  // Rows per group: every config's last N tile reads BN whole rows (no guard), and BN is not
  // always a divisor of 128 (96), so pad to the largest n_tiles * BN over the configs.
  p.w_rows = ceil_div(p.n_limit, conv_detail::kWeightRowAlign) * conv_detail::kWeightRowAlign;
  int count = 0;
  const TileConfig* configs = tile_configs(&count);
  for (int i = 0; i < count; ++i)
    p.w_rows = std::max(p.w_rows, ceil_div(p.n_limit, configs[i].bn) * configs[i].bn);
  return p;
}

// Without a device (plan_only) the occupancy is estimated: the described target's shared memory
// per SM (1 KB per block is the driver's since sm_80) and its 2048 threads, and the registers
// at the cap __launch_bounds__ gives ptxas (igemm_min_blocks CTAs per SM; the real count is the
// kernel image's, readable only through a device).  The true occupancy lies between that and
// the shared-memory/thread bound alone; on sm_90 the cap is exact for every config but the
// 64x64 ones (docs/kernels/conv_fp16.md's ptxas table), and the zoo's AlexNet, ResNet-50 and
// EfficientNet-Lite0 plans at batch 1/64/256 were the same at both ends, for h100 and a100.
// scripts/plan_target_check.sh compares the outcome with a GPU's own plan.
int estimated_occupancy(const TileConfig& cfg, size_t smem) {
  const DeviceTraits& t = device_traits();
  const size_t by_smem = t.smem_per_sm / (smem + (t.cc_major >= 8 ? 1024 : 0));
  const int warps = cfg.threads / 32;
  // The warp grid's split does not matter: igemm_min_blocks reads the warp tile's area.
  const int by_registers = conv_detail::igemm_min_blocks(cfg.bm, cfg.bn, warps, 1);
  return static_cast<int>(
      std::min<size_t>({by_smem, size_t(2048 / cfg.threads), size_t(by_registers)}));
}

// Occupancy of each candidate at its shared memory; candidates that cannot run are dropped.
void set_occupancy(std::vector<Candidate>& list, size_t first, KernelFn fn, const TileConfig& cfg) {
  for (size_t j = first; j < list.size();) {
    Candidate& c = list[j];
    if (plan_only())
      c.occupancy = estimated_occupancy(cfg, c.smem);
    else
      CNNRT_CUDA_CHECK(
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&c.occupancy, fn, cfg.threads, c.smem));
    if (c.occupancy <= 0)
      list.erase(list.begin() + j);
    else
      ++j;
  }
}

// The flat and (pool layers) fused candidates of every config instantiated for the loader.
void build_candidates(ConvFp16Impl& m, size_t smem_optin) {
  int count = 0;
  const TileConfig* configs = tile_configs(&count);
  for (int i = 0; i < count; ++i) {
    const TileConfig& cfg = configs[i];
    const KernelFn flat_fn = kernel_of(i, m.gather(), false);
    const KernelFn pool_fn = kernel_of(i, m.gather(), true);
    if (!flat_fn || !pool_fn) continue;  // config not instantiated for this loader
    // Always the device maximum: the attribute is per function and process-wide, so every
    // instance sets the same value and none can shrink another's limit.
    for (const KernelFn fn : {flat_fn, pool_fn})
      if (!plan_only())
        CNNRT_CUDA_CHECK(
            cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_optin)));
    Candidate c;
    c.config = i;
    c.smem = conv_detail::igemm_smem_bytes(cfg.bm, cfg.bn, cfg.stages, 1, cfg.bk);
    const size_t first_flat = m.flat.size();
    if (c.smem <= smem_optin) m.flat.push_back(c);
    set_occupancy(m.flat, first_flat, flat_fn, cfg);
    if (m.pool()) {
      const size_t first = m.candidates.size();
      m.add_pool_candidates(i, cfg, smem_optin);
      set_occupancy(m.candidates, first, pool_fn, cfg);
    }
  }
  if (!m.pool()) m.candidates = m.flat;
  if (m.candidates.empty()) {  // e.g. a device with tiny shared memory
    m.path = Path::Direct;
    m.flat.clear();
  }
}

}  // namespace

namespace igemm_host {

const TileConfig* tile_configs(int* count) {
  static const std::vector<TileConfig> infos = [] {
    int n = 0;
    const ConfigEntry* entries = config_entries(&n);
    std::vector<TileConfig> out;
    for (int i = 0; i < n; ++i) out.push_back(entries[i].info);
    return out;
  }();
  *count = int(infos.size());
  return infos.data();
}

}  // namespace igemm_host

ConvFp16Impl::~ConvFp16Impl() {
  // Destructors must not throw: errors from cudaFree are ignored on purpose.
  cudaFree(w_igemm);
  cudaFree(b_igemm);
  cudaFree(w_direct);
  cudaFree(b_direct);
}

void ConvFp16Impl::pack_igemm(const float* weight, const float* bias) {
  const int groups = base.groups, cpg = base.cpg, opg = base.opg;
  const int kh = base.kh, kw = base.kw;
  // Packed in fp32, converted on the GPU (upload_as_fp16: the host conversion was a large part
  // of the build time, issue 7).
  std::vector<float> w(size_t(groups) * base.w_rows * base.w_k, 0.f);
  std::vector<float> b(size_t(groups) * base.w_rows, 0.f);
  for (int g = 0; g < groups; ++g)
    for (int j = 0; j < opg; ++j) {
      const int oc = g * opg + j;
      if (bias) b[size_t(g) * base.w_rows + j] = bias[oc];
      for (int ci = 0; ci < cpg; ++ci)
        for (int ky = 0; ky < kh; ++ky)
          for (int kx = 0; kx < kw; ++kx) {
            const int tap = ky * kw + kx;
            const int col = gather() ? tap * shape.in_c + ci : tap * base.cpg_chunks * 8 + ci;
            w[(size_t(g) * base.w_rows + j) * base.w_k + col] =
                weight[((size_t(oc) * cpg + ci) * kh + ky) * kw + kx];
          }
    }
  w_igemm = static_cast<__half*>(upload_as_fp16(w).release());
  b_igemm = upload(b);
  bytes += w.size() * sizeof(__half) + b.size() * sizeof(float);
}

void ConvFp16Impl::pack_direct(const float* weight, const float* bias) {
  const int cpg = base.cpg, kh = base.kh, kw = base.kw;
  std::vector<float> w(size_t(shape.out_c) * kh * kw * cpg);
  std::vector<float> b(shape.out_c, 0.f);
  for (int oc = 0; oc < shape.out_c; ++oc) {
    if (bias) b[oc] = bias[oc];
    for (int ci = 0; ci < cpg; ++ci)
      for (int ky = 0; ky < kh; ++ky)
        for (int kx = 0; kx < kw; ++kx)
          w[((size_t(oc) * kh + ky) * kw + kx) * cpg + ci] =
              weight[((size_t(oc) * cpg + ci) * kh + ky) * kw + kx];
  }
  w_direct = static_cast<__half*>(upload_as_fp16(w).release());
  b_direct = upload(b);
  bytes += w.size() * sizeof(__half) + b.size() * sizeof(float);
}

// Launches the igemm kernel.  fused: the candidate's own kernel (pool or not) writing y;
// otherwise the flat (non-pool) kernel with y = the workspace (unfused) or, when split_k > 0,
// fp32 partials into `partial` over grid.z = splits.
void ConvFp16Impl::launch_igemm(const Candidate& c, bool fused, const void* x, void* y, int batch,
                                cudaStream_t stream, int splits, int split_k, float* partial,
                                const void* residual) const {
  const TileConfig& cfg = config(c);
  const bool pool_kernel = fused && pool();
  ConvParams p = base;
  p.x = static_cast<const __half*>(x);
  p.residual = static_cast<const __half*>(residual);
  p.y = static_cast<__half*>(y);
  p.w = w_igemm;
  p.bias = b_igemm;
  p.batch = batch;
  p.n_tiles = ceil_div(p.n_limit, cfg.bn);
  p.k_tiles = k_tiles_of(cfg);
  p.m_total = m_total(batch);
  p.tile = c.tile;
  p.split_k = split_k;
  p.partial = partial;
  const long long grid_x = m_ctas(c, batch, fused);
  const long long grid_y = (long long)p.n_tiles * p.groups;
  if (grid_x >= (1LL << 31) || grid_y > 65535 || splits > 65535)
    throw Error("conv_fp16: batch " + std::to_string(batch) + " exceeds the launch grid");
  launch_kernel(kernel_of(c.config, gather(), pool_kernel),
                dim3(unsigned(grid_x), unsigned(grid_y), unsigned(splits)), cfg.threads, c.smem,
                stream, p);
}

// Second kernel of the workspace variants: y = pool(finish(workspace)).
void ConvFp16Impl::launch_finish(bool fp32, const void* ws, int splits, void* y, int batch,
                                 cudaStream_t stream, const void* residual) const {
  ConvParams p = base;
  p.residual = static_cast<const __half*>(residual);
  p.y = static_cast<__half*>(y);
  p.bias = b_igemm;
  p.batch = batch;
  p.m_total = m_total(batch);
  if (fp32 && finish_tiled) {
    p.tile = finish;
    const long long grid_x = (long long)batch * finish.tiles_y * finish.tiles_x;
    const int grid_y = ceil_div(p.out_cs, 8 * conv_detail::kFinishChunks);
    if (grid_x >= (1LL << 31))
      throw Error("conv_fp16: batch " + std::to_string(batch) + " exceeds the launch grid");
    launch_kernel(conv_detail::conv_splitk_finish_kernel, dim3(unsigned(grid_x), unsigned(grid_y)),
                  conv_detail::kFinishThreads,
                  conv_detail::finish_smem_bytes(finish.tile_th, finish.tile_tw), stream, p,
                  static_cast<const float*>(ws), splits);
    return;
  }
  const long long total = (long long)batch * p.out_h * p.out_w * (p.out_cs / 8);
  const long long blocks =
      std::max(1LL, std::min<long long>(ceil_div(total, kFlatFinishThreads), (long long)sms * 16));
  if (fp32)
    launch_kernel(conv_detail::conv_finish_kernel<true>, unsigned(blocks), kFlatFinishThreads, 0,
                  stream, p, ws, splits);
  else
    launch_kernel(conv_detail::conv_finish_kernel<false>, unsigned(blocks), kFlatFinishThreads, 0,
                  stream, p, ws, splits);
}

void ConvFp16Impl::launch_direct(const void* x, void* y, int batch, cudaStream_t stream,
                                 const void* residual) const {
  ConvParams p = base;
  p.residual = static_cast<const __half*>(residual);
  p.x = static_cast<const __half*>(x);
  p.y = static_cast<__half*>(y);
  p.w = w_direct;
  p.bias = b_direct;
  p.batch = batch;
  const long long total = (long long)batch * p.out_h * p.out_w * p.out_cs;
  const long long blocks =
      std::max(1LL, std::min<long long>(ceil_div(total, kDirectThreads), (long long)sms * 64));
  launch_kernel(conv_detail::conv_direct_kernel, unsigned(blocks), kDirectThreads, 0, stream, p);
}

// `residual`: the fused residual (shape.residual), nullptr otherwise; never with a pool, so the
// unfused-pool kind never sees one.
void ConvFp16Impl::run(const Launch& l, const void* x, const void* residual, void* y, int batch,
                       cudaStream_t stream, void* workspace) const {
  switch (l.kind) {
    case Kind::Fused:
      launch_igemm(candidates[l.cand], true, x, y, batch, stream, 1, 0, nullptr, residual);
      return;
    case Kind::Unfused:
      launch_igemm(flat[l.cand], false, x, workspace, batch, stream);
      launch_finish(false, workspace, 1, y, batch, stream);
      return;
    case Kind::SplitK:
      launch_igemm(flat[l.cand], false, x, y, batch, stream, l.splits, l.split_k,
                   static_cast<float*>(workspace));
      launch_finish(true, workspace, l.splits, y, batch, stream, residual);
      return;
    default:
      launch_direct(x, y, batch, stream, residual);
      return;
  }
}

bool ConvFp16::supports(const ConvShape& shape) { return conv_shape_problem(shape).empty(); }

ConvFp16::ConvFp16(const ConvShape& shape_in, const float* weight, const float* bias)
    : impl_(std::make_unique<ConvFp16Impl>()) {
  ConvFp16Impl& m = *impl_;
  const std::string problem = conv_shape_problem(shape_in);
  if (!problem.empty()) throw Error("conv_fp16: unsupported shape: " + problem);
  if (!weight) throw Error("conv_fp16: weight is null");
  m.shape = shape_in;
  m.shape.conv.out_channels = m.shape.out_c;
  m.shape.derive();
  m.path = choose_path(m.shape);
  m.base = base_params(m.shape, m.path);

  const DeviceTraits& device = device_traits();  // the GPU's, or a plan target's
  m.sms = device.sms;
  const size_t smem_optin = device.smem_optin;

  m.pack_direct(weight, bias);
  if (m.path != Path::Direct) {
    m.choose_finish_tiling();
    m.pack_igemm(weight, bias);
    build_candidates(m, size_t(smem_optin));
  }
  m.build_launches();
}

ConvFp16::~ConvFp16() = default;

size_t ConvFp16::weight_bytes() const { return impl_->bytes; }

std::string ConvFp16::path() const {
  switch (impl_->path) {
    case Path::Igemm:
      return "igemm";
    case Path::IgemmGather:
      return "igemm_gather";
    default:
      return "direct";
  }
}

void ConvFp16::forward(int variant, const void* x, void* y, int batch, cudaStream_t stream,
                       void* workspace) const {
  forward(variant, x, nullptr, y, batch, stream, workspace);
}

void ConvFp16::forward(int variant, const void* x, const void* residual, void* y, int batch,
                       cudaStream_t stream, void* workspace) const {
  if (impl_->shape.residual != (residual != nullptr))
    throw Error(impl_->shape.residual ? "conv_fp16: the fused residual is missing"
                                      : "conv_fp16: a residual given to a conv without one");
  if (reinterpret_cast<uintptr_t>(residual) % 16 != 0)
    throw Error("conv_fp16: the residual must be 16-byte aligned");
  if (batch <= 0) throw Error("conv_fp16: batch must be positive, got " + std::to_string(batch));
  if (!x || !y) throw Error("conv_fp16: null input or output pointer");
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(y) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
    throw Error("conv_fp16: input, output and workspace must be 16-byte aligned");
  const ConvFp16Impl::Launch& l = impl_->launch(variant);
  if (!workspace && impl_->workspace_of(l, batch) > 0)
    throw Error("conv_fp16: variant '" + impl_->name(l) + "' needs a workspace of " +
                std::to_string(impl_->workspace_of(l, batch)) + " bytes");
  impl_->run(l, x, residual, y, batch, stream, workspace);
}

}  // namespace cnnrt::cuda
