// ExecutionContext::run_async with the caller's device buffers (runtime/cuda/cuda_context.h):
// the forward is a graph bound to those buffers, captured on first use and kept for the last
// few pairs, with a copy path for pairs that cannot be bound.  Every path must give run()'s
// bits, read nothing past the input, write nothing past the output and never write the input.
//
// Models: a conv stack ending in a softmax (fused: the returned tensor is a kernel's output),
// the same unfused (in-place relus, so the returned tensor shares memory with the linear's
// output), a model whose first layer is an in-place relu on the input (unfused: it cannot be
// bound and must take the copy path), and a residual model whose input has two readers.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/model_loader.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/engine_impl.h"

namespace cnnrt {
namespace {

struct AsyncCase {
  const char* name;
  const char* yaml;
  bool fuse;
};

const char* const kSoftmaxModel = R"(
name: softmax_head
input: {shape: [3, 21, 19]}
layers:
  - {name: conv1, op: conv, out_channels: 16, kernel: 3, stride: 2, padding: 1, weight: c1.w, bias: c1.b}
  - {name: relu1, op: relu}
  - {name: pool1, op: maxpool, kernel: 2, stride: 2}
  - {name: flatten, op: flatten}
  - {name: fc1, op: linear, out_features: 29, weight: f1.w, bias: f1.b}
  - {name: relu2, op: relu}
  - {name: fc2, op: linear, out_features: 10, weight: f2.w, bias: f2.b}
  - {name: prob, op: softmax}
)";

const char* const kReluFirstModel = R"(
name: relu_first
input: {shape: [5, 9, 11]}
layers:
  - {name: relu0, op: relu}
  - {name: conv1, op: conv, out_channels: 7, kernel: 3, padding: 1, weight: c1.w, bias: c1.b}
  - {name: relu1, op: relu}
)";

const char* const kResidualModel = R"(
name: residual_input
input: {shape: [8, 13, 13]}
layers:
  - {name: conv1, op: conv, out_channels: 8, kernel: 3, padding: 1, weight: c1.w, bias: c1.b}
  - {name: sum, op: add, inputs: [conv1, input]}
  - {name: relu, op: relu}
)";

const AsyncCase kCases[] = {
    {"softmax_fused", kSoftmaxModel, true},         {"softmax_unfused", kSoftmaxModel, false},
    {"relu_first_unfused", kReluFirstModel, false}, {"relu_first_fused", kReluFirstModel, true},
    {"residual_input", kResidualModel, true},
};

constexpr int kBatch = 3;
constexpr size_t kGuard =
    64;  // floats past each buffer: NaN after inputs, a sentinel after outputs
constexpr float kSentinel = 12345.678f;

