// Registry entries of the fp16 linear layer (kernels/cuda/linear_fp16.h).
//
// Three entries share one adapter: "linear_fp16_cublaslt" (tensor-core GEMM, bias/ReLU in the
// cuBLASLt epilogue), "linear_fp16_gemv" (weight-streaming kernel for small batches) and the
// default "linear_fp16", which owns both and picks by the run-time batch (the batch is only
// known per context, so the choice cannot be made at build time).  The factory packs the weight
// once, straight to fp16 (linear_weight_refs_of + GemmWeights; the fp32 family packs the same
// layout in fp32 with linear_weights_of): fp16, padded to multiples of 8, and —
// when the input is an NHWC flatten of [C, H, W] — with its columns permuted to the flatten's
// (h, w, c) order (cuda_registry.h).  They implement a ReLU epilogue or none, and refuse others.
// The graph's output layer (e.g. AlexNet's fc8) writes the fp32 [batch, features] result itself:
// the GEMV stores fp32 (gemv_fp16_to_fp32), the GEMM stores fp16 into its workspace and converts
// from there (the conversion step the builder would otherwise add, moved inside), so the
// network ends without a separate conversion launch at the batches where latency matters.
#include <memory>
#include <mutex>
#include <string>

#include "kernels/cuda/layout.h"
#include "kernels/cuda/linear_fp16.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::cuda {
namespace {

enum class LinearMode { Auto, Gemm, Gemv };

class LinearFp16Kernel final : public Fp16Kernel {
 public:
  // `weights`: packed once per layer for the three entries within a family (prepared_once).
  // float_output: the layer is the graph output, written as fp32 [batch, out_features].
  LinearFp16Kernel(std::shared_ptr<const GemmWeights> weights, bool relu, LinearMode mode,
                   bool float_output, int out_features)
      : weights_(std::move(weights)),
        relu_(relu),
        mode_(mode),
        float_output_(float_output),
        out_features_(out_features) {
    if (mode_ == LinearMode::Gemm) gemm();
  }
  TensorType output_type() const override {
    return float_output_ ? fp32_nchw() : Fp16Kernel::output_type();
  }

  // The batch decides GEMV (weights streamed once, batch <= kGemvMaxBatch) or cuBLASLt.
  KernelPlan prepare(const PrepareInfo& info) const override {
    const bool gemv =
        mode_ == LinearMode::Gemv || (mode_ == LinearMode::Auto && info.batch <= kGemvMaxBatch);
    KernelPlan plan;
    plan.variant = gemv ? kGemv : kGemm;
    plan.variant_name = gemv ? "gemv" : "cublaslt";
    plan.workspace_bytes = gemv ? 0 : LtGemm::kWorkspaceBytes + staged_bytes(info.batch);
    // cuBLASLt's layouts and algorithm for this batch, once per context; arena tensors are
    // 256-byte aligned.
    if (gemv) {
      plan.streamed_weights = weights_->weight();
      plan.streamed_weight_bytes = weights_->weight_matrix_bytes();
    } else {
      plan.state = gemm().plan(info.batch, 256);
    }
    return plan;
  }
  void run(const KernelArgs& args) override {
    auto stream = static_cast<cudaStream_t>(args.stream);
    if (args.variant == kGemv) {
      if (float_output_)
        gemv_fp16_to_fp32(*weights_, relu_, args.inputs.at(0), static_cast<float*>(args.output),
                          args.batch, out_features_, stream, 0, args.stream_evict_first);
      else
        gemv_fp16(*weights_, relu_, args.inputs.at(0), args.output, args.batch, stream, 0,
                  args.stream_evict_first);
      return;
    }
    if (args.state == nullptr) throw Error("linear_fp16: cuBLASLt run without a prepared plan");
    const auto& plan = *static_cast<const LtGemm::Plan*>(args.state);
    if (!float_output_) {
      gemm_->run(plan, args.inputs.at(0), args.output, args.workspace, stream);
      return;
    }
    // [cuBLASLt's workspace | the fp16 result], then fp16 -> fp32 without the padding lanes.
    char* staged = static_cast<char*>(args.workspace) + LtGemm::kWorkspaceBytes;
    gemm_->run(plan, args.inputs.at(0), staged, args.workspace, stream);
    padded_rows_fp16_to_fp32(staged, static_cast<float*>(args.output), args.batch, out_features_,
                             stream);
  }
  size_t weight_bytes() const override { return weights_->bytes(); }

