// Public API glue: Engine and ExecutionContext check the arguments once, then forward to the
// backend-specific implementations; option parsing; device queries.  Nothing here knows a
// layer's internals.
#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "cnnrt/cnnrt.h"
#include "graph/model_loader.h"
#include "runtime/engine_impl.h"
#ifdef CNNRT_WITH_CUDA
#include "runtime/cuda/device_info.h"
#endif

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
#ifdef CNNRT_WITH_CUDA
  return cuda::cuda_device_present();
#else
  return false;
#endif
}

DeviceInfo device_info(Device device) {
  if (device == Device::Auto) device = cuda_available() ? Device::CUDA : Device::CPU;
  if (device == Device::CUDA) {
#ifdef CNNRT_WITH_CUDA
    return cuda::cuda_device_info();
#else
    throw Error("this build of cnnrt has no CUDA backend");
#endif
  }
  // Nominal figures for the reference kernels: they are scalar loops, so a core's scalar FMA
  // rate (≈2 GFLOP/s at ~1 FMA/cycle with double accumulation) is the honest ceiling.
  DeviceInfo info;
  info.name = "cpu";
  info.multiprocessors = static_cast<int>(std::thread::hardware_concurrency());
  info.peak_fp32_tflops = 0.002 * std::max(1, info.multiprocessors);
  info.peak_fp16_tflops = info.peak_fp32_tflops;
  info.peak_bandwidth_gbs = 20.0;
  return info;
}

// --- Engine ---------------------------------------------------------------------------------

Engine::Engine(std::unique_ptr<EngineImpl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

std::shared_ptr<Engine> Engine::load(const std::string& model_path, const std::string& weights_path,
                                     const BuildOptions& options) {
  Graph graph = load_model(model_path);
  load_weights(graph, weights_path);
  return build(graph, options);
}

std::shared_ptr<Engine> Engine::build(const Graph& graph, const BuildOptions& options) {
  return std::make_shared<Engine>(build_engine(graph, options));
}

Device Engine::device() const { return impl_->device; }
Precision Engine::precision() const { return impl_->precision; }
const ModelInfo& Engine::model() const { return impl_->model; }
size_t Engine::weight_bytes() const { return impl_->weight_bytes; }

std::string Engine::describe() const {
  std::ostringstream out;
  out << "engine: " << impl_->model.name << " on " << to_string(impl_->device) << ", "
      << to_string(impl_->precision) << ", " << impl_->steps.size() << " steps\n";
  for (const Step& step : impl_->steps) {
    std::string sources;
    for (const std::string& s : step.node->source_layers)
      sources += (sources.empty() ? "" : "+") + s;
    out << "  " << step.node->name << "  [" << sources << "]  " << step.entry->name;
    std::string variant = step.kernel->variant();
    if (!variant.empty()) out << " (" << variant << ")";
    out << "\n";
  }
  return out.str();
}

std::unique_ptr<ExecutionContext> Engine::create_context(int batch) const {
  if (batch < 1) throw Error("batch must be at least 1 (got " + std::to_string(batch) + ")");
  // The loader caps each tensor at 2^31 elements per sample; capping batch x that here keeps
  // every backend's byte arithmetic (and the planner's arena sum) far from size_t overflow, and
  // turns an impossible batch into an error naming it rather than a std::bad_alloc.
  constexpr int64_t kMaxActivationElements = int64_t{1} << 40;  // 4 TiB of fp32
  int64_t largest = shape_elements(impl_->graph.input.shape);
  for (const Step& step : impl_->steps) {
    largest = std::max(largest, shape_elements(step.node->output_shape));
    largest = std::max(largest, shape_elements(step.node->pre_pool_shape));
  }
  if (largest > kMaxActivationElements / batch)
    throw Error("batch " + std::to_string(batch) + " is too large for this model (one tensor of " +
                std::to_string(largest) + " elements per sample would exceed " +
                std::to_string(kMaxActivationElements) + " elements)");
  return std::make_unique<ExecutionContext>(impl_->backend->create_context(*impl_, batch));
}

// --- ExecutionContext -----------------------------------------------------------------------

ExecutionContext::ExecutionContext(std::unique_ptr<ContextImpl> impl) : impl_(std::move(impl)) {}
ExecutionContext::~ExecutionContext() = default;
int ExecutionContext::batch() const { return impl_->batch(); }

void ExecutionContext::run(const float* input, float* output) {
  if (input == nullptr || output == nullptr) throw Error("run: input and output must not be null");
  impl_->run(input, output);
}

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

}  // namespace cnnrt
