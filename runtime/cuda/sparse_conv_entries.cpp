// Registry entries of the 2:4 sparse convs on sparse tensor cores: on Hopper
// "conv_fp16_sparse24_wgmma" (kernels/cuda/conv/wgmma_sparse.h, cp.async gather),
// "conv_fp16_sparse24_tma" (kernels/cuda/conv/tma_sparse.h, the sparse instance of the TMA conv
// mainloop; in_c % 64 shapes the im2col box describes, a fused pool staged) and, at precision
// int8, "conv_int8_sparse24_tma" (kernels/cuda/conv/tma_sparse_s8.h, the int8 sparse instance of
// that mainloop; the convs conv_int8_tma serves); on every sm_80+ GPU "conv_fp16_sparse24_mma"
// (kernels/cuda/conv/mma_sparse.h, warp-level mma.sp; any groups-1 conv, a pool staged).
//
// Offered only for a layer whose weight is 2:4 (KernelRegistry::add checks Node::weight_2_4) and
// taken only where the layer asks for `sparsity: 2:4` or names the kernel (runtime/builder.cpp),
// like the CPU sparse entries.  The factory checks and compresses the weight once (an error
// names the layer, output channel, tap and channels that break 2:4); run() launches the planned
// variant.  No small-batch fallback: the sparse kernel runs at every batch (at batch 1-8 its
// 128-pixel tiles leave SMs idle, and the dense entries are the faster choice there — the
// per-layer choice weighs that, a sparse entry does not hide it behind a dense one).
//
// conv_fp16_sparse24_tma has the same priority and is registered first, so where both serve a
// layer that asks for `sparsity: 2:4` it is the default: on an H100 (docs/PERFORMANCE.md, run
// 37b) it ran AlexNet conv2-conv5 1.7-2.4x faster than the cp.async kernel at batch 64 and 256;
// the cp.async kernel keeps the shapes the im2col box cannot describe (in_c % 64 != 0).  The
// automatic plan and `profile --compare` time both.  conv_fp16_sparse24_mma has the same
// priority and is registered last: on sm_90 the Hopper entries stay the default where they
// serve, and on sm_80 / sm_89 (where they do not) it serves `sparsity: 2:4`.  Its input's im2col
// map is cached per context like conv_fp16_tma's (KernelPlan::state); a pooled layer asks for the
// pre-pool workspace.
//
// conv_int8_sparse24_tma does on the host what every int8 entry does (int8_layer_prep.h: the
// calibration's scales, ref::prepare_int8_layer's per-channel int8 weights, int32 biases and
// multipliers, so the integers are the reference's by construction), then hands the int8 weight
// to the kernel, which checks it 2:4 and compresses it once.  It is the only int8 sparse entry,
// so `precision: int8` with `sparsity: 2:4` takes it.  A fused max-pool runs after it on the
// pre-pool tensor (maxpool_nhwc_s8 / _f32, exact), as in the dense int8 entries; the graph output
// is dequantised in its epilogue (fp32 NHWC/8).  No small-batch fallback (as the fp16 sparse
// entries).
#include <memory>
#include <optional>
#include <string>

#include "kernels/cpu/int8_ref.h"
#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/conv/mma_sparse.h"
#include "kernels/cuda/conv/tma_encode.h"
#include "kernels/cuda/conv/tma_sparse.h"
#include "kernels/cuda/conv/tma_sparse_s8.h"
#include "kernels/cuda/conv/wgmma_sparse.h"
#include "runtime/cuda/cuda_registry.h"
#include "runtime/cuda/int8_layer_prep.h"

namespace cnnrt::cuda {
namespace {

constexpr const char* kName = "conv_fp16_sparse24_wgmma";

std::optional<ConvShape> served_shape(const Node& node) {
  std::optional<ConvShape> shape = conv_shape_of(node);
  if (!shape || !ConvFp16Sparse24::supports(*shape)) return std::nullopt;
  return shape;
}

class SparseConvKernel final : public Fp16Kernel {
 public:
  SparseConvKernel(const ConvShape& shape, const float* weight, const float* bias,
                   const std::string& layer)
      : conv_(shape, weight, bias, layer) {}
  KernelPlan prepare(const PrepareInfo& info) const override {
    const ConvFp16Sparse24Plan p = conv_.plan(info.batch);
    KernelPlan plan;
    plan.variant = p.variant;
    plan.variant_name = p.name;
    return plan;
  }
  void run(const KernelArgs& args) override {
    const void* residual = args.inputs.size() > 1 ? args.inputs[1] : nullptr;
    conv_.forward(args.variant, args.inputs.at(0), residual, args.output, args.batch,
                  static_cast<cudaStream_t>(args.stream));
  }
  size_t weight_bytes() const override { return conv_.weight_bytes(); }

