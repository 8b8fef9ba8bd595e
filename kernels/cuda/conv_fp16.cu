// Host side of the fp16 convolution: shape validation, weight prepacking, variant list and the
// launch heuristic.  The kernels live in conv_fp16_igemm.cuh (tensor cores) and
// conv_fp16_direct.cuh (fallback); docs/kernels/conv_fp16.md explains the design.
//
// Paths, fixed at construction from the shape:
//   igemm         groups == 1 with C > 4, or groups > 1 with C/groups and OC/groups multiples of 8
//   igemm_gather  groups == 1 with C <= 4 (AlexNet conv1): K over the real channels
//   direct        everything else (depthwise, odd grouped convs)
// Within a path, the tile config (and for a fused pool, the spatial tile) depends on the batch,
// which is a run-time argument: forward() evaluates a small time model over precomputed
// candidates (pure arithmetic, no CUDA calls, cached per batch), so it stays cheap and
// graph-capturable.  Pool layers get two kinds of fused tiling per config: packed passes
// (the whole conv tile staged) and row-streaming passes (a ring of conv rows, whole images).
// With a workspace (forward(..., workspace)) two more kinds of variant compete:
//   unfused   pool layers: the non-pool kernel writes the fp16 pre-pool tensor to the workspace
//             (no halo recompute, no passes), conv_finish_kernel pools it;
//   split-K   batch <= kSplitKMaxBatch, groups == 1: grid.z splits the K loop, fp32 partials go
//             to the workspace, conv_finish_kernel sums + bias + ReLU (+ pool).  Trades the
//             epilogue fusion for filling the SMs when the natural grid is tiny.
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <sstream>

#include "kernels/cuda/conv_fp16.h"
#include "kernels/cuda/conv_fp16_direct.cuh"
#include "kernels/cuda/conv_fp16_igemm.cuh"
#include "kernels/cuda/cuda_check.h"

