// CPU backend: NCHW fp32 activations in one host arena laid out by the memory planner, the
// reference kernels run step by step.  It is the oracle the GPU path is checked against and
// the fallback on machines without a GPU, so it favours being obviously right over speed.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <new>

#include "graph/ir.h"
#include "runtime/engine_impl.h"

namespace cnnrt {
namespace {

using Clock = std::chrono::steady_clock;

double elapsed_ms(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

class CpuContext final : public ContextImpl {
 public:
  CpuContext(const EngineImpl& engine, int batch) : engine_(engine), batch_(batch) {
    plan_ = plan_memory(activation_requests(engine, batch));
    // The one allocation of this context; float elements keep the base 4-byte aligned and
    // planner offsets are multiples of 256 bytes.
    try {
      arena_.assign(plan_.arena_bytes / sizeof(float) + 1, 0.0f);
    } catch (const std::bad_alloc&) {
      // Embedders get the one error type, with the size that did not fit.
      throw Error("cannot allocate the " + std::to_string(plan_.arena_bytes) +
                  "-byte activation arena for batch " + std::to_string(batch) + " on the host");
    }

    for (const Step& step : engine.steps) {
      KernelArgs args;
      for (const std::string& input : step.node->inputs) args.inputs.push_back(tensor(input));
      args.output = tensor(step.node->name);
      args.batch = batch;
      const PlannedTensor* workspace = plan_.find(step.node->name + ".workspace");
      args.workspace = workspace ? base() + workspace->offset : nullptr;
      args_.push_back(args);
    }
    input_bytes_ = sizeof(float) * batch * shape_elements(engine.graph.input.shape);
    // profile()/benchmark() before any run() must not time zeros: seed the input with a
    // deterministic pseudo-random pattern in [-1, 1).
    input_ = tensor("input");
    output_ = tensor(engine.graph.output);
    float* in = input_;
    uint32_t state = 0x9e3779b9u;
    for (size_t i = 0; i < input_bytes_ / sizeof(float); ++i) {
      state = state * 1664525u + 1013904223u;
      in[i] = static_cast<float>(state >> 8) / 8388608.0f - 1.0f;
    }
    output_bytes_ = sizeof(float) * batch * shape_elements(engine.model.output_shape);
  }

  int batch() const override { return batch_; }
  const MemoryPlan& memory_plan() const override { return plan_; }

  void run(const float* input, float* output) override {
    // Pointers resolved at creation: run() does no name look-ups.
    std::memcpy(input_, input, input_bytes_);
    forward();
    std::memcpy(output, output_, output_bytes_);
  }

  std::vector<LayerProfile> profile(int iterations) override {
    forward();  // warm-up
    std::vector<std::vector<double>> times(engine_.steps.size());
    for (int it = 0; it < iterations; ++it)
      for (size_t i = 0; i < engine_.steps.size(); ++i) {
        const auto start = Clock::now();
        engine_.steps[i].kernel->run(args_[i]);
        times[i].push_back(elapsed_ms(start));
      }
    std::vector<LayerProfile> rows;
    for (size_t i = 0; i < engine_.steps.size(); ++i) {
      LayerProfile row = profile_row(engine_.steps[i]);
      row.median_ms = median(times[i]);
      row.flops = step_flops(engine_.steps[i], batch_);
      row.bytes = step_bytes(engine_, engine_.steps[i], batch_);
      rows.push_back(row);
    }
    return rows;
  }

  std::vector<LayerProfile> compare_kernels(int iterations) override {
    const KernelRegistry& registry = KernelRegistry::instance();
    std::vector<LayerProfile> rows;
    for (size_t i = 0; i < engine_.steps.size(); ++i) {
      const Step& step = engine_.steps[i];
      std::vector<const KernelEntry*> candidates =
          registry.candidates(*step.node, engine_.device, engine_.precision);
      // Chosen kernel first, then the other candidates in registry order.
      std::stable_partition(candidates.begin(), candidates.end(),
                            [&](const KernelEntry* e) { return e == step.entry; });
      for (const KernelEntry* entry : candidates) {
        std::unique_ptr<LayerKernel> kernel = entry->create({*step.node, engine_.graph});
        std::vector<float> workspace(kernel->workspace_bytes(batch_) / sizeof(float) + 1);
        KernelArgs args = args_[i];
        args.workspace = workspace.data();
        std::vector<double> times;
        for (int it = 0; it < iterations; ++it) {
          const auto start = Clock::now();
          kernel->run(args);
          times.push_back(elapsed_ms(start));
        }
        LayerProfile row = profile_row(step);
        row.kernel = entry->name;
        row.median_ms = median(times);
        row.flops = step_flops(step, batch_);
        row.bytes = step_bytes(engine_, step, batch_);
        rows.push_back(row);
      }
    }
    forward();  // leave the arena as a plain run would
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
  float* tensor(const std::string& name) {
    const PlannedTensor* planned = plan_.find(name);
    if (planned == nullptr)
      throw Error("internal: tensor '" + name + "' is not in the memory plan");
    return reinterpret_cast<float*>(base() + planned->offset);
  }
  void forward() {
    for (size_t i = 0; i < engine_.steps.size(); ++i) engine_.steps[i].kernel->run(args_[i]);
  }

  const EngineImpl& engine_;
  int batch_;
  MemoryPlan plan_;
  std::vector<float> arena_;
  std::vector<KernelArgs> args_;
  size_t input_bytes_ = 0, output_bytes_ = 0;
  float* input_ = nullptr;   // the graph input tensor in the arena
  float* output_ = nullptr;  // the graph output tensor in the arena
};

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::CPU; }
  size_t tensor_bytes(const Shape& shape, int batch) const override {
    return sizeof(float) * static_cast<size_t>(batch) * static_cast<size_t>(shape_elements(shape));
  }
  std::unique_ptr<ContextImpl> create_context(const EngineImpl& engine, int batch) const override {
    return std::make_unique<CpuContext>(engine, batch);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace cnnrt
