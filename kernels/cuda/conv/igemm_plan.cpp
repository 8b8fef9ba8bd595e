// The mma.sync conv's planner: which launches exist for a layer (tile configs x pool tilings,
// split-K slicings, built once at construction) and which one is fastest at a batch (a time
// model, pure arithmetic: ConvFp16::plan, called once per context).  docs/kernels/conv_fp16.md
// ("Choosing a variant") explains the model; its constants are H200 fits.
//
// Pool layers get two kinds of fused tiling per config (kernels/cuda/conv/pool_tiling.h):
// packed passes (the whole conv tile staged) and row-streaming passes (a ring of conv rows,
// whole images).  With a workspace two more kinds compete:
//   unfused   pool layers: the non-pool kernel writes the fp16 pre-pool tensor to the workspace
//             (no halo recompute, no passes), conv_finish_kernel pools it (lab only: never
//             planned, a fused node promises its pre-pool tensor never reaches memory);
//   split-K   batch <= kSplitKMaxBatch, groups == 1: grid.z splits the K loop, fp32 partials go
//             to the workspace, a finish kernel sums + bias + activation (+ pool).  Trades the
//             epilogue fusion for filling the SMs when the natural grid is tiny.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "cnnrt/error.h"
#include "kernels/cuda/conv/igemm_impl.h"