namespace cnnrt::cuda {

using conv_detail::ConvParams;

namespace {

using KernelFn = void (*)(ConvParams);

struct TileConfig {
  int bm, bn, threads, stages, bk;
  double efficiency;  // relative MMA throughput of one CTA-tile (bigger tiles reuse more)
  double latency_us;  // time of one k-tile for a CTA alone on its SM (H200, batch-1 runs)
  const char* name;
  KernelFn fn[2][2];  // [gather][pool]
};

// `if constexpr`, not a ?: -- taking the address in a discarded ?: branch still instantiates.
template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, bool POOL, bool ENABLED>
KernelFn gather_kernel() {
  if constexpr (ENABLED)
    return &conv_detail::conv_igemm_kernel<BM, BN, WARPS_M, WARPS_N, STAGES, true, POOL>;
  else
    return nullptr;
}

// WITH_GATHER = false leaves the few-channel instances out (nullptr): large tiles are for deep
// layers, and every instance costs CI compile time for three archs.
template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, bool WITH_GATHER = true,
          int BK = conv_detail::kBK>
TileConfig make_config(double efficiency, double latency_us, const char* name) {
  using namespace conv_detail;
  static_assert(BK == kBK || !WITH_GATHER, "the gather loader is BK 32 only");
  return {BM,
          BN,
          WARPS_M * WARPS_N * 32,
          STAGES,
          BK,
          efficiency,
          latency_us,
          name,
          {{&conv_igemm_kernel<BM, BN, WARPS_M, WARPS_N, STAGES, false, false, BK>,
            &conv_igemm_kernel<BM, BN, WARPS_M, WARPS_N, STAGES, false, true, BK>},
           {gather_kernel<BM, BN, WARPS_M, WARPS_N, STAGES, false, WITH_GATHER>(),
            gather_kernel<BM, BN, WARPS_M, WARPS_N, STAGES, true, WITH_GATHER>()}}};
}

const TileConfig* tile_configs(int* count) {
  static const TileConfig configs[] = {
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

constexpr int kMaxPasses = 8;
constexpr int kMaxStreamPasses = 32;  // row-streaming pool: staging does not grow with passes
constexpr int kDirectThreads = 256;
constexpr int kFlatFinishThreads = 256;  // conv_finish_kernel (unfused pool)
// Time model constants (H200-calibrated; only their ratios matter for the choice).
constexpr double kSmFlopsPerUs = 1.65e6;  // sustained mma.sync rate of one SM, 128x128 tile
constexpr double kBytesPerUs = 2.5e6;     // workspace round trip (mostly L2)
constexpr double kExtraLaunchUs = 2.0;    // second kernel of a workspace variant
constexpr double kSliceLatencyUs = 0.7;   // split-K finish: one round of kFinishUnroll slice loads
constexpr int kSplitKMaxBatch = 16;
constexpr int kMaxSplits = 32;

int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int ceil_div(long long a, long long b) { return int((a + b - 1) / b); }

// PyTorch conv / max_pool2d output extent (pool: ceil_mode's last window must start inside the
// input or the left padding).  Returns <= 0 for shapes that produce nothing.
int conv_extent(int in, int k, int s, int pad, int dil) {
  return floor_div(in + 2 * pad - dil * (k - 1) - 1, s) + 1;
}
int pool_extent(int in, int k, int s, int pad, bool ceil_mode) {
  const int span = in + 2 * pad - k;
  if (span < 0) return 0;
  int out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + pad) --out;
  return out;
}

// Empty string when the shape is fine, else what is wrong with it.
std::string shape_problem(const ConvShape& s) {
  const ConvAttrs& c = s.conv;
  if (s.in_c <= 0 || s.in_h <= 0 || s.in_w <= 0 || s.out_c <= 0) return "non-positive extent";
  if (c.out_channels != 0 && c.out_channels != s.out_c) return "conv.out_channels != out_c";
  if (c.kernel_h <= 0 || c.kernel_w <= 0 || c.stride_h <= 0 || c.stride_w <= 0 ||
      c.dilation_h <= 0 || c.dilation_w <= 0 || c.pad_h < 0 || c.pad_w < 0 || c.groups <= 0)
    return "bad kernel/stride/dilation/padding/groups";
  if (s.in_c % c.groups != 0 || s.out_c % c.groups != 0)
    return "groups must divide in and out channels";
  const int ch = conv_extent(s.in_h, c.kernel_h, c.stride_h, c.pad_h, c.dilation_h);
  const int cw = conv_extent(s.in_w, c.kernel_w, c.stride_w, c.pad_w, c.dilation_w);
  if (ch <= 0 || cw <= 0) return "kernel larger than the padded input";
  if (s.pool) {
    const PoolAttrs& p = *s.pool;
    if (p.kernel_h <= 0 || p.kernel_w <= 0 || p.stride_h <= 0 || p.stride_w <= 0 || p.pad_h < 0 ||
        p.pad_w < 0 || 2 * p.pad_h > p.kernel_h || 2 * p.pad_w > p.kernel_w)
      return "bad pool attributes";
    if (pool_extent(ch, p.kernel_h, p.stride_h, p.pad_h, p.ceil_mode) <= 0 ||
        pool_extent(cw, p.kernel_w, p.stride_w, p.pad_w, p.ceil_mode) <= 0)
      return "pool window larger than the conv output";
  }
  const long long per_image = (long long)s.in_h * s.in_w * padded_channels(s.in_c);
  if (per_image >= (1LL << 31)) return "input image too large";
  return "";
}

enum class Path { Igemm, IgemmGather, Direct };

Path choose_path(const ConvShape& s) {
  const int groups = s.conv.groups;
  if (groups == 1) return s.in_c <= 4 ? Path::IgemmGather : Path::Igemm;
  const int cpg = s.in_c / groups, opg = s.out_c / groups;
  return (cpg % 8 == 0 && opg % 8 == 0) ? Path::Igemm : Path::Direct;
}

enum class Kind { Fused, Unfused, SplitK, Direct };

// One launchable igemm configuration whose cost does not depend on the batch.
struct Candidate {
  int config = 0;
  int tile_ph = 1, tile_pw = 1, tile_th = 1, tile_tw = 1, tiles_y = 1, tiles_x = 1, passes = 1;
  int pool_rows = 0, stage_rows = 0;  // row-streaming pool (> 0), see ConvParams
  size_t smem = 0;
  int occupancy = 1;  // CTAs per SM
};

// One entry of variants(batch).
struct Variant {
  Kind kind = Kind::Direct;
  const Candidate* cand = nullptr;  // Fused: a pool tiling or flat; Unfused / SplitK: flat
  int splits = 1, split_k = 0;      // SplitK: slices and k-tiles per slice
  double us = 0;                    // modelled time
};

size_t round_up_256(size_t v) { return (v + 255) / 256 * 256; }

template <typename T>
T* upload(const std::vector<T>& host) {
  T* device = nullptr;
  CNNRT_CUDA_CHECK(cudaMalloc(&device, host.size() * sizeof(T)));
  CNNRT_CUDA_CHECK(
      cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return device;
}

}  // namespace

void ConvShape::derive() {
  conv_h = conv_extent(in_h, conv.kernel_h, conv.stride_h, conv.pad_h, conv.dilation_h);
  conv_w = conv_extent(in_w, conv.kernel_w, conv.stride_w, conv.pad_w, conv.dilation_w);
  if (pool) {
    out_h = pool_extent(conv_h, pool->kernel_h, pool->stride_h, pool->pad_h, pool->ceil_mode);
    out_w = pool_extent(conv_w, pool->kernel_w, pool->stride_w, pool->pad_w, pool->ceil_mode);
  } else {
    out_h = conv_h;
    out_w = conv_w;
  }
}

class ConvFp16Impl {
 public:
  ConvShape shape;
  Path path = Path::Direct;
  ConvParams base;  // everything but pointers, batch and tiling
  int sms = 1;
  std::vector<Candidate> candidates;  // fused launches (pool tilings, or flat tiles); igemm only
  std::vector<Candidate> flat;        // non-pool kernel per config (unfused / split-K / no pool)
  // Split-K finish tiling (conv_splitk_finish_kernel): pooled block of one image whose conv
  // region has <= kFinishMaxPixels pixels; finish_tiled false: the generic finish kernel.
  bool finish_tiled = false;
  int fin_ph = 1, fin_pw = 1, fin_th = 1, fin_tw = 1, fin_tiles_y = 1, fin_tiles_x = 1;
  // forward() is called per run with a batch; the variant list (and both picks) of the batches
  // seen so far are cached, so a launch costs a lookup instead of re-running the time model
  // over every candidate (a few us of host time, which batch-1 latency pays in eager mode).
  struct VariantSet {
    std::vector<Variant> list;
    size_t chosen = 0, chosen_ws = 0;
  };
  mutable std::mutex cache_mutex;
  mutable std::map<int, std::shared_ptr<const VariantSet>> cache;
  __half* w_igemm = nullptr;
  float* b_igemm = nullptr;
  __half* w_direct = nullptr;
  float* b_direct = nullptr;
  size_t bytes = 0;

  ~ConvFp16Impl() {
    // Destructors must not throw: errors from cudaFree are ignored on purpose.
    cudaFree(w_igemm);
    cudaFree(b_igemm);
    cudaFree(w_direct);
    cudaFree(b_direct);
  }

  bool pool() const { return shape.pool.has_value(); }
  bool gather() const { return path == Path::IgemmGather; }

  const TileConfig& config(const Candidate& c) const {
    int count = 0;
    return tile_configs(&count)[c.config];
  }

  // Time of one k-tile step of one CTA when `resident` CTAs share its SM: a latency floor
  // (a lone CTA cannot hide its cp.async latency) or the SM's MMA throughput split between them.
  static double ktile_us(const TileConfig& cfg, int resident) {
    const double throughput_us = 2.0 * cfg.bm * cfg.bn * cfg.bk / (kSmFlopsPerUs * cfg.efficiency);
    return std::max(cfg.latency_us, resident * throughput_us);
  }

  // Modelled time of `ctas` CTAs of `steps` k-tile steps each at `occupancy` CTAs/SM: each SM
  // runs ceil(ctas / SMs) of them (wave quantisation) in rounds of `occupancy`.
  double grid_us(const TileConfig& cfg, long long ctas, int occupancy, double steps) const {
    const long long per_sm = (ctas + sms - 1) / sms;
    const long long full = per_sm / occupancy;
    const int rem = int(per_sm % occupancy);
    double t = double(full) * steps * ktile_us(cfg, occupancy);
    if (rem > 0) t += steps * ktile_us(cfg, rem);
    return t;
  }

  long long m_ctas(const Candidate& c, int batch, bool fused) const {
    return fused && pool() ? (long long)batch * c.tiles_y * c.tiles_x
                           : ceil_div((long long)batch * shape.conv_h * shape.conv_w, config(c).bm);
  }
  long long n_ctas(const Candidate& c) const {
    return (long long)ceil_div(base.n_limit, config(c).bn) * base.groups;
  }
  long long m_total(int batch) const { return (long long)batch * shape.conv_h * shape.conv_w; }
  // K tiles of one config (its BK): K elements = k_real (gather) or k_real 8-chunks (vector).
  int k_tiles_of(const TileConfig& cfg) const {
    const long long k = gather() ? base.k_real : (long long)base.k_real * 8;
    return ceil_div(k, cfg.bk);
  }
  size_t out_bytes(int batch) const {
    return size_t(batch) * shape.out_h * shape.out_w * base.out_cs * sizeof(__half);
  }

  // Fused (pool tiling, or the flat tile of a non-pool layer): one kernel.
  double fused_us(const Candidate& c, int batch) const {
    return grid_us(config(c), m_ctas(c, batch, true) * n_ctas(c), c.occupancy,
                   double(c.passes) * (k_tiles_of(config(c)) + 2));
  }
  // Unfused pool: flat conv into the workspace (written + read back once), then the pool pass.
  double unfused_us(const Candidate& f, int batch) const {
    const double pre_pool = double(m_total(batch)) * base.out_cs * sizeof(__half);
    return grid_us(config(f), m_ctas(f, batch, false) * n_ctas(f), f.occupancy,
                   k_tiles_of(config(f)) + 2) +
           kExtraLaunchUs + (2 * pre_pool + out_bytes(batch)) / kBytesPerUs;
  }
  // Split-K with `splits` slices of split_k k-tiles: the conv grid (partials written once),
  // then the finish: its partial reads (the tiled finish reads each conv pixel of its region
  // once; regions of neighbouring pooled blocks overlap by the halo) plus one slice-latency
  // round per kFinishUnroll slices, which every finish thread walks in sequence.
  double split_us(const Candidate& f, int batch, int splits, int split_k) const {
    const double partials = double(splits) * m_total(batch) * base.n_limit * sizeof(float);
    double overlap = 1.0;
    if (finish_tiled)
      overlap = double(fin_tiles_y) * fin_tiles_x * fin_th * fin_tw /
                (double(shape.conv_h) * shape.conv_w);
    const double rounds = std::ceil(double(splits) / conv_detail::kFinishUnroll);
    return grid_us(config(f), m_ctas(f, batch, false) * n_ctas(f) * splits, f.occupancy,
                   split_k + 2) +
           kExtraLaunchUs +
           ((1 + std::max(1.0, overlap)) * partials + out_bytes(batch)) / kBytesPerUs +
           rounds * kSliceLatencyUs;
  }

  bool split_k_eligible(int batch) const {
    return path != Path::Direct && base.groups == 1 && batch <= kSplitKMaxBatch &&
           base.k_tiles >= 2 && !flat.empty();
  }

  // Everything variants(batch) lists, in order: fused per config, unfused (pool layers),
  // split-K (small batches), direct (always last).
  std::vector<Variant> variant_list(int batch) const {
    std::vector<Variant> out;
    int count = 0;
    tile_configs(&count);
    // Per config the best packed-pass tiling and the best row-streaming one (pool layers).
    std::vector<const Candidate*> best(2 * count, nullptr);
    for (const Candidate& c : candidates) {
      const Candidate*& slot = best[2 * c.config + (c.pool_rows > 0 ? 1 : 0)];
      if (!slot || fused_us(c, batch) < fused_us(*slot, batch)) slot = &c;
    }
    for (const Candidate* c : best)
      if (c) out.push_back({Kind::Fused, c, 1, 0, fused_us(*c, batch)});
    if (pool() && !flat.empty()) {
      Variant v{Kind::Unfused, nullptr, 1, 0, 0};
      for (const Candidate& f : flat)
        if (!v.cand || unfused_us(f, batch) < v.us) {
          v.cand = &f;
          v.us = unfused_us(f, batch);
        }
      out.push_back(v);
    }
    if (split_k_eligible(batch)) {
      Variant v{Kind::SplitK, nullptr, 1, 0, 0};
      for (const Candidate& f : flat) {
        const int k_tiles = k_tiles_of(config(f));
        for (int want = 2; want <= std::min(k_tiles, kMaxSplits); ++want) {
          const int split_k = ceil_div(k_tiles, want);
          const int splits = ceil_div(k_tiles, split_k);  // no empty slice
          if (splits < 2) continue;
          const double us = split_us(f, batch, splits, split_k);
          if (!v.cand || us < v.us) v = {Kind::SplitK, &f, splits, split_k, us};
        }
      }
      if (v.cand) out.push_back(v);
    }
    out.push_back({Kind::Direct, nullptr, 1, 0, 0});
    return out;
  }

  // The modelled-fastest variant; workspace variants only when a workspace can be given.
  // The unfused-pool variant is never chosen: a fused node promises that its pre-pool tensor
  // never reaches device memory.  It stays listed (variants(), forward_variant()) so the kernel
  // lab can measure what the fusion is worth.  Split-K at tiny batches does stage fp32 partial
  // sums — that is the documented trade of parallelism for fusion where the grid is too small.
  static size_t choose_in(const std::vector<Variant>& list, bool with_workspace) {
    size_t chosen = list.size() - 1;  // direct, when there is nothing else
    for (size_t i = 0; i + 1 < list.size(); ++i) {
      if (list[i].kind == Kind::Unfused) continue;
      if (!with_workspace && list[i].kind != Kind::Fused) continue;
      if (chosen == list.size() - 1 || list[i].us < list[chosen].us) chosen = i;
    }
    return chosen;
  }
  size_t choose(int batch, bool with_workspace) const {
    const std::shared_ptr<const VariantSet> set = variant_set(batch);
    return with_workspace ? set->chosen_ws : set->chosen;
  }

  // variant_list(batch) and its two picks, cached per batch (bounded: cleared past 256 entries).
  std::shared_ptr<const VariantSet> variant_set(int batch) const {
    {
      std::lock_guard<std::mutex> lock(cache_mutex);
      const auto it = cache.find(batch);
      if (it != cache.end()) return it->second;
    }
    auto set = std::make_shared<VariantSet>();
    set->list = variant_list(batch);
    set->chosen = choose_in(set->list, false);
    set->chosen_ws = choose_in(set->list, true);
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (cache.size() >= 256) cache.clear();
    cache.emplace(batch, set);
    return set;
  }

  size_t workspace_of(const Variant& v, int batch) const {
    switch (v.kind) {
      case Kind::Unfused:
        return round_up_256(size_t(m_total(batch)) * base.out_cs * sizeof(__half));
      case Kind::SplitK:
        return round_up_256(size_t(v.splits) * size_t(m_total(batch)) * base.n_limit *
                            sizeof(float));
      default:
        return 0;
    }
  }

  std::string name(const Variant& v) const {
    if (v.kind == Kind::Direct) return "direct";
    const Candidate& c = *v.cand;
    std::ostringstream s;
    s << (gather() ? "igemm_gather " : "igemm ") << config(c).name;
    if (v.kind == Kind::Fused && pool()) {
      s << " pool-tile " << c.tile_ph << "x" << c.tile_pw << " (conv " << c.tile_th << "x"
        << c.tile_tw << ", " << c.passes << (c.passes == 1 ? " pass" : " passes");
      if (c.pool_rows > 0) s << " of " << c.pool_rows << " rows, streamed";
      s << ")";
    }
    if (v.kind == Kind::Unfused) s << " unfused + pool pass";
    if (v.kind == Kind::SplitK)
      s << " split-K " << v.splits << "x" << v.split_k << (pool() ? " + pool pass" : "");
    return s.str();
  }

  // Launches the igemm kernel.  fused: the candidate's own kernel (pool or not) writing y;
  // otherwise the flat (non-pool) kernel with y = the workspace (unfused) or, when split_k > 0,
  // fp32 partials into `partial` over grid.z = splits.
  void launch_igemm(const Candidate& c, bool fused, const void* x, void* y, int batch,
                    cudaStream_t stream, int splits = 1, int split_k = 0,
                    float* partial = nullptr) const {
    const TileConfig& cfg = config(c);
    const bool pool_kernel = fused && pool();
    ConvParams p = base;
    p.x = static_cast<const __half*>(x);
    p.y = static_cast<__half*>(y);
    p.w = w_igemm;
    p.bias = b_igemm;
    p.batch = batch;
    p.n_tiles = ceil_div(p.n_limit, cfg.bn);
    p.k_tiles = k_tiles_of(cfg);
    p.m_total = m_total(batch);
    p.tile_ph = c.tile_ph;
    p.tile_pw = c.tile_pw;
    p.tile_th = c.tile_th;
    p.tile_tw = c.tile_tw;
    p.tiles_y = c.tiles_y;
    p.tiles_x = c.tiles_x;
    p.passes = c.passes;
    p.pool_rows = c.pool_rows;
    p.stage_rows = c.stage_rows;
    p.split_k = split_k;
    p.partial = partial;
    const long long grid_x = m_ctas(c, batch, fused);
    const long long grid_y = (long long)p.n_tiles * p.groups;
    if (grid_x >= (1LL << 31) || grid_y > 65535 || splits > 65535)
      throw Error("conv_fp16: batch " + std::to_string(batch) + " exceeds the launch grid");
    cfg.fn[gather() ? 1 : 0][pool_kernel ? 1 : 0]<<<
        dim3(unsigned(grid_x), unsigned(grid_y), unsigned(splits)), cfg.threads, c.smem, stream>>>(
        p);
    CNNRT_CUDA_CHECK_LAUNCH();
  }

  // Second kernel of the workspace variants: y = pool(finish(workspace)).
  void launch_finish(bool fp32, const void* ws, int splits, void* y, int batch,
                     cudaStream_t stream) const {
    ConvParams p = base;
    p.y = static_cast<__half*>(y);
    p.bias = b_igemm;
    p.batch = batch;
    p.m_total = m_total(batch);
    if (fp32 && finish_tiled) {
      p.tile_ph = fin_ph;
      p.tile_pw = fin_pw;
      p.tile_th = fin_th;
      p.tile_tw = fin_tw;
      p.tiles_y = fin_tiles_y;
      p.tiles_x = fin_tiles_x;
      const long long grid_x = (long long)batch * fin_tiles_y * fin_tiles_x;
      const int grid_y = ceil_div(p.out_cs, 8 * conv_detail::kFinishChunks);
      if (grid_x >= (1LL << 31))
        throw Error("conv_fp16: batch " + std::to_string(batch) + " exceeds the launch grid");
      conv_detail::conv_splitk_finish_kernel<<<
          dim3(unsigned(grid_x), unsigned(grid_y)), conv_detail::kFinishThreads,
          conv_detail::finish_smem_bytes(fin_th, fin_tw), stream>>>(
          p, static_cast<const float*>(ws), splits);
      CNNRT_CUDA_CHECK_LAUNCH();
      return;
    }
    const long long total = (long long)batch * p.out_h * p.out_w * (p.out_cs / 8);
    const long long blocks = std::max(
        1LL, std::min<long long>(ceil_div(total, kFlatFinishThreads), (long long)sms * 16));
    if (fp32)
      conv_detail::conv_finish_kernel<true>
          <<<unsigned(blocks), kFlatFinishThreads, 0, stream>>>(p, ws, splits);
    else
      conv_detail::conv_finish_kernel<false>
          <<<unsigned(blocks), kFlatFinishThreads, 0, stream>>>(p, ws, splits);
    CNNRT_CUDA_CHECK_LAUNCH();
  }

  void run(const Variant& v, const void* x, void* y, int batch, cudaStream_t stream,
           void* workspace) const {
    switch (v.kind) {
      case Kind::Fused:
        launch_igemm(*v.cand, true, x, y, batch, stream);
        return;
      case Kind::Unfused:
        launch_igemm(*v.cand, false, x, workspace, batch, stream);
        launch_finish(false, workspace, 1, y, batch, stream);
        return;
      case Kind::SplitK:
        launch_igemm(*v.cand, false, x, y, batch, stream, v.splits, v.split_k,
                     static_cast<float*>(workspace));
        launch_finish(true, workspace, v.splits, y, batch, stream);
        return;
      default:
        launch_direct(x, y, batch, stream);
        return;
    }
  }

  void launch_direct(const void* x, void* y, int batch, cudaStream_t stream) const {
    ConvParams p = base;
    p.x = static_cast<const __half*>(x);
    p.y = static_cast<__half*>(y);
    p.w = w_direct;
    p.bias = b_direct;
    p.batch = batch;
    const long long total = (long long)batch * p.out_h * p.out_w * p.out_cs;
    const long long blocks =
        std::max(1LL, std::min<long long>(ceil_div(total, kDirectThreads), (long long)sms * 64));
    conv_detail::conv_direct_kernel<<<unsigned(blocks), kDirectThreads, 0, stream>>>(p);
    CNNRT_CUDA_CHECK_LAUNCH();
  }

  void pack_igemm(const float* weight, const float* bias) {
    const int groups = base.groups, cpg = base.cpg, opg = base.opg;
    const int kh = base.kh, kw = base.kw;
    std::vector<__half> w(size_t(groups) * base.w_rows * base.w_k, __float2half(0.f));
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
                  __float2half(weight[((size_t(oc) * cpg + ci) * kh + ky) * kw + kx]);
            }
      }
    w_igemm = upload(w);
    b_igemm = upload(b);
    bytes += w.size() * sizeof(__half) + b.size() * sizeof(float);
  }

