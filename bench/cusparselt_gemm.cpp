// cusparselt_gemm: cuSPARSELt's 2:4 fp16 GEMM against dense cuBLASLt fp16 on the GEMM shapes of
// AlexNet's sparse candidates (issue: "sparse fp16 vs cuSPARSELt on the same GEMM shapes"):
//   conv2..conv5 at batch 256 as a sparse conv maps them (docs/SPARSITY.md: M = output channels,
//   K = in_c·kh·kw, N = 256·conv_h·conv_w pixels), and fc6 / fc7 at batch 1 and 256 (N = batch).
// Both sides run the project's own wrappers on the same layouts, so each row is what the
// registry entries would run: LinearCusparseLt (kernels/cuda/linear_cusparselt.h, the
// linear_fp16_cusparselt baseline) and LtGemm (kernels/cuda/linear_fp16.h, linear_fp16_cublaslt),
// both x [N][K] · Wᵀ + b with ReLU, fp16 operands, fp32 compute, the weight as operand A.  The
// weight is random, non-zero where kept, pruned 2:4 (two kept of every four along K), and the
// dense GEMM multiplies the same pruned weight with its zeros.  x is random and non-zero.
//
// Timing: 10 warm-up launches, then --iters (>= 50) launches each bracketed by CUDA events, the
// median reported; before each timed launch (outside its events) a 2 × L2 memset evicts the
// cache, so a weight that fits in L2 (fc7: 32 MiB dense) is streamed from DRAM as in a forward
// pass (--no-flush keeps it warm).  TFLOP/s counts the dense FLOPs 2·M·N·K on both sides, so
// the speed-up is sparse vs dense time.  "2:4": cuSPARSELt's default algorithm configuration,
// as the entry runs it.  "best" (--no-search skips it): cusparseLtMatmulSearch's pick on a plan
// of its own, given a 64 MiB workspace (it may try configurations that need more than the
// default one), timed as above ("search#ID"); where the search fails, the failure is printed
// and the fastest of cuSPARSELt's configurations 0..CONFIG_MAX_ID instead, each planned
// (CUSPARSELT_MATMUL_ALG_CONFIG_ID) and timed on max(10, iters / 5) launches, the fastest timed
// again as above ("sweep#ID", with how many configurations cuSPARSELt refused).  Buffers hold
// round_up8(N) rows, so the N = 1 rows time cuSPARSELt on 8 columns without the entry's staging
// copies.  "rel diff": relative L2 distance of the sparse outputs (default, best) from the dense
// one (a layout check).  Every library call's status is checked: a shape whose dense or default
// sparse run fails prints its error and the table goes on; the exit status is then 1.
//
// Usage: cusparselt_gemm [--iters N] [--json FILE] [--no-search] [--no-flush]
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/event_timing.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise_fp16.h"
#include "kernels/cuda/linear_cusparselt.h"
#include "kernels/cuda/linear_fp16.h"
#include "kernels/cuda/linear_pack.h"

namespace {

using cnnrt::cuda::round_up8;

struct GemmShape {
  const char* name;
  int64_t m, k, n;
};

const GemmShape kShapes[] = {
    {"conv2 b256", 192, 64 * 5 * 5, 256 * 27 * 27},
    {"conv3 b256", 384, 192 * 3 * 3, 256 * 13 * 13},
    {"conv4 b256", 256, 384 * 3 * 3, 256 * 13 * 13},
    {"conv5 b256", 256, 256 * 3 * 3, 256 * 13 * 13},
    {"fc6 b1", 4096, 9216, 1},
    {"fc6 b256", 4096, 9216, 256},
    {"fc7 b1", 4096, 4096, 1},
    {"fc7 b256", 4096, 4096, 256},
};

// Deterministic non-zero values in ±[0.25, 1) · scale.
struct Random {
  uint64_t state;
  float next(float scale) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const float u = static_cast<float>(state >> 40) / 16777216.0f;  // [0, 1)
    return ((state >> 20) & 1 ? 1.0f : -1.0f) * (0.25f + 0.75f * u) * scale;
  }
};