 private:
  ConvFp16Sparse24 conv_;
};

std::unique_ptr<LayerKernel> create(const KernelBuildContext& context) {
  ErrorSite site = node_site(context);
  const std::optional<ConvShape> shape = served_shape(context.node);
  if (!shape)
    throw_error(site, std::string(kName) +
                          " does not serve this conv (needs groups 1, dilation 1, in_c % 8 == 0, "
                          "out_c % 64 == 0, a pool window of <= 128 pixels)");
  if (!ConvFp16Sparse24::device_supported())
    throw_error(site,
                std::string(kName) + " needs a compute capability 9.0 GPU and the sm_90a build");
  const ConvWeights weights = conv_weights_of(context, kName, shape);
  try {
    return std::make_unique<SparseConvKernel>(*shape, weights.weight, weights.bias,
                                              context.node.name);
  } catch (const Error& error) {
    throw_error(site, error.what());
  }
}

// ---- conv_fp16_sparse24_tma -------------------------------------------------------------------

constexpr const char* kTmaName = "conv_fp16_sparse24_tma";
using InputMaps = tma::InputMaps<ConvFp16TmaInput>;

std::optional<ConvShape> tma_served_shape(const Node& node) {
  std::optional<ConvShape> shape = conv_shape_of(node);
  if (!shape || !ConvFp16Sparse24Tma::supports(*shape)) return std::nullopt;
  return shape;
}

class SparseTmaConvKernel final : public Fp16Kernel {
 public:
  SparseTmaConvKernel(const ConvShape& shape, const float* weight, const float* bias,
                      const std::string& layer)
      : conv_(shape, weight, bias, layer) {}
  KernelPlan prepare(const PrepareInfo& info) const override {
    KernelPlan plan = kernel_plan_of(conv_.plan(info.batch));
    plan.state = std::make_shared<const InputMaps>();
    return plan;
  }
  void run(const KernelArgs& args) override {
    if (args.state == nullptr) throw Error(std::string(kTmaName) + ": run() without its state");
    const void* x = args.inputs.at(0);
    const void* residual = args.inputs.size() > 1 ? args.inputs[1] : nullptr;
    const ConvFp16TmaInput input =
        static_cast<const InputMaps*>(args.state)
            ->find_or_encode(x, args.batch,
                             [this](const void* p, int b) { return conv_.encode_input(p, b); });
    conv_.forward(args.variant, input, residual, args.output,
                  static_cast<cudaStream_t>(args.stream), args.workspace);
  }
  size_t weight_bytes() const override { return conv_.weight_bytes(); }

 private:
  ConvFp16Sparse24Tma conv_;
};

std::unique_ptr<LayerKernel> create_tma(const KernelBuildContext& context) {
  ErrorSite site = node_site(context);
  const std::optional<ConvShape> shape = tma_served_shape(context.node);
  if (!shape)
    throw_error(site, std::string(kTmaName) +
                          " does not serve this conv (needs groups 1, dilation 1, in_c % 64 == 0, "
                          "out_c % 8 == 0, kernel <= 64, stride <= 8, padding within the im2col "
                          "box, no residual with a pool)");
  if (!ConvFp16Sparse24Tma::device_supported())
    throw_error(site,
                std::string(kTmaName) + " needs a compute capability 9.0 GPU and the sm_90a build");
  const ConvWeights weights = conv_weights_of(context, kTmaName, shape);
  try {
    return std::make_unique<SparseTmaConvKernel>(*shape, weights.weight, weights.bias,
                                                 context.node.name);
  } catch (const Error& error) {
    throw_error(site, error.what());
  }
}

// ---- conv_fp16_sparse24_mma --------------------------------------------------------------------

constexpr const char* kMmaName = "conv_fp16_sparse24_mma";

std::optional<ConvShape> mma_served_shape(const Node& node) {
  std::optional<ConvShape> shape = conv_shape_of(node);
  if (!shape || !ConvFp16Sparse24Mma::supports(*shape)) return std::nullopt;
  return shape;
}

class SparseMmaConvKernel final : public Fp16Kernel {
 public:
  SparseMmaConvKernel(const ConvShape& shape, const float* weight, const float* bias,
                      const std::string& layer)
      : conv_(shape, weight, bias, layer) {}
  KernelPlan prepare(const PrepareInfo& info) const override {
    return kernel_plan_of(conv_.plan(info.batch));
  }
  void run(const KernelArgs& args) override {
    const void* residual = args.inputs.size() > 1 ? args.inputs[1] : nullptr;
    conv_.forward(args.variant, args.inputs.at(0), residual, args.output, args.batch,
                  static_cast<cudaStream_t>(args.stream), args.workspace);
  }
  size_t weight_bytes() const override { return conv_.weight_bytes(); }

