// Kernel registry: every executable kernel (CPU reference, CUDA fp16, baselines) is an entry
// with a name, the op it implements, its device and precision, a supports() predicate and a
// factory that prepacks the node's weights once.  The builder asks for all candidates of a
// layer; `cnnrt profile --compare` times them side by side.  Kernel choice and weight repacking
// never happen inside run().
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/ir.h"
#include "graph/tensor_type.h"

namespace cnnrt {

// What a kernel decides once per context, for its batch size and the input types the builder
// bound (LayerKernel::prepare).  run() only launches what was decided here: no kernel re-derives
// a choice, loops over batch sizes or caches decisions at run time.
struct KernelPlan {
  int variant = 0;           // the kernel's own index of what runs, handed back in KernelArgs
  std::string variant_name;  // what plans and profiles print ("" when the kernel has one form)
  size_t workspace_bytes = 0;
  // The kernel may write its output over inputs[0] (same bytes, same type).  The memory planner
  // decides whether that is legal at this step (the input's last use, not pinned).
  bool in_place = false;
  // Data the kernel prepared for this context (e.g. cuBLASLt layouts and algorithm), owned by
  // the context and handed back in KernelArgs::state; null when the variant index says it all.
  std::shared_ptr<const void> state;
  // Weights this variant streams from device memory once per run and no earlier step reads (a
  // GEMV's matrix): the context may prefetch part of them into L2 while earlier steps run
  // (kernels/cuda/l2_prefetch.h).  Null when the kernel does not stream its weights.
  const void* streamed_weights = nullptr;
  size_t streamed_weight_bytes = 0;
};

// What prepare() is told: the context's batch and the type of each input as the builder bound
// it (one of the kernel's input_types(i)).
struct PrepareInfo {
  int batch = 0;
  std::vector<TensorType> input_types;
};

// What a kernel gets at run time.  Pointers are into the context's arena (device memory for
// CUDA kernels), each tensor in the type the builder bound for it.
struct KernelArgs {
  std::vector<const void*> inputs;
  void* output = nullptr;
  int batch = 0;
  void* workspace = nullptr;    // KernelPlan::workspace_bytes bytes, or nullptr when 0
  void* stream = nullptr;       // cudaStream_t for CUDA kernels
  int variant = 0;              // KernelPlan::variant of this context's prepare()
  const void* state = nullptr;  // KernelPlan::state of this context's prepare()
  // The context prefetches a later step's streamed weights into L2 while this step streams its
  // own (KernelPlan::streamed_weights; kernels/cuda/l2_prefetch.h): read them evict-first, so
  // that they do not push the prefetched lines out.  Set once, at context creation.
  bool stream_evict_first = false;
};

// A layer's life: its factory prepacks the weights once (build), prepare() decides the variant
// and workspace once per context, run() launches.  The types are fixed at build: the builder
// reads them to bind tensors and insert conversion steps.
class LayerKernel {
 public:
  virtual ~LayerKernel() = default;
  // Types run() accepts at input `index`, preferred first.  The builder binds the first one the
  // producer already writes, else the first (and converts into it).
  virtual std::vector<TensorType> input_types(size_t /*index*/) const { return {fp32_nchw()}; }
  virtual TensorType output_type() const { return fp32_nchw(); }
  virtual KernelPlan prepare(const PrepareInfo& /*info*/) const { return {}; }
  virtual void run(const KernelArgs& args) = 0;
  // Bytes of prepacked weights this kernel holds (on its device).
  virtual size_t weight_bytes() const { return 0; }
};

// Weights prepared once and read by several kernels of one layer: the four CUDA int8 linear
// entries quantise and upload the same integers, the three fp16 ones the same halves.  A
// family's KernelCache (runtime/engine_family.h) keeps them for all its engines, so an automatic
// plan packs AlexNet's fc6 once per layout instead of once per kernel (docs/PERFORMANCE.md, run
// 29: ~200 ms each).  Keys name the layer and what was prepared; one family has one calibration,
// so scales need not be part of them.  Not thread-safe (one thread builds).
class SharedPreparations {
 public:
  template <class T>
  std::shared_ptr<const T> get(const std::string& key,
                               const std::function<std::shared_ptr<const T>()>& make) {
    std::shared_ptr<const void>& item = items_[key];
    if (!item) item = make();
    return std::static_pointer_cast<const T>(item);
  }

