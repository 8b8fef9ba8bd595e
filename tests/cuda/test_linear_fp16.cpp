// The fp16 linear entries (linear_fp16, linear_fp16_cublaslt, linear_fp16_gemv): what is specific
// to them.  Their numerics on the linear case table (odd sizes, flattened inputs whose weight
// columns are permuted, AlexNet's fc layers, batches either side of the GEMV/GEMM switch) run
// in the kernel test harness (tests/harness, `--gtest_filter='linear/*'`).  Here: the default
// entry's variant choice at the GEMV threshold, capture in a CUDA graph on first use, the GEMV
// driven directly with every K split, its host-side split choice, the epilogues the entries
// refuse and the column permutation of the packing.  Inputs and weights are rounded to fp16
// before the reference sees them; tolerance: the fp16 one of harness/tolerance.h (relative L2);
// outputs start as NaN bytes and padded output features must come out exactly zero.
#include <cstring>
#include <memory>
#include <random>

#include "fp16_test_util.h"
#include "harness/tolerance.h"
#include "kernels/cpu/reference.h"
#include "kernels/cuda/linear_fp16.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt {
namespace {

using test::DeviceMem;

const double kTolerance = harness::tolerance_for(Precision::FP16).rel_l2;  // one place
const char* const kEntries[] = {"linear_fp16", "linear_fp16_cublaslt", "linear_fp16_gemv"};

const KernelRegistry& linear_registry() {
  static KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    cuda::register_linear_kernels(*r);
    return r;
  }();
  return *registry;
}

struct LinearCase {
  int in = 0, out = 0;
  bool bias = true, relu = false;
  Shape flattened;  // [C, H, W] when the input comes from a flatten, else empty
};

// A graph holding (optionally) a flatten node and the linear node reading it.
struct LinearGraph {
  Graph graph;
  std::vector<float> weight, bias;
  const Node& linear() const { return graph.nodes.back(); }
};

LinearGraph make_linear_graph(const LinearCase& lc, std::mt19937& rng) {
  LinearGraph g;
  // Scaled so outputs stay O(1) whatever the fan-in.
  const float scale = 1.0f / std::sqrt(static_cast<float>(lc.in));
  g.weight = test::random_fp16_values(static_cast<size_t>(lc.out) * lc.in, rng, -scale, scale);
  if (lc.bias) g.bias = test::random_fp16_values(lc.out, rng);
  g.graph = test::linear_test_graph(lc.in, lc.out, lc.relu, lc.flattened, g.weight, g.bias);
  return g;
}

// The GPU input for x [batch][in] in PyTorch's feature order: padded to pad8(in), and, for a
// flattened [C, H, W], reordered to (h, w, c).
std::vector<__half> gpu_input(const std::vector<float>& x, int batch, const LinearCase& lc) {
  return test::linear_gpu_input(x, batch, lc.in, lc.flattened);
}

std::vector<float> reference(const LinearGraph& g, const std::vector<float>& x, int batch,
                             const LinearCase& lc) {
  return test::linear_reference(x, batch, lc.in, lc.out, g.weight, g.bias, lc.relu);
}

// The batch decides the variant once per context (prepare); the harness runs both sides.
TEST(LinearFp16, DefaultEntrySwitchesAtTheGemvThreshold) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const LinearCase lc{300, 45, true, true, {}};
  std::mt19937 rng(402);
  const LinearGraph g = make_linear_graph(lc, rng);
  test::EntryRunner runner(linear_registry(), "linear_fp16", g.linear(), g.graph);
  EXPECT_EQ(runner.prepare(cuda::kGemvMaxBatch).workspace_bytes, 0u);
  EXPECT_EQ(runner.prepare(cuda::kGemvMaxBatch).variant_name, "gemv");
  EXPECT_GT(runner.prepare(cuda::kGemvMaxBatch + 1).workspace_bytes, 0u);
  EXPECT_EQ(runner.prepare(cuda::kGemvMaxBatch + 1).variant_name, "cublaslt");
}

