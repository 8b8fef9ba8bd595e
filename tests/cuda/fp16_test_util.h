// Helpers shared by the fp16 kernel tests: skip without a device, fp16 rounding, NCHW fp32 ↔
// padded NHWC fp16 on the host, NaN-poisoned device buffers, relative L2 error, and running a
// registry entry on a hand-built node.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "kernels/cpu/reference.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/kernel.h"

namespace cnnrt::test {

inline bool cuda_device_present() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

#define CNNRT_REQUIRE_CUDA_DEVICE() \
  if (!::cnnrt::test::cuda_device_present()) GTEST_SKIP() << "no CUDA device"

inline int64_t pad8(int64_t v) { return (v + 7) / 8 * 8; }
inline float round_fp16(float v) { return __half2float(__float2half_rn(v)); }

// Uniform values in [lo, hi), already rounded to fp16 so the reference sees what the GPU sees.
inline std::vector<float> random_fp16_values(size_t count, std::mt19937& rng, float lo = -1.0f,
                                             float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(count);
  for (float& v : values) v = round_fp16(dist(rng));
  return values;
}

// [n, c, h, w] fp32 → [n, h, w, pad8(c)] fp16 (zeros in the padding).  A vector [n, f] is
// c = f, h = w = 1.
inline std::vector<__half> to_nhwc(const std::vector<float>& x, int n, int c, int h, int w) {
  const int64_t cp = pad8(c);
  std::vector<__half> out(static_cast<size_t>(n) * h * w * cp, __float2half(0.0f));
  for (int b = 0; b < n; ++b)
    for (int ch = 0; ch < c; ++ch)
      for (int y = 0; y < h; ++y)
        for (int xx = 0; xx < w; ++xx)
          out[((static_cast<size_t>(b) * h + y) * w + xx) * cp + ch] =
              __float2half_rn(x[((static_cast<size_t>(b) * c + ch) * h + y) * w + xx]);
  return out;
}

// Inverse of to_nhwc; counts padding lanes that are not exactly +0/-0 into *bad_padding.
inline std::vector<float> from_nhwc(const std::vector<__half>& x, int n, int c, int h, int w,
                                    int64_t* bad_padding) {
  const int64_t cp = pad8(c);
  std::vector<float> out(static_cast<size_t>(n) * c * h * w);
  *bad_padding = 0;
  for (int b = 0; b < n; ++b)
    for (int y = 0; y < h; ++y)
      for (int xx = 0; xx < w; ++xx)
        for (int64_t ch = 0; ch < cp; ++ch) {
          const float v = __half2float(x[((static_cast<size_t>(b) * h + y) * w + xx) * cp + ch]);
          if (ch < c)
            out[((static_cast<size_t>(b) * c + ch) * h + y) * w + xx] = v;
          else if (v != 0.0f)
            ++*bad_padding;
        }
  return out;
}

// Device memory for a test; filled with 0xFF bytes (fp16 NaN) so unwritten outputs show.
class DeviceMem {
 public:
  explicit DeviceMem(size_t bytes) : bytes_(bytes) {
    CNNRT_CUDA_CHECK(cudaMalloc(&ptr_, bytes > 0 ? bytes : 1));
    CNNRT_CUDA_CHECK(cudaMemset(ptr_, 0xFF, bytes > 0 ? bytes : 1));
  }
  template <typename T>
  explicit DeviceMem(const std::vector<T>& host) : DeviceMem(host.size() * sizeof(T)) {
    CNNRT_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), bytes_, cudaMemcpyHostToDevice));
  }
  ~DeviceMem() { cudaFree(ptr_); }
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  std::vector<__half> halves() const {
    std::vector<__half> host(bytes_ / sizeof(__half));
    CNNRT_CUDA_CHECK(
        cudaMemcpy(host.data(), ptr_, host.size() * sizeof(__half), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// ||a - b|| / ||b||; NaN anywhere makes it infinite.
inline double rel_l2(const std::vector<float>& actual, const std::vector<float>& expected) {
  if (actual.size() != expected.size()) return INFINITY;
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(actual[i]) != std::isnan(expected[i])) return INFINITY;
    if (std::isnan(expected[i])) continue;
    const double d = static_cast<double>(actual[i]) - expected[i];
    diff += d * d;
    norm += static_cast<double>(expected[i]) * expected[i];
  }
  return norm == 0.0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

inline Param make_param(const std::string& role, Shape shape, std::vector<float> data) {
  Param param;
  param.role = role;
  param.key = "test." + role;
  param.value.shape = std::move(shape);
  param.value.data.assign(data.begin(), data.end());
  return param;
}

// The linear tests' graph: when `flattened` [C, H, W] is given, a flatten node "flatten" of the
// input, then the linear node "fc" reading it, with weight [out][in] and bias (empty: none).
inline Graph linear_test_graph(int in, int out, bool relu, const Shape& flattened,
                               const std::vector<float>& weight, const std::vector<float>& bias) {
  Graph graph;
  std::string input = "input";
  if (!flattened.empty()) {
    Node flatten;
    flatten.name = "flatten";
    flatten.op = OpKind::Flatten;
    flatten.inputs = {"input"};
    flatten.input_shapes = {flattened};
    flatten.output_shape = {shape_elements(flattened)};
    graph.nodes.push_back(flatten);
    input = "flatten";
  }
  Node node;
  node.name = "fc";
  node.op = OpKind::Linear;
  node.attrs = LinearAttrs{out};
  node.inputs = {input};
  node.input_shapes = {{in}};
  node.output_shape = {out};
  node.activation = relu ? Activation::Relu : Activation::None;
  node.params.push_back(make_param("weight", {out, in}, weight));
  if (!bias.empty()) node.params.push_back(make_param("bias", {out}, bias));
  graph.nodes.push_back(node);
  return graph;
}

// x [batch][in] in PyTorch's feature order as the GPU holds it: [batch][pad8(in)], and after a
// flatten of [C, H, W] in (h, w, c) order (feature c·H·W + p at p·C + c).
inline std::vector<__half> linear_gpu_input(const std::vector<float>& x, int batch, int in,
                                            const Shape& flattened) {
  const int64_t in_pad = pad8(in);
  std::vector<__half> out(static_cast<size_t>(batch) * in_pad, __float2half(0.0f));
  for (int b = 0; b < batch; ++b)
    for (int f = 0; f < in; ++f) {
      int64_t at = f;
      if (!flattened.empty()) {
        const int64_t channels = flattened[0], hw = flattened[1] * flattened[2];
        at = (f % hw) * channels + f / hw;
      }
      out[b * in_pad + at] = __float2half_rn(x[static_cast<size_t>(b) * in + f]);
    }
  return out;
}

// The CPU reference of the linear tests: ref::linear of x [batch][in] with weight [out][in] and
// bias (empty: none), then ReLU when `relu`.
inline std::vector<float> linear_reference(const std::vector<float>& x, int batch, int in, int out,
                                           const std::vector<float>& weight,
                                           const std::vector<float>& bias, bool relu) {
  std::vector<float> y(static_cast<size_t>(batch) * out);
  ref::linear(x.data(), batch, in, weight.data(), bias.empty() ? nullptr : bias.data(), out,
              y.data());
  if (relu) ref::relu(y.data(), static_cast<int64_t>(y.size()), y.data());
  return y;
}

// Creates the kernel of registry entry `name` for `node` (must be supported) and runs it once on
// `stream` with a NaN-poisoned workspace, then synchronises.
class EntryRunner {
 public:
  EntryRunner(const KernelRegistry& registry, const std::string& name, const Node& node,
              const Graph& graph) {
    entry_ = registry.find(name);
    if (entry_ == nullptr) throw Error("no registry entry " + name);
    if (!entry_->supports(node)) throw Error(name + " does not support node " + node.name);
    kernel_ = entry_->create(KernelBuildContext{node, graph});
    entry_inputs_ = node.inputs.size();
  }
  LayerKernel& kernel() { return *kernel_; }
  // The kernel's plan for `batch` with every input in its preferred type (or `input_types`).
  KernelPlan prepare(int batch, std::vector<TensorType> input_types = {}) const {
    if (input_types.empty())
      for (size_t i = 0; i < entry_inputs_; ++i) input_types.push_back(kernel_->input_types(i)[0]);
    return kernel_->prepare({batch, input_types});
  }
  void run(const std::vector<const void*>& inputs, void* output, int batch,
           cudaStream_t stream = nullptr, std::vector<TensorType> input_types = {}) {
    const KernelPlan plan = prepare(batch, std::move(input_types));
    DeviceMem workspace(plan.workspace_bytes);
    kernel_->run(args_of(plan, inputs, output, batch, workspace, stream));
    CNNRT_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  // As the engine runs it: `plan` (from prepare()) launched once inside a captured CUDA graph on a
  // stream of its own, with a workspace of the plan's size; synchronised before returning.
  void run_captured(const KernelPlan& plan, const std::vector<const void*>& inputs, void* output,
                    int batch) {
    DeviceMem workspace(plan.workspace_bytes);
    cudaStream_t stream;
    CNNRT_CUDA_CHECK(cudaStreamCreate(&stream));
    cudaGraph_t graph;
    CNNRT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    kernel_->run(args_of(plan, inputs, output, batch, workspace, stream));
    CNNRT_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    CNNRT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CNNRT_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CNNRT_CUDA_CHECK(cudaStreamSynchronize(stream));
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }

 private:
  static KernelArgs args_of(const KernelPlan& plan, const std::vector<const void*>& inputs,
                            void* output, int batch, const DeviceMem& workspace,
                            cudaStream_t stream) {
    KernelArgs args;
    args.inputs = inputs;
    args.output = output;
    args.batch = batch;
    args.workspace = plan.workspace_bytes > 0 ? workspace.get() : nullptr;
    args.stream = stream;
    args.variant = plan.variant;
    args.state = plan.state.get();
    return args;
  }
  const KernelEntry* entry_ = nullptr;
  std::unique_ptr<LayerKernel> kernel_;
  size_t entry_inputs_ = 1;
};

}  // namespace cnnrt::test
