// CudaContext implementation: arena + stream + captured CUDA graph per batch size (see the
// header for the why).  Timing paths (profile, compare_kernels, benchmark) run on the same
// stream and buffers as run(), enqueue every timed launch before synchronising once so the GPU
// queue stays full and host launch latency is not counted as kernel time, and feed a
// deterministic pseudo-random input generated on the device: the input tensor only lives until
// its last reader in the plan, so after a forward it may hold later activations, and timing
// must not depend on whatever bytes were left there.
#include "runtime/cuda/cuda_context.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <string>

#ifdef CNNRT_WITH_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

#include "kernels/cpu/convert_ref.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
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

std::string layer_prefix(const std::string& layer) {
  ErrorSite site;
  site.layer = layer;
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

CudaContext::CudaContext(std::shared_ptr<const EngineImpl> engine, int batch,
                         const ContextOptions& options)
    : engine_(std::move(engine)), batch_(batch), keep_all_(options.keep_all_tensors) {
  if (batch < 1) throw Error("batch must be at least 1, got " + std::to_string(batch));
  const EngineImpl& e = *engine_;
  if (e.steps.empty()) throw Error("CUDA backend: the engine has no layers to run");
  input_elements_ = batch_ * shape_elements(e.graph->input.shape);
  output_elements_ = batch_ * shape_elements(e.tensors.at(e.output_tensor).shape);
  prepared_ = prepare_context(e, batch_, options.keep_all_tensors);
  programmatic_launch_ = device_traits().programmatic_launch;

  // Weights were uploaded at build on other streams (pageable copies may still be in flight)
  // and our stream is non-blocking, so it would not wait for them: settle everything once here.
  CNNRT_CUDA_CHECK(cudaDeviceSynchronize());
  arena_ = device_alloc(prepared_.memory.arena_bytes,
                        "the activation arena of batch " + std::to_string(batch_));
  cudaStream_t stream = nullptr;
  CNNRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_.reset(stream);
  try {
    // Zero once so no kernel ever reads uninitialised bytes (e.g. padding it does not own).
    if (prepared_.memory.arena_bytes > 0)
      CNNRT_CUDA_CHECK(cudaMemsetAsync(arena_.get(), 0, prepared_.memory.arena_bytes, stream));
    bind_arguments();
    const std::vector<PrefetchChoice> prefetch_choices = plan_l2_prefetch();

    // One eager forward first: kernels finish lazy setup (cuBLASLt heuristics, module loading)
    // outside capture, and a failing kernel reports here with its layer name.
    // Its steps are timed too (first_run): two events per step, nothing waited for.
    fill_random_input();
    std::vector<EventHandle> events = make_events(2 * e.steps.size());
    enqueue_forward(step_args_, /*annotate=*/true, &events);
    synchronize();
    for (size_t i = 0; i < e.steps.size(); ++i)
      first_run_ms_.push_back(elapsed_ms(events[2 * i], events[2 * i + 1]));
    CapturedGraph captured = capture_fastest(prefetch_choices, options.timed_choices);
    graph_ = std::move(captured.graph);
    graph_exec_ = std::move(captured.exec);
    plan_binding();
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
  const PlannedTensor* tensor = prepared_.memory.find(name);
  if (tensor == nullptr) throw Error("CUDA backend: the memory plan has no tensor '" + name + "'");
  return static_cast<char*>(arena_.get()) + tensor->offset;
}

std::vector<float> CudaContext::read_tensor(const std::string& name) const {
  check_readable(name, keep_all_, engine_->output_tensor);
  const EngineTensor& t = engine_->tensors.at(name);
  std::vector<uint8_t> bytes(tensor_bytes(t.shape, t.type, batch_));
  // run() has synchronised the stream; the copy waits for nothing else of ours.
  CNNRT_CUDA_CHECK(
      cudaMemcpy(bytes.data(), tensor_pointer(name), bytes.size(), cudaMemcpyDeviceToHost));
  std::vector<float> values(static_cast<size_t>(batch_ * shape_elements(t.shape)));
  ref::convert_tensor(bytes.data(), t.type, values.data(), fp32_nchw(), t.shape, batch_);
  return values;
}

void CudaContext::bind_arguments() {
  input_ = static_cast<float*>(tensor_pointer("input"));
  output_ = static_cast<const float*>(tensor_pointer(engine_->output_tensor));
  step_args_.clear();
  for (size_t i = 0; i < engine_->steps.size(); ++i) {
    const Step& step = engine_->steps[i];
    const KernelPlan& plan = prepared_.kernel_plans[i];
    KernelArgs args;
    for (const std::string& input : step.inputs) args.inputs.push_back(tensor_pointer(input));
    // An in-place step's output was planned at its input's offset, so output == inputs[0].
    args.output = tensor_pointer(step.name);
    args.batch = batch_;
    if (plan.workspace_bytes > 0) args.workspace = tensor_pointer(step.name + ".workspace");
    args.stream = stream_.get();
    args.variant = plan.variant;
    args.state = plan.state.get();
    step_args_.push_back(std::move(args));
  }
}

void CudaContext::fill_random_input() {
  fill_uniform_fp32(input_, input_elements_, random_seed_, stream_.get());
}

void CudaContext::run_step(size_t i, const KernelArgs& args) {
  const Step& step = engine_->steps[i];
  try {
    step.kernel->run(args);
  } catch (const Error& error) {
    throw Error(layer_prefix(step.name) + error.what());
  }
}

void CudaContext::enqueue_forward(const std::vector<KernelArgs>& args, bool annotate,
                                  std::vector<EventHandle>* events) {
  NvtxRange forward_range(annotate ? "forward" : nullptr);
  ProgrammaticLaunchScope programmatic(programmatic_launch_);
  const bool prefetch = events == nullptr && !prefetch_.empty();
  for (size_t i = 0; i < engine_->steps.size(); ++i) {
    if (prefetch && i == prefetch_fork_step_) {
      // A side branch: the prefetch runs beside the steps from here on; nothing waits for it (a
      // hint), so it joins back after the last step (in a captured graph a fork and a join
      // edge).
      CNNRT_CUDA_CHECK(cudaEventRecord(fork_event_.get(), stream_.get()));
      CNNRT_CUDA_CHECK(cudaStreamWaitEvent(side_stream_.get(), fork_event_.get(), 0));
      for (const L2PrefetchPattern& pattern : prefetch_) l2_prefetch(pattern, side_stream_.get());
      CNNRT_CUDA_CHECK(cudaEventRecord(join_event_.get(), side_stream_.get()));
    }
    NvtxRange layer_range(annotate ? engine_->steps[i].name.c_str() : nullptr);
    if (events) CNNRT_CUDA_CHECK(cudaEventRecord((*events)[2 * i].get(), stream_.get()));
    run_step(i, args[i]);
    if (events) CNNRT_CUDA_CHECK(cudaEventRecord((*events)[2 * i + 1].get(), stream_.get()));
  }
  if (prefetch) CNNRT_CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), join_event_.get(), 0));
}

