// The int8 window conv's quantising form (kernels/cuda/conv/tma_window_quantise.cuh; the entry
// conv_int8_s2d_quantise): from the fp32 input, the window conv's producer quantises and
// rearranges it.  Its output must be the two-pass form's (conv_int8_s2d_window2: the
// rearrangement kernel, whose bits the kernel harness and the AlexNet GPU == CPU check hold to
// the integer reference, then the same window conv over x') byte for byte, on shapes of AlexNet's
// conv1 family: odd heights, narrower rows, out_c 32 and 64, pad 0 and 2, batch 1-40 (one unit a
// CTA, and several: the rows shared with the previous unit copied), inputs on
// rounding boundaries (the reciprocal's deferred path), saturating and NaN.  Its shape rule (no
// GPU needed) is test_s2d_tma.cpp's.
// The window conv's pooling form (kernels/cuda/conv/tma_window_pool.cuh; the comparison entry
// conv_int8_s2d_window3_pool): its pooled output must be the staged
// form's (conv_int8_s2d_window3: the same conv, then the pool pass) byte for byte, on the same
// shapes — bands of two pooled rows and of one (odd pooled heights), conv rows under no band,
// units straddling images, one unit a CTA and many.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "graph/ops.h"
#include "kernels/cuda/conv/tma_window.h"
#include "runtime/calibration.h"
#include "runtime/kernel.h"
#include "tests/cuda/fp16_test_util.h"

