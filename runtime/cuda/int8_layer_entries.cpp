// Registry entries of the CUDA int8 layers without weights (kernels/cuda/layers_s8.h),
// precision int8, on int8 NHWC/16 at each tensor's calibrated scale: maxpool_int8,
// avgpool_int8, adaptive_avgpool_int8, relu_int8, add_int8 (the residual add of two int8
// tensors at their own scales), and the views flatten_int8 / dropout_int8.
// Like the CPU int8 entries (runtime/cpu_int8_entries.cpp), the factory reads the scales once
// (int8_tensor_scale: errors name the calibration file, layer and tensor) and computes every
// multiplier on the host with the reference's own function (ref::requant_multiplier); run() only
// launches.  Flatten and dropout keep their input's scale; a flatten of a map whose channels are
// a multiple of 16 and a dropout move no byte (in place), any other flatten compacts.
#include <cuda_runtime.h>

#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/cpu/int8_ref.h"
#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/elementwise_fp16.h"
#include "kernels/cuda/layers_s8.h"
#include "runtime/calibration.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::cuda {
namespace {

using Int8Launch = std::function<void(const KernelArgs&, cudaStream_t)>;

// One launch closure made by the factory, int8 in and out at their own scales.
class Int8LayerKernel final : public LayerKernel {
 public:
  Int8LayerKernel(float input_scale, float output_scale, Int8Launch launch, bool in_place,
                  DeviceArray table = {})
      : input_scale_(input_scale),
        output_scale_(output_scale),
        launch_(std::move(launch)),
        in_place_(in_place),
        table_(std::move(table)) {}
  std::vector<TensorType> input_types(size_t) const override { return {int8_nhwc16(input_scale_)}; }
  TensorType output_type() const override { return int8_nhwc16(output_scale_); }
  KernelPlan prepare(const PrepareInfo&) const override {
    KernelPlan plan;
    plan.in_place = in_place_;
    return plan;
  }
  void run(const KernelArgs& args) override {
    launch_(args, static_cast<cudaStream_t>(args.stream));
  }
  size_t weight_bytes() const override { return table_.bytes(); }

 private:
  float input_scale_, output_scale_;
  Int8Launch launch_;
  bool in_place_;
  DeviceArray table_;  // the multipliers a pool's closure points into
};

struct Chw {
  int c = 0, h = 0, w = 0;
};
Chw chw_of(const Node& node) {
  const Shape& s = node.input_shapes.at(0);
  return {static_cast<int>(s[0]), static_cast<int>(s[1]), static_cast<int>(s[2])};
}
float input_scale(const KernelBuildContext& context) {
  return int8_tensor_scale(context, context.node.inputs.at(0));
}
float output_scale(const KernelBuildContext& context) {
  return int8_tensor_scale(context, context.node.name);
}

// Bytes of one sample of the node's input as int8 NHWC/16.
int64_t sample_bytes(const Node& node) {
  return static_cast<int64_t>(tensor_bytes(node.input_shapes.at(0), int8_nhwc16(1), 1));
}

std::unique_ptr<LayerKernel> make_pool(const KernelBuildContext& context, S8Pool::Kind kind) {
  const Node& node = context.node;
  const Chw in = chw_of(node);
  const float s_x = input_scale(context), s_y = output_scale(context);
  S8Pool pool;
  pool.kind = kind;
  pool.c = in.c;
  pool.h = in.h;
  pool.w = in.w;
  pool.out_h = static_cast<int>(node.output_shape.at(1));
  pool.out_w = static_cast<int>(node.output_shape.at(2));
  int max_divisor = 0;
  if (kind == S8Pool::Kind::Adaptive) {
    // A bin spans at most ceil(in / out) + 1 pixels per axis.
    max_divisor = (in.h / pool.out_h + 2) * (in.w / pool.out_w + 2);
  } else {
    const PoolAttrs& a = node.get<PoolAttrs>();
    pool.kh = a.kernel_h;
    pool.kw = a.kernel_w;
    pool.stride_h = a.stride_h;
    pool.stride_w = a.stride_w;
    pool.pad_h = a.pad_h;
    pool.pad_w = a.pad_w;
    pool.count_include_pad = a.count_include_pad;
    max_divisor = kind == S8Pool::Kind::Max ? 0 : a.kernel_h * a.kernel_w;
  }
  std::vector<float> multipliers(static_cast<size_t>(max_divisor) + 1);
  multipliers[0] = ref::requant_multiplier(s_x, s_y);  // max-pool; never a divisor
  for (int n = 1; n <= max_divisor; ++n)
    multipliers[n] = ref::requant_multiplier(s_x, static_cast<double>(s_y) * n);
  DeviceArray table(multipliers.size() * sizeof(float));
  table.upload(multipliers.data(), table.bytes());
  pool.multipliers = static_cast<const float*>(table.get());
  return std::make_unique<Int8LayerKernel>(
      s_x, s_y,
      [pool](const KernelArgs& args, cudaStream_t stream) {
        pool_s8(pool, args.inputs.at(0), args.output, args.batch, stream);
      },
      false, std::move(table));
}

std::unique_ptr<LayerKernel> make_relu(const KernelBuildContext& context) {
  const float s_x = input_scale(context), s_y = output_scale(context);
  const float multiplier = ref::requant_multiplier(s_x, s_y);
  const ref::Int8Bounds bounds =
      ref::int8_bounds({0.0f, std::numeric_limits<float>::infinity()}, s_y);
  const int64_t bytes = sample_bytes(context.node);
  return std::make_unique<Int8LayerKernel>(
      s_x, s_y,
      [=](const KernelArgs& args, cudaStream_t stream) {
        requantize_s8(args.inputs.at(0), args.output, bytes * args.batch, multiplier, bounds.lo,
                      bounds.hi, stream);
      },
      s_x == s_y);  // in place only when the type (scale) is the same
}

// Flatten and dropout: the bytes (or the compacted bytes), at the input's scale.
std::unique_ptr<LayerKernel> make_view(const KernelBuildContext& context) {
  const Node& node = context.node;
  const float scale = input_scale(context);
  const int64_t bytes = sample_bytes(node);
  const bool compact = node.op == OpKind::Flatten && node.input_shapes[0].size() == 3 &&
                       node.input_shapes[0][0] % 16 != 0;
  if (compact) {
    const Chw in = chw_of(node);
    return std::make_unique<Int8LayerKernel>(
        scale, scale,
        [in](const KernelArgs& args, cudaStream_t stream) {
          flatten_nhwc_s8(args.inputs.at(0), args.output, args.batch, in.c, in.h, in.w, stream);
        },
        false);
  }
  return std::make_unique<Int8LayerKernel>(
      scale, scale,
      [bytes](const KernelArgs& args, cudaStream_t stream) {
        if (args.inputs.at(0) != args.output)
          CNNRT_CUDA_CHECK(cudaMemcpyAsync(args.output, args.inputs.at(0),
                                           static_cast<size_t>(bytes * args.batch),
                                           cudaMemcpyDeviceToDevice, stream));
      },
      true);
}

// The residual add of two int8 tensors of one shape ([C, H, W] maps or [F] vectors), each at its
// own scale, to the add's scale: one pass instead of converting both inputs to fp32, adding
// and quantising (four launches per EfficientNet-Lite0 block end).
class Int8AddKernel final : public LayerKernel {
 public:
  explicit Int8AddKernel(const KernelBuildContext& context)
      : scale_a_(int8_tensor_scale(context, context.node.inputs.at(0))),
        scale_b_(int8_tensor_scale(context, context.node.inputs.at(1))),
        scale_y_(int8_tensor_scale(context, context.node.name)),
        multiplier_a_(ref::requant_multiplier(scale_a_, scale_y_)),
        multiplier_b_(ref::requant_multiplier(scale_b_, scale_y_)),
        bounds_(ref::int8_bounds(activation_bounds(context.node), scale_y_)) {
    const Shape& shape = context.node.input_shapes.at(0);
    channels_ = static_cast<int>(shape[0]);
    rows_ = shape.size() == 3 ? shape[1] * shape[2] : 1;  // pixels per sample, or one vector
  }
  std::vector<TensorType> input_types(size_t index) const override {
    return {int8_nhwc16(index == 0 ? scale_a_ : scale_b_)};
  }
  TensorType output_type() const override { return int8_nhwc16(scale_y_); }
  void run(const KernelArgs& args) override {
    add_s8(args.inputs.at(0), multiplier_a_, args.inputs.at(1), multiplier_b_, args.output,
           rows_ * args.batch, channels_, bounds_.lo, bounds_.hi,
           static_cast<cudaStream_t>(args.stream));
  }