class RunAsyncTest : public ::testing::TestWithParam<AsyncCase> {
 protected:
  void SetUp() override {
    if (!cuda::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
    Graph graph = parse_model(GetParam().yaml, std::string(GetParam().name) + ".yaml");
    bind_random_weights(graph, 23);
    BuildOptions options;
    options.device = Device::CUDA;
    options.fuse = GetParam().fuse;
    engine_ = Engine::build(graph, options);
    context_ = engine_->create_context(kBatch);
    input_.resize(context_->input_count());
    std::mt19937 generator(11);
    std::uniform_real_distribution<float> distribution(-1.0f, 1.0f);
    for (float& value : input_) value = distribution(generator);
    expected_.assign(context_->output_count(), std::nanf(""));
    context_->run(input_.data(), expected_.data());
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    for (void* pointer : allocations_) cudaFree(pointer);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // A device input `offset` floats into its allocation, NaN after it; an output with a sentinel
  // tail.
  struct Buffers {
    float* input;
    float* output;
  };
  Buffers make_buffers(size_t offset) {
    std::vector<float> input(offset + input_.size() + kGuard, std::nanf(""));
    std::memcpy(input.data() + offset, input_.data(), input_.size() * sizeof(float));
    std::vector<float> output(offset + expected_.size() + kGuard, kSentinel);
    Buffers buffers{upload(input) + offset, upload(output) + offset};
    return buffers;
  }
  float* upload(const std::vector<float>& values) {
    void* pointer = nullptr;
    EXPECT_EQ(cudaMalloc(&pointer, values.size() * sizeof(float)), cudaSuccess);
    allocations_.push_back(pointer);
    EXPECT_EQ(
        cudaMemcpy(pointer, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice),
        cudaSuccess);
    return static_cast<float*>(pointer);
  }
  std::vector<float> download(const float* pointer, size_t count) {
    std::vector<float> values(count);
    EXPECT_EQ(cudaMemcpy(values.data(), pointer, count * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return values;
  }
  // The output equals run()'s bits, the guard after it is untouched and the input unchanged.
  void expect_run_bits(const Buffers& buffers, const std::string& what) {
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess) << what;
    const std::vector<float> output = download(buffers.output, expected_.size() + kGuard);
    EXPECT_EQ(std::memcmp(output.data(), expected_.data(), expected_.size() * sizeof(float)), 0)
        << what;
    for (size_t i = expected_.size(); i < output.size(); ++i)
      ASSERT_EQ(output[i], kSentinel) << what << ": written past the output at " << i;
    const std::vector<float> input = download(buffers.input, input_.size());
    EXPECT_EQ(std::memcmp(input.data(), input_.data(), input_.size() * sizeof(float)), 0)
        << what << ": the input was modified";
  }
  void clear_output(const Buffers& buffers) {
    ASSERT_EQ(cudaMemset(buffers.output, 0xFF, expected_.size() * sizeof(float)), cudaSuccess);
  }

  std::shared_ptr<Engine> engine_;
  std::unique_ptr<ExecutionContext> context_;
  std::vector<float> input_, expected_;
  std::vector<void*> allocations_;
  cudaStream_t stream_ = nullptr;
};

TEST_P(RunAsyncTest, BoundBuffersGiveRunsBitsAndStayInBounds) {
  const Buffers buffers = make_buffers(0);
  // Several submissions queue up before the one synchronisation: the first captures the bound
  // graph, the rest replay it.
  for (int i = 0; i < 4; ++i) context_->run_async(buffers.input, buffers.output, stream_);
  expect_run_bits(buffers, "aligned pair");
  // A later run() (the context's own graph) is unaffected by the bound one.
  std::vector<float> again(expected_.size(), std::nanf(""));
  context_->run(input_.data(), again.data());
  EXPECT_EQ(std::memcmp(again.data(), expected_.data(), again.size() * sizeof(float)), 0);
}

TEST_P(RunAsyncTest, ManyBufferPairsEvictAndRecaptureCorrectly) {
  // More pairs than the context keeps graphs for (4), each used twice in turn, then the first
  // again after it was evicted.
  std::vector<Buffers> pairs;
  for (int i = 0; i < 6; ++i) pairs.push_back(make_buffers(0));
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < pairs.size(); ++i) {
      clear_output(pairs[i]);
      context_->run_async(pairs[i].input, pairs[i].output, stream_);
      expect_run_bits(pairs[i], "pair " + std::to_string(i) + ", round " + std::to_string(round));
    }
  }
}

TEST_P(RunAsyncTest, MisalignedBuffersTakeTheCopyPath) {
  const Buffers buffers = make_buffers(1);  // 4 bytes past a 256-byte boundary
  context_->run_async(buffers.input, buffers.output, stream_);
  expect_run_bits(buffers, "misaligned pair");
}

// ContextImpl::run_many (the automatic plan's held-out runs): one upload, the forwards queued,
// one download — each batch's output must be the bits run() gives for it alone, and nothing is
// written past the last output.
TEST_P(RunAsyncTest, RunManyGivesEachBatchRunsBits) {
  constexpr int kRuns = 5;
  const size_t in = context_->input_count(), out = context_->output_count();
  std::vector<float> inputs(kRuns * in);
  std::mt19937 generator(29);
  std::uniform_real_distribution<float> distribution(-2.0f, 2.0f);
  for (float& value : inputs) value = distribution(generator);
  std::vector<float> expected(kRuns * out, std::nanf(""));
  for (int r = 0; r < kRuns; ++r) context_->run(inputs.data() + r * in, expected.data() + r * out);
  std::vector<float> outputs(kRuns * out + kGuard, kSentinel);
  context_->impl().run_many(inputs.data(), outputs.data(), kRuns);
  EXPECT_EQ(std::memcmp(outputs.data(), expected.data(), expected.size() * sizeof(float)), 0);
  for (size_t i = expected.size(); i < outputs.size(); ++i)
    ASSERT_EQ(outputs[i], kSentinel) << "written past the last output at " << i;
  // The context's own run() afterwards is unaffected.
  std::vector<float> again(out, std::nanf(""));
  context_->run(input_.data(), again.data());
  EXPECT_EQ(std::memcmp(again.data(), expected_.data(), out * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(Models, RunAsyncTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<AsyncCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace cnnrt