class Buffer {
 public:
  explicit Buffer(size_t bytes) : bytes_(bytes) {
    CNNRT_CUDA_CHECK(cudaMalloc(&ptr_, bytes > 0 ? bytes : 1));
  }
  ~Buffer() { cudaFree(ptr_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// [rows][k] random non-zero fp16, filled chunk by chunk (conv2's x is 0.6 GB).
void fill_random(const Buffer& buffer, int64_t rows, int64_t k, uint64_t seed) {
  Random random{seed | 1};
  const int64_t total = rows * k, chunk = int64_t{1} << 22;
  std::vector<__half> host(static_cast<size_t>(std::min(total, chunk)));
  for (int64_t at = 0; at < total; at += chunk) {
    const int64_t count = std::min(chunk, total - at);
    for (int64_t i = 0; i < count; ++i) host[i] = __float2half_rn(random.next(1.0f));
    CNNRT_CUDA_CHECK(cudaMemcpy(static_cast<__half*>(buffer.get()) + at, host.data(),
                                count * sizeof(__half), cudaMemcpyHostToDevice));
  }
}

// bench/event_timing.h's median, the flush (if any) before each timed launch.
double median_ms(const std::function<void()>& launch, const std::function<void()>& flush, int iters,
                 cudaStream_t stream) {
  return cnnrt::bench::median_event_ms([&](int) { launch(); }, iters, stream, flush);
}

// ||a - b|| / ||b|| over the first `rows` rows of two [rows][m] fp16 outputs.
double rel_diff(const Buffer& a, const Buffer& b, int64_t rows, int64_t m) {
  std::vector<__half> ha(static_cast<size_t>(rows * m)), hb(ha.size());
  CNNRT_CUDA_CHECK(cudaMemcpy(ha.data(), a.get(), ha.size() * 2, cudaMemcpyDeviceToHost));
  CNNRT_CUDA_CHECK(cudaMemcpy(hb.data(), b.get(), hb.size() * 2, cudaMemcpyDeviceToHost));
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ha.size(); ++i) {
    const double x = __half2float(ha[i]), y = __half2float(hb[i]);
    diff += (x - y) * (x - y);
    norm += y * y;
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// The best cuSPARSELt configuration of a shape beside the default one ("best" in the table).
struct Best {
  double ms = NAN, rel_diff = NAN;
  std::string method = "none";  // "search", "sweep" or "none"
  int config_id = -1, split_k = -1;
  std::string search_error;                    // cusparseLtMatmulSearch's failure, if any
  int configs_timed = 0, configs_refused = 0;  // the sweep's
  std::string first_refusal;
  std::string label() const {
    const std::string id = config_id >= 0 ? "#" + std::to_string(config_id) : "";
    if (method == "search") return "search" + id;
    if (method == "sweep")
      return "sweep" + id +
             (configs_refused > 0 ? " (" + std::to_string(configs_refused) + " refused)" : "");
    return "-";
  }
};

constexpr size_t kSearchWorkspaceBytes = size_t{64} << 20;

// Where cusparseLtMatmulSearch fails: every configuration the default plan reports, planned and
// timed on a few launches, the fastest timed again with `iters`.
void sweep_configurations(const cnnrt::cuda::LinearCusparseLt& sparse, int64_t n, int max_id,
                          const Buffer& x, const Buffer& y, const std::function<void()>& flush,
                          int iters, cudaStream_t stream, Best& best) {
  best.method = "sweep";
  if (max_id < 0) {
    best.method = "none";
    best.first_refusal = "cuSPARSELt reports no configuration count (CONFIG_MAX_ID)";
    return;
  }
  const int sweep_iters = std::max(10, iters / 5);
  double fastest = INFINITY;
  cnnrt::cuda::LinearCusparseLt::Prepared kept;
  std::unique_ptr<Buffer> kept_ws;
  for (int id = 0; id <= max_id; ++id) {
    try {
      auto prepared = sparse.plan(n, /*buffers_hold_padded_batch=*/true, id);
      auto ws = std::make_unique<Buffer>(prepared.workspace_bytes);
      const double ms =
          median_ms([&] { sparse.run(*prepared.plan, x.get(), y.get(), ws->get(), stream); }, flush,
                    sweep_iters, stream);
      ++best.configs_timed;
      if (ms < fastest) {
        fastest = ms;
        kept = std::move(prepared);
        kept_ws = std::move(ws);
      }
    } catch (const std::exception& e) {
      (void)cudaGetLastError();  // a refused configuration must not fail the next call
      ++best.configs_refused;
      if (best.first_refusal.empty())
        best.first_refusal = "configuration " + std::to_string(id) + ": " + e.what();
    }
  }
  if (kept.plan == nullptr) {
    best.method = "none";
    return;
  }
  best.config_id = kept.config_id;
  best.ms = median_ms([&] { sparse.run(*kept.plan, x.get(), y.get(), kept_ws->get(), stream); },
                      flush, iters, stream);
}

int run(int argc, char** argv) {
  int iters = 100;
  bool search = true, flush_l2 = true;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--iters" && i + 1 < argc) {
      iters = std::max(50, std::atoi(argv[++i]));
    } else if (flag == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (flag == "--no-search") {
      search = false;
    } else if (flag == "--no-flush") {
      flush_l2 = false;
    } else {
      std::fprintf(stderr,
                   "usage: cusparselt_gemm [--iters N] [--json FILE] [--no-search] [--no-flush]\n");
      return 2;
    }
  }
  cudaDeviceProp prop{};
  CNNRT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream = nullptr;
  CNNRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const std::string version = cnnrt::cuda::LinearCusparseLt::library_version();
  std::printf("device: %s, %d SMs; cuSPARSELt %s; median of %d launches after warm-up, L2 %s\n",
              prop.name, prop.multiProcessorCount, version.c_str(), iters,
              flush_l2 ? "flushed before each" : "warm");
  std::printf("%-11s %5s %7s %5s | %9s %7s | %9s %7s %6s | %9s %6s %-18s | %8s %8s\n", "shape", "M",
              "N", "K", "dense ms", "TFLOP/s", "2:4 ms", "TFLOP/s", "x", "best ms", "x",
              "best config", "rel diff", "best");
  const size_t flush_bytes = 2 * static_cast<size_t>(std::max(prop.l2CacheSize, 1 << 20));
  Buffer flush_buffer(flush_bytes);
  std::function<void()> flush;
  if (flush_l2)
    flush = [&] { CNNRT_CUDA_CHECK(cudaMemsetAsync(flush_buffer.get(), 0, flush_bytes, stream)); };

  nlohmann::json rows = nlohmann::json::array();
  uint64_t seed = 1;
  int failed_shapes = 0;
  for (const GemmShape& shape : kShapes) {
    const int64_t m = shape.m, k = shape.k, n = shape.n, n_pad = round_up8(n);
    ++seed;
    try {
      // The weight [m][k], 2:4 along k: two kept positions per group, drawn per group.
      Random random{seed * 0x9E3779B97F4A7C15ull};
      std::vector<float> weight(static_cast<size_t>(m * k), 0.0f), bias(static_cast<size_t>(m));
      const float scale = 1.0f / std::sqrt(static_cast<float>(k) / 2);
      for (int64_t row = 0; row < m; ++row)
        for (int64_t group = 0; group < k / 4; ++group) {
          const int first = static_cast<int>(random.state % 4);
          const int second = (first + 1 + static_cast<int>((random.state >> 8) % 3)) % 4;
          weight[row * k + group * 4 + first] = random.next(scale);
          weight[row * k + group * 4 + second] = random.next(scale);
        }
      for (float& b : bias) b = random.next(0.1f);

      Buffer x(static_cast<size_t>(n_pad * k) * 2), y_dense(static_cast<size_t>(n_pad * m) * 2),
          y_sparse(static_cast<size_t>(n_pad * m) * 2);
      fill_random(x, n_pad, k, seed * 7);

      // Dense: the linear_fp16_cublaslt path.
      const cnnrt::cuda::GemmWeights dense_weights(cnnrt::cuda::pack_linear_weights(
          weight.data(), bias.data(), static_cast<int>(m), static_cast<int>(k), cnnrt::Shape{}));
      const cnnrt::cuda::LtGemm dense(dense_weights, /*relu=*/true);
      const auto dense_plan = dense.plan(n, 256);
      Buffer dense_ws(cnnrt::cuda::LtGemm::kWorkspaceBytes);
      const double dense_ms =
          median_ms([&] { dense.run(*dense_plan, x.get(), y_dense.get(), dense_ws.get(), stream); },
                    flush, iters, stream);

      // Sparse: the linear_fp16_cusparselt path (cuSPARSELt's default algorithm).
      const cnnrt::cuda::LinearCusparseLt sparse(weight.data(), bias.data(), static_cast<int>(m),
                                                 static_cast<int>(k), /*relu=*/true);
      const auto prepared = sparse.plan(n, /*buffers_hold_padded_batch=*/true);
      Buffer sparse_ws(prepared.workspace_bytes);
      const double sparse_ms = median_ms(
          [&] { sparse.run(*prepared.plan, x.get(), y_sparse.get(), sparse_ws.get(), stream); },
          flush, iters, stream);
      CNNRT_CUDA_CHECK(cudaStreamSynchronize(stream));
      const int64_t compared_rows = std::min<int64_t>(n, 256);
      const double diff = rel_diff(y_sparse, y_dense, compared_rows, m);

      Best best;
      if (search) {
        // A plan of its own: a failed search may leave its plan in any state.
        const auto searched = sparse.plan(n, /*buffers_hold_padded_batch=*/true);
        const size_t search_bytes = std::max(searched.workspace_bytes, kSearchWorkspaceBytes);
        auto search_ws = std::make_unique<Buffer>(search_bytes);
        bool found = false;
        cnnrt::cuda::LinearCusparseLt::SearchResult result;
        try {
          result = sparse.search(searched, x.get(), y_sparse.get(), search_ws->get(), search_bytes,
                                 stream);
          found = true;
        } catch (const std::exception& e) {
          (void)cudaGetLastError();
          best.search_error = e.what();
        }
        if (found) {
          if (result.workspace_bytes > search_ws->bytes())
            search_ws = std::make_unique<Buffer>(result.workspace_bytes);
          best.method = "search";
          best.config_id = result.config_id;
          best.split_k = result.split_k;
          best.ms = median_ms(
              [&] {
                sparse.run(*searched.plan, x.get(), y_sparse.get(), search_ws->get(), stream);
              },
              flush, iters, stream);
        } else {
          sweep_configurations(sparse, n, prepared.max_config_id, x, y_sparse, flush, iters, stream,
                               best);
        }
        CNNRT_CUDA_CHECK(cudaStreamSynchronize(stream));
        if (!std::isnan(best.ms)) best.rel_diff = rel_diff(y_sparse, y_dense, compared_rows, m);
      }

      const double flops = 2.0 * m * n * k;
      auto tflops = [&](double ms) { return flops / (ms * 1e-3) / 1e12; };
      std::printf(
          "%-11s %5lld %7lld %5lld | %9.4f %7.1f | %9.4f %7.1f %6.2f | %9.4f %6.2f %-18s | %8.1e "
          "%8.1e\n",
          shape.name, static_cast<long long>(m), static_cast<long long>(n),
          static_cast<long long>(k), dense_ms, tflops(dense_ms), sparse_ms, tflops(sparse_ms),
          dense_ms / sparse_ms, best.ms, dense_ms / best.ms, best.label().c_str(), diff,
          best.rel_diff);
      if (!best.search_error.empty())
        std::printf(
            "  cusparseLtMatmulSearch failed: %s\n  -> best of %d of cuSPARSELt's "
            "configurations 0..%d timed instead\n",
            best.search_error.c_str(), best.configs_timed, prepared.max_config_id);
      if (!best.first_refusal.empty())
        std::printf("  %d configuration(s) refused; first: %s\n", best.configs_refused,
                    best.first_refusal.c_str());
      std::fflush(stdout);
      nlohmann::json row = {{"shape", shape.name},
                            {"m", m},
                            {"n", n},
                            {"k", k},
                            {"dense_cublaslt_ms", dense_ms},
                            {"dense_tflops", tflops(dense_ms)},
                            {"sparse_cusparselt_ms", sparse_ms},
                            {"sparse_tflops", tflops(sparse_ms)},
                            {"speedup", dense_ms / sparse_ms},
                            {"sparse_variant", prepared.name},
                            {"sparse_default_config", prepared.config_id},
                            {"sparse_max_config", prepared.max_config_id},
                            {"rel_diff", diff}};
      if (search) {
        row["best_method"] = best.method;
        if (!std::isnan(best.ms)) {
          row["sparse_searched_ms"] = best.ms;
          row["speedup_searched"] = dense_ms / best.ms;
          row["best_config"] = best.config_id;
          row["rel_diff_best"] = best.rel_diff;
        }
        if (best.split_k >= 0) row["best_split_k"] = best.split_k;
        if (!best.search_error.empty()) row["search_error"] = best.search_error;
        if (best.method == "sweep" || !best.first_refusal.empty()) {
          row["configs_timed"] = best.configs_timed;
          row["configs_refused"] = best.configs_refused;
          if (!best.first_refusal.empty()) row["first_refusal"] = best.first_refusal;
        }
      }
      rows.push_back(row);
    } catch (const std::exception& e) {
      (void)cudaGetLastError();
      ++failed_shapes;
      std::printf("%-11s %5lld %7lld %5lld | error: %s\n", shape.name, static_cast<long long>(m),
                  static_cast<long long>(n), static_cast<long long>(k), e.what());
      std::fflush(stdout);
      rows.push_back({{"shape", shape.name}, {"m", m}, {"n", n}, {"k", k}, {"error", e.what()}});
    }
  }
  CNNRT_CUDA_CHECK(cudaStreamDestroy(stream));
  if (!json_path.empty()) {
    const char* commit = std::getenv("CNNRT_COMMIT");
    nlohmann::json report = {{"device", prop.name},
                             {"sms", prop.multiProcessorCount},
                             {"cusparselt", version},
                             {"commit", commit != nullptr ? commit : "unknown"},
                             {"iterations", iters},
                             {"l2_flushed", flush_l2},
                             {"flops", "dense 2*M*N*K on both sides"},
                             {"failed_shapes", failed_shapes},
                             {"rows", rows}};
    std::ofstream out(json_path);
    out << report.dump(2) << "\n";
    if (!out) throw cnnrt::Error("cannot write " + json_path);
  }
  if (failed_shapes > 0) {
    std::fprintf(stderr, "error: %d of %zu shapes failed (rows above)\n", failed_shapes,
                 sizeof(kShapes) / sizeof(kShapes[0]));
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