// First use inside stream capture: the cuBLASLt plan is made while capturing (host calls only),
// and the replayed graph must produce the reference result.
TEST(LinearFp16, FirstRunCanBeCapturedInACudaGraph) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const LinearCase lc{100, 37, true, true, {}};
  for (const char* entry : kEntries) {
    const int batch = 16;
    std::mt19937 rng(500);
    const LinearGraph g = make_linear_graph(lc, rng);
    const auto x = test::random_fp16_values(static_cast<size_t>(batch) * lc.in, rng);
    const auto expected = reference(g, x, batch, lc);
    test::EntryRunner runner(linear_registry(), entry, g.linear(), g.graph);
    DeviceMem input(gpu_input(x, batch, lc));
    DeviceMem output(static_cast<size_t>(batch) * test::pad8(lc.out) * 2);
    runner.run_captured(runner.prepare(batch), {input.get()}, output.get(), batch);
    int64_t bad_padding = 0;
    const auto got = test::from_nhwc(output.halves(), batch, lc.out, 1, 1, &bad_padding);
    EXPECT_LE(test::rel_l2(got, expected), kTolerance) << entry;
    EXPECT_EQ(bad_padding, 0);
  }
}

// One GEMV test shape's data: a [rows, k] weight scaled by 1/sqrt(k), a bias, kGemvMaxBatch
// input vectors (batch b uses the first b), the CPU reference of all of them, and the packed
// device weights.  with_bias false: the kernels get no bias.
struct GemvData {
  std::vector<float> weight, bias, x, expected;
  std::unique_ptr<cuda::GemmWeights> weights;
};
GemvData gemv_data(int rows, int k, uint32_t seed, bool with_bias, bool relu) {
  GemvData d;
  std::mt19937 rng(seed);
  const float scale = 1.0f / std::sqrt(static_cast<float>(k));
  d.weight = test::random_fp16_values(static_cast<size_t>(rows) * k, rng, -scale, scale);
  d.bias = test::random_fp16_values(rows, rng);
  d.x = test::random_fp16_values(static_cast<size_t>(cuda::kGemvMaxBatch) * k, rng);
  d.expected.resize(static_cast<size_t>(cuda::kGemvMaxBatch) * rows);
  const float* bias = with_bias ? d.bias.data() : nullptr;
  ref::linear(d.x.data(), cuda::kGemvMaxBatch, k, d.weight.data(), bias, rows, d.expected.data());
  if (relu)
    ref::relu(d.expected.data(), static_cast<int64_t>(d.expected.size()), d.expected.data());
  d.weights = std::make_unique<cuda::GemmWeights>(
      cuda::pack_linear_weights(d.weight.data(), bias, rows, k, Shape{}));
  return d;
}

