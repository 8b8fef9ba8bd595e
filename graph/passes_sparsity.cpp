// 2:4 structure of weights (passes_sparsity.h).  The rule lives in graph/ because both the
// builder (which layers may run sparse kernels) and `cnnrt prune` (which makes the structure)
// need it, and graph/ is the lowest layer both see; the compressed format is the kernels'.
#include "graph/passes_sparsity.h"

#include <cmath>

#include "cnnrt/error.h"

namespace cnnrt::sparsity {
namespace {

float element(const float* weight, const WeightShape& s, int row, int tap, int channel) {
  if (channel >= s.channels) return 0.0f;  // the zero padding of the last group
  return weight[(static_cast<int64_t>(row) * s.channels + channel) * s.taps + tap];
}

ErrorSite site_of(const Graph& graph, const Node& node) {
  return {graph.source_file, node.line, node.column, node.name, "weight"};
}

}  // namespace

bool can_be_2_4(const Node& node) {
  if (node.input_shapes.empty()) return false;
  if (node.op == OpKind::Conv)
    return node.get<ConvAttrs>().groups == 1 && node.input_shapes[0].size() == 3;
  return node.op == OpKind::Linear;
}

WeightShape weight_shape_of(const Node& node) {
  if (!can_be_2_4(node))
    throw Error(node.name +
                ": 2:4 sparsity applies to conv layers with groups == 1 and linear "
                "layers only");
  WeightShape s;
  if (node.op == OpKind::Conv) {
    const ConvAttrs& a = node.get<ConvAttrs>();
    s.rows = a.out_channels;
    s.channels = static_cast<int>(node.input_shapes[0][0]);
    s.taps = a.kernel_h * a.kernel_w;
  } else {
    s.rows = node.get<LinearAttrs>().out_features;
    s.channels = static_cast<int>(shape_elements(node.input_shapes[0]));
  }
  return s;
}

std::string first_violation(const float* weight, const WeightShape& s) {
  if (s.rows < 1 || s.channels < 1 || s.taps < 1) throw Error("2:4: invalid weight shape");
  for (int row = 0; row < s.rows; ++row)
    for (int tap = 0; tap < s.taps; ++tap)
      for (int first = 0; first < s.channels; first += 4) {
        int nonzeros = 0;
        for (int i = 0; i < 4; ++i) nonzeros += element(weight, s, row, tap, first + i) != 0.0f;
        if (nonzeros > 2)
          return "output channel " + std::to_string(row) + ", tap " + std::to_string(tap) +
                 ", input channels " + std::to_string(first) + ".." + std::to_string(first + 3) +
                 " hold " + std::to_string(nonzeros) + " non-zeros (2:4 allows 2 in every 4)";
      }
  return "";
}

std::string node_violation(const Node& node) {
  if (!can_be_2_4(node))
    return std::string(op_name(node.op)) +
           (node.op == OpKind::Conv ? " with groups " + std::to_string(node.get<ConvAttrs>().groups)
                                    : std::string()) +
           " cannot be 2:4 (conv with groups == 1 and linear only)";
  const WeightShape s = weight_shape_of(node);
  const Param* weight = node.find_param("weight");
  if (weight == nullptr ||
      weight->value.data.size() != static_cast<size_t>(s.rows) * s.channels * s.taps)
    return "the weight is not loaded";
  return first_violation(weight->value.data.data(), s);
}

void prune_magnitude(float* weight, const WeightShape& s) {
  for (int row = 0; row < s.rows; ++row)
    for (int tap = 0; tap < s.taps; ++tap)
      for (int first = 0; first < s.channels; first += 4) {
        const int count = std::min(4, s.channels - first);
        // The two largest magnitudes stay; strict comparisons keep the lower index on a tie.
        int best = -1, second = -1;
        for (int i = 0; i < count; ++i) {
          const float m = std::fabs(element(weight, s, row, tap, first + i));
          if (best < 0 || m > std::fabs(element(weight, s, row, tap, first + best))) {
            second = best;
            best = i;
          } else if (second < 0 || m > std::fabs(element(weight, s, row, tap, first + second))) {
            second = i;
          }
        }
        for (int i = 0; i < count; ++i)
          if (i != best && i != second)
            weight[(static_cast<int64_t>(row) * s.channels + first + i) * s.taps + tap] = 0.0f;
      }
}

int mark_2_4_weights(Graph& graph) {
  int marked = 0;
  for (Node& node : graph.nodes) {
    if (node.op != OpKind::Conv && node.op != OpKind::Linear) continue;
    const std::string violation = node_violation(node);
    node.weight_2_4 = violation.empty();
    marked += node.weight_2_4 ? 1 : 0;
    if (node.sparsity_request == "2:4" && !node.weight_2_4)
      throw_error(site_of(graph, node), "asks for sparsity 2:4 but " + violation);
  }
  return marked;
}

}  // namespace cnnrt::sparsity
