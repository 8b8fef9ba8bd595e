// Engine internals shared by the backends.
//
// EngineImpl is built once (builder.cpp): the fused graph with bound weights, one Step per
// executed node with its chosen kernel already created (weights prepacked), and the backend that
// knows the activation layout.  A backend creates ContextImpls: each owns one arena laid out by
// the memory planner for its batch size.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/ir.h"
#include "runtime/kernel.h"
#include "runtime/memory_planner.h"

namespace cnnrt {

struct Step {
  const Node* node = nullptr;  // into EngineImpl::graph.nodes
  const KernelEntry* entry = nullptr;
  std::unique_ptr<LayerKernel> kernel;
};

class ContextImpl {
 public:
  virtual ~ContextImpl() = default;
  virtual int batch() const = 0;
  virtual void run(const float* input, float* output) = 0;
  virtual std::vector<LayerProfile> profile(int iterations) = 0;
  virtual std::vector<LayerProfile> compare_kernels(int iterations) = 0;
  virtual std::vector<double> benchmark(int warmup, int iterations) = 0;
  virtual const MemoryPlan& memory_plan() const = 0;
};

class EngineImpl;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  // Bytes of one activation tensor of per-sample `shape` at `batch` in this backend's layout.
  virtual size_t tensor_bytes(const Shape& shape, int batch) const = 0;
  virtual std::unique_ptr<ContextImpl> create_context(const EngineImpl& engine,
                                                      int batch) const = 0;
};

std::unique_ptr<Backend> make_cpu_backend();
#ifdef CNNRT_WITH_CUDA
std::unique_ptr<Backend> make_cuda_backend();  // throws Error when no device is usable
#endif

class EngineImpl {
 public:
  Graph graph;  // fused, weights bound, shapes inferred; Steps point into it
  ModelInfo model;
  Device device = Device::CPU;
  Precision precision = Precision::FP32;
  std::vector<Step> steps;
  std::unique_ptr<Backend> backend;
  size_t weight_bytes = 0;  // sum over kernels, as reported by the backend at build
};

// Builds the engine: passes (if options.fuse), backend, kernel choice per node, prepacking.
std::unique_ptr<EngineImpl> build_engine(Graph graph, const BuildOptions& options);

// Planner requests for the engine's tensors at `batch`: the graph input (step 0..first use),
// each step's output (step i .. last consumer; the graph output lives to the last step),
// in-place candidates for relu/dropout/flatten, and each step's workspace ("<layer>.workspace",
// step i only).  Step i is engine.steps[i].  Backends add their own staging buffers.
std::vector<PlanRequest> activation_requests(const EngineImpl& engine, int batch);

// Median of timing samples (0 for none).
double median(std::vector<double> values);

// Per-step FLOPs and minimum bytes at `batch` for profile rows.
double step_flops(const Step& step, int batch);
double step_bytes(const EngineImpl& engine, const Step& step, int batch);

// Fills the name/sources/kernel/precision fields of a profile row.
LayerProfile profile_row(const Step& step);

}  // namespace cnnrt
