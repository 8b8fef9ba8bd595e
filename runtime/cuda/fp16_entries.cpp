// Registry entries of the fp16 non-GEMM ops: pools, relu, dropout, flatten, batchnorm, add,
// concat, softmax, LRN.
//
// One table of small factories instead of a class per op: each factory reads the node once
// (shapes, attributes, weights such as batchnorm's folded affine) and returns a LaunchKernel
// (launch_kernel.h) whose closure only launches.  Every closure honours the backend layout
// (cuda_registry.h).  relu, dropout and the flatten that is a view declare themselves in place (the
// planner may give them output == inputs[0]); the flatten that drops channel padding cannot compact
// in place in parallel, so it does not.
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/concat_fp16.h"
#include "kernels/cuda/elementwise_fp16.h"
#include "kernels/cuda/lrn_fp16.h"
#include "kernels/cuda/pool_fp16.h"
#include "kernels/cuda/softmax_fp16.h"
#include "runtime/cuda/cuda_registry.h"
#include "runtime/cuda/launch_kernel.h"

namespace cnnrt::cuda {
namespace {

constexpr size_t kHalfBytes = 2;

bool layout_defined(const Shape& shape) { return shape.size() == 1 || shape.size() == 3; }

// Shapes the layout defines, the expected input count, no fused activation unless allowed — and
// then only ReLU, the one epilogue these kernels implement (relu6 / clip: the fp32 family).
bool plain_node(const Node& node, size_t inputs, bool activation_ok = false) {
  if (node.input_shapes.size() != inputs || !layout_defined(node.output_shape)) return false;
  for (const Shape& shape : node.input_shapes)
    if (!layout_defined(shape)) return false;
  return (activation_ok && relu_or_none(node)) || node.activation == Activation::None;
}

bool feature_map_node(const Node& node) {
  return plain_node(node, 1) && node.input_shapes[0].size() == 3 && node.output_shape.size() == 3;
}

ErrorSite site_of(const KernelBuildContext& context) {
  ErrorSite site;
  site.file = context.graph.source_file;
  site.line = context.node.line;
  site.column = context.node.column;
  site.layer = context.node.name;
  return site;
}

std::unique_ptr<LayerKernel> make(Launch launch, bool in_place = false) {
  return std::make_unique<LaunchKernel>(fp16_nhwc8(), std::move(launch), in_place);
}

// --- factories -----------------------------------------------------------------------------

std::unique_ptr<LayerKernel> create_pool(const KernelBuildContext& context) {
  const Node& node = context.node;
  const Shape& in = node.input_shapes[0];
  const int c = static_cast<int>(in[0]), h = static_cast<int>(in[1]), w = static_cast<int>(in[2]);
  const int oh = static_cast<int>(node.output_shape[1]),
            ow = static_cast<int>(node.output_shape[2]);
  if (node.op == OpKind::AdaptiveAvgPool)
    return make([=](const KernelArgs& a, cudaStream_t s) {
      adaptive_avgpool_fp16(a.inputs.at(0), a.output, a.batch, c, h, w, oh, ow, s);
    });
  const PoolAttrs attrs = node.get<PoolAttrs>();
  if (node.op == OpKind::MaxPool)
    return make([=](const KernelArgs& a, cudaStream_t s) {
      maxpool_fp16(a.inputs.at(0), a.output, a.batch, c, h, w, attrs, oh, ow, s);
    });
  return make([=](const KernelArgs& a, cudaStream_t s) {
    avgpool_fp16(a.inputs.at(0), a.output, a.batch, c, h, w, attrs, oh, ow, s);
  });
}

std::unique_ptr<LayerKernel> create_relu(const KernelBuildContext& context) {
  const int64_t sample = nhwc_view(context.node.output_shape).sample_elements();
  return make([=](const KernelArgs& a,
                  cudaStream_t s) { relu_fp16(a.inputs.at(0), a.output, sample * a.batch, s); },
              /*in_place=*/true);
}

std::unique_ptr<LayerKernel> create_identity(const KernelBuildContext& context) {
  const size_t sample_bytes = nhwc_view(context.node.output_shape).sample_elements() * kHalfBytes;
  // In place it copies nothing (copy_fp16 skips x == y): a view.
  return make(
      [=](const KernelArgs& a, cudaStream_t s) {
        copy_fp16(a.inputs.at(0), a.output, sample_bytes * a.batch, s);
      },
      /*in_place=*/true);
}

std::unique_ptr<LayerKernel> create_flatten(const KernelBuildContext& context) {
  const Shape& in = context.node.input_shapes[0];
  // A flatten of [F] or of a [C, H, W] with C % 8 == 0 is a view in this layout.
  if (in.size() != 3 || in[0] % 8 == 0) return create_identity(context);
  const int c = static_cast<int>(in[0]), h = static_cast<int>(in[1]), w = static_cast<int>(in[2]);
  // Compacting away the channel padding cannot run in place in parallel: not in place.
  return make([=](const KernelArgs& a, cudaStream_t s) {
    flatten_nhwc_fp16(a.inputs.at(0), a.output, a.batch, c, h, w, s);
  });
}

std::unique_ptr<LayerKernel> create_batchnorm(const KernelBuildContext& context) {
  const Node& node = context.node;
  const NhwcView view = nhwc_view(node.input_shapes[0]);
  const float eps = node.get<BatchNormAttrs>().eps;
  const char* roles[] = {"weight", "bias", "running_mean", "running_var"};
  const HostVector<float>* values[4];
  for (int i = 0; i < 4; ++i) {
    const Param* param = node.find_param(roles[i]);
    if (param == nullptr || static_cast<int>(param->value.data.size()) != view.channels) {
      ErrorSite site = site_of(context);
      site.tensor = param != nullptr ? param->key : roles[i];
      throw_error(site, std::string("batchnorm ") + roles[i] + " must have " +
                            std::to_string(view.channels) + " values");
    }
    values[i] = &param->value.data;
  }
  // Folded once: y = x * scale + shift; padding channels get 0 * x + 0 = 0.
  std::vector<float> scale(view.channel_stride, 0.0f), shift(view.channel_stride, 0.0f);
  for (int c = 0; c < view.channels; ++c) {
    const double s = (*values[0])[c] / std::sqrt(static_cast<double>((*values[3])[c]) + eps);
    scale[c] = static_cast<float>(s);
    shift[c] = static_cast<float>((*values[1])[c] - (*values[2])[c] * s);
  }
  std::vector<DeviceArray> buffers;
  buffers.push_back(upload_fp32(scale));
  buffers.push_back(upload_fp32(shift));
  const auto* scale_d = static_cast<const float*>(buffers[0].get());
  const auto* shift_d = static_cast<const float*>(buffers[1].get());
  const bool relu = node.activation == Activation::Relu;
  const int64_t pixels = view.pixels;
  const int stride = view.channel_stride;
  return std::make_unique<LaunchKernel>(
      fp16_nhwc8(),
      [=](const KernelArgs& a, cudaStream_t s) {
        channel_affine_fp16(a.inputs.at(0), a.output, pixels * a.batch, stride, scale_d, shift_d,
                            relu, s);
      },
      /*in_place=*/false, std::move(buffers));
}

std::unique_ptr<LayerKernel> create_add(const KernelBuildContext& context) {
  const int64_t sample = nhwc_view(context.node.output_shape).sample_elements();
  const bool relu = context.node.activation == Activation::Relu;
  return make([=](const KernelArgs& a, cudaStream_t s) {
    add_fp16(a.inputs.at(0), a.inputs.at(1), a.output, sample * a.batch, relu, s);
  });
}

std::unique_ptr<LayerKernel> create_concat(const KernelBuildContext& context) {
  std::vector<int> channels;
  for (const Shape& shape : context.node.input_shapes)
    channels.push_back(static_cast<int>(shape[0]));
  const int64_t pixels = nhwc_view(context.node.output_shape).pixels;
  return make([=](const KernelArgs& a, cudaStream_t s) {
    concat_channels_fp16(a.inputs, channels, a.output, pixels * a.batch, s);
  });
}

std::unique_ptr<LayerKernel> create_softmax(const KernelBuildContext& context) {
  const NhwcView view = nhwc_view(context.node.output_shape);
  return make([=](const KernelArgs& a, cudaStream_t s) {
    softmax_fp16(a.inputs.at(0), a.output, view.pixels * a.batch, view.channels,
                 view.channel_stride, s);
  });
}

std::unique_ptr<LayerKernel> create_lrn(const KernelBuildContext& context) {
  const NhwcView view = nhwc_view(context.node.output_shape);
  const LRNAttrs attrs = context.node.get<LRNAttrs>();
  return make([=](const KernelArgs& a, cudaStream_t s) {
    lrn_fp16(a.inputs.at(0), a.output, view.pixels * a.batch, view.channels, view.channel_stride,
             attrs, s);
  });
}

// --- supports ------------------------------------------------------------------------------

bool concat_supported(const Node& node) {
  if (node.input_shapes.size() < 2 || node.activation != Activation::None ||
      !layout_defined(node.output_shape))
    return false;
  for (const Shape& shape : node.input_shapes)
    if (shape.size() != node.output_shape.size()) return false;
  return true;
}

}  // namespace

void register_fp16_layer_kernels(KernelRegistry& registry) {
  const auto one_input = [](const Node& node) { return plain_node(node, 1); };
  const std::vector<EntryRow> table = {
      {"maxpool_fp16", OpKind::MaxPool, feature_map_node, create_pool},
      {"avgpool_fp16", OpKind::AvgPool, feature_map_node, create_pool},
      {"adaptive_avgpool_fp16", OpKind::AdaptiveAvgPool, feature_map_node, create_pool},
      {"relu_fp16", OpKind::Relu, one_input, create_relu},
      {"dropout_fp16", OpKind::Dropout, one_input, create_identity},
      {"flatten_fp16", OpKind::Flatten, one_input, create_flatten},
      {"batchnorm_fp16", OpKind::BatchNorm,
       [](const Node& node) { return plain_node(node, 1, true); }, create_batchnorm},
      {"add_fp16", OpKind::Add, [](const Node& node) { return plain_node(node, 2, true); },
       create_add},
      {"concat_fp16", OpKind::Concat, concat_supported, create_concat},
      {"softmax_fp16", OpKind::Softmax, one_input, create_softmax},
      {"lrn_fp16", OpKind::LRN, one_input, create_lrn},
  };
  add_entries(registry, Device::CUDA, Precision::FP16, 10, table);
}

}  // namespace cnnrt::cuda