// gemv_fp16 directly, every split (0 = the host's choice, then each forced 1/2/4/8) on shapes
// that stress it: a single output row (split 8 leaves 7 warps of a group idle or the row past
// the matrix), rows not a multiple of a block's row count, k of one 16-byte vector (only lane 0
// of slice 0 works), k of 9 vectors (one partial chunk), k = 4104 (16 full chunks + 1 vector:
// the predicated round), fc6's 9216, batch 1..8 (all row/unroll variants).  Bias and ReLU
// alternate per shape.  The 8 input vectors are drawn once per shape; batch b uses the first b,
// so one CPU reference serves all batches.  Tolerance as above.
TEST(LinearFp16, GemvEverySplitOddShapesAndBatches) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  struct GemvShape {
    int rows, k;
  };
  const GemvShape shapes[] = {{1, 8},    {7, 72},   {37, 4104}, {1000, 9216},
                              {1, 9216}, {1000, 8}, {37, 72},   {7, 4104}};
  uint32_t seed = 600;
  for (const GemvShape& shape : shapes) {
    ++seed;
    const bool with_bias = seed % 2 == 0, relu = seed % 3 != 0;
    const GemvData d = gemv_data(shape.rows, shape.k, seed, with_bias, relu);
    const cuda::GemmWeights& weights = *d.weights;
    const std::vector<float>&x = d.x, &expected = d.expected;
    const LinearCase lc{shape.k, shape.rows, with_bias, relu, {}};
    DeviceMem input(gpu_input(x, cuda::kGemvMaxBatch, lc));
    for (int batch = 1; batch <= cuda::kGemvMaxBatch; ++batch)
      for (int split : {0, 1, 2, 4, 8}) {
        DeviceMem output(static_cast<size_t>(batch) * test::pad8(shape.rows) * 2);  // NaN bytes
        // Splits 4 and 8 read the weights evict-first (KernelArgs::stream_evict_first).
        cuda::gemv_fp16(weights, relu, input.get(), output.get(), batch, nullptr, split,
                        split >= 4);
        CNNRT_CUDA_CHECK(cudaDeviceSynchronize());
        int64_t bad_padding = 0;
        const auto got = test::from_nhwc(output.halves(), batch, shape.rows, 1, 1, &bad_padding);
        const std::vector<float> want(expected.begin(),
                                      expected.begin() + static_cast<size_t>(batch) * shape.rows);
        SCOPED_TRACE("rows=" + std::to_string(shape.rows) + " k=" + std::to_string(shape.k) +
                     " batch=" + std::to_string(batch) + " split=" + std::to_string(split) +
                     " bias=" + std::to_string(with_bias) + " relu=" + std::to_string(relu));
        EXPECT_LE(test::rel_l2(got, want), kTolerance);
        EXPECT_EQ(bad_padding, 0);
      }
  }
}

// gemv_fp16_to_fp32: the graph-output form writes exactly [batch, rows] fp32 (rows not a
// multiple of 8, so the padded rows of the weight must not be written: the bytes after the last
// value keep their 0xFF fill), every split, batch 1..8, against the same CPU reference.
TEST(LinearFp16, GemvToFp32WritesTheDenseOutputOnly) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  struct GemvShape {
    int rows, k;
  };
  const GemvShape shapes[] = {{37, 4104}, {1, 72}, {1001, 9216}};
  uint32_t seed = 650;
  for (const GemvShape& shape : shapes) {
    ++seed;
    const bool relu = seed % 2 == 0;
    const GemvData d = gemv_data(shape.rows, shape.k, seed, /*with_bias=*/true, relu);
    const cuda::GemmWeights& weights = *d.weights;
    const std::vector<float>&x = d.x, &expected = d.expected;
    const LinearCase lc{shape.k, shape.rows, true, relu, {}};
    DeviceMem input(gpu_input(x, cuda::kGemvMaxBatch, lc));
    constexpr size_t kGuard = 64;  // floats after the output that must stay untouched
    for (int batch = 1; batch <= cuda::kGemvMaxBatch; ++batch)
      for (int split : {0, 1, 4, 8}) {
        const size_t count = static_cast<size_t>(batch) * shape.rows;
        DeviceMem output((count + kGuard) * sizeof(float));
        cuda::gemv_fp16_to_fp32(weights, relu, input.get(), static_cast<float*>(output.get()),
                                batch, shape.rows, nullptr, split, split >= 4);
        CNNRT_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<float> got(count + kGuard);
        CNNRT_CUDA_CHECK(cudaMemcpy(got.data(), output.get(), got.size() * sizeof(float),
                                    cudaMemcpyDeviceToHost));
        SCOPED_TRACE("rows=" + std::to_string(shape.rows) + " k=" + std::to_string(shape.k) +
                     " batch=" + std::to_string(batch) + " split=" + std::to_string(split));
        const std::vector<float> want(expected.begin(), expected.begin() + count);
        EXPECT_LE(test::rel_l2(std::vector<float>(got.begin(), got.begin() + count), want),
                  kTolerance);
        int64_t touched = 0;
        for (size_t i = count; i < got.size(); ++i) {
          uint32_t bits;
          std::memcpy(&bits, &got[i], sizeof(bits));
          touched += bits != 0xFFFFFFFFu;
        }
        EXPECT_EQ(touched, 0) << "values written past [batch, rows]";
      }
  }
  // out_features outside 1..rows_pad is refused.
  std::mt19937 rng(1);
  const auto small_weight = test::random_fp16_values(16 * 24, rng);
  const cuda::GemmWeights small(
      cuda::pack_linear_weights(small_weight.data(), nullptr, 16, 24, Shape{}));
  DeviceMem in(24 * 2), out(64 * sizeof(float));
  for (int features : {0, 17})
    EXPECT_THROW(cuda::gemv_fp16_to_fp32(small, false, in.get(), static_cast<float*>(out.get()), 1,
                                         features, nullptr),
                 Error);
}

