// Registry entries of the CUDA fp32 reference family (kernels/cuda/reference_fp32.h): one entry
// per op of the op table, precision FP32, device CUDA, reading and writing fp32 NHWC/8.
//
// They make `--precision fp32` on CUDA work end to end (a GPU reference to hold the fp16 engine
// against) and let one layer of an fp16 engine run in fp32 (`precision: fp32` in the YAML or a
// plan file); the builder inserts the fp16 ↔ fp32 conversions around it (cuda_backend.cpp).
// Priority 1: a faster fp32 kernel registered later wins by default, and this stays its oracle.
//
// supports() is exact: each entry accepts every node it computes right — any fused activation
// clamp where the op has an epilogue (conv, linear, add, batchnorm), groups, dilation, any
// padding and a fused max-pool on conv — and refuses the rest (a fused activation on an op
// without an epilogue, ranks the CUDA layout does not define), so an fp32 layer is never computed
// wrongly in silence.  A flatten whose input has C % 8 == 0 (or is a vector) is a view, like the
// fp16 one, so a vector keeps the (h, w, c) order and the linear after it permutes its weight
// columns exactly like the fp16 linear (linear_weights_of, shared).
#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/elementwise_fp16.h"
#include "kernels/cuda/reference_fp32.h"
#include "runtime/cuda/cuda_registry.h"
#include "runtime/cuda/launch_kernel.h"

