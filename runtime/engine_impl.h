// Engine internals shared by the backends.
//
// EngineImpl is built once (builder.cpp): the fused graph with bound weights, the ordered Steps
// (one per executed node, plus the conversion steps the builder inserted where a producer's and
// a consumer's tensor types differ), every tensor's shape and type, and the backend.  A backend
// creates ContextImpls: each asks every step's kernel to prepare() for its batch once, then
// lays out one arena with the memory planner (prepared_context below) and only launches in
// run().
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/ir.h"
#include "graph/passes.h"
#include "graph/passes_compact.h"
#include "graph/tensor_type.h"
#include "runtime/kernel.h"
#include "runtime/memory_planner.h"

namespace cnnrt {

// A tensor the engine materialises: the graph input, each step's output.
struct EngineTensor {
  Shape shape;  // per sample
  TensorType type;
};

struct Step {
  std::string name;                    // the tensor it writes (a node's name for a layer step)
  std::vector<std::string> inputs;     // tensors it reads, in the kernel's input order
  std::vector<std::string> sources;    // YAML layers it covers (empty for a conversion)
  const Node* node = nullptr;          // into EngineImpl::graph.nodes; nullptr for a conversion
  const KernelEntry* entry = nullptr;  // nullptr for a conversion
  std::string kernel_name;             // entry->name, or the conversion's name
  Precision precision = Precision::FP32;
  std::vector<TensorType> input_types;  // as bound: one of kernel->input_types(i) each
  // Shared: engines built from one fused graph by an EngineFamily reuse the kernels (and their
  // packed weights) of the layers they choose alike.
  std::shared_ptr<LayerKernel> kernel;
  bool is_conversion() const { return node == nullptr; }
};

class ContextImpl {
 public:
  virtual ~ContextImpl() = default;
  virtual int batch() const = 0;
  virtual void run(const float* input, float* output) = 0;
  virtual void run_async(const float* device_input, float* device_output, void* stream) = 0;
  // `runs` forwards of batch() samples each, host inputs back to back into host outputs back to
  // back: what as many run() calls compute, in one submission where the device allows it (CUDA:
  // one upload, the forwards queued, one download, one wait).  The automatic plan's held-out
  // runs at batch 1 were a round trip per sample, 32 per candidate engine.
  virtual void run_many(const float* inputs, float* outputs, int runs) {
    for (int r = 0; r < runs; ++r)
      run(inputs + static_cast<size_t>(r) * input_count(),
          outputs + static_cast<size_t>(r) * output_count());
  }
  virtual std::vector<LayerProfile> profile(int iterations) = 0;
  // Per-step times of one forward with no warm-up: on CUDA the eager forward the context ran
  // when it was created (recorded then, so this costs nothing), on the CPU one forward now.
  // One-time costs (module loading) are included: for timing a kernel that takes tens of
  // milliseconds once (the automatic plan's slow candidates), not for fast steps.
  virtual std::vector<LayerProfile> first_run() = 0;
  virtual std::vector<LayerProfile> compare_kernels(int iterations) = 0;
  virtual std::vector<double> benchmark(int warmup, int iterations) = 0;
  virtual const MemoryPlan& memory_plan() const = 0;
  // ExecutionContext::describe().
  virtual std::string describe() const { return ""; }
  virtual size_t input_count() const = 0;   // floats run() reads
  virtual size_t output_count() const = 0;  // floats run() writes
  // After run(), the values of a tensor the context kept as fp32 NCHW, padding lanes dropped:
  // what calibration observes.  Every tensor in a context created with keep_all_tensors; else
  // only the returned one (Error for another: its memory may hold a later tensor).  The order
  // is the tensor's own: a CUDA flatten is a view that keeps its input's (h, w, c) order, which
  // statistics over all values do not see.
  virtual std::vector<float> read_tensor(const std::string& name) const = 0;
};

class EngineImpl;

// How a context is made (Backend::create_context).
struct ContextOptions {
  // No tensor shares memory with another, so after run() every one can be read
  // (ContextImpl::read_tensor): the calibration collector's context.  Engines' contexts plan
  // the arena (false).
  bool keep_all_tensors = false;
  // Choices a backend makes by timing at creation (the CUDA context's L2-prefetch budget:
  // capture_fastest).  Off for contexts that only measure or collect (the automatic plan's
  // timing, the held-out runs, the calibration): they take the untimed default, so a build
  // that creates ~45 candidate contexts does not pay a timing for each.
  bool timed_choices = true;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  // The step that turns a tensor of per-sample `shape` from one type into another (the builder
  // inserts it); throws Error when this backend cannot convert between the two.
  virtual std::unique_ptr<LayerKernel> make_conversion(const Shape& shape, const TensorType& from,
                                                       const TensorType& to) const = 0;
  virtual std::unique_ptr<ContextImpl> create_context(std::shared_ptr<const EngineImpl> engine,
                                                      int batch,
                                                      const ContextOptions& options) const = 0;
};

class EngineImpl {
 public:
  // Fused, weights bound, shapes inferred; Steps point into it.  Shared by the engines of one
  // EngineFamily (runtime/engine_family.h), never changed after the passes.
  std::shared_ptr<const Graph> graph;
  ModelInfo model;
  Device device = Device::CPU;
  Precision precision = Precision::FP32;  // the engine-wide default for layers that say nothing
  std::vector<Step> steps;
  std::map<std::string, EngineTensor> tensors;  // "input", every step's output
  std::string output_tensor;  // the fp32 tensor run() returns (graph output, converted if needed)
  std::unique_ptr<Backend> backend;
  size_t weight_bytes = 0;     // sum over kernels, as reported by the backend at build
  CompactionReport compacted;  // the all-zero channels the build removed (or kept, and why)
  // The build's calibration (int8 tensor scales), for kernels created after the build.
  std::shared_ptr<const Calibration> calibration;
  std::string plan_target;  // BuildOptions::plan_target: plan only, no contexts
};

// Enters BuildOptions::plan_target on this thread for the returned object's lifetime (nullptr
// when `target` is empty); Error when the device's backend has no described targets.
std::shared_ptr<void> enter_plan_target(Device device, const std::string& target);

// The graph as the engines of `options` run it: weights checked, a plan's fingerprint checked,
// the passes run (if options.fuse; which ones follows pass_options below), all-zero channels
// compacted, 2:4 weights marked.  The first half of build_engine.
struct FusedGraph {
  std::shared_ptr<const Graph> graph;
  CompactionReport compacted;
};
FusedGraph fuse_graph(Graph graph, const BuildOptions& options);
// The graph passes `options` asks for: the residual add stays unfused where int8 layers are
// possible (an int8 precision, an int8 layer choice, a calibration).  Engines may share a fused
// graph only when these agree.
PassOptions pass_options(const BuildOptions& options);

// Kernels created for one fused graph and calibration, by layer and registry entry: what lets an
// EngineFamily's engines share packed weights.  Only valid for the graph it was filled from.
class KernelCache {
 public:
  std::shared_ptr<LayerKernel> get(const std::string& layer, const KernelEntry& entry,
                                   const KernelBuildContext& context);
  int created() const { return created_; }