TEST(LinearFp16, GemvRejectsInvalidSplitAndAliasing) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(700);
  const auto weight = test::random_fp16_values(16 * 24, rng);
  const cuda::GemmWeights weights(
      cuda::pack_linear_weights(weight.data(), nullptr, 16, 24, Shape{}));
  DeviceMem input(static_cast<size_t>(24) * 2), output(static_cast<size_t>(16) * 2);
  for (int split : {-1, 3, 16})
    EXPECT_THROW(cuda::gemv_fp16(weights, false, input.get(), output.get(), 1, nullptr, split),
                 Error);
  EXPECT_THROW(cuda::gemv_fp16(weights, false, input.get(), input.get(), 1, nullptr, 1), Error);
}

// Host-only: the launch-shape choice follows the design note in linear_fp16.cu.
TEST(LinearFp16, GemvSplitChoice) {
  constexpr int kSms = 132;  // H100 / H200
  // Many rows already fill the GPU: no split (fc6, fc7 at batch 1).
  EXPECT_EQ(cuda::gemv_choose_split(4096, 9216, 1, kSms), 1);
  EXPECT_EQ(cuda::gemv_choose_split(4096, 4096, 1, kSms), 1);
  // fc8 (1000 rows): split so the grid has ≥ 24 warps per SM; 4 rows per warp at batch 8
  // leave 250 row warps, so the split goes to its limit.
  EXPECT_EQ(cuda::gemv_choose_split(1000, 4096, 1, kSms), 4);
  EXPECT_EQ(cuda::gemv_choose_split(1000, 4096, 8, kSms), 8);
  // Never more slices than the row has 512-byte chunks (k 8 → 1 chunk, k 264 → 2 chunks).
  EXPECT_EQ(cuda::gemv_choose_split(8, 8, 1, kSms), 1);
  EXPECT_EQ(cuda::gemv_choose_split(8, 264, 1, kSms), 2);
  for (int batch = 1; batch <= cuda::kGemvMaxBatch; ++batch) {
    const int split = cuda::gemv_choose_split(40, 9216, batch, kSms);
    EXPECT_TRUE(split == 1 || split == 2 || split == 4 || split == 8) << split;
  }
  EXPECT_THROW(cuda::gemv_choose_split(1000, 4096, cuda::kGemvMaxBatch + 1, kSms), Error);
  EXPECT_THROW(cuda::gemv_choose_split(1000, 4096, 1, 0), Error);
}

// The kernels implement a ReLU epilogue or none; relu6 and clip are the fp32 family's.
TEST(LinearFp16, EntriesRefuseEpiloguesOtherThanRelu) {
  std::mt19937 rng(800);
  LinearGraph g = make_linear_graph({16, 8, true, false, {}}, rng);
  Node node = g.linear();
  for (const char* name : kEntries) {
    const KernelEntry* entry = linear_registry().find(name);
    ASSERT_NE(entry, nullptr) << name;
    for (Activation activation : {Activation::None, Activation::Relu}) {
      node.activation = activation;
      EXPECT_TRUE(entry->supports(node)) << name;
    }
    for (Activation activation : {Activation::Relu6, Activation::Clip}) {
      node.activation = activation;
      EXPECT_FALSE(entry->supports(node)) << name << " accepted an epilogue it does not compute";
    }
  }
}