  void pack_direct(const float* weight, const float* bias) {
    const int cpg = base.cpg, kh = base.kh, kw = base.kw;
    std::vector<__half> w(size_t(shape.out_c) * kh * kw * cpg);
    std::vector<float> b(shape.out_c, 0.f);
    for (int oc = 0; oc < shape.out_c; ++oc) {
      if (bias) b[oc] = bias[oc];
      for (int ci = 0; ci < cpg; ++ci)
        for (int ky = 0; ky < kh; ++ky)
          for (int kx = 0; kx < kw; ++kx)
            w[((size_t(oc) * kh + ky) * kw + kx) * cpg + ci] =
                __float2half(weight[((size_t(oc) * cpg + ci) * kh + ky) * kw + kx]);
    }
    w_direct = upload(w);
    b_direct = upload(b);
    bytes += w.size() * sizeof(__half) + b.size() * sizeof(float);
  }

  // Split-K finish tile: one pooled row (more CTAs at batch 1) and as many pooled columns as
  // keep the covering conv region within kFinishMaxPixels (shared memory 12 KB).  A pool window
  // larger than that leaves finish_tiled false (generic finish kernel).
  void choose_finish_tiling() {
    const int pk_h = base.pk_h, pk_w = base.pk_w, ps_w = base.ps_w;
    for (int pw = std::min(shape.out_w, conv_detail::kFinishMaxPixels); pw >= 1; --pw) {
      const int tw = (pw - 1) * ps_w + pk_w;
      if (pk_h * tw > conv_detail::kFinishMaxPixels) continue;
      finish_tiled = true;
      fin_ph = 1;
      fin_pw = pw;
      fin_th = pk_h;
      fin_tw = tw;
      fin_tiles_y = shape.out_h;
      fin_tiles_x = ceil_div(shape.out_w, pw);
      // Equal-width blocks: 13 columns as 7 + 6 rather than 12 + 1.
      fin_pw = ceil_div(shape.out_w, fin_tiles_x);
      fin_tw = (fin_pw - 1) * ps_w + pk_w;
      return;
    }
  }

