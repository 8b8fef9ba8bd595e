// Entry point of the CUDA kernel families (the backend table → register_cuda_kernels) and the
// one layout helper they share: which [C, H, W] a linear's input was flattened from.
//
// flattened_source_shape lives here rather than with the linear kernels because it encodes the
// backend's layout rule (flatten emits features in (h, w, c) order, cuda_registry.h), which any
// kernel reading a flattened vector by feature index must honour.
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::cuda {

void register_cuda_kernels(KernelRegistry& registry) {
  register_conv_kernels(registry);
  register_sparse_conv_kernels(registry);
  register_linear_kernels(registry);
  register_sparse_linear_kernels(registry);
  register_fp16_layer_kernels(registry);
  register_int8_kernels(registry);
  register_int8_linear_kernels(registry);
  register_int8_layer_kernels(registry);
  register_conv_baseline_kernels(registry);
  register_fp32_kernels(registry);
  register_cusparselt_kernels(registry);
}

Shape flattened_source_shape(const Node& node, const Graph& graph) {
  if (node.inputs.empty()) return {};
  // Walk back through ops that keep a vector's feature order (relu, dropout are per element),
  // so flatten → relu → linear still permutes its weight.  Anything else ends the walk.
  const Node* producer = graph.find(node.inputs[0]);
  while (producer != nullptr && (producer->op == OpKind::Relu || producer->op == OpKind::Dropout) &&
         !producer->inputs.empty())
    producer = graph.find(producer->inputs[0]);
  if (producer == nullptr || producer->op != OpKind::Flatten) return {};
  if (producer->input_shapes.empty() || producer->input_shapes[0].size() != 3) return {};
  return producer->input_shapes[0];
}

}  // namespace cnnrt::cuda
