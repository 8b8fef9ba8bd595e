// Registration of the CUDA kernels, split by family so each file stays small.
// register_cuda_kernels (runtime/kernel.h) calls each of these once.
//
// Layout convention of every CUDA kernel (the CUDA backend's activation layout):
//   feature maps [C, H, W] per sample  → NHWC, channel stride pad8(C) = round_up(C, 8)
//   vectors [F] per sample             → [N][pad8(F)]
// in fp16 (the tensor-core families: fp16_nhwc8) or fp32 (the reference family of
// fp32_entries.cpp: fp32_nhwc8), element for element the same, so a precision change between
// two layers is an elementwise conversion that moves nothing.
// Padding channels / features hold zeros; every kernel writes zeros into its output's padding.
// A flatten of [C, H, W] produces features in (h, w, c) order: when C % 8 == 0 it is a pure view
// (the planner aliases it to its input), otherwise it copies dropping the channel padding.  A
// linear that consumes a flattened [C, H, W] permutes its weight columns from PyTorch's
// (c, h, w) order to (h, w, c) once at build time, so no run-time transpose is needed.
#pragma once

#include <optional>
#include <string>

#include "kernels/cuda/conv/conv_shape.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/linear_pack.h"
#include "runtime/kernel.h"

namespace cnnrt::cuda {

// Base of every fp16 tensor-core-layout kernel: reads and writes fp16 NHWC/8 (the layout above).
class Fp16Kernel : public LayerKernel {
 public:
  std::vector<TensorType> input_types(size_t /*index*/) const override { return {fp16_nhwc8()}; }
  TensorType output_type() const override { return fp16_nhwc8(); }
};

// A kernel's own plan for a batch (its `variant`, `name` and `workspace_bytes`) as the runtime's
// KernelPlan: the one translation every planned CUDA kernel's prepare() starts from.
template <class Plan>
KernelPlan kernel_plan_of(const Plan& p) {
  KernelPlan plan;
  plan.variant = p.variant;
  plan.variant_name = p.name;
  plan.workspace_bytes = p.workspace_bytes;
  return plan;
}

// The conv family: igemm, s2d and the wgmma entries (conv_entries.cpp, conv_s2d_entries.cpp,
// conv_wgmma_entries.cpp), and its comparison-only baselines (cuDNN, im2col + cuBLAS),
// registered after every other family so that `cnnrt profile --compare` lists them last.
void register_conv_kernels(KernelRegistry& registry);
void register_wgmma_conv_kernels(KernelRegistry& registry);  // called by register_conv_kernels
// conv_fp16_tma and its pinned tiles (conv_tma_entries.cpp), called by register_conv_kernels.
void register_tma_conv_kernels(KernelRegistry& registry);
// conv_fp16_s2d and its pinned inner convs (conv_s2d_entries.cpp), called by
// register_conv_kernels.
void register_s2d_conv_kernels(KernelRegistry& registry);
// conv_fp16_depthwise (conv_residual_entries.cpp), called by register_conv_kernels.
void register_depthwise_conv_kernels(KernelRegistry& registry);
// Lets a conv entry without a native residual epilogue (s2d, wgmma_ws) serve fused-residual nodes
// (graph/passes.h):
// the conv runs alone, then the residual is added and the activation applied in one elementwise
// pass (conv_residual_entries.cpp).  Sets entry.residual.
void add_residual_epilogue(KernelEntry& entry);
void register_conv_baseline_kernels(KernelRegistry& registry);
// 2:4 sparse conv on sparse tensor cores (sparse_conv_entries.cpp,
// kernels/cuda/conv/wgmma_sparse.h).
void register_sparse_conv_kernels(KernelRegistry& registry);
void register_linear_kernels(KernelRegistry& registry);  // cuBLASLt epilogue, GEMV
// 2:4 sparse fp16 GEMV linear (sparse_linear_entries.cpp, kernels/cuda/linear_sparse24.h).
void register_sparse_linear_kernels(KernelRegistry& registry);
void register_fp16_layer_kernels(KernelRegistry& registry);  // pools, relu, add, concat, ...
void register_fp32_kernels(KernelRegistry& registry);        // fp32 reference, every op
// int8: conv (tensor-core implicit GEMM, direct for groups), linear (GEMM / GEMV) in
// int8_entries.cpp; pools, relu, flatten, dropout in int8_layer_entries.cpp.
void register_int8_kernels(KernelRegistry& registry);
void register_int8_linear_kernels(KernelRegistry& registry);  // int8_linear_entries.cpp
void register_int8_layer_kernels(KernelRegistry& registry);
// linear_fp16_cusparselt, the cuSPARSELt 2:4 baseline (cusparselt_entries.cpp): registers nothing
// in a build without cuSPARSELt (CNNRT_WITH_CUSPARSELT).
void register_cusparselt_kernels(KernelRegistry& registry);

// A linear node the CUDA layout can run: [F] -> [F'], LinearAttrs, a weight bound (any fused
// activation: each family adds its own epilogue rule).
bool linear_shape_supported(const Node& node);
// The node's linear weight and bias checked against its shapes and packed once for the CUDA
// layout (kernels/cuda/linear_pack.h: padded to 8, columns permuted when it reads a flatten), so
// every linear family permutes identically.  Errors name the layer, the tensor and `entry_name`.
HostGemmWeights linear_weights_of(const KernelBuildContext& context, const std::string& entry_name);
// The same checks, without packing: the graph's arrays and the flatten they read (for the
// families that pack on the device).
LinearWeightRefs linear_weight_refs_of(const KernelBuildContext& context,
                                       const std::string& entry_name);

// What most CUDA kernels implement today: a ReLU epilogue or none, and symmetric conv padding.
// Their supports() refuse other nodes (relu6 / clip epilogues, TF-SAME or ONNX asymmetric pads)
// rather than compute them wrongly.  The conv family takes any clamp and asymmetric padding
// (conv_shape_of below; each conv entry's shape rule says what it computes exactly).
inline bool relu_or_none(const Node& node) {
  return node.activation == Activation::None || node.activation == Activation::Relu;
}
inline bool symmetric_conv(const Node& node) {
  return std::holds_alternative<ConvAttrs>(node.attrs) && node.get<ConvAttrs>().symmetric_padding();
}

// The per-sample shape the flatten that feeds `node` (a linear) flattened, or empty when the
// linear's input is not a flatten of a 3-D tensor.  Looks back through relu and dropout, which
// keep a vector's feature order.
Shape flattened_source_shape(const Node& node, const Graph& graph);

// Largest batch whose grid (grid_ctas(batch), growing with the batch) leaves SMs of the current
// device (or plan target: device_traits.h) idle: at and below it a conv entry plans ConvFp16
// (split-K) instead of its full-tile kernel (conv_fp16_s2d's and the wgmma entries' small-batch
// fallback).  Evaluated once, when the kernel is built.
template <class GridCtas>
int fallback_max_batch(GridCtas grid_ctas) {
  const int sms = current_sm_count();
  int batch = 0;
  while (grid_ctas(batch + 1) < sms) ++batch;
  return batch;
}

// The node's conv weight (fp32 OIHW) and bias (or nullptr), checked against `shape` (groups
// included); Errors name the layer and tensor, and `entry_name` when there is no shape.
struct ConvWeights {
  const float* weight = nullptr;
  const float* bias = nullptr;
};
ConvWeights conv_weights_of(const KernelBuildContext& context, const std::string& entry_name,
                            const std::optional<ConvShape>& shape);

// The ConvShape the conv kernels see for a (possibly fused) conv node — input, attributes, the
// activation as a clamp (activation_bounds), the fused pool — or nullopt when the node is not a
// valid 2-D conv or its recorded output (or pre-pool) extent disagrees with the kernels'
// arithmetic (graph/ops.h's rules, asymmetric padding included).  The one node->conv adapter of
// every conv entry.
std::optional<ConvShape> conv_shape_of(const Node& node);

}  // namespace cnnrt::cuda
