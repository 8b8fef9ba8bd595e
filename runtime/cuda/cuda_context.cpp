// CudaContext implementation: arena + stream + captured CUDA graph per batch size (see the
// header for the why).  Timing paths (profile, compare_kernels, benchmark) run on the same
// stream and buffers as run(), enqueue every timed launch before synchronising once so the GPU
// queue stays full and host launch latency is not counted as kernel time, and feed a
// deterministic pseudo-random input generated on the device: the input staging buffer only
// lives for step 0 in the plan, so after a forward it may hold later activations, and timing
// must not depend on whatever bytes were left there.
// Input fusion (see the header): decided once from the engine; when on, the "input" request is
// dropped from the plan and step 0's arguments point at the staging buffer.  compare_kernels
// gives step-0 candidates that cannot read fp32 a converted copy made outside their timing.
#include "runtime/cuda/cuda_context.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#ifdef CNNRT_WITH_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/layout.h"

namespace cnnrt::cuda {
namespace {

// An NVTX range for the eager and profile paths; a no-op for nullptr or without NVTX.
class NvtxRange {
 public:
  explicit NvtxRange(const char* name) {
#ifdef CNNRT_WITH_NVTX
    if (name != nullptr) {
      nvtxRangePushA(name);
      active_ = true;
    }
#else
    (void)name;
#endif
  }
  ~NvtxRange() {
#ifdef CNNRT_WITH_NVTX
    if (active_) nvtxRangePop();
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;

 private:
  bool active_ = false;
};

int checked_int(int64_t value, const char* what) {
  if (value < 1 || value > std::numeric_limits<int>::max())
    throw Error(std::string("CUDA backend: ") + what + " " + std::to_string(value) +
                " is out of range");
  return static_cast<int>(value);
}

std::string layer_prefix(const Node& node) {
  ErrorSite site;
  site.layer = node.name;
  return site.format();
}

std::vector<EventHandle> make_events(size_t count) {
  std::vector<EventHandle> events;
  events.reserve(count);
  for (size_t i = 0; i < count; ++i) events.push_back(make_event());
  return events;
}

double elapsed_ms(const EventHandle& start, const EventHandle& stop) {
  float ms = 0;
  CNNRT_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return ms;
}

// Median time of `kernel` on `args`: one untimed warm-up, then `iterations` event-timed launches
// enqueued back to back, one synchronisation at the end.
double time_kernel(LayerKernel& kernel, const KernelArgs& args, int iterations,
                   cudaStream_t stream) {
  std::vector<EventHandle> events = make_events(2 * static_cast<size_t>(iterations));
  kernel.run(args);
  for (int i = 0; i < iterations; ++i) {
    CNNRT_CUDA_CHECK(cudaEventRecord(events[2 * i].get(), stream));
    kernel.run(args);
    CNNRT_CUDA_CHECK(cudaEventRecord(events[2 * i + 1].get(), stream));
  }
  CNNRT_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> times;
  for (int i = 0; i < iterations; ++i)
    times.push_back(elapsed_ms(events[2 * i], events[2 * i + 1]));
  return median(times);
}

// True when step 0 may read the NCHW fp32 staging input itself: the graph input is an image, it
// is step 0's only input, no later step (nor the graph output) reads it, and step 0's kernel
// converts as it reads.  Then nothing needs the backend-layout copy of the input at all.
bool first_step_reads_staging(const EngineImpl& engine) {
  const Step& first = engine.steps.front();
  if (engine.graph.input.shape.size() != 3 || engine.graph.output == "input") return false;
  if (first.node->inputs.size() != 1 || first.node->inputs[0] != "input") return false;
  if (!first.kernel->reads_nchw_fp32_input()) return false;
  for (size_t i = 1; i < engine.steps.size(); ++i)
    for (const std::string& name : engine.steps[i].node->inputs)
      if (name == "input") return false;
  return true;
}

}  // namespace

EventHandle make_event() {
  cudaEvent_t event = nullptr;
  CNNRT_CUDA_CHECK(cudaEventCreate(&event));
  return EventHandle(event);
}

DeviceBuffer device_alloc(size_t bytes, const std::string& what) {
  if (bytes == 0) return DeviceBuffer();
  void* pointer = nullptr;
  const cudaError_t status = cudaMalloc(&pointer, bytes);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    throw Error("out of device memory: " + what + " needs " + std::to_string(bytes) +
                " bytes; the device has " + std::to_string(free_bytes) + " free of " +
                std::to_string(total_bytes));
  }
  CNNRT_CUDA_CHECK(status);
  return DeviceBuffer(pointer);
}

CudaContext::CudaContext(const EngineImpl& engine, int batch) : engine_(engine), batch_(batch) {
  if (batch < 1) throw Error("batch must be at least 1, got " + std::to_string(batch));
  if (engine.steps.empty()) throw Error("CUDA backend: the engine has no layers to run");
  const Graph& graph = engine.graph;
  input_shape_ = graph.input.shape;
  if (input_shape_.size() != 3 && input_shape_.size() != 1)
    throw Error("CUDA backend: the model input must be [C, H, W] or [F], got " +
                shape_to_string(input_shape_));
  output_tensor_ = graph.output.empty() ? engine.steps.back().node->name : graph.output;
  const Node* output_node = graph.find(output_tensor_);
  if (output_node == nullptr)
    throw Error("CUDA backend: the graph output '" + output_tensor_ + "' is not a layer");
  output_shape_ = output_node->output_shape;
  if (output_shape_.empty())
    throw Error("CUDA backend: the graph output '" + output_tensor_ + "' has no shape");
  input_elements_ = batch_ * shape_elements(input_shape_);
  output_elements_ = batch_ * shape_elements(output_shape_);

  // The plan: every activation and workspace (activation_requests, in-place aliases included)
  // and the fp32 staging buffers at the ends.
  std::vector<PlanRequest> requests = activation_requests(engine, batch_);
  input_fused_ = first_step_reads_staging(engine);
  if (input_fused_)
    requests.erase(std::remove_if(requests.begin(), requests.end(),
                                  [](const PlanRequest& r) { return r.name == "input"; }),
                   requests.end());
  const int last_step = static_cast<int>(engine.steps.size()) - 1;
  requests.push_back(
      {"input.staging", static_cast<size_t>(input_elements_) * sizeof(float), 0, 0, ""});
  requests.push_back({"output.staging", static_cast<size_t>(output_elements_) * sizeof(float),
                      last_step, last_step, ""});
  plan_ = plan_memory(requests);

  // Weights were uploaded at build on other streams (pageable copies may still be in flight)
  // and our stream is non-blocking, so it would not wait for them: settle everything once here.
  CNNRT_CUDA_CHECK(cudaDeviceSynchronize());
  arena_ =
      device_alloc(plan_.arena_bytes, "the activation arena of batch " + std::to_string(batch_));
  cudaStream_t stream = nullptr;
  CNNRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_.reset(stream);
  try {
    // Zero once so no kernel ever reads uninitialised bytes (e.g. padding it does not own).
    if (plan_.arena_bytes > 0)
      CNNRT_CUDA_CHECK(cudaMemsetAsync(arena_.get(), 0, plan_.arena_bytes, stream));
    bind_arguments();

    // One eager forward first: kernels finish lazy setup (cuBLASLt heuristics, module loading)
    // outside capture, and a failing kernel reports here with its layer name.
    fill_random_input();
    enqueue_forward(/*annotate=*/true);
    synchronize();
    capture_graph();
  } catch (...) {
    // The destructor does not run for a half-built object: drain the stream before the
    // handles free the arena under work that may still be queued.
    cudaStreamSynchronize(stream);
    cudaGetLastError();
    throw;
  }
}

CudaContext::~CudaContext() {
  // Handles free themselves (exec, graph, stream, arena: reverse declaration order); wait for
  // in-flight work first so nothing is freed under a running kernel.  Never throws.
  if (stream_) cudaStreamSynchronize(stream_.get());
  cudaGetLastError();
}

void* CudaContext::tensor_pointer(const std::string& name) const {
  const PlannedTensor* tensor = plan_.find(name);
  if (tensor == nullptr) throw Error("CUDA backend: the memory plan has no tensor '" + name + "'");
  return static_cast<char*>(arena_.get()) + tensor->offset;
}

void CudaContext::bind_arguments() {
  input_staging_ = static_cast<float*>(tensor_pointer("input.staging"));
  output_staging_ = static_cast<float*>(tensor_pointer("output.staging"));
  input_tensor_ = input_fused_ ? nullptr : tensor_pointer("input");
  output_tensor_ptr_ = tensor_pointer(output_tensor_);
  step_args_.clear();
  for (const Step& step : engine_.steps) {
    KernelArgs args;
    for (const std::string& input : step.node->inputs) {
      const bool staged = input_fused_ && input == "input";  // step 0 only (checked at creation)
      args.inputs.push_back(staged ? input_staging_ : tensor_pointer(input));
      args.input_is_nchw_fp32 = args.input_is_nchw_fp32 || staged;
    }
    // An in-place step's output was planned at its input's offset, so output == inputs[0].
    args.output = tensor_pointer(step.node->name);
    args.batch = batch_;
    if (step.kernel->workspace_bytes(batch_) > 0)
      args.workspace = tensor_pointer(step.node->name + ".workspace");
    args.stream = stream_.get();
    step_args_.push_back(std::move(args));
  }
}

void CudaContext::fill_random_input() {
  fill_uniform_fp32(input_staging_, input_elements_, random_seed_, stream_.get());
}

void CudaContext::convert_input_into(void* target) {
  const bool image = input_shape_.size() == 3;
  const int channels = checked_int(input_shape_[0], "input channels");
  const int height = image ? checked_int(input_shape_[1], "input height") : 1;
  const int width = image ? checked_int(input_shape_[2], "input width") : 1;
  nchw_fp32_to_nhwc_fp16(input_staging_, target, batch_, channels, height, width, stream_.get());
}

void CudaContext::enqueue_input_conversion() {
  if (!input_fused_) convert_input_into(input_tensor_);
}

double CudaContext::bytes_of_step(size_t i) const {
  const Step& step = engine_.steps[i];
  double bytes = step_bytes(engine_, step, batch_);
  if (i == 0 && input_fused_)  // reads the fp32 input instead of its padded fp16 copy
    bytes += static_cast<double>(input_elements_) * sizeof(float) -
             static_cast<double>(engine_.backend->tensor_bytes(input_shape_, batch_));
  return bytes;
}

void CudaContext::enqueue_output_conversion() {
  if (output_shape_.size() == 3) {
    nhwc_fp16_to_nchw_fp32(output_tensor_ptr_, output_staging_, batch_,
                           checked_int(output_shape_[0], "output channels"),
                           checked_int(output_shape_[1], "output height"),
                           checked_int(output_shape_[2], "output width"), stream_.get());
    return;
  }
  // Vectors and any other rank: the last dimension is the padded one, the rest are rows.
  const int features = checked_int(output_shape_.back(), "output features");
  const int64_t rows = output_elements_ / features;
  padded_rows_fp16_to_fp32(output_tensor_ptr_, output_staging_, rows, features, stream_.get());
}

void CudaContext::enqueue_forward(bool annotate) {
  NvtxRange forward_range(annotate ? "forward" : nullptr);
  enqueue_input_conversion();
  for (size_t i = 0; i < engine_.steps.size(); ++i) {
    const Step& step = engine_.steps[i];
    NvtxRange layer_range(annotate ? step.node->name.c_str() : nullptr);
    try {
      step.kernel->run(step_args_[i]);
    } catch (const Error& error) {
      throw Error(layer_prefix(*step.node) + error.what());
    }
  }
  enqueue_output_conversion();
}

void CudaContext::capture_graph() {
  cudaStream_t stream = stream_.get();
  // Thread-local mode: other threads may keep creating contexts (and allocating) meanwhile,
  // while a kernel that allocates or synchronises during capture still fails loudly here.
  CNNRT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue_forward(/*annotate=*/false);
  } catch (...) {
    cudaGraph_t partial = nullptr;
    cudaStreamEndCapture(stream, &partial);
    if (partial != nullptr) cudaGraphDestroy(partial);
    cudaGetLastError();
    throw;
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t status = cudaStreamEndCapture(stream, &graph);
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw Error(std::string("CUDA graph capture of the forward failed (a kernel did something "
                            "that cannot be captured, e.g. allocated or synchronised): ") +
                cudaGetErrorString(status));
  }
  graph_.reset(graph);
  cudaGraphExec_t exec = nullptr;
  CNNRT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  graph_exec_.reset(exec);
}