  // Spatial tilings of the pooled output for one config: for each pass count, the tiling with
  // the fewest CTAs per image (cost per image = tiles x passes).
  void add_pool_candidates(int config, const TileConfig& cfg, size_t smem_limit) {
    std::vector<Candidate> best(kMaxPasses + 1);
    std::vector<bool> found(kMaxPasses + 1, false);
    const PoolAttrs& pa = *shape.pool;
    for (int ph = 1; ph <= std::min(shape.out_h, 64); ++ph) {
      const int th = (ph - 1) * pa.stride_h + pa.kernel_h;
      for (int pw = 1; pw <= std::min(shape.out_w, 64); ++pw) {
        const int tw = (pw - 1) * pa.stride_w + pa.kernel_w;
        const int passes = ceil_div((long long)th * tw, cfg.bm);
        if (passes > kMaxPasses) break;
        const size_t smem =
            conv_detail::igemm_smem_bytes(cfg.bm, cfg.bn, cfg.stages, passes, cfg.bk);
        if (smem > smem_limit) break;
        Candidate c;
        c.config = config;
        c.tile_ph = ph;
        c.tile_pw = pw;
        c.tile_th = th;
        c.tile_tw = tw;
        c.tiles_y = ceil_div(shape.out_h, ph);
        c.tiles_x = ceil_div(shape.out_w, pw);
        c.passes = passes;
        c.smem = smem;
        const long long tiles = (long long)c.tiles_y * c.tiles_x;
        if (!found[passes] || tiles < (long long)best[passes].tiles_y * best[passes].tiles_x) {
          best[passes] = c;
          found[passes] = true;
        }
      }
    }
    for (int passes = 1; passes <= kMaxPasses; ++passes)
      if (found[passes]) candidates.push_back(best[passes]);
    add_stream_candidates(config, cfg, smem_limit);
  }

