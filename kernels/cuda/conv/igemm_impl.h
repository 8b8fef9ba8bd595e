// Host side of the mma.sync conv (igemm.h), shared by igemm.cu (kernel table, construction,
// weight packing, launches) and igemm_plan.cpp (candidates, time model, variant list, plan).
// Internal: only those two files include it.
#pragma once

#include <cuda_fp16.h>

#include <string>
#include <vector>

#include "kernels/cuda/conv/igemm.h"
#include "kernels/cuda/conv/igemm_params.h"
#include "kernels/cuda/conv/pool_tiling.h"

namespace cnnrt::cuda {
namespace igemm_host {

// One tile config of the kernel (igemm.cu instantiates its kernels in this order).
struct TileConfig {
  int bm, bn, threads, stages, bk;
  double efficiency;  // relative MMA throughput of one CTA-tile (bigger tiles reuse more)
  double latency_us;  // time of one k-tile for a CTA alone on its SM (H200, batch-1 runs)
  const char* name;
  bool has_gather;  // the few-channel (gather) instances exist
};
const TileConfig* tile_configs(int* count);

enum class Path { Igemm, IgemmGather, Direct };
enum class Kind { Fused, Unfused, SplitK, Direct };

// One launchable igemm configuration whose cost does not depend on the batch: a tile config
// and, for a pool layer's fused kernel, its pool tiling.
struct Candidate {
  int config = 0;
  PoolTile tile;
  size_t smem = 0;
  int occupancy = 1;  // CTAs per SM
};

// An entry of the launch table (ConvFp16Plan::variant indexes it).  cand: into candidates
// (Fused) or flat (Unfused, SplitK); split-K: `splits` slices of split_k k-tiles.
struct Launch {
  Kind kind = Kind::Direct;
  int cand = 0;
  int splits = 1, split_k = 0;
};

// A launch the model weighs at one batch, with its modelled time.
struct Variant {
  int launch = 0;
  double us = 0;
};

constexpr int kSplitKMaxBatch = 16;
constexpr int kMaxSplits = 32;

inline int ceil_div(long long a, long long b) { return int((a + b - 1) / b); }

}  // namespace igemm_host

class ConvFp16Impl {
 public:
  using Candidate = igemm_host::Candidate;
  using Launch = igemm_host::Launch;
  using Variant = igemm_host::Variant;
  using TileConfig = igemm_host::TileConfig;

  ConvShape shape;
  igemm_host::Path path = igemm_host::Path::Direct;
  conv_detail::ConvParams base;  // everything but pointers, batch and tiling
  int sms = 1;
  std::vector<Candidate> candidates;  // fused launches (pool tilings, or flat tiles); igemm only
  std::vector<Candidate> flat;        // non-pool kernel per config (unfused / split-K / no pool)
  std::vector<Launch> launches;       // fused per candidate, unfused per flat, split-K, direct
  // Split-K finish tiling (conv_splitk_finish_kernel): pooled block of one image whose conv
  // region has <= kFinishMaxPixels pixels; finish_tiled false: the generic finish kernel.
  bool finish_tiled = false;
  PoolTile finish;
  __half* w_igemm = nullptr;
  float* b_igemm = nullptr;
  __half* w_direct = nullptr;
  float* b_direct = nullptr;
  size_t bytes = 0;

  ~ConvFp16Impl();

  bool pool() const { return shape.pool.has_value(); }
  bool gather() const { return path == igemm_host::Path::IgemmGather; }
  const TileConfig& config(const Candidate& c) const;
  const Launch& launch(int variant) const;  // throws Error when out of range

  // ---- igemm_plan.cpp: candidates, time model, variants ----------------------------------------
  void add_pool_candidates(int config, const TileConfig& cfg, size_t smem_limit);
  void add_stream_candidates(int config, const TileConfig& cfg, size_t smem_limit);
  void choose_finish_tiling();
  void build_launches();
  double fused_us(const Candidate& c, int batch) const;
  double unfused_us(const Candidate& f, int batch) const;
  double split_us(const Candidate& f, int batch, int splits, int split_k) const;
  std::vector<Variant> variant_list(int batch) const;
  static size_t choose_in(const std::vector<Variant>& list, const std::vector<Launch>& launches,
                          bool with_workspace);
  size_t workspace_of(const Launch& l, int batch) const;
  std::string name(const Launch& l) const;
  ConvFp16Plan plan_of(const Variant& v, int batch) const;
  long long m_ctas(const Candidate& c, int batch, bool fused) const;
  long long m_total(int batch) const { return (long long)batch * shape.conv_h * shape.conv_w; }
  int k_tiles_of(const TileConfig& cfg) const;

  // ---- igemm.cu: packing and launches ----------------------------------------------------------
  void pack_igemm(const float* weight, const float* bias);
  void pack_direct(const float* weight, const float* bias);
  void run(const Launch& l, const void* x, const void* residual, void* y, int batch,
           cudaStream_t stream, void* workspace) const;
  void launch_igemm(const Candidate& c, bool fused, const void* x, void* y, int batch,
                    cudaStream_t stream, int splits = 1, int split_k = 0, float* partial = nullptr,
                    const void* residual = nullptr) const;
  void launch_finish(bool fp32, const void* ws, int splits, void* y, int batch, cudaStream_t stream,
                     const void* residual = nullptr) const;
  void launch_direct(const void* x, void* y, int batch, cudaStream_t stream,
                     const void* residual = nullptr) const;
};

}  // namespace cnnrt::cuda