 private:
  ConvFp16Sparse24Mma conv_;
};

std::unique_ptr<LayerKernel> create_mma(const KernelBuildContext& context) {
  ErrorSite site = node_site(context);
  const std::optional<ConvShape> shape = mma_served_shape(context.node);
  if (!shape)
    throw_error(site, std::string(kMmaName) +
                          " does not serve this conv (needs groups 1; a pool without a residual, "
                          "padded by at most half its window)");
  if (!ConvFp16Sparse24Mma::device_supported())
    throw_error(site, std::string(kMmaName) + " needs a compute capability 8.0 or later GPU");
  const ConvWeights weights = conv_weights_of(context, kMmaName, shape);
  try {
    return std::make_unique<SparseMmaConvKernel>(*shape, weights.weight, weights.bias,
                                                 context.node.name);
  } catch (const Error& error) {
    throw_error(site, error.what());
  }
}

// ---- conv_int8_sparse24_tma ------------------------------------------------------------------

constexpr const char* kS8Name = "conv_int8_sparse24_tma";
using S8InputMaps = tma::InputMaps<ConvS8TmaInput>;

// The kernel's shape rule in either output form (the int8 output's is checked: an fp32 one
// differs only in out_stride, which the rule accepts for both), K within the int8 contract, no
// residual (int8 kernels have no residual epilogue).
bool s8_tma_supported(const Node& node) {
  const std::optional<ConvShape> shape = conv_shape_of(node);
  if (!shape || shape->residual) return false;
  const int64_t k =
      int64_t(shape->in_c / shape->conv.groups) * shape->conv.kernel_h * shape->conv.kernel_w;
  return k <= ref::kMaxInt8Reduction && ConvS8Sparse24Tma::supports(s8_conv_of(*shape, false)) &&
         ConvS8Sparse24Tma::device_supported();
}

class SparseS8TmaConvKernel final : public LayerKernel {
 public:
  explicit SparseS8TmaConvKernel(const KernelBuildContext& context) {
    const std::optional<ConvShape> shape = conv_shape_of(context.node);
    const ConvWeights weights = conv_weights_of(context, kS8Name, shape);
    const ConvAttrs& a = shape->conv;
    const ref::Int8Layer layer =
        prepare_layer(context, weights.weight, weights.bias, shape->out_c,
                      int64_t(shape->in_c) * a.kernel_h * a.kernel_w, shape->activation, device_);
    conv_ = s8_conv_of(*shape, layer.float_output);
    conv_.lo = layer.int_bounds.lo;
    conv_.hi = layer.int_bounds.hi;
    conv_.float_lo = layer.float_bounds.lo;
    conv_.float_hi = layer.float_bounds.hi;
    try {
      kernel_.emplace(conv_, layer.weight.data(), layer.bias.data(), layer.multiplier.data(),
                      context.node.name);
    } catch (const Error& error) {
      throw_error(node_site(context), error.what());
    }
    pool_ = nhwc_pool_of(*shape);
  }
  std::vector<TensorType> input_types(size_t) const override {
    return {int8_nhwc16(device_.input_scale)};
  }
  TensorType output_type() const override { return output_type_of(device_); }
  KernelPlan prepare(const PrepareInfo& info) const override {
    const ConvS8Sparse24TmaPlan p = kernel_->plan(info.batch);
    KernelPlan plan;
    plan.variant = p.variant;
    plan.variant_name = p.name + (pool_ ? "+pool" : "");
    plan.workspace_bytes = pre_pool_bytes(info.batch);
    plan.state = std::make_shared<const S8InputMaps>();
    return plan;
  }
  void run(const KernelArgs& args) override {
    if (args.state == nullptr) throw Error(std::string(kS8Name) + ": run() without its state");
    if (pool_ && args.workspace == nullptr) throw Error(std::string(kS8Name) + ": no workspace");
    const auto stream = static_cast<cudaStream_t>(args.stream);
    const ConvS8TmaInput input =
        static_cast<const S8InputMaps*>(args.state)
            ->find_or_encode(args.inputs.at(0), args.batch,
                             [this](const void* p, int b) { return kernel_->encode_input(p, b); });
    void* conv_out = pool_ ? args.workspace : args.output;
    kernel_->forward(args.variant, input, conv_out, stream);
    if (pool_)
      pool_conv_output(*pool_, conv_.float_output, conv_out, args.output, args.batch, stream);
  }
  size_t weight_bytes() const override { return kernel_->weight_bytes(); }

