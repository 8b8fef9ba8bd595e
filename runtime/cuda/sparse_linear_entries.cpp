// Registry entry of the 2:4 sparse fp16 linear layer (kernels/cuda/linear_sparse24.h):
// "linear_fp16_sparse24", a weight-streaming GEMV over the kept half of a 2:4 weight.
//
// The factory checks the node as every fp16 linear does (linear_weight_refs_of: shapes, weight and
// bias sizes, the flatten it reads), compresses the weight once (sparse24::compress, which names
// the layer and the first group with more than two non-zeros) and repacks it into the GPU slabs;
// the kernel never sees the dense weight.  Like the CPU sparse entries it is offered only for a
// 2:4 weight (KernelEntry::sparse_2_4) and taken only where a layer asks for `sparsity: 2:4` or
// names it (runtime/builder.cpp), at a priority below the dense fp16 linears.  ReLU or no
// epilogue, as the dense fp16 linears; prepare() fixes the K split for the context's batch.
#include <memory>
#include <string>

#include "graph/passes_sparsity.h"
#include "kernels/cpu/sparse24.h"
#include "kernels/cuda/linear_sparse24.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::cuda {
namespace {

const char* const kEntryName = "linear_fp16_sparse24";

class SparseLinearFp16Kernel final : public Fp16Kernel {
 public:
  SparseLinearFp16Kernel(const HostSparse24& packed, bool relu) : weights_(packed), relu_(relu) {}

  // The split depends on the batch and the device's SM count: decided once per context.
  KernelPlan prepare(const PrepareInfo& info) const override {
    KernelPlan plan;
    plan.variant_name = "gemv";
    if (info.batch > 0)
      plan.variant = sparse24_choose_split(weights_.geometry(), info.batch, current_sm_count());
    return plan;
  }
  void run(const KernelArgs& args) override {
    gemv_sparse24_fp16(weights_, relu_, args.inputs.at(0), args.output, args.batch,
                       static_cast<cudaStream_t>(args.stream), args.variant);
  }
  // Kept values, metadata (with the row padding the kernel streams) and the fp32 bias.
  size_t weight_bytes() const override { return weights_.bytes(); }

 private:
  Sparse24Weights weights_;
  bool relu_;
};

// The node shapes the dense fp16 linear runs, with its epilogues (ReLU or none).
bool sparse_linear_supported(const Node& node) {
  return linear_shape_supported(node) && relu_or_none(node);
}

std::unique_ptr<LayerKernel> create_sparse_linear(const KernelBuildContext& context) {
  if (!sparse_linear_supported(context.node))
    throw_error(node_site(context), std::string(kEntryName) + " cannot run this node");
  const LinearWeightRefs refs = linear_weight_refs_of(context, kEntryName);
  try {
    const sparse24::Compressed compressed =
        sparse24::compress(refs.weight, sparsity::weight_shape_of(context.node), context.node.name);
    return std::make_unique<SparseLinearFp16Kernel>(
        pack_sparse24(compressed, refs.bias, refs.flattened_source),
        context.node.activation == Activation::Relu);
  } catch (const Error& error) {
    throw_error(node_site(context), error.what());
  }
}

}  // namespace

void register_sparse_linear_kernels(KernelRegistry& registry) {
  KernelEntry entry;
  entry.name = kEntryName;
  entry.op = OpKind::Linear;
  entry.device = Device::CUDA;
  entry.precision = Precision::FP16;
  // Below the dense fp16 linears (4..10) and never the default: taken only where asked for.
  entry.priority = -1;
  entry.sparse_2_4 = true;
  entry.supports = sparse_linear_supported;
  entry.create = create_sparse_linear;
  registry.add(std::move(entry));
}

}  // namespace cnnrt::cuda
