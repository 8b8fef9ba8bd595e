// Registry entries of the 2:4 sparse fp16 linear layer, two weight-streaming GEMVs over the kept
// half of a 2:4 weight: "linear_fp16_sparse24_mma" (kernels/cuda/linear_sparse24_mma.h: mma.sp on
// the sparse tensor cores, the batch as N; sm_80+ and an input whose staged sample fits a block's
// shared memory) and "linear_fp16_sparse24" (kernels/cuda/linear_sparse24.h: CUDA cores, any
// GPU).  The mma entry is registered first at the same priority, so it is the one a `sparsity:
// 2:4` layer gets where it serves; the other stays a pinned entry and `profile --compare`'s
// comparison (docs/PERFORMANCE.md: the mma form streams faster).
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
#include "kernels/cuda/linear_sparse24_mma.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::cuda {
namespace {

const char* const kEntryName = "linear_fp16_sparse24";
const char* const kMmaEntryName = "linear_fp16_sparse24_mma";

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

// The mma.sp GEMV: the split depends on the device's SM count only.  Where the batch is one pass
// its weights are streamed once, so the context may prefetch part of them into L2.
class SparseLinearMmaKernel final : public Fp16Kernel {
 public:
  SparseLinearMmaKernel(const HostSparse24Mma& packed, bool relu) : weights_(packed), relu_(relu) {}

  KernelPlan prepare(const PrepareInfo& info) const override {
    KernelPlan plan;
    plan.variant_name = "gemv_mma";
    plan.variant = sparse24_mma_choose_split(weights_.geometry(), current_sm_count());
    if (info.batch > 0 && info.batch <= weights_.max_pass()) {  // one pass: streamed once
      plan.streamed_weights = weights_.weight();
      plan.streamed_weight_bytes = weights_.weight_matrix_bytes();
    }
    return plan;
  }
  void run(const KernelArgs& args) override {
    gemv_sparse24_mma_fp16(weights_, relu_, args.inputs.at(0), args.output, args.batch,
                           static_cast<cudaStream_t>(args.stream), args.variant,
                           args.stream_evict_first);
  }
  size_t weight_bytes() const override { return weights_.bytes(); }

 private:
  Sparse24MmaWeights weights_;
  bool relu_;
};

// The node shapes the dense fp16 linear runs, with its epilogues (ReLU or none).
bool sparse_linear_supported(const Node& node) {
  return linear_shape_supported(node) && relu_or_none(node);
}

// ... and, for the mma.sp GEMV, an sm_80+ device where one staged sample of x fits a block.
bool sparse_linear_mma_supported(const Node& node) {
  return sparse_linear_supported(node) &&
         sparse24_mma_max_pass(static_cast<int>(node.input_shapes[0][0])) > 0;
}

// The compressed weight of a sparse linear node, then `pack` into a kernel's layout.
template <class Pack>
auto packed_sparse_linear(const KernelBuildContext& context, const char* entry, Pack pack) {
  const LinearWeightRefs refs = linear_weight_refs_of(context, entry);
  try {
    const sparse24::Compressed compressed =
        sparse24::compress(refs.weight, sparsity::weight_shape_of(context.node), context.node.name);
    return pack(compressed, refs.bias, refs.flattened_source);
  } catch (const Error& error) {
    throw_error(node_site(context), error.what());
  }
}

std::unique_ptr<LayerKernel> create_sparse_linear_mma(const KernelBuildContext& context) {
  if (!sparse_linear_mma_supported(context.node))
    throw_error(node_site(context),
                std::string(kMmaEntryName) +
                    " cannot run this node (a linear with ReLU or none, on an sm_80+ GPU, whose "
                    "input fits one block's shared memory)");
  const HostSparse24Mma packed = packed_sparse_linear(context, kMmaEntryName, pack_sparse24_mma);
  try {
    return std::make_unique<SparseLinearMmaKernel>(packed,
                                                   context.node.activation == Activation::Relu);
  } catch (const Error& error) {
    throw_error(node_site(context), error.what());
  }
}

std::unique_ptr<LayerKernel> create_sparse_linear(const KernelBuildContext& context) {
  if (!sparse_linear_supported(context.node))
    throw_error(node_site(context), std::string(kEntryName) + " cannot run this node");
  const HostSparse24 packed = packed_sparse_linear(context, kEntryName, pack_sparse24);
  try {
    return std::make_unique<SparseLinearFp16Kernel>(packed,
                                                    context.node.activation == Activation::Relu);
  } catch (const Error& error) {
    throw_error(node_site(context), error.what());
  }
}

}  // namespace

void register_sparse_linear_kernels(KernelRegistry& registry) {
  KernelEntry mma_entry;
  mma_entry.name = kMmaEntryName;
  mma_entry.op = OpKind::Linear;
  mma_entry.device = Device::CUDA;
  mma_entry.precision = Precision::FP16;
  mma_entry.priority = -1;  // as linear_fp16_sparse24, before it (header comment)
  mma_entry.sparse_2_4 = true;
  mma_entry.supports = sparse_linear_mma_supported;
  mma_entry.create = create_sparse_linear_mma;
  registry.add(std::move(mma_entry));

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
