// Pruning (passes_prune.h).  Magnitude is the criterion for both kinds: it needs no data, and
// the error it causes is measured afterwards on a calibration set by `cnnrt prune`.
#include "graph/passes_prune.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "cnnrt/error.h"
#include "graph/passes.h"
#include "graph/passes_compact.h"
#include "graph/passes_sparsity.h"

namespace cnnrt {
namespace {

int64_t nonzeros(const HostVector<float>& values) {
  return std::count_if(values.begin(), values.end(), [](float v) { return v != 0.0f; });
}

std::string valid_names(const Graph& graph, bool channels) {
  std::string names;
  for (const Node& node : graph.nodes)
    if (channels ? (node.op == OpKind::Conv || node.op == OpKind::Linear)
                 : sparsity::can_be_2_4(node))
      names += (names.empty() ? "" : ", ") + node.name;
  return names;
}

}  // namespace

std::vector<std::string> layers_to_prune(const Graph& graph, const std::vector<std::string>& names,
                                         bool channels) {
  auto applies = [&](const Node& node) {
    if (!channels) return sparsity::can_be_2_4(node);
    return (node.op == OpKind::Conv && node.get<ConvAttrs>().groups == 1) ||
           node.op == OpKind::Linear;
  };
  std::vector<std::string> layers;
  if (names.empty()) {
    for (const Node& node : graph.nodes)
      if (applies(node) && !(channels && node.name == graph.output)) layers.push_back(node.name);
    if (layers.empty()) throw Error("model " + graph.name + " has no layer to prune");
    return layers;
  }
  for (const std::string& name : names) {
    const Node* node = graph.find(name);
    if (node == nullptr)
      throw Error("layer '" + name + "' is not in model " + graph.name +
                  " (layers it can prune: " + valid_names(graph, channels) + ")");
    if (!applies(*node))
      throw Error("layer '" + name + "': " + op_name(node->op) +
                  (channels ? " has no output channels to prune (conv with groups == 1 and "
                              "linear only)"
                            : " cannot be 2:4 (conv with groups == 1 and linear only)"));
    layers.push_back(name);
  }
  return layers;
}

std::vector<PrunedLayer> prune_2_4(Graph& graph, const std::vector<std::string>& layers) {
  std::vector<PrunedLayer> pruned;
  for (const std::string& name : layers) {
    Node& node = *graph.find(name);
    HostVector<float>& weight = node.find_param("weight")->value.data;
    PrunedLayer row{name, nonzeros(weight), 0, 0, 0};
    sparsity::prune_magnitude(weight.data(), sparsity::weight_shape_of(node));
    row.kept_weights = nonzeros(weight);
    row.channels = row.kept_channels = sparsity::weight_shape_of(node).rows;
    pruned.push_back(row);
  }
  return pruned;
}

std::vector<PrunedLayer> prune_channels(Graph& graph, const std::vector<std::string>& layers,
                                        double keep_fraction) {
  if (!(keep_fraction > 0.0 && keep_fraction < 1.0))
    throw Error("--channels " + std::to_string(keep_fraction) +
                ": the share of channels kept must be in (0, 1)");
  std::vector<PrunedLayer> pruned;
  for (const std::string& name : layers) {
    Node& node = *graph.find(name);
    HostTensor& weight = node.find_param("weight")->value;
    const int rows = static_cast<int>(weight.shape[0]);
    const int64_t per_row = weight.elements() / rows;
    const int keep = static_cast<int>(std::lround(rows * keep_fraction));
    if (keep < 1)
      throw Error("layer '" + name + "': keeping " + std::to_string(keep_fraction) + " of " +
                  std::to_string(rows) + " output channels would remove every channel");
    PrunedLayer row{name, nonzeros(weight.data), 0, rows, keep};
    std::vector<double> l1(static_cast<size_t>(rows), 0.0);
    for (int o = 0; o < rows; ++o)
      for (int64_t k = 0; k < per_row; ++k) l1[o] += std::fabs(weight.data[o * per_row + k]);
    std::vector<int> order(static_cast<size_t>(rows));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l1[a] < l1[b]; });
    Param* bias = node.find_param("bias");
    for (int i = 0; i < rows - keep; ++i) {
      const int o = order[i];
      std::fill_n(weight.data.begin() + o * per_row, per_row, 0.0f);
      // A zero bias makes the removed channel carry 0, which folds into any consumer.
      if (bias != nullptr) bias->value.data[o] = 0.0f;
    }
    row.kept_weights = nonzeros(weight.data);
    pruned.push_back(row);
  }
  return pruned;
}

void check_channels_removable(const Graph& graph, const std::vector<PrunedLayer>& pruned) {
  Graph fused = graph;
  run_default_passes(fused);
  const CompactionReport report = compact_pruned_channels(fused);
  for (const PrunedLayer& row : pruned) {
    const Node* node = fused.find(row.layer);
    // A layer fused into another (none for conv / linear heads) or compacted is fine.
    if (node == nullptr) continue;
    for (const std::string& kept : report.kept)
      if (kept.rfind(row.layer + ": ", 0) == 0)
        throw Error("layer '" + row.layer + "': its pruned channels cannot be removed at build: " +
                    kept.substr(kept.find("kept: ") + 6) +
                    " (prune both sides of a residual add alike, or leave the layer out with "
                    "--layers)");
  }
}

}  // namespace cnnrt