  // Row-streaming pool tilings (kernel: ConvParams::pool_rows): passes of whole conv rows
  // (pool_rows = BM / TW of them), staging = a ring of stage_rows conv rows.  Kept: the Pareto
  // front of (CTAs per image, rows computed per image), fewest CTAs first, so both "one CTA
  // sweeps the image" and more parallel splits of it compete in the model.
  void add_stream_candidates(int config, const TileConfig& cfg, size_t smem_limit) {
    const PoolAttrs& pa = *shape.pool;
    std::vector<Candidate> all;
    for (int pw = 1; pw <= std::min(shape.out_w, 64); ++pw) {
      const int tw = (pw - 1) * pa.stride_w + pa.kernel_w;
      const int rows = cfg.bm / tw;  // conv rows per pass
      if (rows < 1) break;
      for (int ph = 1; ph <= std::min(shape.out_h, 64); ++ph) {
        const int th = (ph - 1) * pa.stride_h + pa.kernel_h;
        const int passes = ceil_div(th, rows);
        if (passes < 2) continue;  // one pass: the packed tiling is the same launch
        if (passes > kMaxStreamPasses) break;
        Candidate c;
        c.config = config;
        c.tile_ph = ph;
        c.tile_pw = pw;
        c.tile_th = th;
        c.tile_tw = tw;
        c.tiles_y = ceil_div(shape.out_h, ph);
        c.tiles_x = ceil_div(shape.out_w, pw);
        c.passes = passes;
        c.pool_rows = rows;
        c.stage_rows = stream_stage_rows(c);
        c.smem = conv_detail::igemm_stream_smem_bytes(cfg.bm, cfg.bn, cfg.stages, c.stage_rows, tw,
                                                      cfg.bk);
        if (c.smem > smem_limit) continue;
        all.push_back(c);
      }
    }
    auto tiles = [](const Candidate& c) { return (long long)c.tiles_y * c.tiles_x; };
    std::sort(all.begin(), all.end(), [&](const Candidate& a, const Candidate& b) {
      return tiles(a) != tiles(b) ? tiles(a) < tiles(b) : a.passes < b.passes;
    });
    long long best_work = -1;
    for (const Candidate& c : all) {
      const long long work = tiles(c) * c.passes;
      if (best_work < 0 || work < best_work) {
        candidates.push_back(c);
        best_work = work;
      }
    }
  }

