// Registry entry of the cuSPARSELt baseline (kernels/cuda/linear_cusparselt.h):
// "linear_fp16_cusparselt", the vendor library's 2:4 fp16 GEMM on a linear layer whose weight is
// 2:4, beside which `cnnrt profile --compare` times the project's own sparse and dense linears.
// Registered only in a build that found cuSPARSELt (CNNRT_WITH_CUSPARSELT, CMakeLists.txt); the
// function exists in every CUDA build and registers nothing otherwise.
//
// Marked baseline and sparse_2_4: offered only for a layer whose weight is 2:4
// (KernelRegistry::add), never chosen by the default heuristic nor by `sparsity: 2:4` alone,
// only by --compare or by name.  supports() takes the nodes the fp16 linears take with a ReLU
// epilogue or none, and only the feature counts cuSPARSELt's fp16 structured matrix accepts as
// they lie in the backend's buffers (LinearCusparseLt::supports: pad8(in) and pad8(out)
// multiples of 16); others are refused rather than padded.  A layer that reads an NHWC flatten
// cannot be told from its node alone (supports() sees no graph); the kernel reads such an input
// back in PyTorch's (c, h, w) order itself, so it keeps the weight's 2:4 groups
// (docs/SPARSITY.md).
#include <memory>
#include <string>

#include "runtime/cuda/cuda_registry.h"

#ifdef CNNRT_WITH_CUSPARSELT
#include "kernels/cuda/linear_cusparselt.h"
#endif

namespace cnnrt::cuda {

#ifdef CNNRT_WITH_CUSPARSELT
namespace {

constexpr const char* kName = "linear_fp16_cusparselt";

// The library's plan for the context's batch is made once in prepare() and handed back in
// KernelArgs::state; run() only enqueues (staging copies, the GEMM).
class CusparseLtLinearKernel final : public Fp16Kernel {
 public:
  CusparseLtLinearKernel(const LinearWeightRefs& refs, bool relu)
      : linear_(refs.weight, refs.bias, refs.out_features, refs.in_features, relu,
                refs.flattened_source) {}
  KernelPlan prepare(const PrepareInfo& info) const override {
    LinearCusparseLt::Prepared p = linear_.plan(info.batch);
    KernelPlan plan;
    plan.variant_name = p.name;
    plan.workspace_bytes = p.workspace_bytes;
    plan.state = std::move(p.plan);
    return plan;
  }
  void run(const KernelArgs& args) override {
    if (args.state == nullptr) throw Error(std::string(kName) + ": run without a prepared plan");
    linear_.run(*static_cast<const LinearCusparseLt::Plan*>(args.state), args.inputs.at(0),
                args.output, args.workspace, static_cast<cudaStream_t>(args.stream));
  }
  size_t weight_bytes() const override { return linear_.weight_bytes(); }

 private:
  LinearCusparseLt linear_;
};

bool cusparselt_supported(const Node& node) {
  return linear_shape_supported(node) && relu_or_none(node) &&
         LinearCusparseLt::supports(static_cast<int>(node.input_shapes[0][0]),
                                    node.get<LinearAttrs>().out_features);
}

std::unique_ptr<LayerKernel> create_cusparselt(const KernelBuildContext& context) {
  if (!cusparselt_supported(context.node))
    throw_error(node_site(context), std::string(kName) + " cannot run this node");
  const LinearWeightRefs refs = linear_weight_refs_of(context, kName);
  try {
    return std::make_unique<CusparseLtLinearKernel>(refs,
                                                    context.node.activation == Activation::Relu);
  } catch (const Error& error) {
    throw_error(node_site(context), error.what());
  }
}

}  // namespace
#endif  // CNNRT_WITH_CUSPARSELT

void register_cusparselt_kernels(KernelRegistry& registry) {
#ifdef CNNRT_WITH_CUSPARSELT
  KernelEntry entry;
  entry.name = kName;
  entry.op = OpKind::Linear;
  entry.device = Device::CUDA;
  entry.precision = Precision::FP16;
  entry.priority = 0;
  entry.baseline = true;
  entry.sparse_2_4 = true;
  entry.supports = cusparselt_supported;
  entry.create = create_cusparselt;
  registry.add(std::move(entry));
#else
  (void)registry;
#endif
}

}  // namespace cnnrt::cuda