namespace cnnrt::cuda {
namespace {

const float* in(const KernelArgs& args, size_t index = 0) {
  return static_cast<const float*>(args.inputs.at(index));
}
float* out(const KernelArgs& args) { return static_cast<float*>(args.output); }

std::unique_ptr<LayerKernel> make(Launch launch, bool in_place,
                                  std::vector<DeviceArray> buffers = {},
                                  std::function<size_t(int)> workspace = nullptr) {
  return std::make_unique<LaunchKernel>(fp32_nhwc8(), std::move(launch), in_place,
                                        std::move(buffers), std::move(workspace));
}

Fp32Clamp clamp_of(const Node& node) {
  const ActivationBounds bounds = activation_bounds(node);
  return {bounds.lo, bounds.hi};
}

Fp32Map map_of(const Shape& shape, int64_t batch) {
  return {batch, static_cast<int>(shape[0]), static_cast<int>(shape[1]),
          static_cast<int>(shape[2])};
}

float* device_floats(const DeviceArray& array) { return static_cast<float*>(array.get()); }

// --- supports ------------------------------------------------------------------------------

bool layout_defined(const Shape& shape) { return shape.size() == 1 || shape.size() == 3; }
bool is_map(const Shape& shape) { return shape.size() == 3; }

// `inputs` inputs, every shape in the CUDA layout, a fused activation only where allowed.
bool plain(const Node& node, size_t inputs, bool activation_ok) {
  if (node.input_shapes.size() != inputs || !layout_defined(node.output_shape)) return false;
  for (const Shape& shape : node.input_shapes)
    if (!layout_defined(shape)) return false;
  return activation_ok || node.activation == Activation::None;
}

bool pool_attrs_ok(const PoolAttrs& a) {
  return a.kernel_h >= 1 && a.kernel_w >= 1 && a.stride_h >= 1 && a.stride_w >= 1 && a.pad_h >= 0 &&
         a.pad_w >= 0;
}

bool conv_supported(const Node& node) {
  // A fused residual (graph/passes.h) is a second input of the output's shape.
  if (node.op != OpKind::Conv || !std::holds_alternative<ConvAttrs>(node.attrs) ||
      !plain(node, node.fused_residual ? 2 : 1, true) || !is_map(node.input_shapes[0]) ||
      !is_map(node.output_shape) ||
      (node.fused_residual && (node.fused_maxpool || node.input_shapes[1] != node.output_shape)))
    return false;
  const ConvAttrs& a = node.get<ConvAttrs>();
  const Shape& conv_out = node.fused_maxpool ? node.pre_pool_shape : node.output_shape;
  if (!is_map(conv_out) || conv_out[0] != a.out_channels || node.output_shape[0] != a.out_channels)
    return false;
  if (node.fused_maxpool && !pool_attrs_ok(*node.fused_maxpool)) return false;
  return a.groups >= 1 && node.input_shapes[0][0] % a.groups == 0 &&
         a.out_channels % a.groups == 0 && a.kernel_h >= 1 && a.kernel_w >= 1 && a.stride_h >= 1 &&
         a.stride_w >= 1 && a.dilation_h >= 1 && a.dilation_w >= 1 && a.pad_h >= 0 &&
         a.pad_w >= 0 && node.find_param("weight") != nullptr;
}

bool pool_supported(const Node& node) {
  if (!plain(node, 1, false) || !is_map(node.input_shapes[0]) || !is_map(node.output_shape))
    return false;
  if (node.op == OpKind::AdaptiveAvgPool)
    return std::holds_alternative<AdaptivePoolAttrs>(node.attrs);
  return std::holds_alternative<PoolAttrs>(node.attrs) && pool_attrs_ok(node.get<PoolAttrs>());
}

bool concat_supported(const Node& node) {
  if (node.input_shapes.empty() || !plain(node, node.input_shapes.size(), false)) return false;
  for (const Shape& shape : node.input_shapes)
    if (shape.size() != node.output_shape.size() ||
        !std::equal(shape.begin() + 1, shape.end(), node.output_shape.begin() + 1))
      return false;
  return true;
}

bool add_supported(const Node& node) {
  return plain(node, 2, true) && node.input_shapes[0] == node.output_shape &&
         node.input_shapes[1] == node.output_shape;
}

bool flatten_supported(const Node& node) {
  return plain(node, 1, false) && node.output_shape.size() == 1;
}

// --- factories -----------------------------------------------------------------------------

std::unique_ptr<LayerKernel> create_conv(const KernelBuildContext& context) {
  const Node& node = context.node;
  ErrorSite site = node_site(context);
  if (!conv_supported(node)) throw_error(site, "conv_fp32 cannot run this node");
  const ConvAttrs attrs = node.get<ConvAttrs>();
  const Shape input = node.input_shapes[0];
  const Shape conv_out = node.fused_maxpool ? node.pre_pool_shape : node.output_shape;
  const Param* weight = node.find_param("weight");
  const int64_t expected = static_cast<int64_t>(attrs.out_channels) * (input[0] / attrs.groups) *
                           attrs.kernel_h * attrs.kernel_w;
  if (static_cast<int64_t>(weight->value.data.size()) != expected) {
    site.tensor = weight->key;
    throw_error(site, "conv weight has " + std::to_string(weight->value.data.size()) +
                          " values, expected " + std::to_string(expected));
  }
  const Param* bias = node.find_param("bias");
  const bool has_bias = bias != nullptr && !bias->value.data.empty();
  if (has_bias && static_cast<int>(bias->value.data.size()) != attrs.out_channels) {
    site.tensor = bias->key;
    throw_error(site, "conv bias has " + std::to_string(bias->value.data.size()) +
                          " values, expected " + std::to_string(attrs.out_channels));
  }
  std::vector<DeviceArray> buffers;
  buffers.push_back(upload_fp32(weight->value.data.data(),
                                weight->value.data.size()));  // OIHW, as the kernel reads it
  if (has_bias) buffers.push_back(upload_fp32(bias->value.data.data(), bias->value.data.size()));
  const float* weight_d = device_floats(buffers[0]);
  const float* bias_d = has_bias ? device_floats(buffers[1]) : nullptr;
  const Fp32Clamp clamp = clamp_of(node);
  const std::optional<PoolAttrs> pool = node.fused_maxpool;
  const bool has_residual = node.fused_residual;
  const Shape output = node.output_shape;
  // With a fused pool the conv writes its pre-pool map (fp32 NHWC/8) into the workspace.
  const size_t conv_sample_bytes =
      sizeof(float) * static_cast<size_t>(conv_out[1] * conv_out[2] * ((conv_out[0] + 7) / 8 * 8));
  std::function<size_t(int)> workspace;
  if (pool) workspace = [conv_sample_bytes](int batch) { return conv_sample_bytes * batch; };
  return make(
      [=](const KernelArgs& a, cudaStream_t s) {
        Fp32ConvGeometry geometry;
        geometry.input = map_of(input, a.batch);
        geometry.out_channels = static_cast<int>(conv_out[0]);
        geometry.out_height = static_cast<int>(conv_out[1]);
        geometry.out_width = static_cast<int>(conv_out[2]);
        geometry.attrs = attrs;
        float* conv_y = pool ? static_cast<float*>(a.workspace) : out(a);
        const float* residual = has_residual ? static_cast<const float*>(a.inputs.at(1)) : nullptr;
        conv2d_fp32(in(a), conv_y, geometry, weight_d, bias_d, residual, clamp, s);
        if (pool)
          maxpool_fp32(conv_y, out(a), map_of(conv_out, a.batch), *pool,
                       static_cast<int>(output[1]), static_cast<int>(output[2]), s);
      },
      /*in_place=*/false, std::move(buffers), workspace);
}

std::unique_ptr<LayerKernel> create_linear(const KernelBuildContext& context) {
  const HostGemmWeights packed = linear_weights_of(context, "linear_fp32");
  std::vector<DeviceArray> buffers;
  buffers.push_back(upload_fp32(packed.weight.data(), packed.weight.size()));
  buffers.push_back(upload_fp32(packed.bias));
  const float* weight_d = device_floats(buffers[0]);
  const float* bias_d = device_floats(buffers[1]);
  const int in_features = static_cast<int>(context.node.input_shapes[0][0]);
  const int out_features = context.node.get<LinearAttrs>().out_features;
  const int in_stride = packed.cols_pad, out_stride = packed.rows_pad;
  const Fp32Clamp clamp = clamp_of(context.node);
  return make(
      [=](const KernelArgs& a, cudaStream_t s) {
        linear_fp32(in(a), out(a), a.batch, in_features, in_stride, weight_d, bias_d, out_features,
                    out_stride, clamp, s);
      },
      /*in_place=*/false, std::move(buffers));
}

std::unique_ptr<LayerKernel> create_pool(const KernelBuildContext& context) {
  const Node& node = context.node;
  const Shape input = node.input_shapes[0];
  const int oh = static_cast<int>(node.output_shape[1]),
            ow = static_cast<int>(node.output_shape[2]);
  if (node.op == OpKind::AdaptiveAvgPool)
    return make(
        [=](const KernelArgs& a, cudaStream_t s) {
          adaptive_avgpool_fp32(in(a), out(a), map_of(input, a.batch), oh, ow, s);
        },
        false);
  const PoolAttrs attrs = node.get<PoolAttrs>();
  if (node.op == OpKind::MaxPool)
    return make(
        [=](const KernelArgs& a, cudaStream_t s) {
          maxpool_fp32(in(a), out(a), map_of(input, a.batch), attrs, oh, ow, s);
        },
        false);
  return make(
      [=](const KernelArgs& a, cudaStream_t s) {
        avgpool_fp32(in(a), out(a), map_of(input, a.batch), attrs, oh, ow, s);
      },
      false);
}

std::unique_ptr<LayerKernel> create_relu(const KernelBuildContext& context) {
  const Shape shape = context.node.output_shape;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  return make(
      [=](const KernelArgs& a, cudaStream_t s) {
        clamp_fp32(in(a), out(a), fp32_rows(shape, a.batch), {0.0f, kInf}, s);
      },
      /*in_place=*/true);
}

// Standalone relu6 and clip: the clamp interval comes from the op.
std::unique_ptr<LayerKernel> create_clamp(const KernelBuildContext& context) {
  const Shape shape = context.node.output_shape;
  const ActivationBounds bounds =
      context.node.op == OpKind::Clip
          ? ActivationBounds{context.node.get<ClipAttrs>().min, context.node.get<ClipAttrs>().max}
          : ActivationBounds{0.0f, 6.0f};
  return make(
      [=](const KernelArgs& a, cudaStream_t s) {
        clamp_fp32(in(a), out(a), fp32_rows(shape, a.batch), {bounds.lo, bounds.hi}, s);
      },
      /*in_place=*/true);
}

// Dropout, and a flatten that moves nothing: a copy out of place, nothing in place (a view).
std::unique_ptr<LayerKernel> create_identity(const KernelBuildContext& context) {
  const int64_t sample = fp32_rows(context.node.output_shape, 1).elements();
  return make(
      [=](const KernelArgs& a, cudaStream_t s) { copy_fp32(in(a), out(a), sample * a.batch, s); },
      /*in_place=*/true);
}

std::unique_ptr<LayerKernel> create_flatten(const KernelBuildContext& context) {
  const Shape input = context.node.input_shapes[0];
  if (!is_map(input) || input[0] % 8 == 0) return create_identity(context);
  // Compacting away the channel padding cannot run in place in parallel.
  return make([=](const KernelArgs& a,
                  cudaStream_t s) { flatten_fp32(in(a), out(a), map_of(input, a.batch), s); },
              /*in_place=*/false);
}

std::unique_ptr<LayerKernel> create_add(const KernelBuildContext& context) {
  const Shape shape = context.node.output_shape;
  const Fp32Clamp clamp = clamp_of(context.node);
  return make(
      [=](const KernelArgs& a, cudaStream_t s) {
        add_fp32(in(a, 0), in(a, 1), out(a), fp32_rows(shape, a.batch), clamp, s);
      },
      /*in_place=*/true);
}

std::unique_ptr<LayerKernel> create_batchnorm(const KernelBuildContext& context) {
  const Node& node = context.node;
  const Shape shape = node.output_shape;
  const size_t channels = static_cast<size_t>(shape[0]);
  // gamma / beta may be absent (PyTorch affine=False): ones / zeros, as the CPU reference.
  const char* roles[] = {"weight", "bias", "running_mean", "running_var"};
  const float defaults[] = {1.0f, 0.0f, 0.0f, 0.0f};
  std::vector<DeviceArray> buffers;
  for (int i = 0; i < 4; ++i) {
    const Param* param = node.find_param(roles[i]);
    const bool present = param != nullptr && !param->value.data.empty();
    if ((i >= 2 && !present) || (present && param->value.data.size() != channels)) {
      ErrorSite site = node_site(context);
      site.tensor = param != nullptr ? param->key : roles[i];
      throw_error(site, std::string("batchnorm ") + roles[i] + " must have " +
                            std::to_string(channels) + " values");
    }
    const std::vector<float> values =
        present ? std::vector<float>(param->value.data.begin(), param->value.data.end())
                : std::vector<float>(channels, defaults[i]);
    buffers.push_back(upload_fp32(values));
  }
  const float* gamma = device_floats(buffers[0]);
  const float* beta = device_floats(buffers[1]);
  const float* mean = device_floats(buffers[2]);
  const float* var = device_floats(buffers[3]);
  const float eps = node.get<BatchNormAttrs>().eps;
  const Fp32Clamp clamp = clamp_of(node);
  return make(
      [=](const KernelArgs& a, cudaStream_t s) {
        batchnorm_fp32(in(a), out(a), fp32_rows(shape, a.batch), gamma, beta, mean, var, eps, clamp,
                       s);
      },
      /*in_place=*/true, std::move(buffers));
}

std::unique_ptr<LayerKernel> create_concat(const KernelBuildContext& context) {
  std::vector<int> channels;
  for (const Shape& shape : context.node.input_shapes)
    channels.push_back(static_cast<int>(shape[0]));
  const int64_t rows_per_sample = fp32_rows(context.node.output_shape, 1).rows;
  return make(
      [=](const KernelArgs& a, cudaStream_t s) {
        std::vector<const float*> inputs;
        for (size_t i = 0; i < channels.size(); ++i) inputs.push_back(in(a, i));
        concat_fp32(inputs, channels, out(a), rows_per_sample * a.batch, s);
      },
      /*in_place=*/false);
}

std::unique_ptr<LayerKernel> create_softmax(const KernelBuildContext& context) {
  const Shape shape = context.node.output_shape;
  return make([=](const KernelArgs& a,
                  cudaStream_t s) { softmax_fp32(in(a), out(a), fp32_rows(shape, a.batch), s); },
              /*in_place=*/true);
}

std::unique_ptr<LayerKernel> create_lrn(const KernelBuildContext& context) {
  const Shape shape = context.node.output_shape;
  const LRNAttrs attrs = context.node.get<LRNAttrs>();
  return make([=](const KernelArgs& a,
                  cudaStream_t s) { lrn_fp32(in(a), out(a), fp32_rows(shape, a.batch), attrs, s); },
              /*in_place=*/false);
}

}  // namespace

void register_fp32_kernels(KernelRegistry& registry) {
  auto one = [](bool activation_ok) {
    return [activation_ok](const Node& node) { return plain(node, 1, activation_ok); };
  };
  const std::vector<EntryRow> table = {
      {"conv_fp32", OpKind::Conv, conv_supported, create_conv, /*residual=*/true},
      {"linear_fp32", OpKind::Linear, linear_shape_supported, create_linear},
      {"relu_fp32", OpKind::Relu, one(false), create_relu},
      {"relu6_fp32", OpKind::Relu6, one(false), create_clamp},
      {"clip_fp32", OpKind::Clip, one(false), create_clamp},
      {"maxpool_fp32", OpKind::MaxPool, pool_supported, create_pool},
      {"avgpool_fp32", OpKind::AvgPool, pool_supported, create_pool},
      {"adaptive_avgpool_fp32", OpKind::AdaptiveAvgPool, pool_supported, create_pool},
      {"softmax_fp32", OpKind::Softmax, one(false), create_softmax},
      {"add_fp32", OpKind::Add, add_supported, create_add},
      {"concat_fp32", OpKind::Concat, concat_supported, create_concat},
      {"batchnorm_fp32", OpKind::BatchNorm, one(true), create_batchnorm},
      {"lrn_fp32", OpKind::LRN, one(false), create_lrn},
      {"flatten_fp32", OpKind::Flatten, flatten_supported, create_flatten},
      {"dropout_fp32", OpKind::Dropout, one(false), create_identity},
  };
  add_entries(registry, Device::CUDA, Precision::FP32, 1, table);
}

}  // namespace cnnrt::cuda
