// The cuSPARSELt baseline entry (linear_fp16_cusparselt, kernels/cuda/linear_cusparselt.h)
// against the CPU reference on weights pruned 2:4 by magnitude (graph/passes_sparsity.h):
// feature counts cuSPARSELt takes that are not multiples of 8 or 16 (pad8 of them is a multiple
// of 16), inputs read from an NHWC flatten (the kernel transposes them back to (c, h, w) order),
// batch 1, 7 (staged to 8 rows) and 64, with and without ReLU and bias; AlexNet's fc6 (reading a
// flatten) and fc7 built after freed device memory that held 0xFF bytes; a first run captured in
// a CUDA graph; the registry flags (baseline, 2:4 only) and the shapes and weights it refuses.
// Inputs and weights are fp16 values before the reference sees them; tolerance: the fp16 one of
// harness/tolerance.h (relative L2); outputs and workspace start as NaN bytes and padded output
// features must come out exactly zero.  Without cuSPARSELt in the build
// (CNNRT_WITH_CUSPARSELT), or without a GPU for the numerical tests, they skip and say why.
#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <string>
#include <vector>

#include "fp16_test_util.h"
#include "graph/passes_sparsity.h"
#include "harness/tolerance.h"
#include "kernels/cpu/reference.h"
#include "runtime/cuda/cuda_registry.h"

#ifdef CNNRT_WITH_CUSPARSELT
#include "kernels/cuda/linear_cusparselt.h"
#endif

namespace cnnrt {
namespace {

#ifndef CNNRT_WITH_CUSPARSELT

TEST(LinearCusparseLt, BuiltWithoutCusparseLtRegistersNothing) {
  KernelRegistry registry;
  cuda::register_cusparselt_kernels(registry);
  EXPECT_TRUE(registry.entries().empty());
  GTEST_SKIP() << "built without cuSPARSELt (CNNRT_WITH_CUSPARSELT: see CMakeLists.txt for how "
                  "it is found)";
}

#else

using test::DeviceMem;

const double kTolerance = harness::tolerance_for(Precision::FP16).rel_l2;
const char* const kEntry = "linear_fp16_cusparselt";

const KernelRegistry& cusparselt_registry() {
  static KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    cuda::register_cusparselt_kernels(*r);
    return r;
  }();
  return *registry;
}

struct LinearCase {
  int in = 0, out = 0;
  bool bias = true, relu = false;
  Shape flattened;  // [C, H, W] when the input comes from a flatten, else empty
};

std::string describe(const LinearCase& lc) {
  return "in " + std::to_string(lc.in) + " out " + std::to_string(lc.out) +
         (lc.bias ? " bias" : "") + (lc.relu ? " relu" : "") +
         (lc.flattened.empty() ? "" : " flattened " + shape_to_string(lc.flattened));
}

// A graph holding (optionally) a flatten node and the linear node reading it, its weight pruned
// 2:4 in PyTorch's order and marked so (as mark_2_4_weights would).
struct LinearGraph {
  Graph graph;
  std::vector<float> weight, bias;
  const Node& linear() const { return graph.nodes.back(); }
};

LinearGraph make_pruned_graph(const LinearCase& lc, std::mt19937& rng) {
  LinearGraph g;
  const float scale = 2.0f / std::sqrt(static_cast<float>(lc.in));
  g.weight = test::random_fp16_values(static_cast<size_t>(lc.out) * lc.in, rng, -scale, scale);
  sparsity::prune_magnitude(g.weight.data(), sparsity::WeightShape{lc.out, lc.in, 1});
  if (lc.bias) g.bias = test::random_fp16_values(lc.out, rng);
  g.graph = test::linear_test_graph(lc.in, lc.out, lc.relu, lc.flattened, g.weight, g.bias);
  Node& node = g.graph.nodes.back();
  node.weight_2_4 = sparsity::node_violation(node).empty();
  return g;
}

// x [batch][in] in PyTorch's feature order as the GPU holds it: padded to pad8(in), and, after a
// flatten of [C, H, W], in (h, w, c) order.
std::vector<__half> gpu_input(const std::vector<float>& x, int batch, const LinearCase& lc) {
  return test::linear_gpu_input(x, batch, lc.in, lc.flattened);
}

std::vector<float> reference(const LinearGraph& g, const std::vector<float>& x, int batch,
                             const LinearCase& lc) {
  return test::linear_reference(x, batch, lc.in, lc.out, g.weight, g.bias, lc.relu);
}

// pad8(in) and pad8(out) multiples of 16, the features themselves not.
const LinearCase kCases[] = {
    {90, 41, true, false, {}},
    {300, 45, true, true, {}},
    {765, 250, false, true, {}},
    {12 * 3 * 4, 30, true, true, {12, 3, 4}},    // C % 8 != 0: the flatten copies
    {16 * 2 * 3, 27, false, false, {16, 2, 3}},  // C % 8 == 0: the flatten is a view
};

TEST(LinearCusparseLt, MatchesCpuReferenceOnPrunedWeights) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  uint32_t seed = 900;
  for (const LinearCase& lc : kCases) {
    std::mt19937 rng(++seed);
    const LinearGraph g = make_pruned_graph(lc, rng);
    ASSERT_TRUE(g.linear().weight_2_4) << describe(lc);
    test::EntryRunner runner(cusparselt_registry(), kEntry, g.linear(), g.graph);
    for (int batch : {1, 7, 64}) {
      SCOPED_TRACE(describe(lc) + ", batch " + std::to_string(batch));
      const auto x = test::random_fp16_values(static_cast<size_t>(batch) * lc.in, rng);
      const auto expected = reference(g, x, batch, lc);
      DeviceMem input(gpu_input(x, batch, lc));
      DeviceMem output(static_cast<size_t>(batch) * test::pad8(lc.out) * 2);  // NaN bytes
      runner.run({input.get()}, output.get(), batch);
      int64_t bad_padding = 0;
      const auto got = test::from_nhwc(output.halves(), batch, lc.out, 1, 1, &bad_padding);
      EXPECT_LE(test::rel_l2(got, expected), kTolerance);
      EXPECT_EQ(bad_padding, 0);
    }
  }
}