 private:
  float scale_a_, scale_b_, scale_y_, multiplier_a_, multiplier_b_;
  ref::Int8Bounds bounds_;
  int channels_ = 0;
  int64_t rows_ = 0;
};

bool add_supported(const Node& node) {
  return node.op == OpKind::Add && node.input_shapes.size() == 2 &&
         node.input_shapes[0] == node.input_shapes[1] &&
         node.input_shapes[0] == node.output_shape &&
         (node.input_shapes[0].size() == 3 || node.input_shapes[0].size() == 1);
}

bool has_chw_input(const Node& node) {
  return node.input_shapes.size() == 1 && node.input_shapes[0].size() == 3 &&
         node.output_shape.size() == 3;
}
bool has_one_input(const Node& node) {
  return node.input_shapes.size() == 1 && !node.input_shapes[0].empty();
}
// A map (compacted or viewed) or a vector (viewed): other ranks are rows whose padding moves.
bool flatten_supported(const Node& node) {
  return has_one_input(node) &&
         (node.input_shapes[0].size() == 3 || node.input_shapes[0].size() == 1);
}

}  // namespace

void register_int8_layer_kernels(KernelRegistry& registry) {
  add_entries(registry, Device::CUDA, Precision::INT8, 10,
              {{"maxpool_int8", OpKind::MaxPool, has_chw_input,
                [](const KernelBuildContext& c) { return make_pool(c, S8Pool::Kind::Max); }},
               {"avgpool_int8", OpKind::AvgPool, has_chw_input,
                [](const KernelBuildContext& c) { return make_pool(c, S8Pool::Kind::Avg); }},
               {"adaptive_avgpool_int8", OpKind::AdaptiveAvgPool, has_chw_input,
                [](const KernelBuildContext& c) { return make_pool(c, S8Pool::Kind::Adaptive); }},
               {"relu_int8", OpKind::Relu, has_one_input, make_relu},
               {"flatten_int8", OpKind::Flatten, flatten_supported, make_view},
               {"dropout_int8", OpKind::Dropout, has_one_input, make_view},
               {"add_int8", OpKind::Add, add_supported,
                [](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
                  return std::make_unique<Int8AddKernel>(context);
                }}});
}

}  // namespace cnnrt::cuda