 private:
  std::map<std::string, std::shared_ptr<LayerKernel>> kernels_;
  SharedPreparations shared_;  // weights several kernels of a layer read (kernel.h)
  int created_ = 0;
};

// The second half: backend, per-layer kernel choice (plan file / model / engine default /
// heuristic), prepacking (through `cache` when given), type binding and conversion steps.
// options.layer_choices and precision may differ between engines of one fused graph; what
// fuse_graph used of the options (passes, plan fingerprint) must not.
std::unique_ptr<EngineImpl> build_engine(const FusedGraph& fused, const BuildOptions& options,
                                         KernelCache* cache = nullptr);
// Both halves: passes (if options.fuse), backend, per-layer kernel choice, prepacking, type
// binding and conversion steps.
std::unique_ptr<EngineImpl> build_engine(Graph graph, const BuildOptions& options);

// What a context decides once for its batch: every step's KernelPlan and the memory plan.
struct PreparedContext {
  int batch = 0;
  std::vector<KernelPlan> kernel_plans;  // one per engine step
  MemoryPlan memory;
};

// Calls prepare() on every step for `batch` and plans the arena: the graph input (step 0 .. its
// last reader), each step's output (step i .. last reader; the returned tensor lives to the
// end), in-place where the kernel allows it, and each step's workspace ("<step>.workspace",
// step i only).  With keep_all_tensors every tensor lives to the end and none is in place.
// Tensor bytes come from each tensor's own type.  Allocates nothing.
PreparedContext prepare_context(const EngineImpl& engine, int batch, bool keep_all_tensors = false);

// read_tensor's precondition: Error unless the context keeps every tensor or `name` is the one
// it returns (`output`).
void check_readable(const std::string& name, bool keep_all_tensors, const std::string& output);

// Per-step FLOPs and minimum bytes at `batch` for profile rows (a conversion does no FLOPs).
double step_flops(const Step& step, int batch);
double step_bytes(const EngineImpl& engine, const Step& step, int batch);

// Fills the name/sources/kernel/precision fields of a profile row.
LayerProfile profile_row(const Step& step, const KernelPlan& plan);

// Median of timing samples (0 for none).
double median(std::vector<double> values);

// Engine::create_context with the options a tool's own contexts take (ContextOptions: the
// held-out runs that only collect outputs time no choices); the same checks and errors.
std::unique_ptr<ExecutionContext> create_context(const Engine& engine, int batch,
                                                 const ContextOptions& options);

}  // namespace cnnrt
