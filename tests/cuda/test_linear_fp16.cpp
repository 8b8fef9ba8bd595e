// The three fp16 linear entries (linear_fp16, linear_fp16_cublaslt, linear_fp16_gemv) against
// ref::linear on odd sizes (in/out not multiples of 8), with and without bias and fused ReLU, on
// a flattened [C, H, W] input (weight columns permuted to the NHWC flatten order), at the
// AlexNet fc shapes, across the GEMV/GEMM batch threshold, and captured in a CUDA graph on first
// use.  Inputs and weights are rounded to fp16 before the reference sees them; tolerance: relative
// L2 error ≤ 2e-3 (fp32 accumulation, fp16 output rounding ~3e-4 rms).  Outputs start as NaN
// bytes; the padded output features must come out exactly zero.
#include <random>

#include "fp16_test_util.h"
#include "kernels/cpu/reference.h"
#include "kernels/cuda/linear_fp16.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt {
namespace {

using test::DeviceMem;

constexpr double kTolerance = 2e-3;
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
  std::string input = "input";
  if (!lc.flattened.empty()) {
    Node flatten;
    flatten.name = "flatten";
    flatten.op = OpKind::Flatten;
    flatten.inputs = {"input"};
    flatten.input_shapes = {lc.flattened};
    flatten.output_shape = {shape_elements(lc.flattened)};
    g.graph.nodes.push_back(flatten);
    input = "flatten";
  }
  Node node;
  node.name = "fc";
  node.op = OpKind::Linear;
  node.attrs = LinearAttrs{lc.out};
  node.inputs = {input};
  node.input_shapes = {{lc.in}};
  node.output_shape = {lc.out};
  node.activation = lc.relu ? Activation::Relu : Activation::None;
  node.params.push_back(test::make_param("weight", {lc.out, lc.in}, g.weight));
  if (lc.bias) node.params.push_back(test::make_param("bias", {lc.out}, g.bias));
  g.graph.nodes.push_back(node);
  return g;
}

// The GPU input for x [batch][in] in PyTorch's feature order: padded to pad8(in), and, for a
// flattened [C, H, W], reordered to (h, w, c).
std::vector<__half> gpu_input(const std::vector<float>& x, int batch, const LinearCase& lc) {
  const int64_t in_pad = test::pad8(lc.in);
  std::vector<__half> out(static_cast<size_t>(batch) * in_pad, __float2half(0.0f));
  for (int b = 0; b < batch; ++b)
    for (int f = 0; f < lc.in; ++f) {
      int64_t dst = f;
      if (!lc.flattened.empty()) {
        const int64_t h = lc.flattened[1], w = lc.flattened[2], c = lc.flattened[0];
        const int64_t ch = f / (h * w), pixel = f % (h * w);
        dst = pixel * c + ch;
      }
      out[b * in_pad + dst] = __float2half_rn(x[static_cast<size_t>(b) * lc.in + f]);
    }
  return out;
}

std::vector<float> reference(const LinearGraph& g, const std::vector<float>& x, int batch,
                             const LinearCase& lc) {
  std::vector<float> y(static_cast<size_t>(batch) * lc.out);
  ref::linear(x.data(), batch, lc.in, g.weight.data(), lc.bias ? g.bias.data() : nullptr, lc.out,
              y.data());
  if (lc.relu) ref::relu(y.data(), static_cast<int64_t>(y.size()), y.data());
  return y;
}