  // Ring rows a row-streaming tile needs: while pass q writes conv rows [q*R, (q+1)*R), the
  // rows from the first not-yet-pooled row's window onward are still live (mirrors the
  // kernel's pooled_rows_after).
  int stream_stage_rows(const Candidate& c) const {
    const PoolAttrs& pa = *shape.pool;
    auto pooled_after = [&](int q) {
      if (q + 1 >= c.passes) return c.tile_ph;
      const int done = std::min((q + 1) * c.pool_rows, c.tile_th);
      return done < pa.kernel_h ? 0 : std::min(c.tile_ph, (done - pa.kernel_h) / pa.stride_h + 1);
    };
    int need = c.pool_rows;
    for (int q = 0; q < c.passes; ++q) {
      const int first_live = (q == 0 ? 0 : pooled_after(q - 1)) * pa.stride_h;
      const int end = std::min((q + 1) * c.pool_rows, c.tile_th);
      need = std::max(need, end - first_live);
    }
    return std::min(need, c.tile_th);
  }
};

bool ConvFp16::supports(const ConvShape& shape) { return shape_problem(shape).empty(); }

ConvFp16::ConvFp16(const ConvShape& shape_in, const float* weight, const float* bias)
    : impl_(std::make_unique<ConvFp16Impl>()) {
  ConvFp16Impl& m = *impl_;
  const std::string problem = shape_problem(shape_in);
  if (!problem.empty()) throw Error("conv_fp16: unsupported shape: " + problem);
  if (!weight) throw Error("conv_fp16: weight is null");
  m.shape = shape_in;
  m.shape.conv.out_channels = m.shape.out_c;
  m.shape.derive();
  m.path = choose_path(m.shape);
  const ConvShape& s = m.shape;
  const ConvAttrs& a = s.conv;

  ConvParams& p = m.base;
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
  p.ph = a.pad_h;
  p.pw = a.pad_w;
  p.dh = a.dilation_h;
  p.dw = a.dilation_w;
  p.groups = a.groups;
  p.cpg = s.in_c / a.groups;
  p.opg = s.out_c / a.groups;
  p.cpg_chunks = (p.cpg + 7) / 8;
  p.out_c = s.out_c;
  p.out_cs = padded_channels(s.out_c);
  p.relu = s.relu ? 1 : 0;
  if (s.pool) {
    p.pk_h = s.pool->kernel_h;
    p.pk_w = s.pool->kernel_w;
    p.ps_h = s.pool->stride_h;
    p.ps_w = s.pool->stride_w;
    p.pp_h = s.pool->pad_h;
    p.pp_w = s.pool->pad_w;
  }
  p.out_h = s.out_h;
  p.out_w = s.out_w;
  if (m.path == Path::IgemmGather) {
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
  {
    int count = 0;
    const TileConfig* configs = tile_configs(&count);
    for (int i = 0; i < count; ++i)
      p.w_rows = std::max(p.w_rows, ceil_div(p.n_limit, configs[i].bn) * configs[i].bn);
  }

  int device = 0, smem_optin = 0;
  CNNRT_CUDA_CHECK(cudaGetDevice(&device));
  CNNRT_CUDA_CHECK(cudaDeviceGetAttribute(&m.sms, cudaDevAttrMultiProcessorCount, device));
  CNNRT_CUDA_CHECK(
      cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));

  m.pack_direct(weight, bias);
  if (m.path == Path::Direct) return;
  m.choose_finish_tiling();
  m.pack_igemm(weight, bias);

  int count = 0;
  const TileConfig* configs = tile_configs(&count);
  auto set_occupancy = [&](std::vector<Candidate>& list, size_t first, KernelFn fn, int threads) {
    for (size_t j = first; j < list.size();) {
      Candidate& c = list[j];
      CNNRT_CUDA_CHECK(
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&c.occupancy, fn, threads, c.smem));
      if (c.occupancy <= 0)
        list.erase(list.begin() + j);
      else
        ++j;
    }
  };
  for (int i = 0; i < count; ++i) {
    const TileConfig& cfg = configs[i];
    const KernelFn flat_fn = cfg.fn[m.gather() ? 1 : 0][0];
    const KernelFn pool_fn = cfg.fn[m.gather() ? 1 : 0][1];
    if (!flat_fn || !pool_fn) continue;  // config not instantiated for this loader
    // Always the device maximum: the attribute is per function and process-wide, so every
    // instance sets the same value and none can shrink another's limit.
    for (const KernelFn fn : {flat_fn, pool_fn})
      CNNRT_CUDA_CHECK(
          cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_optin));
    Candidate c;
    c.config = i;
    c.smem = conv_detail::igemm_smem_bytes(cfg.bm, cfg.bn, cfg.stages, 1, cfg.bk);
    const size_t first_flat = m.flat.size();
    if (c.smem <= size_t(smem_optin)) m.flat.push_back(c);
    set_occupancy(m.flat, first_flat, flat_fn, cfg.threads);
    if (m.pool()) {
      const size_t first = m.candidates.size();
      m.add_pool_candidates(i, cfg, size_t(smem_optin));
      set_occupancy(m.candidates, first, pool_fn, cfg.threads);
    }
  }
  if (!m.pool()) m.candidates = m.flat;
  if (m.candidates.empty()) {  // e.g. a device with tiny shared memory
    m.path = Path::Direct;
    m.flat.clear();
  }
}

