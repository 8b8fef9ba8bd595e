// Registry entries of the comparison-only convolution baselines: "cudnn_conv" (when built with
// cuDNN) and "im2col_cublas_conv".  Both are marked baseline, so the default heuristic never
// picks them; `cnnrt profile --compare` and explicit overrides do.  They take the fused node as
// it stands (ReLU, fused max-pool) and produce exactly its output, so any conv layer can be
// compared row by row.
#include <memory>
#include <string>

#include "kernels/cuda/conv/cudnn_conv.h"
#include "kernels/cuda/conv/im2col_gemm.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::cuda {
namespace {

std::optional<ConvProblem> problem_of(const Node& node) {
  if (node.op != OpKind::Conv || !std::holds_alternative<ConvAttrs>(node.attrs))
    return std::nullopt;
  try {
    return conv_problem(node);
  } catch (const Error&) {
    return std::nullopt;
  }
}

template <typename Conv>
class BaselineConvKernel final : public Fp16Kernel {
 public:
  BaselineConvKernel(const ConvProblem& problem, const float* weight, const float* bias)
      : conv_(problem, weight, bias) {}
  void run(const KernelArgs& args) override {
    conv_.forward(args.inputs.at(0), args.output, args.batch, args.workspace,
                  static_cast<cudaStream_t>(args.stream));
  }
  KernelPlan prepare(const PrepareInfo& info) const override {
    KernelPlan plan;
    plan.workspace_bytes = conv_.workspace_bytes(info.batch);
    return plan;
  }
  size_t weight_bytes() const override { return conv_.weight_bytes(); }

 private:
  Conv conv_;
};

template <typename Conv>
std::unique_ptr<LayerKernel> create_baseline(const KernelBuildContext& context) {
  const Node& node = context.node;
  ErrorSite site = node_site(context);
  const std::optional<ConvProblem> problem = problem_of(node);
  if (!problem || !Conv::supports(*problem))
    throw_error(site, "baseline conv cannot run this node");
  const ConvAttrs& a = problem->conv;
  const int64_t expected =
      static_cast<int64_t>(problem->out_c) * (problem->in_c / a.groups) * a.kernel_h * a.kernel_w;
  const Param* weight = node.find_param("weight");
  if (weight == nullptr || static_cast<int64_t>(weight->value.data.size()) != expected) {
    site.tensor = weight != nullptr ? weight->key : "weight";
    throw_error(site, "conv weight is not bound or has the wrong size (expected " +
                          std::to_string(expected) + " values)");
  }
  const Param* bias = node.find_param("bias");
  const bool has_bias = bias != nullptr && !bias->value.data.empty();
  if (has_bias && static_cast<int>(bias->value.data.size()) != problem->out_c) {
    site.tensor = bias->key;
    throw_error(site, "conv bias has the wrong size");
  }
  try {
    return std::make_unique<BaselineConvKernel<Conv>>(*problem, weight->value.data.data(),
                                                      has_bias ? bias->value.data.data() : nullptr);
  } catch (const Error& error) {
    throw_error(site, error.what());
  }
}

template <typename Conv>
void add_entry(KernelRegistry& registry, const char* name) {
  KernelEntry entry;
  entry.name = name;
  entry.op = OpKind::Conv;
  entry.device = Device::CUDA;
  entry.precision = Precision::FP16;
  entry.baseline = true;
  entry.supports = [](const Node& node) {
    const std::optional<ConvProblem> problem = problem_of(node);
    return problem.has_value() && Conv::supports(*problem);
  };
  entry.create = create_baseline<Conv>;
  registry.add(std::move(entry));
}

}  // namespace

void register_baseline_kernels(KernelRegistry& registry) {
#ifdef CNNRT_WITH_CUDNN
  add_entry<CudnnConv>(registry, "cudnn_conv");
#endif
  add_entry<Im2colGemmConv>(registry, "im2col_cublas_conv");
}

}  // namespace cnnrt::cuda