 private:
  static constexpr int kGemm = 0, kGemv = 1;
  // The GEMM's fp16 result before the fp32 conversion (graph output only; 256-byte aligned).
  size_t staged_bytes(int batch) const {
    if (!float_output_) return 0;
    return (size_t(batch) * weights_->rows_pad() * sizeof(uint16_t) + 255) / 256 * 256;
  }
  std::shared_ptr<const GemmWeights> weights_;  // shared with the layer's other fp16 entries
  bool relu_;
  LinearMode mode_;
  bool float_output_;
  int out_features_;
  // cuBLASLt's GEMM, made by the first prepare() of a GEMM batch (the Gemm mode: at creation): an
  // engine only ever run at GEMV batches never loads cuBLASLt (kernels/cuda/cublaslt_loader.cpp:
  // ~0.1 s of a process's start).
  const LtGemm& gemm() const {
    std::call_once(gemm_once_, [this] { gemm_ = std::make_unique<LtGemm>(*weights_, relu_); });
    return *gemm_;
  }
  mutable std::once_flag gemm_once_;
  mutable std::unique_ptr<LtGemm> gemm_;
};

// The fp16 kernels implement a ReLU epilogue or none (relu6 / clip: the fp32 family).
bool linear_supported(const Node& node) {
  return linear_shape_supported(node) && relu_or_none(node);
}

std::unique_ptr<LayerKernel> create_linear(const KernelBuildContext& context, LinearMode mode) {
  if (!linear_supported(context.node))
    throw_error(node_site(context), "linear_fp16 cannot run this node");
  const LinearWeightRefs refs = linear_weight_refs_of(context, "linear_fp16");
  try {
    std::shared_ptr<const GemmWeights> weights = prepared_once<GemmWeights>(
        context, "linear_fp16 weights", [&] { return std::make_shared<const GemmWeights>(refs); });
    return std::make_unique<LinearFp16Kernel>(
        std::move(weights), context.node.activation == Activation::Relu, mode,
        context.node.name == context.graph.output, refs.out_features);
  } catch (const Error& error) {
    throw_error(node_site(context), error.what());
  }
}

void add_entry(KernelRegistry& registry, const char* name, int priority, LinearMode mode) {
  KernelEntry entry;
  entry.name = name;
  entry.op = OpKind::Linear;
  entry.device = Device::CUDA;
  entry.precision = Precision::FP16;
  entry.priority = priority;
  entry.supports = linear_supported;
  entry.create = [mode](const KernelBuildContext& context) { return create_linear(context, mode); };
  registry.add(std::move(entry));
}

}  // namespace

bool linear_shape_supported(const Node& node) {
  return node.op == OpKind::Linear && std::holds_alternative<LinearAttrs>(node.attrs) &&
         node.input_shapes.size() == 1 && node.input_shapes[0].size() == 1 &&
         node.output_shape.size() == 1 && node.find_param("weight") != nullptr;
}

LinearWeightRefs linear_weight_refs_of(const KernelBuildContext& context,
                                       const std::string& entry_name) {
  const Node& node = context.node;
  ErrorSite site = node_site(context);
  if (!linear_shape_supported(node)) throw_error(site, entry_name + " cannot run this node");
  const int out_features = node.get<LinearAttrs>().out_features;
  const int64_t in_features = node.input_shapes[0][0];
  const Param* weight = node.find_param("weight");
  if (static_cast<int64_t>(weight->value.data.size()) != in_features * out_features) {
    site.tensor = weight->key;
    throw_error(site, "linear weight has " + std::to_string(weight->value.data.size()) +
                          " values, expected " + std::to_string(in_features * out_features));
  }
  const Param* bias = node.find_param("bias");
  const bool has_bias = bias != nullptr && !bias->value.data.empty();
  if (has_bias && static_cast<int>(bias->value.data.size()) != out_features) {
    site.tensor = bias->key;
    throw_error(site, "linear bias has " + std::to_string(bias->value.data.size()) +
                          " values, expected " + std::to_string(out_features));
  }
  LinearWeightRefs refs;
  refs.weight = weight->value.data.data();
  refs.bias = has_bias ? bias->value.data.data() : nullptr;
  refs.out_features = out_features;
  refs.in_features = static_cast<int>(in_features);
  refs.flattened_source = flattened_source_shape(node, context.graph);
  return refs;
}

HostGemmWeights linear_weights_of(const KernelBuildContext& context,
                                  const std::string& entry_name) {
  const LinearWeightRefs refs = linear_weight_refs_of(context, entry_name);
  try {
    return pack_linear_weights(refs.weight, refs.bias, refs.out_features, refs.in_features,
                               refs.flattened_source);
  } catch (const Error& error) {
    throw_error(node_site(context), error.what());
  }
}

void register_linear_kernels(KernelRegistry& registry) {
  add_entry(registry, "linear_fp16", 10, LinearMode::Auto);
  add_entry(registry, "linear_fp16_cublaslt", 5, LinearMode::Gemm);
  add_entry(registry, "linear_fp16_gemv", 4, LinearMode::Gemv);
}

}  // namespace cnnrt::cuda
