// CPU fp32 2:4 sparse registry entries: conv (groups == 1) and linear computed from the
// compressed weight (kernels/cpu/sparse24.h), with the same fused epilogue as the dense CPU
// entries (bias, residual, activation, max-pool).
//
// They are the reference the future sparse tensor-core kernels are checked against and the
// proof that the format carries every kept weight: the dense weight is dropped after
// compression, so a kernel that read a wrong index could not hide behind a dense copy.  They are
// offered only for a layer whose weight is 2:4 (KernelRegistry::add checks Node::weight_2_4) and
// taken only when the layer asks for `sparsity: 2:4` or names the kernel (runtime/builder.cpp):
// a 2:4 model does not change kernels by itself.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "kernels/cpu/reference.h"
#include "kernels/cpu/sparse24.h"
#include "runtime/kernel.h"

namespace cnnrt {
namespace {

ErrorSite site_of(const KernelBuildContext& context) { return node_site(context); }

sparse24::Compressed compress_weight(const KernelBuildContext& context) {
  const Node& node = context.node;
  const Param* weight = node.find_param("weight");
  const sparse24::WeightShape shape = sparsity::weight_shape_of(node);
  const size_t expected = static_cast<size_t>(shape.rows) * shape.channels * shape.taps;
  if (weight == nullptr || weight->value.data.size() != expected)
    throw_error(site_of(context), "sparse kernel: weight not loaded or of the wrong size");
  return sparse24::compress(weight->value.data.data(), shape, node.name);
}

std::vector<float> bias_of(const Node& node, int rows) {
  const Param* bias = node.find_param("bias");
  if (bias == nullptr || bias->value.data.empty()) return {};
  if (static_cast<int>(bias->value.data.size()) != rows)
    throw Error(node.name + ": sparse kernel: bias has the wrong size");
  return {bias->value.data.begin(), bias->value.data.end()};
}

void apply_activation(const Node& node, float* values, int64_t count) {
  if (node.activation == Activation::None) return;
  const ActivationBounds b = activation_bounds(node);
  ref::clamp(values, count, b.lo, b.hi, values);
}

class SparseConvKernel : public LayerKernel {
 public:
  explicit SparseConvKernel(const KernelBuildContext& context)
      : node_(context.node), weight_(compress_weight(context)) {
    const Shape& in = node_.input_shapes.at(0);
    h_ = static_cast<int>(in.at(1));
    w_ = static_cast<int>(in.at(2));
    bias_ = bias_of(node_, weight_.shape.rows);
    node_.params.clear();  // the dense weight is not kept: run() reads the compressed form only
    conv_shape_ = node_.fused_maxpool ? node_.pre_pool_shape : node_.output_shape;
  }

  void run(const KernelArgs& args) override {
    auto* y = static_cast<float*>(args.output);
    float* conv_out = node_.fused_maxpool ? static_cast<float*>(args.workspace) : y;
    if (conv_out == nullptr) throw Error(node_.name + ": sparse conv: no output or workspace");
    sparse24::conv2d(static_cast<const float*>(args.inputs.at(0)), args.batch, h_, w_, weight_,
                     bias_.empty() ? nullptr : bias_.data(), node_.get<ConvAttrs>(), conv_out);
    const int64_t count = shape_elements(conv_shape_) * args.batch;
    if (node_.fused_residual)
      ref::add(conv_out, static_cast<const float*>(args.inputs.at(1)), count, conv_out);
    apply_activation(node_, conv_out, count);
    if (node_.fused_maxpool)
      ref::maxpool2d(conv_out, args.batch, static_cast<int>(conv_shape_[0]),
                     static_cast<int>(conv_shape_[1]), static_cast<int>(conv_shape_[2]),
                     *node_.fused_maxpool, y);
  }
  KernelPlan prepare(const PrepareInfo& info) const override {
    KernelPlan plan;
    if (node_.fused_maxpool)
      plan.workspace_bytes = sizeof(float) * shape_elements(conv_shape_) * info.batch;
    return plan;
  }
  // Kept values, metadata and bias: what a sparse kernel reads instead of the dense weight.
  size_t weight_bytes() const override {
    return sizeof(float) * (weight_.values.size() + bias_.size()) +
           sizeof(uint16_t) * weight_.meta.size();
  }

 private:
  Node node_;  // a copy without its params: the kernel never points into the graph
  sparse24::Compressed weight_;
  std::vector<float> bias_;
  int h_ = 0, w_ = 0;
  Shape conv_shape_;
};

class SparseLinearKernel : public LayerKernel {
 public:
  explicit SparseLinearKernel(const KernelBuildContext& context)
      : node_(context.node), weight_(compress_weight(context)) {
    bias_ = bias_of(node_, weight_.shape.rows);
    node_.params.clear();
  }
  void run(const KernelArgs& args) override {
    auto* y = static_cast<float*>(args.output);
    sparse24::linear(static_cast<const float*>(args.inputs.at(0)), args.batch, weight_,
                     bias_.empty() ? nullptr : bias_.data(), y);
    apply_activation(node_, y, static_cast<int64_t>(weight_.shape.rows) * args.batch);
  }
  size_t weight_bytes() const override {
    return sizeof(float) * (weight_.values.size() + bias_.size()) +
           sizeof(uint16_t) * weight_.meta.size();
  }

 private:
  Node node_;
  sparse24::Compressed weight_;
  std::vector<float> bias_;
};

bool conv_supported(const Node& node) {
  if (node.input_shapes.empty() || node.input_shapes[0].size() != 3) return false;
  return node.get<ConvAttrs>().groups == 1;
}

bool linear_supported(const Node& node) { return !node.input_shapes.empty(); }

}  // namespace

void register_cpu_sparse_kernels(KernelRegistry& registry) {
  EntryRow conv{"cpu_sparse24_conv", OpKind::Conv, conv_supported,
                [](const KernelBuildContext& c) -> std::unique_ptr<LayerKernel> {
                  return std::make_unique<SparseConvKernel>(c);
                }};
  conv.residual = true;
  conv.sparse_2_4 = true;
  EntryRow linear{"cpu_sparse24_linear", OpKind::Linear, linear_supported,
                  [](const KernelBuildContext& c) -> std::unique_ptr<LayerKernel> {
                    return std::make_unique<SparseLinearKernel>(c);
                  }};
  linear.sparse_2_4 = true;
  // Priority below the dense reference's 0: never the default, only asked for.
  add_entries(registry, Device::CPU, Precision::FP32, -1, {conv, linear});
}

}  // namespace cnnrt
