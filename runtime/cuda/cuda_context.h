// CudaContext: one execution context of a CUDA engine, for one batch size.
//
// It owns, for its whole life, everything a forward needs so run() allocates nothing:
//   - one device arena (a single cudaMalloc) laid out by the memory planner: every activation,
//     the fp32 input/output staging buffers and each kernel's workspace;
//   - its own non-blocking stream;
//   - a CUDA graph of the forward (input conversion, every step's kernel, output conversion),
//     captured once at creation after one eager warm-up run, so a run is one graph launch between
//     two copies.
// Input fusion: when step 0 alone reads the graph input and its kernel can read NCHW fp32
// (LayerKernel::reads_nchw_fp32_input, e.g. conv_fp16_s2d for AlexNet conv1), the conversion
// pass is skipped, step 0 reads the staging buffer with KernelArgs::input_is_nchw_fp32, and the
// plan holds no fp16 "input" tensor: one launch and a padded fp16 copy of the input saved.
// Kernel arguments are resolved to arena pointers once, at creation; graph replays reuse them.
// Handles are RAII so a constructor that throws half-way leaks nothing.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <type_traits>
#include <vector>

#include "runtime/engine_impl.h"

namespace cnnrt::cuda {

struct StreamDeleter {
  void operator()(cudaStream_t stream) const noexcept { cudaStreamDestroy(stream); }
};
struct GraphDeleter {
  void operator()(cudaGraph_t graph) const noexcept { cudaGraphDestroy(graph); }
};
struct GraphExecDeleter {
  void operator()(cudaGraphExec_t exec) const noexcept { cudaGraphExecDestroy(exec); }
};
struct EventDeleter {
  void operator()(cudaEvent_t event) const noexcept { cudaEventDestroy(event); }
};
struct DeviceFree {
  void operator()(void* pointer) const noexcept { cudaFree(pointer); }
};

using StreamHandle = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDeleter>;
using GraphHandle = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, GraphDeleter>;
using GraphExecHandle = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, GraphExecDeleter>;
using EventHandle = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDeleter>;
using DeviceBuffer = std::unique_ptr<void, DeviceFree>;

EventHandle make_event();  // timing event (cudaEventDefault)
DeviceBuffer device_alloc(size_t bytes, const std::string& what);  // throws with sizes on OOM

class CudaContext final : public ContextImpl {
 public:
  CudaContext(const EngineImpl& engine, int batch);
  ~CudaContext() override;

  int batch() const override { return batch_; }
  // input/output are host pointers the caller owns and sizes: batch × input_shape and
  // batch × output_shape floats.  Only null is detected; a shorter buffer is undefined behaviour
  // (the API takes raw pointers).
  void run(const float* input, float* output) override;
  std::vector<LayerProfile> profile(int iterations) override;
  std::vector<LayerProfile> compare_kernels(int iterations) override;
  std::vector<double> benchmark(int warmup, int iterations) override;
  const MemoryPlan& memory_plan() const override { return plan_; }

 private:
  void* tensor_pointer(const std::string& name) const;  // throws when the plan lacks it
  void bind_arguments();
  void fill_random_input();
  // The NCHW fp32 staging input → backend layout at `target` (an input-tensor-sized buffer).
  void convert_input_into(void* target);
  void enqueue_input_conversion();  // into the "input" tensor; nothing when input_fused_
  void enqueue_output_conversion();
  // The whole forward on stream_.  annotate adds NVTX ranges (eager runs only, never captured).
  void enqueue_forward(bool annotate);
  void capture_graph();
  void synchronize();
  double bytes_of_step(size_t i) const;  // step_bytes, with step 0's input as read

  const EngineImpl& engine_;
  const int batch_;
  MemoryPlan plan_;
  Shape input_shape_, output_shape_;  // per sample
  std::string output_tensor_;
  int64_t input_elements_ = 0, output_elements_ = 0;  // per batch, fp32 values

  // Declared before the handles that use them so they are destroyed after them.
  DeviceBuffer arena_;
  StreamHandle stream_;
  GraphHandle graph_;
  GraphExecHandle graph_exec_;

  float* input_staging_ = nullptr;   // fp32 NCHW, what run() copies in
  float* output_staging_ = nullptr;  // fp32, what run() copies out
  void* input_tensor_ = nullptr;     // fp16 NHWC graph input; null when input_fused_
  // Step 0 reads input_staging_ itself (see the header comment); decided once at creation.
  bool input_fused_ = false;
  const void* output_tensor_ptr_ = nullptr;
  std::vector<KernelArgs> step_args_;  // one per engine step, pointers into the arena
  uint32_t random_seed_ = 0x5eed1234u;
};

}  // namespace cnnrt::cuda