std::vector<LayerProfile> CudaContext::rows_of(const std::vector<double>& times) const {
  std::vector<LayerProfile> rows;
  for (size_t i = 0; i < engine_->steps.size(); ++i) {
    LayerProfile row = profile_row(engine_->steps[i], prepared_.kernel_plans[i]);
    row.median_ms = times[i];
    row.flops = step_flops(engine_->steps[i], batch_);
    row.bytes = step_bytes(*engine_, engine_->steps[i], batch_);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<LayerProfile> CudaContext::first_run() { return rows_of(first_run_ms_); }

CudaContext::CapturedGraph CudaContext::capture_graph(const std::vector<KernelArgs>& args) {
  cudaStream_t stream = stream_.get();
  // Thread-local mode: other threads may keep creating contexts (and allocating) meanwhile,
  // while a kernel that allocates or synchronises during capture still fails loudly here.
  CNNRT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue_forward(args, /*annotate=*/false);
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
  CapturedGraph captured;
  captured.graph.reset(graph);
  cudaGraphExec_t exec = nullptr;
  CNNRT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  captured.exec.reset(exec);
  return captured;
}

void CudaContext::plan_binding() {
  const std::vector<Step>& steps = engine_->steps;
  // An in-place step writes its output over inputs[0] (the planner put both at one offset).
  auto in_place = [&](size_t i) {
    return !steps[i].inputs.empty() && step_args_[i].output == step_args_[i].inputs[0];
  };
  // Tensors sharing the returned tensor's memory: it and, back through in-place steps, what
  // they overwrote.  Each of them lives in the caller's output buffer when bound.
  std::set<std::string> aliases = {engine_->output_tensor};
  for (size_t i = steps.size(); i-- > 0;)
    if (aliases.count(steps[i].name) != 0 && in_place(i)) aliases.insert(steps[i].inputs[0]);
  // The caller's input is const: a model that updates it in place, or returns it, runs on copies.
  if (aliases.count("input") != 0) return;
  for (size_t i = 0; i < steps.size(); ++i)
    if (in_place(i) && steps[i].inputs[0] == "input") return;
  for (size_t i = 0; i < steps.size(); ++i) {
    for (size_t k = 0; k < steps[i].inputs.size(); ++k) {
      if (steps[i].inputs[k] == "input") input_slots_.push_back({i, static_cast<int>(k)});
      if (aliases.count(steps[i].inputs[k]) != 0) output_slots_.push_back({i, static_cast<int>(k)});
    }
    if (aliases.count(steps[i].name) != 0) output_slots_.push_back({i, -1});
  }
  bindable_ = true;
}

cudaGraphExec_t CudaContext::bound_graph(const float* input, float* output) {
  if (!bindable_) return nullptr;
  for (size_t i = 0; i < bound_graphs_.size(); ++i) {
    if (bound_graphs_[i].input != input || bound_graphs_[i].output != output) continue;
    std::rotate(bound_graphs_.begin(), bound_graphs_.begin() + i, bound_graphs_.begin() + i + 1);
    return bound_graphs_.front().graph.exec.get();
  }
  // Kernels assume the arena's alignment (vector loads, cuBLASLt's heuristics at prepare), and
  // read the input while later steps write the output: a misaligned or overlapping pair is
  // copied through the arena instead.
  const uintptr_t in = reinterpret_cast<uintptr_t>(input);
  const uintptr_t out = reinterpret_cast<uintptr_t>(output);
  const uintptr_t alignment = prepared_.memory.alignment;
  if (in % alignment != 0 || out % alignment != 0) return nullptr;
  const uintptr_t in_end = in + static_cast<uintptr_t>(input_elements_) * sizeof(float);
  const uintptr_t out_end = out + static_cast<uintptr_t>(output_elements_) * sizeof(float);
  if (in < out_end && out < in_end) return nullptr;

  std::vector<KernelArgs> args = step_args_;
  for (const Slot& slot : input_slots_) args[slot.step].inputs[slot.input] = input;
  for (const Slot& slot : output_slots_) {
    if (slot.input < 0) {
      args[slot.step].output = output;
    } else {
      args[slot.step].inputs[slot.input] = output;
    }
  }
  BoundGraph bound{input, output, capture_graph(args)};
  if (bound_graphs_.size() == kMaxBoundGraphs) bound_graphs_.pop_back();
  bound_graphs_.insert(bound_graphs_.begin(), std::move(bound));
  return bound_graphs_.front().graph.exec.get();
}

void CudaContext::synchronize() { CNNRT_CUDA_CHECK(cudaStreamSynchronize(stream_.get())); }

void CudaContext::enqueue_run(const float* input, float* output, bool device_buffers,
                              cudaStream_t stream) {
  CNNRT_CUDA_CHECK(
      cudaMemcpyAsync(input_, input, static_cast<size_t>(input_elements_) * sizeof(float),
                      device_buffers ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice, stream));
  // The graph was captured on the context's stream; an executable graph launches on any.
  CNNRT_CUDA_CHECK(cudaGraphLaunch(graph_exec_.get(), stream));
  CNNRT_CUDA_CHECK(
      cudaMemcpyAsync(output, output_, static_cast<size_t>(output_elements_) * sizeof(float),
                      device_buffers ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost, stream));
}

void CudaContext::run(const float* input, float* output) {
  // ExecutionContext::run has rejected null pointers; the caller owns the buffer sizes.
  enqueue_run(input, output, /*device_buffers=*/false, stream_.get());
  synchronize();
}

void CudaContext::run_many(const float* inputs, float* outputs, int runs) {
  if (runs < 1) return;
  const size_t in = static_cast<size_t>(input_elements_),
               out = static_cast<size_t>(output_elements_);
  const size_t count = static_cast<size_t>(runs);
  DeviceBuffer staging = device_alloc((in + out) * count * sizeof(float), "run_many buffers");
  float* device_in = static_cast<float*>(staging.get());
  float* device_out = device_in + in * count;
  cudaStream_t stream = stream_.get();
  CNNRT_CUDA_CHECK(cudaMemcpyAsync(device_in, inputs, in * count * sizeof(float),
                                   cudaMemcpyHostToDevice, stream));
  for (size_t r = 0; r < count; ++r)
    enqueue_run(device_in + r * in, device_out + r * out, /*device_buffers=*/true, stream);
  CNNRT_CUDA_CHECK(cudaMemcpyAsync(outputs, device_out, out * count * sizeof(float),
                                   cudaMemcpyDeviceToHost, stream));
  synchronize();  // before `staging` is freed
}

void CudaContext::run_async(const float* device_input, float* device_output, void* stream) {
  // Everything on the caller's stream, nothing waited for: one launch of the graph bound to
  // these buffers, else the copy path.  (The graphs were captured on the context's stream; an
  // executable graph launches on any.)
  cudaStream_t caller = static_cast<cudaStream_t>(stream);
  if (cudaGraphExec_t exec = bound_graph(device_input, device_output)) {
    CNNRT_CUDA_CHECK(cudaGraphLaunch(exec, caller));
    return;
  }
  enqueue_run(device_input, device_output, /*device_buffers=*/true, caller);
}

std::vector<LayerProfile> CudaContext::profile(int iterations) {
  const std::vector<Step>& steps = engine_->steps;
  const size_t count = steps.size();
  const size_t runs = static_cast<size_t>(iterations);
  // Event pair (step, iteration) at index 2 * (iteration * count + step).
  std::vector<EventHandle> events = make_events(2 * count * runs);

  fill_random_input();
  // Warm-up (caches, clocks, lazy kernel setup), unless the constructor's eager forward just
  // did it: a candidate timed once by the automatic plan then costs two forwards, not three
  // (the CUDA fp32 reference layers take ~0.1-0.2 s each at batch 256).
  if (!fresh_) enqueue_forward(step_args_, /*annotate=*/true);
  fresh_ = false;
  for (size_t run = 0; run < runs; ++run) {
    fill_random_input();
    NvtxRange forward_range("profile forward");
    for (size_t i = 0; i < count; ++i) {
      NvtxRange layer_range(steps[i].name.c_str());
      const size_t pair = 2 * (run * count + i);
      CNNRT_CUDA_CHECK(cudaEventRecord(events[pair].get(), stream_.get()));
      run_step(i, step_args_[i]);
      CNNRT_CUDA_CHECK(cudaEventRecord(events[pair + 1].get(), stream_.get()));
    }
  }
  synchronize();

  std::vector<double> medians;
  for (size_t i = 0; i < count; ++i) {
    std::vector<double> times;
    for (size_t run = 0; run < runs; ++run) {
      const size_t pair = 2 * (run * count + i);
      times.push_back(elapsed_ms(events[pair], events[pair + 1]));
    }
    medians.push_back(median(times));
  }
  return rows_of(medians);
}

double CudaContext::time_candidate(const KernelEntry& entry, size_t i, int iterations,
                                   std::string* variant) {
  const EngineImpl& e = *engine_;
  const Step& step = e.steps[i];
  cudaStream_t stream = stream_.get();
  std::unique_ptr<LayerKernel> kernel = entry.create({*step.node, *e.graph, e.calibration.get()});
  KernelArgs args = step_args_[i];
  PrepareInfo info{batch_, {}};
  std::vector<DeviceBuffer> buffers;
  for (size_t k = 0; k < step.inputs.size(); ++k) {
    const EngineTensor& source = e.tensors.at(step.inputs[k]);
    const std::vector<TensorType> accepted = kernel->input_types(k);
    TensorType wanted = accepted.at(0);
    for (const TensorType& type : accepted)
      if (type == source.type) wanted = type;
    info.input_types.push_back(wanted);
    if (wanted == source.type) continue;
    // Converted once, before the timing starts.
    std::unique_ptr<LayerKernel> conversion =
        e.backend->make_conversion(source.shape, source.type, wanted);
    buffers.push_back(device_alloc(tensor_bytes(source.shape, wanted, batch_) + 256,
                                   "a converted input for comparing kernels"));
    KernelArgs convert{{args.inputs[k]}, buffers.back().get(), batch_, nullptr, stream, 0};
    conversion->run(convert);
    args.inputs[k] = buffers.back().get();
  }
  const KernelPlan plan = kernel->prepare(info);
  *variant = plan.variant_name;
  buffers.push_back(
      device_alloc(plan.workspace_bytes, "the workspace of " + entry.name + " on " + step.name));
  args.workspace = buffers.back().get();
  buffers.push_back(
      device_alloc(tensor_bytes(e.tensors.at(step.name).shape, kernel->output_type(), batch_) + 256,
                   "the output of " + entry.name + " on " + step.name));
  args.output = buffers.back().get();
  args.variant = plan.variant;
  args.state = plan.state.get();
  const double ms = time_kernel(*kernel, args, iterations, stream);
  // The buffers free at return: wait for the timed work that still reads them.
  synchronize();
  return ms;
}

std::vector<LayerProfile> CudaContext::compare_kernels(int iterations) {
  const KernelRegistry& registry = KernelRegistry::instance();
  const std::vector<Step>& steps = engine_->steps;
  cudaStream_t stream = stream_.get();
  std::vector<LayerProfile> rows;

  // Walk the forward step by step, so each step's inputs hold the real activations of the
  // chosen kernels before it; every candidate writes into a buffer of its own, and the chosen
  // kernel runs last to leave its result for step i + 1.
  fill_random_input();
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    LayerProfile chosen = profile_row(step, prepared_.kernel_plans[i]);
    try {
      chosen.median_ms = time_kernel(*step.kernel, step_args_[i], iterations, stream);
    } catch (const Error& error) {
      throw Error(layer_prefix(step.name) + error.what());
    }
    chosen.flops = step_flops(step, batch_);
    chosen.bytes = step_bytes(*engine_, step, batch_);
    rows.push_back(chosen);

    // Every other CUDA entry of the layer's op, at every precision, baselines included.
    for (const KernelEntry& entry : registry.entries()) {
      if (step.is_conversion() || &entry == step.entry || entry.op != step.node->op ||
          entry.device != Device::CUDA || !entry.supports(*step.node))
        continue;
      // int8 candidates need the tensor scales of a calibration.
      if (entry.precision == Precision::INT8 && engine_->calibration == nullptr) continue;
      LayerProfile row = chosen;
      row.kernel = entry.name;
      row.precision = to_string(entry.precision);
      row.variant.clear();
      try {
        row.median_ms = time_candidate(entry, i, iterations, &row.variant);
      } catch (const std::exception& error) {
        // One broken comparison candidate must not hide the others: report it in the row.
        cudaStreamSynchronize(stream);
        cudaGetLastError();
        row.kernel += std::string(" [failed: ") + error.what() + "]";
        row.median_ms = std::numeric_limits<double>::quiet_NaN();
      }
      rows.push_back(std::move(row));
    }
    run_step(i, step_args_[i]);  // the chosen kernel's output feeds step i + 1
  }
  synchronize();
  return rows;
}

std::vector<double> CudaContext::benchmark(int warmup, int iterations) {
  return replay_times(graph_exec_.get(), warmup, iterations);
}

std::vector<double> CudaContext::replay_times(cudaGraphExec_t exec, int warmup, int iterations) {
  cudaStream_t stream = stream_.get();
  std::vector<EventHandle> events = make_events(2 * static_cast<size_t>(iterations));
  fill_random_input();
  for (int i = 0; i < warmup; ++i) CNNRT_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  for (int i = 0; i < iterations; ++i) {
    fill_random_input();  // outside the timed pair: the input tensor may hold activations
    CNNRT_CUDA_CHECK(cudaEventRecord(events[2 * i].get(), stream));
    CNNRT_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CNNRT_CUDA_CHECK(cudaEventRecord(events[2 * i + 1].get(), stream));
  }
  synchronize();
  std::vector<double> times;
  for (int i = 0; i < iterations; ++i)
    times.push_back(elapsed_ms(events[2 * i], events[2 * i + 1]));
  return times;
}

}  // namespace cnnrt::cuda