void check_case(const std::string& entry, const LinearCase& lc, int batch, uint32_t seed) {
  std::mt19937 rng(seed);
  const LinearGraph g = make_linear_graph(lc, rng);
  const auto x = test::random_fp16_values(static_cast<size_t>(batch) * lc.in, rng);
  const std::vector<float> expected = reference(g, x, batch, lc);

  test::EntryRunner runner(linear_registry(), entry, g.linear(), g.graph);
  DeviceMem input(gpu_input(x, batch, lc));
  DeviceMem output(static_cast<size_t>(batch) * test::pad8(lc.out) * 2);
  runner.run({input.get()}, output.get(), batch);
  int64_t bad_padding = 0;
  const auto got = test::from_nhwc(output.halves(), batch, lc.out, 1, 1, &bad_padding);
  SCOPED_TRACE(entry + " in=" + std::to_string(lc.in) + " out=" + std::to_string(lc.out) +
               " batch=" + std::to_string(batch) + " bias=" + std::to_string(lc.bias) +
               " relu=" + std::to_string(lc.relu) + " flattened=" + shape_to_string(lc.flattened));
  EXPECT_LE(test::rel_l2(got, expected), kTolerance);
  EXPECT_EQ(bad_padding, 0);
}

TEST(LinearFp16, OddSizesAllEntriesAllBatches) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const LinearCase cases[] = {{100, 37, true, false, {}},
                              {100, 37, false, true, {}},
                              {13, 1, true, true, {}},
                              {1, 9, true, false, {}},
                              {259, 130, true, true, {}}};
  uint32_t seed = 100;
  for (const char* entry : kEntries)
    for (const LinearCase& lc : cases)
      for (int batch : {1, 3, 16}) check_case(entry, lc, batch, ++seed);
}

TEST(LinearFp16, FlattenedInputPermutesWeightColumns) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  // C % 8 != 0 (flatten dropped the padding) and C % 8 == 0 (flatten is a view).
  const LinearCase cases[] = {{13 * 3 * 5, 29, true, true, {13, 3, 5}},
                              {64 * 3 * 3, 37, true, false, {64, 3, 3}},
                              {3 * 1 * 7, 8, false, false, {3, 1, 7}}};
  uint32_t seed = 200;
  for (const char* entry : kEntries)
    for (const LinearCase& lc : cases)
      for (int batch : {1, 3, 16}) check_case(entry, lc, batch, ++seed);
}

TEST(LinearFp16, AlexNetClassifierShapes) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const LinearCase cases[] = {{9216, 4096, true, true, {256, 6, 6}},
                              {4096, 4096, true, true, {}},
                              {4096, 1000, true, false, {}}};
  uint32_t seed = 300;
  for (const char* entry : {"linear_fp16_cublaslt", "linear_fp16_gemv"})
    for (const LinearCase& lc : cases)
      for (int batch : {1, 16}) check_case(entry, lc, batch, ++seed);
}

TEST(LinearFp16, DefaultEntrySwitchesAtTheGemvThreshold) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const LinearCase lc{300, 45, true, true, {}};
  check_case("linear_fp16", lc, cuda::kGemvMaxBatch, 400);
  check_case("linear_fp16", lc, cuda::kGemvMaxBatch + 1, 401);
  std::mt19937 rng(402);
  const LinearGraph g = make_linear_graph(lc, rng);
  test::EntryRunner runner(linear_registry(), "linear_fp16", g.linear(), g.graph);
  EXPECT_EQ(runner.kernel().workspace_bytes(cuda::kGemvMaxBatch), 0u);
  EXPECT_GT(runner.kernel().workspace_bytes(cuda::kGemvMaxBatch + 1), 0u);
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
    DeviceMem workspace(runner.kernel().workspace_bytes(batch));
    cudaStream_t stream;
    CNNRT_CUDA_CHECK(cudaStreamCreate(&stream));
    KernelArgs args;
    args.inputs = {input.get()};
    args.output = output.get();
    args.batch = batch;
    args.workspace = workspace.get();
    args.stream = stream;
    cudaGraph_t graph;
    CNNRT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    runner.kernel().run(args);
    CNNRT_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    CNNRT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CNNRT_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CNNRT_CUDA_CHECK(cudaStreamSynchronize(stream));
    int64_t bad_padding = 0;
    const auto got = test::from_nhwc(output.halves(), batch, lc.out, 1, 1, &bad_padding);
    EXPECT_LE(test::rel_l2(got, expected), kTolerance) << entry;
    EXPECT_EQ(bad_padding, 0);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
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

}  // namespace
}  // namespace cnnrt