// AlexNet's sparse fc6 (9216 -> 4096, reading the [256, 6, 6] flatten) and fc7 (4096 -> 4096), each
// built right after small device allocations that held 0xFF bytes were freed, as a context's
// earlier layers leave them: cuSPARSELt's 2:4 check writes its verdict into a fresh allocation,
// which must not read stale bytes as "not 2:4" (both layers were refused so on an H100).
TEST(LinearCusparseLt, AlexNetFcLayersBuildAfterStaleDeviceMemory) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const LinearCase fc_cases[] = {
      {9216, 4096, true, true, {256, 6, 6}},
      {4096, 4096, true, true, {}},
  };
  uint32_t seed = 970;
  for (const LinearCase& lc : fc_cases) {
    SCOPED_TRACE(describe(lc));
    std::mt19937 rng(++seed);
    const LinearGraph g = make_pruned_graph(lc, rng);
    ASSERT_TRUE(g.linear().weight_2_4);
    {
      std::deque<DeviceMem> stale;  // 0xFF bytes (DeviceMem), freed at the end of the scope
      for (int i = 0; i < 256; ++i) stale.emplace_back(size_t{4} << (i % 8));
    }
    test::EntryRunner runner(cusparselt_registry(), kEntry, g.linear(), g.graph);
    for (int batch : {1, 3}) {
      SCOPED_TRACE("batch " + std::to_string(batch));
      const auto x = test::random_fp16_values(static_cast<size_t>(batch) * lc.in, rng);
      const auto expected = reference(g, x, batch, lc);
      DeviceMem input(gpu_input(x, batch, lc));
      DeviceMem output(static_cast<size_t>(batch) * test::pad8(lc.out) * 2);
      runner.run({input.get()}, output.get(), batch);
      int64_t bad_padding = 0;
      const auto got = test::from_nhwc(output.halves(), batch, lc.out, 1, 1, &bad_padding);
      EXPECT_LE(test::rel_l2(got, expected), kTolerance);
      EXPECT_EQ(bad_padding, 0);
    }
  }
}

