// Kernel registry: every executable kernel (CPU reference, CUDA fp16, baselines) is an entry
// with a name, the op it implements, its device and precision, a supports() predicate and a
// factory that prepacks the node's weights once.  The builder asks for all candidates of a
// layer; `cnnrt profile --compare` times them side by side.  Kernel choice and weight repacking
// never happen inside run().
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/ir.h"

namespace cnnrt {

// What a kernel gets at run time.  Pointers are into the context's arena (device memory for
// CUDA kernels), laid out as the backend defines (CPU: NCHW fp32; CUDA: NHWC fp16, channels
// padded to a multiple of 8).
struct KernelArgs {
  std::vector<const void*> inputs;
  void* output = nullptr;
  int batch = 0;
  void* workspace = nullptr;  // workspace_bytes(batch) bytes, or nullptr when 0
  void* stream = nullptr;     // cudaStream_t for CUDA kernels
  // inputs[0] is the graph input as the host gave it (NCHW fp32, the context's input staging
  // buffer) instead of the backend layout.  Set only for a kernel whose reads_nchw_fp32_input()
  // is true, by a context that then skips its own input conversion; every other kernel always
  // sees false.
  bool input_is_nchw_fp32 = false;
};

class LayerKernel {
 public:
  virtual ~LayerKernel() = default;
  virtual void run(const KernelArgs& args) = 0;
  virtual size_t workspace_bytes(int /*batch*/) const { return 0; }
  // Bytes of prepacked weights this kernel holds (on its device).
  virtual size_t weight_bytes() const { return 0; }
  // Which internal variant runs, when a kernel has several (e.g. a tile shape); "" otherwise.
  virtual std::string variant() const { return ""; }
  // True when run() also accepts inputs[0] as NCHW fp32 (the graph input staging buffer, see
  // KernelArgs::input_is_nchw_fp32) instead of the backend's layout, converting as it reads.  A
  // backend may then hand a first layer that alone reads the graph input the raw input and skip
  // the separate layout-conversion pass.
  virtual bool reads_nchw_fp32_input() const { return false; }
};

// Context the factory gets: the node (with bound weights and shapes) and the whole graph (for
// layout decisions such as permuting a linear weight that follows an NHWC flatten).
struct KernelBuildContext {
  const Node& node;
  const Graph& graph;
};

// Where a factory's error points: the model file, the layer's YAML position and name.
inline ErrorSite node_site(const KernelBuildContext& context) {
  return {context.graph.source_file, context.node.line, context.node.column, context.node.name, ""};
}

struct KernelEntry {
  std::string name;  // unique, e.g. "cpu_ref_conv", "conv_fp16_igemm", "cudnn_conv"
  OpKind op;
  Device device;
  Precision precision;
  bool baseline = false;  // comparison-only (cuDNN, im2col+cuBLAS): never chosen by default
  int priority = 0;       // default heuristic: highest supported non-baseline wins
  std::function<bool(const Node&)> supports;
  std::function<std::unique_ptr<LayerKernel>(const KernelBuildContext&)> create;
};

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

// Registration functions, called once by KernelRegistry::instance().
void register_cpu_kernels(KernelRegistry& registry);
#ifdef CNNRT_WITH_CUDA
void register_cuda_kernels(KernelRegistry& registry);
#endif

}  // namespace cnnrt