ConvFp16::~ConvFp16() = default;

size_t ConvFp16::weight_bytes() const { return impl_->bytes; }

std::string ConvFp16::variant() const {
  switch (impl_->path) {
    case Path::Igemm:
      return "igemm";
    case Path::IgemmGather:
      return "igemm_gather";
    default:
      return "direct";
  }
}

std::vector<std::string> ConvFp16::variants(int batch) const {
  std::vector<std::string> names;
  for (const Variant& v : impl_->variant_set(std::max(batch, 1))->list)
    names.push_back(impl_->name(v));
  return names;
}

size_t ConvFp16::chosen_variant(int batch) const {
  return impl_->choose(std::max(batch, 1), false);
}

size_t ConvFp16::chosen_variant(int batch, bool with_workspace) const {
  return impl_->choose(std::max(batch, 1), with_workspace);
}

size_t ConvFp16::variant_workspace_bytes(size_t index, int batch) const {
  const std::shared_ptr<const ConvFp16Impl::VariantSet> set =
      impl_->variant_set(std::max(batch, 1));
  const std::vector<Variant>& list = set->list;
  if (index >= list.size())
    throw Error("conv_fp16: variant index " + std::to_string(index) + " out of range");
  return impl_->workspace_of(list[index], std::max(batch, 1));
}