void CudaContext::synchronize() { CNNRT_CUDA_CHECK(cudaStreamSynchronize(stream_.get())); }

void CudaContext::run(const float* input, float* output) {
  // ExecutionContext::run has rejected null pointers; the caller owns the buffer sizes.
  cudaStream_t stream = stream_.get();
  CNNRT_CUDA_CHECK(cudaMemcpyAsync(input_staging_, input,
                                   static_cast<size_t>(input_elements_) * sizeof(float),
                                   cudaMemcpyHostToDevice, stream));
  CNNRT_CUDA_CHECK(cudaGraphLaunch(graph_exec_.get(), stream));
  CNNRT_CUDA_CHECK(cudaMemcpyAsync(output, output_staging_,
                                   static_cast<size_t>(output_elements_) * sizeof(float),
                                   cudaMemcpyDeviceToHost, stream));
  synchronize();
}

std::vector<LayerProfile> CudaContext::profile(int iterations) {
  const size_t steps = engine_.steps.size();
  const size_t runs = static_cast<size_t>(iterations);
  // Event pair (step, iteration) at index 2 * (iteration * steps + step).
  std::vector<EventHandle> events = make_events(2 * steps * runs);

  fill_random_input();
  enqueue_forward(/*annotate=*/true);  // warm-up (caches, clocks, lazy kernel setup)
  for (size_t run = 0; run < runs; ++run) {
    fill_random_input();
    NvtxRange forward_range("profile forward");
    enqueue_input_conversion();
    for (size_t i = 0; i < steps; ++i) {
      const Step& step = engine_.steps[i];
      NvtxRange layer_range(step.node->name.c_str());
      const size_t pair = 2 * (run * steps + i);
      CNNRT_CUDA_CHECK(cudaEventRecord(events[pair].get(), stream_.get()));
      try {
        step.kernel->run(step_args_[i]);
      } catch (const Error& error) {
        throw Error(layer_prefix(*step.node) + error.what());
      }
      CNNRT_CUDA_CHECK(cudaEventRecord(events[pair + 1].get(), stream_.get()));
    }
    enqueue_output_conversion();
  }
  synchronize();

  std::vector<LayerProfile> rows;
  for (size_t i = 0; i < steps; ++i) {
    std::vector<double> times;
    for (size_t run = 0; run < runs; ++run) {
      const size_t pair = 2 * (run * steps + i);
      times.push_back(elapsed_ms(events[pair], events[pair + 1]));
    }
    const Step& step = engine_.steps[i];
    LayerProfile row = profile_row(step);
    row.median_ms = median(times);
    row.flops = step_flops(step, batch_);
    row.bytes = bytes_of_step(i);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<LayerProfile> CudaContext::compare_kernels(int iterations) {
  const KernelRegistry& registry = KernelRegistry::instance();
  cudaStream_t stream = stream_.get();
  std::vector<LayerProfile> rows;

  // Walk the forward step by step, so each step's inputs hold the real activations of the
  // chosen kernels before it; every candidate of step i then writes only step i's output (and
  // its own workspace), and the chosen kernel runs last to leave its result for step i + 1.
  // With input fusion, step 0's candidates that cannot read NCHW fp32 get a backend-layout copy
  // of the same input, converted once before their timing starts.
  DeviceBuffer converted_input;
  fill_random_input();
  enqueue_input_conversion();
  for (size_t i = 0; i < engine_.steps.size(); ++i) {
    const Step& step = engine_.steps[i];
    const KernelArgs& args = step_args_[i];
    const double flops = step_flops(step, batch_);
    const double bytes = bytes_of_step(i);

    LayerProfile chosen = profile_row(step);
    try {
      chosen.median_ms = time_kernel(*step.kernel, args, iterations, stream);
    } catch (const Error& error) {
      throw Error(layer_prefix(*step.node) + error.what());
    }
    chosen.flops = flops;
    chosen.bytes = bytes;
    rows.push_back(chosen);

    // Candidates at fp16 (own kernels, then baselines) and at the chosen kernel's precision.
    std::vector<const KernelEntry*> candidates =
        registry.candidates(*step.node, Device::CUDA, Precision::FP16);
    if (step.entry != nullptr && step.entry->precision != Precision::FP16)
      for (const KernelEntry* entry :
           registry.candidates(*step.node, Device::CUDA, step.entry->precision))
        candidates.push_back(entry);

    for (const KernelEntry* entry : candidates) {
      if (entry == step.entry) continue;
      LayerProfile row = chosen;
      row.kernel = entry->name;
      row.precision = to_string(entry->precision);
      row.median_ms = 0;
      std::unique_ptr<LayerKernel> kernel;
      DeviceBuffer workspace;
      try {
        kernel = entry->create({*step.node, engine_.graph});
        workspace = device_alloc(kernel->workspace_bytes(batch_),
                                 "the workspace of " + entry->name + " on " + step.node->name);
        KernelArgs candidate_args = args;
        candidate_args.workspace = workspace.get();
        if (args.input_is_nchw_fp32 && !kernel->reads_nchw_fp32_input()) {
          if (!converted_input) {
            converted_input = device_alloc(engine_.backend->tensor_bytes(input_shape_, batch_),
                                           "a converted input for comparing kernels");
            convert_input_into(converted_input.get());
          }
          for (size_t k = 0; k < step.node->inputs.size(); ++k)
            if (step.node->inputs[k] == "input") candidate_args.inputs[k] = converted_input.get();
          candidate_args.input_is_nchw_fp32 = false;
        }
        row.median_ms = time_kernel(*kernel, candidate_args, iterations, stream);
        if (!kernel->variant().empty()) row.kernel += " (" + kernel->variant() + ")";
      } catch (const std::exception& error) {
        // One broken comparison candidate must not hide the others: report it in the row.
        cudaStreamSynchronize(stream);
        cudaGetLastError();
        row.kernel += std::string(" [failed: ") + error.what() + "]";
        row.median_ms = std::numeric_limits<double>::quiet_NaN();
      }
      rows.push_back(std::move(row));
    }
    step.kernel->run(args);  // the chosen kernel's output feeds step i + 1
  }
  enqueue_output_conversion();
  synchronize();
  return rows;
}

std::vector<double> CudaContext::benchmark(int warmup, int iterations) {
  cudaStream_t stream = stream_.get();
  std::vector<EventHandle> events = make_events(2 * static_cast<size_t>(iterations));
  fill_random_input();
  for (int i = 0; i < warmup; ++i) CNNRT_CUDA_CHECK(cudaGraphLaunch(graph_exec_.get(), stream));
  for (int i = 0; i < iterations; ++i) {
    fill_random_input();  // outside the timed pair: the staging buffer may hold activations
    CNNRT_CUDA_CHECK(cudaEventRecord(events[2 * i].get(), stream));
    CNNRT_CUDA_CHECK(cudaGraphLaunch(graph_exec_.get(), stream));
    CNNRT_CUDA_CHECK(cudaEventRecord(events[2 * i + 1].get(), stream));
  }
  synchronize();
  std::vector<double> times;
  for (int i = 0; i < iterations; ++i)
    times.push_back(elapsed_ms(events[2 * i], events[2 * i + 1]));
  return times;
}

}  // namespace cnnrt::cuda