 private:
  // The pre-pool tensor (pooled layers only), as the dense int8 entries size it.
  size_t pre_pool_bytes(int batch) const {
    if (!pool_) return 0;
    return size_t(batch) * conv_.out_h * conv_.out_w * conv_.out_stride *
           (conv_.float_output ? sizeof(float) : 1);
  }

  Int8Device device_;  // the scales (the kernel owns its device arrays)
  S8Conv conv_;
  std::optional<ConvS8Sparse24Tma> kernel_;
  std::optional<NhwcPool> pool_;
};

}  // namespace

void register_sparse_conv_kernels(KernelRegistry& registry) {
  // int8: the only sparse entry of its precision (header comment); the same priority as the fp16
  // sparse entries (only `sparsity: 2:4` or its name selects it).
  add_entries(registry, Device::CUDA, Precision::INT8, -1,
              {{kS8Name, OpKind::Conv, s8_tma_supported,
                [](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
                  return std::make_unique<SparseS8TmaConvKernel>(context);
                },
                /*residual=*/false, /*sparse_2_4=*/true}});

  KernelEntry tma_entry;
  tma_entry.name = kTmaName;
  tma_entry.op = OpKind::Conv;
  tma_entry.device = Device::CUDA;
  tma_entry.precision = Precision::FP16;
  tma_entry.priority = -1;  // as conv_fp16_sparse24_wgmma, before it (header comment)
  // Any clamp, asymmetric padding (the im2col box's corners), the fused residual, a staged pool.
  tma_entry.supports = [](const Node& node) {
    return tma_served_shape(node).has_value() && ConvFp16Sparse24Tma::device_supported();
  };
  tma_entry.create = create_tma;
  tma_entry.residual = true;  // native: the transposing write-out adds it
  tma_entry.sparse_2_4 = true;
  registry.add(std::move(tma_entry));

  KernelEntry entry;
  entry.name = kName;
  entry.op = OpKind::Conv;
  entry.device = Device::CUDA;
  entry.precision = Precision::FP16;
  entry.priority = -1;  // never the default: only `sparsity: 2:4` or its name selects it
  entry.supports = [](const Node& node) {
    return symmetric_conv(node) && served_shape(node).has_value() &&
           ConvFp16Sparse24::device_supported();
  };
  entry.create = create;
  entry.residual = true;  // native: the dense wgmma write-out adds it
  entry.sparse_2_4 = true;
  registry.add(std::move(entry));

  KernelEntry mma_entry;
  mma_entry.name = kMmaName;
  mma_entry.op = OpKind::Conv;
  mma_entry.device = Device::CUDA;
  mma_entry.precision = Precision::FP16;
  mma_entry.priority = -1;  // as the Hopper sparse entries, after them (header comment)
  // Any clamp, asymmetric padding (the row table's bounds checks), the fused residual, a staged
  // pool.
  mma_entry.supports = [](const Node& node) {
    return mma_served_shape(node).has_value() && ConvFp16Sparse24Mma::device_supported();
  };
  mma_entry.create = create_mma;
  mma_entry.residual = true;  // native: igemm's write-out adds it
  mma_entry.sparse_2_4 = true;
  registry.add(std::move(mma_entry));
}

}  // namespace cnnrt::cuda
