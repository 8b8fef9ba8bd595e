// The harness's exact int8 mode (harness.h, "int8"): what an int8 registry entry must produce on
// a case, computed with the integer reference kernels (kernels/cpu/int8_ref.h) — the oracle of
// docs/QUANTIZATION.md — and the bit-for-bit comparison.
//
// Scales are realistic, never arbitrary: each input's scale is its own max |x| / 127 (so the
// quantised inputs span the whole int8 range, never all zeros), the output's is the fp32
// reference output's max |y| / 127 (what a minmax calibration of this case would record).  The
// int8 inputs are the fp32 case inputs quantised at those scales — exactly what run_kernel's
// upload (ref::convert_tensor) hands the kernel — and the weights are the case's fp32 weights,
// which the entry quantises per output channel itself (ref::prepare_int8_layer).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>

#include "graph/ops.h"
#include "harness.h"
#include "kernels/cpu/int8_ref.h"
#include "kernels/cpu/reference.h"

namespace cnnrt::harness {
namespace {

float amax_of(const std::vector<float>& values) {
  float amax = 0;
  for (float v : values) amax = std::max(amax, std::fabs(v));
  return amax;
}

const float* param_data(const Node& node, const char* role) {
  const Param* param = node.find_param(role);
  return param != nullptr && !param->value.data.empty() ? param->value.data.data() : nullptr;
}

// Conv or linear prepared as the entries prepare it; output_scale 0 = fp32 output.
ref::Int8Layer prepared_layer(const Node& node, float input_scale, float output_scale) {
  int out_channels = 0;
  int64_t per_channel = 0;
  if (node.op == OpKind::Conv) {
    const ConvAttrs& a = node.get<ConvAttrs>();
    out_channels = a.out_channels;
    per_channel = node.input_shapes[0][0] / a.groups * a.kernel_h * a.kernel_w;
  } else {
    out_channels = node.get<LinearAttrs>().out_features;
    per_channel = shape_elements(node.input_shapes[0]);
  }
  return ref::prepare_int8_layer(param_data(node, "weight"), param_data(node, "bias"), out_channels,
                                 per_channel, input_scale, output_scale, activation_bounds(node));
}

// The conv's output (fused pool included) as float values: dequantised int8 or fp32.
std::vector<float> conv_int8_reference(const Node& node, const std::vector<int8_t>& x, int batch,
                                       float input_scale, float output_scale) {
  const ref::Int8Layer layer = prepared_layer(node, input_scale, output_scale);
  const Shape& in = node.input_shapes[0];
  const Shape& pre = node.fused_maxpool ? node.pre_pool_shape : node.output_shape;
  const int c = static_cast<int>(in[0]), h = static_cast<int>(in[1]), w = static_cast<int>(in[2]);
  const size_t pre_count = static_cast<size_t>(batch * shape_elements(pre));
  const size_t out_count = static_cast<size_t>(batch * shape_elements(node.output_shape));
  const int pc = static_cast<int>(pre[0]), ph = static_cast<int>(pre[1]),
            pw = static_cast<int>(pre[2]);
  if (layer.float_output) {
    std::vector<float> y(pre_count);
    ref::conv2d_int8(x.data(), batch, c, h, w, node.get<ConvAttrs>(), layer, y.data());
    if (!node.fused_maxpool) return y;
    std::vector<float> pooled(out_count);
    ref::maxpool2d(y.data(), batch, pc, ph, pw, *node.fused_maxpool, pooled.data());
    return pooled;
  }
  std::vector<int8_t> y(pre_count);
  ref::conv2d_int8(x.data(), batch, c, h, w, node.get<ConvAttrs>(), layer, y.data());
  if (node.fused_maxpool) {
    std::vector<int8_t> pooled(out_count);
    ref::maxpool2d_int8(y.data(), batch, pc, ph, pw, *node.fused_maxpool, 1.0f, pooled.data());
    y = std::move(pooled);
  }
  return ref::dequantize_values(y, output_scale);
}

std::vector<float> linear_int8_reference(const Node& node, const std::vector<int8_t>& x, int batch,
                                         float input_scale, float output_scale) {
  const ref::Int8Layer layer = prepared_layer(node, input_scale, output_scale);
  const size_t count = static_cast<size_t>(batch) * layer.out_channels;
  const int in_features = static_cast<int>(shape_elements(node.input_shapes[0]));
  if (layer.float_output) {
    std::vector<float> y(count);
    ref::linear_int8(x.data(), batch, in_features, layer, y.data());
    return y;
  }
  std::vector<int8_t> y(count);
  ref::linear_int8(x.data(), batch, in_features, layer, y.data());
  return ref::dequantize_values(y, output_scale);
}

// The int8 ops without weights, on int8 NCHW; the int8 output before dequantisation.
std::vector<int8_t> layer_int8_reference(const Node& node,
                                         const std::vector<std::vector<int8_t>>& x, int batch,
                                         const std::vector<float>& input_scales,
                                         float output_scale) {
  const Shape& in = node.input_shapes.at(0);
  const size_t count = static_cast<size_t>(batch * shape_elements(node.output_shape));
  std::vector<int8_t> y(count);
  const float s_x = input_scales.at(0);
  auto dims = [&](int i) { return static_cast<int>(in.at(i)); };
  switch (node.op) {
    case OpKind::MaxPool:
      ref::maxpool2d_int8(x[0].data(), batch, dims(0), dims(1), dims(2), node.get<PoolAttrs>(),
                          ref::requant_multiplier(s_x, output_scale), y.data());
      break;
    case OpKind::AvgPool:
      ref::avgpool2d_int8(x[0].data(), batch, dims(0), dims(1), dims(2), node.get<PoolAttrs>(), s_x,
                          output_scale, y.data());
      break;
    case OpKind::AdaptiveAvgPool:
      ref::adaptive_avgpool2d_int8(
          x[0].data(), batch, dims(0), dims(1), dims(2), node.get<AdaptivePoolAttrs>().out_h,
          node.get<AdaptivePoolAttrs>().out_w, s_x, output_scale, y.data());
      break;
    case OpKind::Relu:
      ref::activation_int8(
          x[0].data(), static_cast<int64_t>(count), ref::requant_multiplier(s_x, output_scale),
          ref::int8_bounds({0.0f, std::numeric_limits<float>::infinity()}, output_scale), y.data());
      break;
    case OpKind::Add:
      ref::add_int8(x[0].data(), ref::requant_multiplier(s_x, output_scale), x[1].data(),
                    ref::requant_multiplier(input_scales.at(1), output_scale),
                    static_cast<int64_t>(count), y.data());
      // The fused activation: a clamp in the integer domain (docs/QUANTIZATION.md).
      if (node.activation != Activation::None)
        ref::activation_int8(y.data(), static_cast<int64_t>(count), 1.0f,
                             ref::int8_bounds(activation_bounds(node), output_scale), y.data());
      break;
    case OpKind::Concat: {
      std::vector<const int8_t*> pointers;
      std::vector<int> channels;
      std::vector<float> multipliers;
      for (size_t i = 0; i < x.size(); ++i) {
        pointers.push_back(x[i].data());
        channels.push_back(static_cast<int>(node.input_shapes[i][0]));
        multipliers.push_back(ref::requant_multiplier(input_scales[i], output_scale));
      }
      ref::concat_channels_int8(pointers.data(), channels.data(), multipliers.data(),
                                static_cast<int>(x.size()), batch, shape_elements(in) / in[0],
                                y.data());
      break;
    }
    case OpKind::Flatten:
    case OpKind::Dropout:
      y = x[0];  // views: the bytes, at the input's scale
      break;
    default:
      throw std::logic_error(std::string("harness: no int8 reference for op ") + op_name(node.op));
  }
  return y;
}

bool is_view(OpKind op) { return op == OpKind::Flatten || op == OpKind::Dropout; }

}  // namespace

std::vector<bool> int8_output_modes(OpKind op) {
  if (op == OpKind::Conv || op == OpKind::Linear) return {false, true};
  return {false};
}

Int8Expectation int8_expectation(const CaseData& data, const OpCase& op_case, bool float_output) {
  Int8Expectation want;
  want.graph = data.graph;
  const Node& node = data.node();
  want.graph.output = float_output ? node.name : std::string();
  want.calibration.model = want.graph.name;
  want.calibration.method = "minmax";
  auto record = [&](const std::string& tensor, float amax) {
    want.calibration.tensors[tensor] = {amax, ref::scale_from_amax(amax), "minmax"};
  };
  std::vector<std::vector<int8_t>> quantised;
  for (size_t i = 0; i < data.inputs.size(); ++i) {
    const float amax = amax_of(data.inputs[i]);
    want.input_scales.push_back(ref::scale_from_amax(amax));
    record(node.inputs.at(i), amax);
    quantised.push_back(ref::quantize_values(data.inputs[i], want.input_scales.back()));
  }
  // The nodes before the one under test (a flatten feeding a linear) are views of the input.
  for (size_t n = 0; n + 1 < want.graph.nodes.size(); ++n) {
    for (const std::string& input : want.graph.nodes[n].inputs)
      record(input, amax_of(data.inputs[0]));
    record(want.graph.nodes[n].name, amax_of(data.inputs[0]));
  }
  const float output_amax = amax_of(data.expected);
  if (!float_output && !is_view(node.op)) record(node.name, output_amax);
  want.output_scale = float_output       ? 0.0f
                      : is_view(node.op) ? want.input_scales[0]
                                         : ref::scale_from_amax(output_amax);
  const int batch = op_case.batch;
  if (node.op == OpKind::Conv)
    want.expected =
        conv_int8_reference(node, quantised[0], batch, want.input_scales[0], want.output_scale);
  else if (node.op == OpKind::Linear)
    want.expected =
        linear_int8_reference(node, quantised[0], batch, want.input_scales[0], want.output_scale);
  else
    want.expected = ref::dequantize_values(
        layer_int8_reference(node, quantised, batch, want.input_scales, want.output_scale),
        want.output_scale);
  return want;
}

std::string compare_exact(const std::vector<float>& got, const std::vector<float>& expected) {
  if (got.size() != expected.size())
    return "output has " + std::to_string(got.size()) + " values, expected " +
           std::to_string(expected.size());
  if (std::all_of(expected.begin(), expected.end(), [](float v) { return v == 0.0f; }))
    return "the int8 reference output is all zeros: this check could not fail";
  int64_t mismatches = 0;
  size_t first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &expected[i], sizeof(float)) != 0 && mismatches++ == 0) first = i;
  if (mismatches == 0) return "";
  char text[256];
  std::snprintf(text, sizeof text,
                "%lld of %zu values differ from the integer reference (bit for bit); first at "
                "%zu: got %.9g, expected %.9g",
                static_cast<long long>(mismatches), got.size(), first,
                static_cast<double>(got[first]), static_cast<double>(expected[first]));
  return text;
}

}  // namespace cnnrt::harness
