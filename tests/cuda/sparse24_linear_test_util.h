// Shared by the tests of the two 2:4 sparse fp16 linears (test_linear_sparse24.cpp: the CUDA-core
// GEMV; test_linear_sparse24_mma.cpp: the mma.sp GEMV): the odd-shape cases, their pruned
// weights and inputs (non-zero fp16 values, weights pruned 2:4 by magnitude so each group keeps
// two non-zeros), the CPU reference on the compressed weight, the fp16 tolerance check of
// harness/tolerance.h, and a graph holding the linear for the registry tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "fp16_test_util.h"
#include "graph/passes_sparsity.h"
#include "harness/tolerance.h"
#include "kernels/cpu/reference.h"
#include "kernels/cpu/sparse24.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::sparse24_test {

// A registry holding the two sparse linear entries only.
inline const KernelRegistry& sparse_registry() {
  static KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    cuda::register_sparse_linear_kernels(*r);
    return r;
  }();
  return *registry;
}

struct SparseCase {
  int in = 0, out = 0;
  Shape flattened;  // [C, H, W] when the input is an NHWC flatten, else empty
  bool bias = true, relu = false;
};

inline std::string describe(const SparseCase& c) {
  std::string s = "in " + std::to_string(c.in) + " out " + std::to_string(c.out);
  if (!c.flattened.empty()) s += " from " + shape_to_string(c.flattened);
  return s + (c.bias ? " bias" : "") + (c.relu ? " relu" : "");
}

// fp16 values of magnitude [lo, hi) with random signs: never zero.
inline std::vector<float> nonzero_fp16_values(size_t count, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> magnitude(lo, hi);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> values(count);
  for (float& v : values) v = test::round_fp16(negative(rng) ? -magnitude(rng) : magnitude(rng));
  return values;
}

// [out, in] with every weight non-zero, then pruned 2:4 by magnitude (graph/passes_sparsity.h).
inline std::vector<float> pruned_weight(int out, int in, std::mt19937& rng) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(in));
  std::vector<float> weight =
      nonzero_fp16_values(static_cast<size_t>(out) * in, rng, 0.1f * scale, scale);
  sparsity::prune_magnitude(weight.data(), sparsity::WeightShape{out, in, 1});
  return weight;
}

inline sparse24::Compressed compress(const std::vector<float>& weight, int out, int in) {
  return sparse24::compress(weight.data(), sparsity::WeightShape{out, in, 1}, "test");
}

// The GPU input for x [batch][in] in PyTorch's feature order: [batch][pad8(in)], a flattened
// [C, H, W] in (h, w, c) order (feature c·H·W + p at p·C + c).
inline std::vector<__half> gpu_input(const std::vector<float>& x, int batch, const SparseCase& c) {
  return test::linear_gpu_input(x, batch, c.in, c.flattened);
}

inline std::vector<float> sparse_reference(const sparse24::Compressed& weight,
                                           const std::vector<float>& bias,
                                           const std::vector<float>& x, int batch, bool relu) {
  std::vector<float> y(static_cast<size_t>(batch) * weight.shape.rows);
  sparse24::linear(x.data(), batch, weight, bias.empty() ? nullptr : bias.data(), y.data());
  if (relu) ref::relu(y.data(), static_cast<int64_t>(y.size()), y.data());
  return y;
}

// Both bounds of the fp16 tolerance (harness/tolerance.h): relative L2 over the tensor and every
// element within element · (|ref| + rms(ref)).
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want) {
  const harness::Tolerance tolerance = harness::tolerance_for(Precision::FP16);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LE(test::rel_l2(got, want), tolerance.rel_l2);
  double squares = 0.0;
  for (float v : want) squares += static_cast<double>(v) * v;
  const double rms = want.empty() ? 0.0 : std::sqrt(squares / want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tolerance.element * (std::fabs(want[i]) + rms))) ++bad;
  EXPECT_EQ(bad, 0u) << "elements outside the fp16 element bound";
}

// The shapes every layout test runs: plain vectors (in % 4 != 0, a narrow last slab, a padded
// slab), and flattens: AlexNet's fc6 input and C = 37, 40 (QuadMajor: H·W % 4 == 0, C ≥ 32; C not
// a multiple of 8 or 32, so a lane's slots wrap into the next pixel quad mid-slab), C = 13
// (Gather: C < 32, or H·W % 4 != 0), C == 1 or H·W == 1 (the identity: Vector).
inline const SparseCase kCases[] = {
    {37, 1, {}, true, true},
    {37, 13, {}, false, false},
    {100, 65, {}, true, false},
    {9220, 13, {}, true, true},
    {9216, 65, {256, 6, 6}, true, true},
    {37 * 2 * 2, 13, {37, 2, 2}, false, true},
    {40 * 3 * 4, 65, {40, 3, 4}, true, false},
    {13 * 2 * 2, 13, {13, 2, 2}, true, true},
    {13 * 3 * 5, 65, {13, 3, 5}, true, true},
    {3 * 1 * 7, 1, {3, 1, 7}, false, false},
    {7, 13, {7, 1, 1}, true, false},
    {20, 13, {1, 4, 5}, true, true},
};

// One case's data for the GPU kernels' sweep over batches up to max_batch: the pruned weight
// compressed, its bias (empty without), x drawn once (batch b uses the first b samples) and the
// CPU reference for all max_batch samples.
struct CaseRun {
  sparse24::Compressed compressed;
  std::vector<float> bias, x, expected;
};

inline CaseRun case_run(const SparseCase& c, int max_batch, std::mt19937& rng) {
  CaseRun r;
  const std::vector<float> weight = pruned_weight(c.out, c.in, rng);
  if (c.bias) r.bias = nonzero_fp16_values(c.out, rng, 0.05f, 1.0f);
  r.x = nonzero_fp16_values(static_cast<size_t>(max_batch) * c.in, rng, 0.05f, 1.0f);
  r.compressed = compress(weight, c.out, c.in);
  r.expected = sparse_reference(r.compressed, r.bias, r.x, max_batch, c.relu);
  return r;
}

// launch(output) writes `batch` samples into NaN-filled bytes; they must match the reference's
// first `batch` samples, and the padded output features must come out exactly zero.
template <class Launch>
void expect_batch_output(const SparseCase& c, const CaseRun& r, int batch, Launch launch) {
  test::DeviceMem output(static_cast<size_t>(batch) * test::pad8(c.out) * 2);  // NaN bytes
  launch(output.get());
  CNNRT_CUDA_CHECK(cudaDeviceSynchronize());
  int64_t bad_padding = 0;
  const auto got = test::from_nhwc(output.halves(), batch, c.out, 1, 1, &bad_padding);
  expect_close(got,
               std::vector<float>(r.expected.begin(), r.expected.begin() + size_t(batch) * c.out));
  EXPECT_EQ(bad_padding, 0);
}

// A graph holding (optionally) a flatten and the linear reading it, weight marked 2:4.
struct SparseGraph {
  Graph graph;
  std::vector<float> weight, bias;
  const Node& linear() const { return graph.nodes.back(); }
};

inline SparseGraph make_sparse_graph(const SparseCase& c, std::mt19937& rng) {
  SparseGraph g;
  g.weight = pruned_weight(c.out, c.in, rng);
  if (c.bias) g.bias = nonzero_fp16_values(c.out, rng, 0.05f, 1.0f);
  g.graph = test::linear_test_graph(c.in, c.out, c.relu, c.flattened, g.weight, g.bias);
  g.graph.nodes.back().weight_2_4 = true;
  return g;
}

}  // namespace cnnrt::sparse24_test