size_t ConvFp16::workspace_bytes(int batch) const {
  // Largest need of any batch b <= batch, so a workspace sized for the planned batch also serves
  // every smaller run (split-K is chosen at small batches only, so the need is not monotone).
  size_t bytes = 0;
  // Planning-time call: the lists are built here, not cached (the cache is for per-run batches).
  for (int b = 1; b <= batch; ++b) {
    const std::vector<Variant> list = impl_->variant_list(b);
    bytes = std::max(bytes, impl_->workspace_of(list[ConvFp16Impl::choose_in(list, true)], b));
  }
  return bytes;
}

void ConvFp16::forward_variant(size_t index, const void* x, void* y, int batch,
                               cudaStream_t stream) const {
  forward_variant(index, x, y, batch, stream, nullptr);
}

void ConvFp16::forward_variant(size_t index, const void* x, void* y, int batch, cudaStream_t stream,
                               void* workspace) const {
  if (batch <= 0) throw Error("conv_fp16: batch must be positive, got " + std::to_string(batch));
  if (!x || !y) throw Error("conv_fp16: null input or output pointer");
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(y) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
    throw Error("conv_fp16: input, output and workspace must be 16-byte aligned");
  const std::shared_ptr<const ConvFp16Impl::VariantSet> set = impl_->variant_set(batch);
  if (index >= set->list.size())
    throw Error("conv_fp16: variant index " + std::to_string(index) + " out of range");
  const Variant& v = set->list[index];
  if (impl_->workspace_of(v, batch) > 0 && !workspace)
    throw Error("conv_fp16: variant '" + impl_->name(v) + "' needs a workspace of " +
                std::to_string(impl_->workspace_of(v, batch)) + " bytes");
  impl_->run(v, x, y, batch, stream, workspace);
}

void ConvFp16::forward(const void* x, void* y, int batch, cudaStream_t stream) const {
  forward_variant(chosen_variant(batch), x, y, batch, stream, nullptr);
}

void ConvFp16::forward(const void* x, void* y, int batch, cudaStream_t stream,
                       void* workspace) const {
  forward_variant(chosen_variant(batch, workspace != nullptr), x, y, batch, stream, workspace);
}

}  // namespace cnnrt::cuda
