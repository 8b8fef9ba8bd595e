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
// the speed-up is sparse vs dense time.  "searched": cusparseLtMatmulSearch's fastest algorithm
// configuration on the same buffers (the entry uses the default one; --no-search skips it).
// Buffers hold round_up8(N) rows, so the N = 1 rows time cuSPARSELt on 8 columns without the
// entry's staging copies.  "rel diff": relative L2 distance of the two outputs (a layout check).
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

// Median of `iters` event-timed launches after 10 untimed ones; `flush` (if any) is enqueued
// before each timed launch, outside its events.  One synchronisation at the end.
double median_ms(const std::function<void()>& launch, const std::function<void()>& flush, int iters,
                 cudaStream_t stream) {
  for (int i = 0; i < 10; ++i) launch();
  std::vector<cudaEvent_t> events(2 * static_cast<size_t>(iters));
  for (cudaEvent_t& event : events) CNNRT_CUDA_CHECK(cudaEventCreate(&event));
  for (int i = 0; i < iters; ++i) {
    if (flush) flush();
    CNNRT_CUDA_CHECK(cudaEventRecord(events[2 * i], stream));
    launch();
    CNNRT_CUDA_CHECK(cudaEventRecord(events[2 * i + 1], stream));
  }
  CNNRT_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> times(iters);
  for (int i = 0; i < iters; ++i)
    CNNRT_CUDA_CHECK(cudaEventElapsedTime(&times[i], events[2 * i], events[2 * i + 1]));
  for (cudaEvent_t event : events) CNNRT_CUDA_CHECK(cudaEventDestroy(event));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
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
  std::printf("%-11s %5s %7s %5s | %9s %7s | %9s %7s %6s | %9s %6s | %8s\n", "shape", "M", "N", "K",
              "dense ms", "TFLOP/s", "2:4 ms", "TFLOP/s", "x", "search ms", "x", "rel diff");
  const size_t flush_bytes = 2 * static_cast<size_t>(std::max(prop.l2CacheSize, 1 << 20));
  Buffer flush_buffer(flush_bytes);
  std::function<void()> flush;
  if (flush_l2)
    flush = [&] { CNNRT_CUDA_CHECK(cudaMemsetAsync(flush_buffer.get(), 0, flush_bytes, stream)); };

  nlohmann::json rows = nlohmann::json::array();
  uint64_t seed = 1;
  for (const GemmShape& shape : kShapes) {
    const int64_t m = shape.m, k = shape.k, n = shape.n, n_pad = round_up8(n);
    // The weight [m][k], 2:4 along k: two kept positions per group, drawn per group.
    Random random{++seed * 0x9E3779B97F4A7C15ull};
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
    auto sparse_ws = std::make_unique<Buffer>(prepared.workspace_bytes);
    auto sparse_launch = [&] {
      sparse.run(*prepared.plan, x.get(), y_sparse.get(), sparse_ws->get(), stream);
    };
    const double sparse_ms = median_ms(sparse_launch, flush, iters, stream);
    CNNRT_CUDA_CHECK(cudaStreamSynchronize(stream));
    const double diff = rel_diff(y_sparse, y_dense, std::min<int64_t>(n, 256), m);

    double searched_ms = NAN;
    if (search) {
      const size_t needed =
          sparse.search(prepared, x.get(), y_sparse.get(), sparse_ws->get(), stream);
      if (needed > sparse_ws->bytes()) sparse_ws = std::make_unique<Buffer>(needed);
      searched_ms = median_ms(sparse_launch, flush, iters, stream);
    }

    const double flops = 2.0 * m * n * k;
    auto tflops = [&](double ms) { return flops / (ms * 1e-3) / 1e12; };
    std::printf("%-11s %5lld %7lld %5lld | %9.4f %7.1f | %9.4f %7.1f %6.2f | %9.4f %6.2f | %8.1e\n",
                shape.name, static_cast<long long>(m), static_cast<long long>(n),
                static_cast<long long>(k), dense_ms, tflops(dense_ms), sparse_ms, tflops(sparse_ms),
                dense_ms / sparse_ms, searched_ms, dense_ms / searched_ms, diff);
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
                          {"rel_diff", diff}};
    if (search) {
      row["sparse_searched_ms"] = searched_ms;
      row["speedup_searched"] = dense_ms / searched_ms;
    }
    rows.push_back(row);
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
                             {"rows", rows}};
    std::ofstream out(json_path);
    out << report.dump(2) << "\n";
    if (!out) throw cnnrt::Error("cannot write " + json_path);
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