TEST(LinearFp16, PackingPermutesColumnsToHwcOrder) {
  // Host-only: a [2, 1, 3] flatten source, one output row with distinct values per column.
  const std::vector<float> weight = {0, 1, 2, 3, 4, 5};  // PyTorch (c, h, w) order
  const cuda::HostGemmWeights packed =
      cuda::pack_linear_weights(weight.data(), nullptr, 1, 6, Shape{2, 1, 3});
  ASSERT_EQ(packed.rows_pad, 8);
  ASSERT_EQ(packed.cols_pad, 8);
  // (h, w, c): w0c0, w0c1, w1c0, w1c1, w2c0, w2c1 = 0, 3, 1, 4, 2, 5; then zero padding.
  const std::vector<float> first_row(packed.weight.begin(), packed.weight.begin() + 8);
  EXPECT_EQ(first_row, (std::vector<float>{0, 3, 1, 4, 2, 5, 0, 0}));
  EXPECT_THROW(cuda::pack_linear_weights(weight.data(), nullptr, 1, 6, Shape{2, 2, 2}), Error);
}

// The fp16 linear entries pack straight to fp16 on several host threads (GemmWeights from
// LinearWeightRefs); the bytes must be exactly those of the reference pack (pack_linear_weights)
// converted with __float2half_rn: odd sizes, a flatten permutation, no bias, values across fp16's
// range (subnormals, overflow to inf, exact ties), and a weight split over many threads.
TEST(LinearFp16, FastPackEqualsReferencePack) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  struct Case {
    int out, in;
    Shape flattened;
    bool bias;
  };
  const Case cases[] = {{1, 1, {}, true},
                        {13, 37, {}, false},
                        {10, 7 * 3 * 5, Shape{7, 3, 5}, true},
                        {1000, 9216, Shape{256, 6, 6}, true},
                        {3, (16 << 20) / 3 + 11, {}, true}};  // long rows, fewer rows than threads
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::uniform_int_distribution<int> kind(0, 9);
  for (const Case& c : cases) {
    std::vector<float> weight(size_t(c.out) * c.in), bias(c.out);
    for (float& v : weight) {
      const int k = kind(rng);
      v = uniform(rng);
      if (k == 0) v *= 1e-6f;                 // fp16 subnormal range
      if (k == 1) v *= 1e5f;                  // beyond fp16's max: inf
      if (k == 2) v = 1.0f + 1.0f / 2048.0f;  // exact tie between two fp16 values
    }
    for (float& v : bias) v = uniform(rng);
    const cuda::HostGemmWeights host = cuda::pack_linear_weights(
        weight.data(), c.bias ? bias.data() : nullptr, c.out, c.in, c.flattened);
    cuda::LinearWeightRefs refs;
    refs.weight = weight.data();
    refs.bias = c.bias ? bias.data() : nullptr;
    refs.out_features = c.out;
    refs.in_features = c.in;
    refs.flattened_source = c.flattened;
    const cuda::GemmWeights device(refs);
    ASSERT_EQ(device.rows_pad(), host.rows_pad);
    ASSERT_EQ(device.cols_pad(), host.cols_pad);
    std::vector<__half> got(host.weight.size());
    CNNRT_CUDA_CHECK(cudaMemcpy(got.data(), device.weight(), got.size() * sizeof(__half),
                                cudaMemcpyDeviceToHost));
    size_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const __half want = __float2half_rn(host.weight[i]);
      if (__half_as_ushort(got[i]) != __half_as_ushort(want)) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0u) << c.out << "x" << c.in;
    std::vector<float> got_bias(host.bias.size());
    CNNRT_CUDA_CHECK(cudaMemcpy(got_bias.data(), device.bias_fp32(),
                                got_bias.size() * sizeof(float), cudaMemcpyDeviceToHost));
    EXPECT_EQ(got_bias, host.bias);
  }
  const std::vector<float> six(6, 1.0f);
  cuda::LinearWeightRefs bad;
  bad.weight = six.data();
  bad.out_features = 1;
  bad.in_features = 6;
  bad.flattened_source = Shape{2, 2, 2};
  EXPECT_THROW(cuda::GemmWeights{bad}, Error);
}

}  // namespace
}  // namespace cnnrt