// Staging copies, the transpose and cusparseLtMatmul are all enqueued in run(): the first run
// can be captured, and the replayed graph gives the reference result.
TEST(LinearCusparseLt, FirstRunCanBeCapturedInACudaGraph) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const LinearCase lc{12 * 3 * 4, 30, true, true, {12, 3, 4}};
  const int batch = 7;
  std::mt19937 rng(950);
  const LinearGraph g = make_pruned_graph(lc, rng);
  const auto x = test::random_fp16_values(static_cast<size_t>(batch) * lc.in, rng);
  const auto expected = reference(g, x, batch, lc);
  test::EntryRunner runner(cusparselt_registry(), kEntry, g.linear(), g.graph);
  DeviceMem input(gpu_input(x, batch, lc));
  DeviceMem output(static_cast<size_t>(batch) * test::pad8(lc.out) * 2);
  const KernelPlan plan = runner.prepare(batch);
  runner.run_captured(plan, {input.get()}, output.get(), batch);
  int64_t bad_padding = 0;
  const auto got = test::from_nhwc(output.halves(), batch, lc.out, 1, 1, &bad_padding);
  EXPECT_LE(test::rel_l2(got, expected), kTolerance);
  EXPECT_EQ(bad_padding, 0);
  EXPECT_NE(plan.variant_name.find("transpose"), std::string::npos) << plan.variant_name;
}

// Host-only: a comparison baseline, offered only for a 2:4 weight, on the shapes and epilogues
// it computes exactly.
TEST(LinearCusparseLt, EntryIsASparseBaselineForTheShapesItTakes) {
  const KernelEntry* entry = cusparselt_registry().find(kEntry);
  ASSERT_NE(entry, nullptr);
  EXPECT_TRUE(entry->baseline);
  EXPECT_TRUE(entry->sparse_2_4);
  EXPECT_EQ(entry->device, Device::CUDA);
  EXPECT_EQ(entry->precision, Precision::FP16);
  std::mt19937 rng(960);
  LinearGraph g = make_pruned_graph({300, 45, true, true, {}}, rng);
  Node node = g.linear();
  EXPECT_TRUE(entry->supports(node));
  node.activation = Activation::None;
  EXPECT_TRUE(entry->supports(node));
  node.activation = Activation::Relu6;
  EXPECT_FALSE(entry->supports(node)) << "relu6 is not cuSPARSELt's epilogue";
  node.activation = Activation::Relu;
  node.weight_2_4 = false;
  EXPECT_FALSE(entry->supports(node)) << "a weight that is not 2:4";
  // pad8(100) = 104 and pad8(37) = 40 are not multiples of 16: refused, not padded.
  const LinearGraph odd = make_pruned_graph({100, 37, true, false, {}}, rng);
  EXPECT_FALSE(entry->supports(odd.linear()));
  EXPECT_TRUE(cuda::LinearCusparseLt::supports(90, 41));
  EXPECT_FALSE(cuda::LinearCusparseLt::supports(100, 41));
  EXPECT_FALSE(cuda::LinearCusparseLt::supports(90, 37));
  // AlexNet's fc6 and fc7 and the harness's 300 -> 45 are taken; fc8's 1000 outputs are not
  // (pad8(1000) = 1000, not a multiple of 16).
  EXPECT_TRUE(cuda::LinearCusparseLt::supports(9216, 4096));
  EXPECT_TRUE(cuda::LinearCusparseLt::supports(4096, 4096));
  EXPECT_TRUE(cuda::LinearCusparseLt::supports(300, 45));
  EXPECT_FALSE(cuda::LinearCusparseLt::supports(4096, 1000));
}

// Host-only: the 2:4 check comes before any library call, and names the group.
TEST(LinearCusparseLt, RefusesAWeightThatIsNot2of4) {
  std::vector<float> weight(static_cast<size_t>(16) * 32, 0.5f);
  try {
    cuda::LinearCusparseLt linear(weight.data(), nullptr, 16, 32, false);
    FAIL() << "a dense weight was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("not 2:4"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("output channel 0"), std::string::npos)
        << error.what();
  }
}

#endif  // CNNRT_WITH_CUSPARSELT

}  // namespace
}  // namespace cnnrt
