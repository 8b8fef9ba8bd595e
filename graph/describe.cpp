// describe_graph: the text table behind `cnnrt info`.  One row per node as it stands (after
// passes a fused conv shows "conv+relu+maxpool"), then totals.  FLOPs follow node_flops (see the
// convention at the top of ops.cpp and in docs/FORMAT.md).
#include <algorithm>
#include <cstdio>

#include "graph/model_loader.h"
#include "graph/ops.h"

namespace cnnrt {
namespace {

std::string with_thousands(int64_t value) {
  const std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string op_label(const Node& node) {
  std::string label = op_name(node.op);
  if (node.fused_residual) label += "+add";
  if (node.activation != Activation::None)
    label += std::string("+") + activation_name(node.activation);
  if (node.fused_maxpool) label += "+maxpool";
  return label;
}

std::string pad_right(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

std::string pad_left(std::string text, size_t width) {
  if (text.size() < width) text.insert(0, width - text.size(), ' ');
  return text;
}

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

}  // namespace

std::string describe_graph(const Graph& graph) {
  struct Row {
    std::string name, op, inputs, shape, params, mflops;
  };
  std::vector<Row> rows{{"layer", "op", "inputs", "output", "params", "MFLOPs"}};
  int64_t total_params = 0;
  double total_flops = 0;
  for (const Node& node : graph.nodes) {
    std::string inputs;
    for (const std::string& input : node.inputs) inputs += (inputs.empty() ? "" : ",") + input;
    const int64_t params = node_param_count(node);
    const double flops = node_flops(node);
    total_params += params;
    total_flops += flops;
    rows.push_back({node.name, op_label(node), inputs, shape_to_string(node.output_shape),
                    with_thousands(params), fixed(flops / 1e6, 2)});
  }
  size_t widths[6] = {0, 0, 0, 0, 0, 0};
  for (const Row& row : rows) {
    const std::string* cells[6] = {&row.name,  &row.op,     &row.inputs,
                                   &row.shape, &row.params, &row.mflops};
    for (int i = 0; i < 6; ++i) widths[i] = std::max(widths[i], cells[i]->size());
  }
  std::string out = "model " + graph.name + ": input " + shape_to_string(graph.input.shape) +
                    ", output '" + graph.output + "'\n";
  for (const Row& row : rows) {
    out += pad_right(row.name, widths[0]) + "  " + pad_right(row.op, widths[1]) + "  " +
           pad_right(row.inputs, widths[2]) + "  " + pad_right(row.shape, widths[3]) + "  " +
           pad_left(row.params, widths[4]) + "  " + pad_left(row.mflops, widths[5]) + "\n";
  }
  out += "total: " + with_thousands(total_params) + " params, " + fixed(total_flops / 1e9, 3) +
         " GFLOPs per sample (multiply-add = 2)\n";
  return out;
}

}  // namespace cnnrt
