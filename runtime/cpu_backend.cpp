// CPU backend: typed activations (NCHW fp32 for every reference kernel; other types where a
// test or int8 kernel asks, through conversion steps) in one host arena laid out by the memory
// planner, the reference kernels run step by step.  It is the oracle the GPU path is checked
// against and the fallback on machines without a GPU, so it favours being obviously right over
// speed.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <new>

#include "graph/ir.h"
#include "kernels/cpu/convert_ref.h"
#include "runtime/backends.h"
#include "runtime/engine_impl.h"

namespace cnnrt {
namespace {

using Clock = std::chrono::steady_clock;

double elapsed_ms(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The CPU backend's conversion step: the reference conversion (kernels/cpu/convert_ref.h).
class CpuConversion final : public LayerKernel {
 public:
  CpuConversion(const Shape& shape, const TensorType& from, const TensorType& to)
      : shape_(shape), from_(from), to_(to) {}
  std::vector<TensorType> input_types(size_t) const override { return {from_}; }
  TensorType output_type() const override { return to_; }
  void run(const KernelArgs& args) override {
    ref::convert_tensor(args.inputs.at(0), from_, args.output, to_, shape_, args.batch);
  }

 private:
  Shape shape_;
  TensorType from_, to_;
};

// Host memory in 64-byte units (the planner's offsets are 256-byte multiples), zeroed.
std::vector<uint64_t> host_buffer(size_t bytes, const std::string& what) {
  try {
    return std::vector<uint64_t>(bytes / sizeof(uint64_t) + 1, 0);
  } catch (const std::bad_alloc&) {
    // Embedders get the one error type, with the size that did not fit.
    throw Error("cannot allocate " + std::to_string(bytes) + " bytes on the host for " + what);
  }
}

class CpuContext final : public ContextImpl {
 public:
  CpuContext(std::shared_ptr<const EngineImpl> engine, int batch, bool keep_all_tensors)
      : engine_(std::move(engine)), batch_(batch), keep_all_(keep_all_tensors) {
    const EngineImpl& e = *engine_;
    prepared_ = prepare_context(e, batch, keep_all_tensors);
    // The one allocation of this context.
    arena_ = host_buffer(prepared_.memory.arena_bytes,
                         "the activation arena of batch " + std::to_string(batch));
    for (size_t i = 0; i < e.steps.size(); ++i) {
      const Step& step = e.steps[i];
      KernelArgs args;
      for (const std::string& input : step.inputs) args.inputs.push_back(tensor(input));
      args.output = tensor(step.name);
      args.batch = batch;
      const PlannedTensor* workspace = prepared_.memory.find(step.name + ".workspace");
      args.workspace = workspace ? base() + workspace->offset : nullptr;
      args.variant = prepared_.kernel_plans[i].variant;
      args.state = prepared_.kernel_plans[i].state.get();
      args_.push_back(args);
    }
    input_bytes_ = sizeof(float) * batch * shape_elements(e.graph->input.shape);
    output_bytes_ = sizeof(float) * batch * shape_elements(e.model.output_shape);
    input_ = static_cast<float*>(tensor("input"));
    output_ = static_cast<float*>(tensor(e.output_tensor));
    // profile()/benchmark() before any run() must not time zeros: seed the input with a
    // deterministic pseudo-random pattern in [-1, 1).
    uint32_t state = 0x9e3779b9u;
    for (size_t i = 0; i < input_bytes_ / sizeof(float); ++i) {
      state = state * 1664525u + 1013904223u;
      input_[i] = static_cast<float>(state >> 8) / 8388608.0f - 1.0f;
    }
  }

  int batch() const override { return batch_; }
  const MemoryPlan& memory_plan() const override { return prepared_.memory; }

  void run(const float* input, float* output) override {
    // Pointers resolved at creation: run() does no name look-ups.
    std::memcpy(input_, input, input_bytes_);
    forward();
    std::memcpy(output, output_, output_bytes_);
  }
  // Host memory is the CPU's device memory: the same synchronous run.
  void run_async(const float* input, float* output, void* /*stream*/) override {
    run(input, output);
  }
  size_t input_count() const override { return input_bytes_ / sizeof(float); }
  size_t output_count() const override { return output_bytes_ / sizeof(float); }
  std::vector<float> read_tensor(const std::string& name) const override {
    check_readable(name, keep_all_, engine_->output_tensor);
    const EngineTensor& t = engine_->tensors.at(name);
    const PlannedTensor* planned = prepared_.memory.find(name);
    if (planned == nullptr)
      throw Error("internal: tensor '" + name + "' is not in the memory plan");
    std::vector<float> values(static_cast<size_t>(batch_ * shape_elements(t.shape)));
    ref::convert_tensor(reinterpret_cast<const uint8_t*>(arena_.data()) + planned->offset, t.type,
                        values.data(), fp32_nchw(), t.shape, batch_);
    return values;
  }

  // The warm-up forward is skipped right after first_run(), which ran one (as the CUDA context
  // skips it after its creation forward): on AlexNet's ~2 s CPU forward that is a candidate's
  // third of its timing.
  std::vector<LayerProfile> profile(int iterations) override {
    const bool warm_up = !warm_;
    warm_ = false;
    return timed(iterations, warm_up);
  }
  std::vector<LayerProfile> first_run() override {
    warm_ = true;
    return timed(1, false);
  }

  // Median per-step times of `iterations` forwards, after one untimed forward when warm_up.
  std::vector<LayerProfile> timed(int iterations, bool warm_up) {
    const std::vector<Step>& steps = engine_->steps;
    if (warm_up) forward();
    std::vector<std::vector<double>> times(steps.size());
    for (int it = 0; it < iterations; ++it)
      for (size_t i = 0; i < steps.size(); ++i) {
        const auto start = Clock::now();
        steps[i].kernel->run(args_[i]);
        times[i].push_back(elapsed_ms(start));
      }
    std::vector<LayerProfile> rows;
    for (size_t i = 0; i < steps.size(); ++i) {
      LayerProfile row = profile_row(steps[i], prepared_.kernel_plans[i]);
      row.median_ms = median(times[i]);
      row.flops = step_flops(steps[i], batch_);
      row.bytes = step_bytes(*engine_, steps[i], batch_);
      rows.push_back(row);
    }
    return rows;
  }

  // Every registry candidate of each layer step at every precision, on the real activations of
  // the chosen kernels before it.  A candidate reading another type gets its inputs converted
  // (outside the timing), and writes into a buffer of its own, so the arena stays as a plain
  // run leaves it.
  std::vector<LayerProfile> compare_kernels(int iterations) override {
    const KernelRegistry& registry = KernelRegistry::instance();
    const std::vector<Step>& steps = engine_->steps;
    std::vector<LayerProfile> rows;
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& step = steps[i];
      LayerProfile chosen = profile_row(step, prepared_.kernel_plans[i]);
      chosen.median_ms = time_runs(*step.kernel, args_[i], iterations);
      chosen.flops = step_flops(step, batch_);
      chosen.bytes = step_bytes(*engine_, step, batch_);
      rows.push_back(chosen);
      if (step.is_conversion()) {
        step.kernel->run(args_[i]);
        continue;
      }
      for (const KernelEntry& entry : registry.entries()) {
        if (&entry == step.entry || entry.op != step.node->op || entry.device != Device::CPU ||
            !entry.supports(*step.node))
          continue;
        // int8 candidates need the tensor scales of a calibration.
        if (entry.precision == Precision::INT8 && engine_->calibration == nullptr) continue;
        LayerProfile row = chosen;
        row.kernel = entry.name;
        row.precision = to_string(entry.precision);
        row.median_ms = time_candidate(entry, i, iterations, &row.variant);
        rows.push_back(row);
      }
      step.kernel->run(args_[i]);  // the chosen kernel's output feeds the next step
    }
    return rows;
  }

  std::vector<double> benchmark(int warmup, int iterations) override {
    for (int i = 0; i < warmup; ++i) forward();
    std::vector<double> times;
    for (int i = 0; i < iterations; ++i) {
      const auto start = Clock::now();
      forward();
      times.push_back(elapsed_ms(start));
    }
    return times;
  }

 private:
  uint8_t* base() { return reinterpret_cast<uint8_t*>(arena_.data()); }
  void* tensor(const std::string& name) {
    const PlannedTensor* planned = prepared_.memory.find(name);
    if (planned == nullptr)
      throw Error("internal: tensor '" + name + "' is not in the memory plan");
    return base() + planned->offset;
  }
  void forward() {
    const std::vector<Step>& steps = engine_->steps;
    for (size_t i = 0; i < steps.size(); ++i) steps[i].kernel->run(args_[i]);
  }
  double time_runs(LayerKernel& kernel, const KernelArgs& args, int iterations) {
    std::vector<double> times;
    for (int it = 0; it < iterations; ++it) {
      const auto start = Clock::now();
      kernel.run(args);
      times.push_back(elapsed_ms(start));
    }
    return median(times);
  }
  double time_candidate(const KernelEntry& entry, size_t i, int iterations, std::string* variant) {
    const Step& step = engine_->steps[i];
    std::unique_ptr<LayerKernel> kernel =
        entry.create({*step.node, *engine_->graph, engine_->calibration.get()});
    KernelArgs args = args_[i];
    PrepareInfo info{batch_, {}};
    std::vector<std::vector<uint64_t>> buffers;
    for (size_t k = 0; k < step.inputs.size(); ++k) {
      const EngineTensor& source = engine_->tensors.at(step.inputs[k]);
      const TensorType wanted = kernel->input_types(k).at(0);
      info.input_types.push_back(source.type);
      if (wanted == source.type) continue;
      buffers.push_back(host_buffer(tensor_bytes(source.shape, wanted, batch_), "a compare input"));
      ref::convert_tensor(args.inputs[k], source.type, buffers.back().data(), wanted, source.shape,
                          batch_);
      args.inputs[k] = buffers.back().data();
      info.input_types.back() = wanted;
    }
    const KernelPlan plan = kernel->prepare(info);
    *variant = plan.variant_name;
    buffers.push_back(host_buffer(plan.workspace_bytes, "a compare workspace"));
    args.workspace = buffers.back().data();
    buffers.push_back(host_buffer(
        tensor_bytes(engine_->tensors.at(step.name).shape, kernel->output_type(), batch_),
        "a compare output"));
    args.output = buffers.back().data();
    args.variant = plan.variant;
    args.state = plan.state.get();
    return time_runs(*kernel, args, iterations);
  }

  std::shared_ptr<const EngineImpl> engine_;  // kept alive by every context
  int batch_;
  bool keep_all_;      // every tensor has memory of its own (read_tensor)
  bool warm_ = false;  // first_run() just ran a forward: profile() needs no warm-up
  PreparedContext prepared_;
  std::vector<uint64_t> arena_;
  std::vector<KernelArgs> args_;
  size_t input_bytes_ = 0, output_bytes_ = 0;
  float* input_ = nullptr;   // the graph input tensor in the arena
  float* output_ = nullptr;  // the returned tensor in the arena
};

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::CPU; }
  std::unique_ptr<LayerKernel> make_conversion(const Shape& shape, const TensorType& from,
                                               const TensorType& to) const override {
    return std::make_unique<CpuConversion>(shape, from, to);
  }
  std::unique_ptr<ContextImpl> create_context(std::shared_ptr<const EngineImpl> engine, int batch,
                                              const ContextOptions& options) const override {
    return std::make_unique<CpuContext>(std::move(engine), batch, options.keep_all_tensors);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace cnnrt