namespace cnnrt::cuda {

using namespace igemm_host;

namespace {

constexpr int kMaxPasses = 8;
constexpr int kMaxStreamPasses = 32;  // row-streaming pool: staging does not grow with passes
// Time model constants (H200-calibrated; only their ratios matter for the choice).
constexpr double kSmFlopsPerUs = 1.65e6;  // sustained mma.sync rate of one SM, 128x128 tile
constexpr double kBytesPerUs = 2.5e6;     // workspace round trip (mostly L2)
constexpr double kExtraLaunchUs = 2.0;    // second kernel of a workspace variant
constexpr double kSliceLatencyUs = 0.7;   // split-K finish: one round of kFinishUnroll slice loads

size_t round_up_256(size_t v) { return (v + 255) / 256 * 256; }

// Time of one k-tile step of one CTA when `resident` CTAs share its SM: a latency floor (a lone
// CTA cannot hide its cp.async latency) or the SM's MMA throughput split between them.
double ktile_us(const TileConfig& cfg, int resident) {
  const double throughput_us = 2.0 * cfg.bm * cfg.bn * cfg.bk / (kSmFlopsPerUs * cfg.efficiency);
  return std::max(cfg.latency_us, resident * throughput_us);
}

// Modelled time of `ctas` CTAs of `steps` k-tile steps each at `occupancy` CTAs/SM: each SM runs
// ceil(ctas / SMs) of them (wave quantisation) in rounds of `occupancy`.
double grid_us(const TileConfig& cfg, long long ctas, int occupancy, double steps, int sms) {
  const long long per_sm = (ctas + sms - 1) / sms;
  const long long full = per_sm / occupancy;
  const int rem = int(per_sm % occupancy);
  double t = double(full) * steps * ktile_us(cfg, occupancy);
  if (rem > 0) t += steps * ktile_us(cfg, rem);
  return t;
}

}  // namespace

const ConvFp16Impl::TileConfig& ConvFp16Impl::config(const Candidate& c) const {
  int count = 0;
  return tile_configs(&count)[c.config];
}

const ConvFp16Impl::Launch& ConvFp16Impl::launch(int variant) const {
  if (variant < 0 || variant >= int(launches.size()))
    throw Error("conv_fp16: variant " + std::to_string(variant) + " out of range (" +
                std::to_string(launches.size()) + " launches)");
  return launches[variant];
}

long long ConvFp16Impl::m_ctas(const Candidate& c, int batch, bool fused) const {
  return fused && pool() ? (long long)batch * c.tile.tiles_y * c.tile.tiles_x
                         : ceil_div((long long)batch * shape.conv_h * shape.conv_w, config(c).bm);
}

// K tiles of one config (its BK): K elements = k_real (gather) or k_real 8-chunks (vector).
int ConvFp16Impl::k_tiles_of(const TileConfig& cfg) const {
  const long long k = gather() ? base.k_real : (long long)base.k_real * 8;
  return ceil_div(k, cfg.bk);
}

// Fused (pool tiling, or the flat tile of a non-pool layer): one kernel.
double ConvFp16Impl::fused_us(const Candidate& c, int batch) const {
  const long long n_ctas = (long long)ceil_div(base.n_limit, config(c).bn) * base.groups;
  return grid_us(config(c), m_ctas(c, batch, true) * n_ctas, c.occupancy,
                 double(c.tile.passes) * (k_tiles_of(config(c)) + 2), sms);
}

// Unfused pool: flat conv into the workspace (written + read back once), then the pool pass.
double ConvFp16Impl::unfused_us(const Candidate& f, int batch) const {
  const double pre_pool = double(m_total(batch)) * base.out_cs * sizeof(__half);
  const double out_bytes = double(batch) * shape.out_h * shape.out_w * base.out_cs * sizeof(__half);
  const long long n_ctas = (long long)ceil_div(base.n_limit, config(f).bn) * base.groups;
  return grid_us(config(f), m_ctas(f, batch, false) * n_ctas, f.occupancy,
                 k_tiles_of(config(f)) + 2, sms) +
         kExtraLaunchUs + (2 * pre_pool + out_bytes) / kBytesPerUs;
}

// Split-K with `splits` slices of split_k k-tiles: the conv grid (partials written once), then
// the finish: its partial reads (the tiled finish reads each conv pixel of its region once;
// regions of neighbouring pooled blocks overlap by the halo) plus one slice-latency round per
// kFinishUnroll slices, which every finish thread walks in sequence.
double ConvFp16Impl::split_us(const Candidate& f, int batch, int splits, int split_k) const {
  const double partials = double(splits) * m_total(batch) * base.n_limit * sizeof(float);
  const double out_bytes = double(batch) * shape.out_h * shape.out_w * base.out_cs * sizeof(__half);
  double overlap = 1.0;
  if (finish_tiled)
    overlap = double(finish.tiles_y) * finish.tiles_x * finish.tile_th * finish.tile_tw /
              (double(shape.conv_h) * shape.conv_w);
  const double rounds = std::ceil(double(splits) / conv_detail::kFinishUnroll);
  const long long n_ctas = (long long)ceil_div(base.n_limit, config(f).bn) * base.groups;
  return grid_us(config(f), m_ctas(f, batch, false) * n_ctas * splits, f.occupancy, split_k + 2,
                 sms) +
         kExtraLaunchUs + ((1 + std::max(1.0, overlap)) * partials + out_bytes) / kBytesPerUs +
         rounds * kSliceLatencyUs;
}

// Split-K finish tile: one pooled row (more CTAs at batch 1) and as many pooled columns as keep
// the covering conv region within kFinishMaxPixels (shared memory 12 KB).  A pool window larger
// than that leaves finish_tiled false (generic finish kernel).
void ConvFp16Impl::choose_finish_tiling() {
  const PoolWindow& w = base.pool;
  for (int pw = std::min(shape.out_w, conv_detail::kFinishMaxPixels); pw >= 1; --pw) {
    const int tw = (pw - 1) * w.ps_w + w.pk_w;
    if (w.pk_h * tw > conv_detail::kFinishMaxPixels) continue;
    finish_tiled = true;
    finish.tile_ph = 1;
    finish.tile_th = w.pk_h;
    finish.tiles_y = shape.out_h;
    finish.tiles_x = ceil_div(shape.out_w, pw);
    // Equal-width blocks: 13 columns as 7 + 6 rather than 12 + 1.
    finish.tile_pw = ceil_div(shape.out_w, finish.tiles_x);
    finish.tile_tw = (finish.tile_pw - 1) * w.ps_w + w.pk_w;
    return;
  }
}

// Packed tilings of the pooled output for one config: for each pass count, the tiling with the
// fewest CTAs per image (cost per image = tiles x passes).
void ConvFp16Impl::add_pool_candidates(int config, const TileConfig& cfg, size_t smem_limit) {
  std::vector<Candidate> best(kMaxPasses + 1);
  std::vector<bool> found(kMaxPasses + 1, false);
  for (int ph = 1; ph <= std::min(shape.out_h, 64); ++ph) {
    for (int pw = 1; pw <= std::min(shape.out_w, 64); ++pw) {
      Candidate c;
      c.config = config;
      c.tile = packed_pool_tile(shape.out_h, shape.out_w, base.pool, ph, pw, cfg.bm);
      const int passes = c.tile.passes;
      if (passes > kMaxPasses) break;
      c.smem = conv_detail::igemm_smem_bytes(cfg.bm, cfg.bn, cfg.stages, passes, cfg.bk);
      if (c.smem > smem_limit) break;
      const long long tiles = (long long)c.tile.tiles_y * c.tile.tiles_x;
      if (!found[passes] ||
          tiles < (long long)best[passes].tile.tiles_y * best[passes].tile.tiles_x) {
        best[passes] = c;
        found[passes] = true;
      }
    }
  }
  for (int passes = 1; passes <= kMaxPasses; ++passes)
    if (found[passes]) candidates.push_back(best[passes]);
  add_stream_candidates(config, cfg, smem_limit);
}

// Row-streaming tilings: kept is the Pareto front of (CTAs per image, rows computed per image),
// fewest CTAs first, so both "one CTA sweeps the image" and more parallel splits compete.
void ConvFp16Impl::add_stream_candidates(int config, const TileConfig& cfg, size_t smem_limit) {
  std::vector<Candidate> all;
  for (int pw = 1; pw <= std::min(shape.out_w, 64); ++pw) {
    bool row_fits = true;
    for (int ph = 1; ph <= std::min(shape.out_h, 64); ++ph) {
      const std::optional<PoolTile> t =
          streamed_pool_tile(shape.out_h, shape.out_w, base.pool, ph, pw, cfg.bm);
      if (!t) {  // a conv row wider than the M tile: wider blocks only get wider
        row_fits = false;
        break;
      }
      if (t->passes < 2) continue;  // one pass: the packed tiling is the same launch
      if (t->passes > kMaxStreamPasses) break;
      Candidate c;
      c.config = config;
      c.tile = *t;
      c.smem = conv_detail::igemm_stream_smem_bytes(cfg.bm, cfg.bn, cfg.stages, t->stage_rows,
                                                    t->tile_tw, cfg.bk);
      if (c.smem > smem_limit) continue;
      all.push_back(c);
    }
    if (!row_fits) break;
  }
  auto tiles = [](const Candidate& c) { return (long long)c.tile.tiles_y * c.tile.tiles_x; };
  std::sort(all.begin(), all.end(), [&](const Candidate& a, const Candidate& b) {
    return tiles(a) != tiles(b) ? tiles(a) < tiles(b) : a.tile.passes < b.tile.passes;
  });
  long long best_work = -1;
  for (const Candidate& c : all) {
    const long long work = tiles(c) * c.tile.passes;
    if (best_work < 0 || work < best_work) {
      candidates.push_back(c);
      best_work = work;
    }
  }
}

// The launch table (ConvFp16Plan::variant): fused per candidate, unfused per flat tile (pool
// layers), split-K per flat tile and slicing (groups == 1, >= 2 k-tiles), direct last.
void ConvFp16Impl::build_launches() {
  launches.clear();
  for (size_t i = 0; i < candidates.size(); ++i) launches.push_back({Kind::Fused, int(i), 1, 0});
  if (pool())
    for (size_t f = 0; f < flat.size(); ++f) launches.push_back({Kind::Unfused, int(f), 1, 0});
  if (path != Path::Direct && base.groups == 1 && base.k_tiles >= 2) {
    for (size_t f = 0; f < flat.size(); ++f) {
      const int k_tiles = k_tiles_of(config(flat[f]));
      int last_split_k = 0;
      for (int want = 2; want <= std::min(k_tiles, kMaxSplits); ++want) {
        const int split_k = ceil_div(k_tiles, want);
        const int splits = ceil_div(k_tiles, split_k);  // no empty slice
        if (splits < 2 || split_k == last_split_k) continue;
        launches.push_back({Kind::SplitK, int(f), splits, split_k});
        last_split_k = split_k;
      }
    }
  }
  launches.push_back({Kind::Direct, 0, 1, 0});
}

// Everything variants(batch) lists, in order: fused per config (best packed, best streamed),
// unfused (pool layers), split-K (small batches), direct (always last).
std::vector<Variant> ConvFp16Impl::variant_list(int batch) const {
  std::vector<Variant> out;
  int count = 0;
  tile_configs(&count);
  std::vector<int> best(2 * count, -1);  // launch ids, [config][packed, streamed]
  for (size_t id = 0; id < launches.size(); ++id) {
    if (launches[id].kind != Kind::Fused) continue;
    const Candidate& c = candidates[launches[id].cand];
    int& slot = best[2 * c.config + (c.tile.pass_rows > 0 ? 1 : 0)];
    if (slot < 0 || fused_us(c, batch) < fused_us(candidates[launches[slot].cand], batch))
      slot = int(id);
  }
  for (const int id : best)
    if (id >= 0) out.push_back({id, fused_us(candidates[launches[id].cand], batch)});
  Variant unfused{-1, 0}, split{-1, 0};
  const bool split_ok = batch <= kSplitKMaxBatch;
  for (size_t id = 0; id < launches.size(); ++id) {
    const Launch& l = launches[id];
    if (l.kind == Kind::Unfused) {
      const double us = unfused_us(flat[l.cand], batch);
      if (unfused.launch < 0 || us < unfused.us) unfused = {int(id), us};
    } else if (l.kind == Kind::SplitK && split_ok) {
      const double us = split_us(flat[l.cand], batch, l.splits, l.split_k);
      if (split.launch < 0 || us < split.us) split = {int(id), us};
    }
  }
  if (unfused.launch >= 0) out.push_back(unfused);
  if (split.launch >= 0) out.push_back(split);
  out.push_back({int(launches.size()) - 1, 0});  // direct
  return out;
}

// The modelled-fastest variant; workspace variants only when a workspace can be given.  The
// unfused-pool variant is never chosen (see the file comment); split-K at tiny batches does
// stage fp32 partial sums — the documented trade of parallelism for fusion.
size_t ConvFp16Impl::choose_in(const std::vector<Variant>& list,
                               const std::vector<Launch>& launches, bool with_workspace) {
  size_t chosen = list.size() - 1;  // direct, when there is nothing else
  for (size_t i = 0; i + 1 < list.size(); ++i) {
    const Kind kind = launches[list[i].launch].kind;
    if (kind == Kind::Unfused) continue;
    if (!with_workspace && kind != Kind::Fused) continue;
    if (chosen == list.size() - 1 || list[i].us < list[chosen].us) chosen = i;
  }
  return chosen;
}

size_t ConvFp16Impl::workspace_of(const Launch& l, int batch) const {
  switch (l.kind) {
    case Kind::Unfused:
      return round_up_256(size_t(m_total(batch)) * base.out_cs * sizeof(__half));
    case Kind::SplitK:
      return round_up_256(size_t(l.splits) * size_t(m_total(batch)) * base.n_limit * sizeof(float));
    default:
      return 0;
  }
}

std::string ConvFp16Impl::name(const Launch& l) const {
  if (l.kind == Kind::Direct) return "direct";
  const Candidate& c = l.kind == Kind::Fused ? candidates[l.cand] : flat[l.cand];
  std::ostringstream s;
  s << (gather() ? "igemm_gather " : "igemm ") << config(c).name;
  if (l.kind == Kind::Fused && pool()) {
    const PoolTile& t = c.tile;
    s << " pool-tile " << t.tile_ph << "x" << t.tile_pw << " (conv " << t.tile_th << "x"
      << t.tile_tw << ", " << t.passes << (t.passes == 1 ? " pass" : " passes");
    if (t.pass_rows > 0) s << " of " << t.pass_rows << " rows, streamed";
    s << ")";
  }
  if (l.kind == Kind::Unfused) s << " unfused + pool pass";
  if (l.kind == Kind::SplitK)
    s << " split-K " << l.splits << "x" << l.split_k << (pool() ? " + pool pass" : "");
  return s.str();
}

ConvFp16Plan ConvFp16Impl::plan_of(const Variant& v, int batch) const {
  ConvFp16Plan plan;
  plan.variant = v.launch;
  plan.name = name(launches[v.launch]);
  plan.workspace_bytes = workspace_of(launches[v.launch], batch);
  plan.estimated_us = v.us;
  return plan;
}

ConvFp16Plan ConvFp16::plan(int batch, bool with_workspace) const {
  const int b = std::max(batch, 1);
  const std::vector<Variant> list = impl_->variant_list(b);
  return impl_->plan_of(list[ConvFp16Impl::choose_in(list, impl_->launches, with_workspace)], b);
}

std::vector<ConvFp16Plan> ConvFp16::variants(int batch) const {
  const int b = std::max(batch, 1);
  std::vector<ConvFp16Plan> plans;
  for (const Variant& v : impl_->variant_list(b)) plans.push_back(impl_->plan_of(v, b));
  return plans;
}

size_t ConvFp16::workspace_bytes(int variant, int batch) const {
  return impl_->workspace_of(impl_->launch(variant), std::max(batch, 1));
}

}  // namespace cnnrt::cuda