 private:
  std::map<std::string, std::shared_ptr<const void>> items_;
};

// Context the factory gets: the node (with bound weights and shapes) and the whole graph (for
// layout decisions such as permuting a linear weight that follows an NHWC flatten).
struct KernelBuildContext {
  const Node& node;
  const Graph& graph;
  // The tensor scales of int8 kernels (runtime/calibration.h); nullptr when the build has none.
  const Calibration* calibration = nullptr;
  // Where kernels of one family share prepared weights; nullptr outside a family.
  SharedPreparations* shared = nullptr;
};

// `make()` once per layer and `what` within a family, else every time.  `what` names the
// preparation and its type (two kinds must never share a key).
template <class T>
std::shared_ptr<const T> prepared_once(const KernelBuildContext& context, const std::string& what,
                                       const std::function<std::shared_ptr<const T>()>& make) {
  if (context.shared == nullptr) return make();
  return context.shared->get<T>(context.node.name + "|" + what, make);
}

// Where a factory's error points: the model file, the layer's YAML position and name.
inline ErrorSite node_site(const KernelBuildContext& context) {
  return {context.graph.source_file, context.node.line, context.node.column, context.node.name, ""};
}

struct KernelEntry {
  std::string name;  // unique, e.g. "cpu_ref_conv", "conv_fp16_igemm", "cudnn_conv"
  OpKind op;
  Device device;
  Precision precision;
  // Comparison-only (cuDNN, im2col+cuBLAS; a kernel's pinned tiles): never chosen by default or
  // by the automatic plan; `profile --compare`, the test harness and a named choice run it.
  bool baseline = false;
  int priority = 0;  // default heuristic: highest supported non-baseline wins
  std::function<bool(const Node&)> supports;
  std::function<std::unique_ptr<LayerKernel>(const KernelBuildContext&)> create;
  // The kernel reads a conv's fused residual (Node::fused_residual, inputs[1]).  Entries that
  // leave it false never see such a node: KernelRegistry::add makes their supports() refuse it,
  // so no family can silently drop the add.
  bool residual = false;
  // The kernel computes from a 2:4 compressed weight (kernels/cpu/sparse24.h): KernelRegistry::
  // add makes its supports() refuse a node whose weight is not 2:4 (Node::weight_2_4), and the
  // builder takes it only when the layer asks for `sparsity: 2:4` (or names the kernel).
  bool sparse_2_4 = false;
};

// One row of a kernel family's table: the family adds its rows with one device, precision and
// priority (add_entries), so no family repeats the KernelEntry bookkeeping.
struct EntryRow {
  std::string name;
  OpKind op;
  std::function<bool(const Node&)> supports;
  std::function<std::unique_ptr<LayerKernel>(const KernelBuildContext&)> create;
  bool residual = false;    // as KernelEntry::residual
  bool sparse_2_4 = false;  // as KernelEntry::sparse_2_4
  bool baseline = false;    // as KernelEntry::baseline
};

class KernelRegistry;
void add_entries(KernelRegistry& registry, Device device, Precision precision, int priority,
                 const std::vector<EntryRow>& rows);

class KernelRegistry {
 public:
  static KernelRegistry& instance();  // populated with every compiled-in kernel on first use
  void add(KernelEntry entry);
  std::vector<const KernelEntry*> candidates(const Node& node, Device device,
                                             Precision precision) const;
  const KernelEntry* find(const std::string& name) const;
  const std::vector<KernelEntry>& entries() const { return entries_; }

 private:
  std::vector<KernelEntry> entries_;
};

// The CPU backend's entries (runtime/cpu_entries.cpp, and the int8 ones in
// runtime/cpu_int8_entries.cpp); every backend's registration is listed once in the backend
// table (runtime/backends.h).
void register_cpu_kernels(KernelRegistry& registry);
void register_cpu_int8_kernels(KernelRegistry& registry);
void register_cpu_sparse_kernels(KernelRegistry& registry);  // runtime/cpu_sparse_entries.cpp

}  // namespace cnnrt