namespace cnnrt::cuda {
namespace {

constexpr float kInputScale = 2.0f / 127;

struct Stem {
  int h, w, out_c, pad, batch;
};

// conv1 of the AlexNet family (3 -> out_c, 11x11 stride 4, ReLU, MaxPool 3/2), random weights
// and bias of both signs.
Node stem_node(const Stem& s, std::mt19937& rng) {
  Node node;
  node.name = "conv1";
  node.op = OpKind::Conv;
  ConvAttrs a;
  a.out_channels = s.out_c;
  a.kernel_h = a.kernel_w = 11;
  a.stride_h = a.stride_w = 4;
  a.pad_h = a.pad_w = s.pad;
  node.attrs = a;
  node.inputs = {"input"};
  node.input_shapes = {{3, s.h, s.w}};
  const int64_t oh = pool_output_size(s.h, 11, 4, s.pad, 1, false);
  const int64_t ow = pool_output_size(s.w, 11, 4, s.pad, 1, false);
  node.pre_pool_shape = {s.out_c, oh, ow};
  node.output_shape = {s.out_c, pool_output_size(oh, 3, 2, 0, 1, false),
                       pool_output_size(ow, 3, 2, 0, 1, false)};
  node.activation = Activation::Relu;
  node.fused_maxpool = PoolAttrs{3, 3, 2, 2, 0, 0, false, true};
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> weight(size_t(s.out_c) * 3 * 121), bias(size_t(s.out_c));
  for (float& v : weight) v = normal(rng);
  for (float& v : bias) v = normal(rng);
  node.params.push_back(test::make_param("weight", {s.out_c, 3, 11, 11}, weight));
  node.params.push_back(test::make_param("bias", {s.out_c}, bias));
  return node;
}

Calibration stem_calibration() {
  Calibration calibration;
  calibration.model = "window_quantise_test";
  calibration.method = "minmax";
  calibration.tensors["input"] = {2.0f, kInputScale, "minmax"};
  calibration.tensors["conv1"] = {3.0f, 3.0f / 127, "minmax"};
  return calibration;
}

// N(0, 1) inputs; about 3 % exactly on a rounding boundary (k + 1/2 steps of the scale: the
// reciprocal's deferred values), some far past the int8 range, two NaN.
std::vector<float> stem_input(const Stem& s, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> step(-130, 130), pick(0, 99);
  std::vector<float> x(size_t(s.batch) * 3 * s.h * s.w);
  for (float& v : x) {
    const int p = pick(rng);
    v = p < 3    ? (float(step(rng)) + 0.5f) * kInputScale
        : p == 3 ? 40.0f * normal(rng)
                 : normal(rng);
  }
  x[x.size() / 3] = std::numeric_limits<float>::quiet_NaN();
  x[x.size() - 1] = std::numeric_limits<float>::quiet_NaN();
  return x;
}

struct Ran {
  std::string plan;
  std::vector<int8_t> y;
};
Ran run_entry(const char* name, const Node& node, const Calibration& calibration,
              const test::DeviceMem& x, int batch) {
  Graph graph;
  graph.name = "window_quantise_test";
  const KernelEntry* entry = KernelRegistry::instance().find(name);
  EXPECT_NE(entry, nullptr) << name;
  if (entry == nullptr || !entry->supports(node)) return {name + std::string(" not served"), {}};
  const std::unique_ptr<LayerKernel> kernel = entry->create({node, graph, &calibration});
  const KernelPlan plan = kernel->prepare({batch, {fp32_nchw()}});
  const size_t bytes = size_t(batch) * node.output_shape[1] * node.output_shape[2] *
                       ((node.output_shape[0] + 15) / 16 * 16);
  test::DeviceMem y(bytes), workspace(plan.workspace_bytes);
  // A sentinel in the output and the workspace: a byte the kernels do not write cannot pass as
  // the other form's, nor can a counter start from an earlier run's value.
  CNNRT_CUDA_CHECK(cudaMemset(y.get(), 0x5A, bytes));
  if (plan.workspace_bytes > 0)
    CNNRT_CUDA_CHECK(cudaMemset(workspace.get(), 0x5A, plan.workspace_bytes));
  KernelArgs args;
  args.inputs = {x.get()};
  args.output = y.get();
  args.batch = batch;
  args.workspace = plan.workspace_bytes > 0 ? workspace.get() : nullptr;
  args.variant = plan.variant;
  args.state = plan.state.get();
  kernel->run(args);
  CNNRT_CUDA_CHECK(cudaDeviceSynchronize());
  Ran ran{plan.variant_name, std::vector<int8_t>(bytes)};
  CNNRT_CUDA_CHECK(cudaMemcpy(ran.y.data(), y.get(), bytes, cudaMemcpyDeviceToHost));
  return ran;
}

std::string stem_name(const Stem& s) {
  return "h " + std::to_string(s.h) + " w " + std::to_string(s.w) + " out_c " +
         std::to_string(s.out_c) + " pad " + std::to_string(s.pad) + " batch " +
         std::to_string(s.batch);
}

// `a` equals `b` byte for byte, and is not mostly zeros (which would check little).
void expect_same_bytes(const Ran& a, const Ran& b) {
  ASSERT_EQ(a.y.size(), b.y.size());
  size_t differ = 0, nonzero = 0, first = 0;
  for (size_t i = 0; i < a.y.size(); ++i) {
    nonzero += a.y[i] != 0;
    if (a.y[i] != b.y[i] && differ++ == 0) first = i;
  }
  EXPECT_EQ(differ, 0u) << "first at byte " << first << ": " << int(a.y[first]) << " vs "
                        << int(b.y[first]);
  EXPECT_GT(nonzero, a.y.size() / 8) << "an output of mostly zeros checks little";
}

// Runs entries `a` and `b` on every stem (random weights and inputs seeded from `seed` and the
// stem's place) and expects the same bytes; `plans(plan_a, plan_b)` checks the two plan names.
template <class Plans>
void expect_entries_agree(const std::vector<Stem>& stems, uint32_t seed, const char* a,
                          const char* b, const Plans& plans) {
  const Calibration calibration = stem_calibration();
  for (const Stem& s : stems) {
    SCOPED_TRACE(stem_name(s));
    std::mt19937 rng(++seed);
    const Node node = stem_node(s, rng);
    const test::DeviceMem x(stem_input(s, rng));
    const Ran ran_a = run_entry(a, node, calibration, x, s.batch);
    const Ran ran_b = run_entry(b, node, calibration, x, s.batch);
    plans(ran_a.plan, ran_b.plan);
    expect_same_bytes(ran_a, ran_b);
  }
}

TEST(WindowQuantise, MatchesTheRearrangementPassByteForByte) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  if (!ConvS8Window::device_supported()) GTEST_SKIP() << "not an sm_90a device and build";
  const std::vector<Stem> stems = {
      {224, 224, 64, 2, 1},  // AlexNet conv1
      {224, 224, 64, 2, 3},  //   at batch 3: units straddle the images
      {131, 200, 32, 2, 2},  // odd height, narrower rows, half the channels
      {97, 224, 64, 0, 1},   // pad 0: the box from column 0
      {63, 120, 64, 0, 3},   // pad 0, short images (several per unit's rows)
      // Past one unit a CTA (units > SMs): the later units copy the rows their slab shares with
      // the previous one.
      {224, 224, 64, 2, 12},
      {63, 120, 64, 0, 40},
  };
  expect_entries_agree(
      stems, 40, "conv_int8_s2d_quantise", "conv_int8_s2d_window2",
      [](const std::string& fused, const std::string& two_pass) {
        EXPECT_EQ(fused.rfind("quantise-s2d-in-window_s8_3x3_n128+pool", 0), 0u) << fused;
        EXPECT_EQ(two_pass.rfind("quantise+s2d48+window_s8_3x3_n128+pool", 0), 0u) << two_pass;
      });
}

TEST(WindowPool, MatchesThePoolPassByteForByte) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  if (!ConvS8Window::device_supported()) GTEST_SKIP() << "not an sm_90a device and build";
  const std::vector<Stem> stems = {
      {224, 224, 64, 2, 1}, {224, 224, 64, 2, 3},  {131, 200, 32, 2, 2}, {97, 224, 64, 0, 1},
      {63, 120, 64, 0, 3},  {224, 224, 64, 2, 12}, {63, 120, 64, 0, 40}, {131, 200, 32, 2, 37},
  };
  expect_entries_agree(stems, 70, "conv_int8_s2d_window3_pool", "conv_int8_s2d_window3",
                       [](const std::string& pooled, const std::string& staged) {
                         EXPECT_EQ(pooled, "quantise+s2d48+window_s8x3_3x3_n128+bandpool");
                         EXPECT_EQ(staged, "quantise+s2d48+window_s8x3_3x3_n128+pool");
                       });
}

}  // namespace
}  // namespace cnnrt::cuda
