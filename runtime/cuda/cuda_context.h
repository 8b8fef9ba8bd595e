// CudaContext: one execution context of a CUDA engine, for one batch size.
//
// It owns, for its whole life, everything a forward needs so run() allocates nothing:
//   - one device arena (a single cudaMalloc) laid out by the memory planner: every typed tensor
//     (the fp32 graph input run() copies in, the fp32 tensor it copies out, every step's output,
//     conversions included) and each kernel's workspace;
//   - every step's KernelPlan, prepared once for this batch (prepare_context);
//   - its own non-blocking stream;
//   - a CUDA graph of the forward (every step, conversion steps included), captured once at
//     creation after one eager warm-up run, so a run is one graph launch between two copies.
// Kernel arguments are resolved to arena pointers once, at creation; graph replays reuse them.
// Handles are RAII so a constructor that throws half-way leaks nothing.  The context holds the
// engine it runs (shared), so it may outlive the Engine object.
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
  CudaContext(std::shared_ptr<const EngineImpl> engine, int batch);
  ~CudaContext() override;

  int batch() const override { return batch_; }
  // input/output are host pointers the caller owns and sizes: batch × input_shape and
  // batch × output_shape floats.  Only null is detected; a shorter buffer is undefined behaviour
  // (the API takes raw pointers).
  void run(const float* input, float* output) override;
  void run_async(const float* device_input, float* device_output, void* stream) override;
  size_t input_count() const override { return static_cast<size_t>(input_elements_); }
  size_t output_count() const override { return static_cast<size_t>(output_elements_); }
  std::vector<LayerProfile> profile(int iterations) override;
  std::vector<LayerProfile> compare_kernels(int iterations) override;
  std::vector<double> benchmark(int warmup, int iterations) override;
  const MemoryPlan& memory_plan() const override { return prepared_.memory; }

 private:
  void* tensor_pointer(const std::string& name) const;  // throws when the plan lacks it
  void bind_arguments();
  void fill_random_input();
  void run_step(size_t i);  // launches step i, naming its layer in any error
  // The whole forward on stream_.  annotate adds NVTX ranges (eager runs only, never captured).
  void enqueue_forward(bool annotate);
  void capture_graph();
  void synchronize();
  // Copy in, graph replay, copy out on `stream` (host or device buffers); no synchronisation.
  void enqueue_run(const float* input, float* output, bool device_buffers, cudaStream_t stream);
  // Median time of candidate `entry` on step i, its inputs converted where it reads another
  // type, its output in a buffer of its own; `variant` gets its prepared variant's name.
  double time_candidate(const KernelEntry& entry, size_t i, int iterations, std::string* variant);

  std::shared_ptr<const EngineImpl> engine_;
  const int batch_;
  PreparedContext prepared_;
  int64_t input_elements_ = 0, output_elements_ = 0;  // per batch, fp32 values

  // Declared before the handles that use them so they are destroyed after them.
  DeviceBuffer arena_;
  StreamHandle stream_;
  GraphHandle graph_;
  GraphExecHandle graph_exec_;

  float* input_ = nullptr;             // fp32 NCHW graph input: what run() copies in
  const float* output_ = nullptr;      // fp32 returned tensor: what run() copies out
  std::vector<KernelArgs> step_args_;  // one per engine step, pointers into the arena
  uint32_t random_seed_ = 0x5eed1234u;
};

}  // namespace cnnrt::cuda
