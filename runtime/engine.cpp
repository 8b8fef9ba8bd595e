// Public API glue: Engine and ExecutionContext check the arguments once, then forward to the
// backend-specific implementations; option parsing; device queries.  Nothing here knows a
// layer's internals.
#include <algorithm>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <system_error>
#include <thread>

#include "cnnrt/cnnrt.h"
#include "graph/model_loader.h"
#include "runtime/backends.h"
#include "runtime/build_trace.h"
#include "runtime/engine_impl.h"

namespace cnnrt {

const char* to_string(Device device) {
  switch (device) {
    case Device::Auto:
      return "auto";
    case Device::CPU:
      return "cpu";
    case Device::CUDA:
      return "cuda";
  }
  return "?";
}

const char* to_string(Precision precision) {
  switch (precision) {
    case Precision::Auto:
      return "auto";
    case Precision::FP32:
      return "fp32";
    case Precision::FP16:
      return "fp16";
    case Precision::INT8:
      return "int8";
  }
  return "?";
}

Device parse_device(const std::string& text) {
  if (text == "auto") return Device::Auto;
  if (text == "cpu") return Device::CPU;
  if (text == "cuda" || text == "gpu") return Device::CUDA;
  throw Error("unknown device '" + text + "' (expected auto, cpu or cuda)");
}

Precision parse_precision(const std::string& text) {
  if (text == "auto") return Precision::Auto;
  if (text == "fp32") return Precision::FP32;
  if (text == "fp16") return Precision::FP16;
  if (text == "int8") return Precision::INT8;
  throw Error("unknown precision '" + text + "' (expected auto, fp32, fp16 or int8)");
}

bool cuda_available() {
  const BackendInfo* cuda = find_backend(Device::CUDA);
  return cuda != nullptr && cuda->available();
}

DeviceInfo device_info(Device device) {
  if (device == Device::Auto) device = cuda_available() ? Device::CUDA : Device::CPU;
  const BackendInfo* backend = find_backend(device);
  if (backend == nullptr)
    throw Error(std::string("this build of cnnrt has no ") + to_string(device) + " backend");
  return backend->info();
}

namespace {

// warm_up_device's one background start: the future's destructor waits for it at exit.
std::mutex warm_up_mutex;
std::future<void>& warm_up_future() {
  static std::future<void> future;
  return future;
}

void wait_for_warm_up() {
  std::lock_guard<std::mutex> lock(warm_up_mutex);
  if (warm_up_future().valid()) warm_up_future().wait();
}

}  // namespace

void warm_up_device(Device device) {
  // Auto warms up CUDA where it is there.  The availability check runs on the thread too: it is
  // the driver's initialisation (~0.1-0.2 s on an H100 host), the first half of the start-up
  // this call exists to overlap.
  const BackendInfo* backend = find_backend(device == Device::Auto ? Device::CUDA : device);
  if (backend == nullptr || backend->warm_up == nullptr) return;
  std::lock_guard<std::mutex> lock(warm_up_mutex);
  if (warm_up_future().valid()) return;
  try {
    warm_up_future() = std::async(std::launch::async, [backend] {
      if (backend->available()) backend->warm_up();
    });
  } catch (const std::system_error&) {
    // No thread to be had: the first build creates the context, as without a warm-up.
  }
}

// --- Engine ---------------------------------------------------------------------------------

Engine::Engine(std::unique_ptr<EngineImpl> impl) : impl_(std::move(impl)) {}
// The batch check shared by create_context and plan.
Engine::~Engine() = default;

std::shared_ptr<Engine> Engine::load(const std::string& model_path, const std::string& weights_path,
                                     const BuildOptions& options) {
  Graph graph = load_model(model_path);
  if (weights_path.empty() && graph.weights_file.empty())
    throw Error(model_path + ": no weight file given and the model names none (`weights:`)");
  load_weights(graph, weights_path.empty() ? graph.weights_file : weights_path);
  return build(std::move(graph), options);  // no copy of the weights
}

std::shared_ptr<Engine> Engine::build(const Graph& graph, const BuildOptions& options) {
  BuildTrace trace("[engine] ");  // CNNRT_TRACE_BUILD=1: the wait, apart from the build
  wait_for_warm_up();
  trace.mark("waited for the device's start");
  return std::make_shared<Engine>(build_engine(graph, options));
}

std::shared_ptr<Engine> Engine::build(Graph&& graph, const BuildOptions& options) {
  BuildTrace trace("[engine] ");
  wait_for_warm_up();
  trace.mark("waited for the device's start");
  return std::make_shared<Engine>(build_engine(std::move(graph), options));
}

Device Engine::device() const { return impl_->device; }
Precision Engine::precision() const { return impl_->precision; }
const ModelInfo& Engine::model() const { return impl_->model; }
size_t Engine::weight_bytes() const { return impl_->weight_bytes; }

std::string Engine::describe() const {
  std::ostringstream out;
  out << "engine: " << impl_->model.name << " on " << to_string(impl_->device) << ", default "
      << to_string(impl_->precision) << ", " << impl_->steps.size() << " steps\n";
  for (const Step& step : impl_->steps) {
    std::string sources;
    for (const std::string& s : step.sources) sources += (sources.empty() ? "" : "+") + s;
    std::string inputs;
    for (const TensorType& type : step.input_types)
      inputs += (inputs.empty() ? "" : ", ") + to_string(type);
    out << "  " << step.name << "  [" << (sources.empty() ? "conversion" : sources) << "]  "
        << step.kernel_name << "  " << to_string(step.precision) << "  " << inputs << " -> "
        << to_string(impl_->tensors.at(step.name).type) << "\n";
  }
  return out.str();
}

namespace {

// Batch limits shared by create_context and plan.  The loader caps each tensor at 2^31 elements
// per sample; capping batch x that here keeps every backend's byte arithmetic (and the
// planner's arena sum) far from size_t overflow, and turns an impossible batch into an error
// naming it rather than a std::bad_alloc.
void check_batch(const EngineImpl& engine, int batch) {
  if (batch < 1) throw Error("batch must be at least 1 (got " + std::to_string(batch) + ")");
  constexpr int64_t kMaxActivationElements = int64_t{1} << 40;  // 4 TiB of fp32
  int64_t largest = shape_elements(engine.graph->input.shape);
  for (const Node& node : engine.graph->nodes) {
    largest = std::max(largest, shape_elements(node.output_shape));
    largest = std::max(largest, shape_elements(node.pre_pool_shape));
  }
  if (largest > kMaxActivationElements / batch)
    throw Error("batch " + std::to_string(batch) + " is too large for this model (one tensor of " +
                std::to_string(largest) + " elements per sample would exceed " +
                std::to_string(kMaxActivationElements) + " elements)");
}

}  // namespace

std::unique_ptr<ExecutionContext> Engine::create_context(int batch) const {
  return cnnrt::create_context(*this, batch, {});
}

std::unique_ptr<ExecutionContext> create_context(const Engine& engine, int batch,
                                                 const ContextOptions& options) {
  const EngineImpl& impl = engine.impl();
  if (!impl.plan_target.empty())
    throw Error("this engine was built to plan for target '" + impl.plan_target +
                "' without a device; it cannot run");
  check_batch(impl, batch);
  return std::make_unique<ExecutionContext>(
      impl.backend->create_context(engine.shared_impl(), batch, options));
}

ExecutionPlan Engine::plan(int batch) const {
  check_batch(*impl_, batch);
  // prepare() decides for the build's device, so a plan target is back on the thread for it.
  const std::shared_ptr<void> target = enter_plan_target(impl_->device, impl_->plan_target);
  const PreparedContext prepared = prepare_context(*impl_, batch);
  ExecutionPlan plan;
  plan.model = impl_->model.name;
  plan.device = to_string(impl_->device);
  plan.batch = batch;
  for (size_t i = 0; i < impl_->steps.size(); ++i) {
    const Step& step = impl_->steps[i];
    const KernelPlan& kernel_plan = prepared.kernel_plans[i];
    PlannedStep row;
    row.name = step.name;
    row.sources = step.sources;
    row.kernel = step.kernel_name;
    row.variant = kernel_plan.variant_name;
    row.precision = to_string(step.precision);
    row.inputs = step.inputs;
    for (const TensorType& type : step.input_types) row.input_types.push_back(to_string(type));
    row.output_type = to_string(impl_->tensors.at(step.name).type);
    row.workspace_bytes = kernel_plan.workspace_bytes;
    const PlannedTensor* output = prepared.memory.find(step.name);
    row.in_place = output != nullptr && !output->aliases.empty();
    row.sparse_2_4 = step.entry != nullptr && step.entry->sparse_2_4;
    plan.steps.push_back(std::move(row));
  }
  const std::string compacted = impl_->compacted.to_text();
  for (size_t start = 0; start < compacted.size();) {
    const size_t end = compacted.find('\n', start);
    plan.compacted.push_back(compacted.substr(start, end - start));
    start = end + 1;
  }
  for (const PlannedTensor& tensor : prepared.memory.tensors) {
    ExecutionPlan::Tensor row;
    row.name = tensor.name;
    auto typed = impl_->tensors.find(tensor.name);
    row.type = typed != impl_->tensors.end() ? to_string(typed->second.type) : "workspace";
    row.bytes = tensor.bytes;
    row.offset = tensor.offset;
    row.first_step = tensor.first_step;
    row.last_step = tensor.last_step;
    row.aliases = tensor.aliases;
    plan.tensors.push_back(std::move(row));
  }
  plan.arena_bytes = prepared.memory.arena_bytes;
  plan.naive_bytes = prepared.memory.naive_bytes;
  plan.lower_bound_bytes = prepared.memory.lower_bound_bytes;
  return plan;
}

// --- ExecutionContext -----------------------------------------------------------------------

ExecutionContext::ExecutionContext(std::unique_ptr<ContextImpl> impl) : impl_(std::move(impl)) {}
ExecutionContext::~ExecutionContext() = default;
int ExecutionContext::batch() const { return impl_->batch(); }

void ExecutionContext::run(const float* input, float* output) {
  if (input == nullptr || output == nullptr) throw Error("run: input and output must not be null");
  impl_->run(input, output);
}

void ExecutionContext::run(const float* input, size_t input_floats, float* output,
                           size_t output_floats) {
  if (input_floats != input_count() || output_floats != output_count())
    throw Error("run: the model takes " + std::to_string(input_count()) + " input and " +
                std::to_string(output_count()) + " output floats at batch " +
                std::to_string(batch()) + ", got buffers of " + std::to_string(input_floats) +
                " and " + std::to_string(output_floats));
  run(input, output);
}

void ExecutionContext::run_async(const float* device_input, float* device_output, void* stream) {
  if (device_input == nullptr || device_output == nullptr)
    throw Error("run_async: input and output must not be null");
  impl_->run_async(device_input, device_output, stream);
}

size_t ExecutionContext::input_count() const { return impl_->input_count(); }
size_t ExecutionContext::output_count() const { return impl_->output_count(); }

std::vector<LayerProfile> ExecutionContext::profile(int iterations) {
  if (iterations < 1) throw Error("profile: iterations must be at least 1");
  return impl_->profile(iterations);
}

std::vector<LayerProfile> ExecutionContext::compare_kernels(int iterations) {
  if (iterations < 1) throw Error("compare: iterations must be at least 1");
  return impl_->compare_kernels(iterations);
}

std::vector<double> ExecutionContext::benchmark(int warmup, int iterations) {
  if (warmup < 0 || iterations < 1) throw Error("benchmark: need warmup >= 0 and iterations >= 1");
  return impl_->benchmark(warmup, iterations);
}

const MemoryPlan& ExecutionContext::memory_plan() const { return impl_->memory_plan(); }
size_t ExecutionContext::arena_bytes() const { return impl_->memory_plan().arena_bytes; }
std::string ExecutionContext::describe() const { return impl_->describe(); }

}  // namespace cnnrt
