// Pruning as a candidate of the automatic plan (auto_plan_prune.h); the pruning itself is
// graph/passes_prune.h's, the same as `cnnrt prune --pattern 2:4`.
#include "runtime/auto_plan_prune.h"

#include "graph/passes_prune.h"
#include "graph/passes_sparsity.h"
#include "runtime/kernel.h"

namespace cnnrt {

std::vector<Candidate> pruned_candidates(const Step& step, const Graph& graph,
                                         const AutoPlanSettings& settings) {
  const Node* node = step.node;
  if (node == nullptr || node->weight_2_4 || node->sparsity_request == "dense" ||
      !sparsity::can_be_2_4(*node))
    return {};
  // The weight is pruned in the unfused model, by YAML layer name: a fused conv keeps its name,
  // and BN folding scales whole output channels, so the folded weight keeps the 2:4 zeros.
  const Node* source = graph.find(step.name);
  if (source == nullptr || source->op != node->op || !sparsity::can_be_2_4(*source)) return {};
  // The registry offers sparse kernels only for a 2:4 weight (KernelRegistry::add); a copy that
  // says so asks which of them serve this shape, the weight's values not mattering to supports().
  Node probe = *node;
  probe.weight_2_4 = true;
  std::vector<Precision> precisions = settings.precisions;
  if (precisions.empty()) precisions = {Precision::FP32, Precision::FP16, Precision::INT8};
  std::vector<Candidate> out;
  for (Precision precision : precisions)
    for (const KernelEntry* entry :
         KernelRegistry::instance().candidates(probe, settings.device, precision)) {
      if (!entry->sparse_2_4 || entry->baseline) continue;  // dense ones are candidates already
      Candidate c;
      c.kernel = entry->name;
      c.precision = precision;
      c.pruned = true;
      out.push_back(c);
    }
  return out;
}

std::map<std::string, HostTensor> pruned_weights(const Graph& graph,
                                                 const std::vector<std::string>& layers) {
  // Only the pruned layers are copied (AlexNet's weights are 244 MB): prune_2_4 needs their
  // nodes (weight and shapes), not the rest of the model.
  Graph only;
  only.name = graph.name;
  only.source_file = graph.source_file;
  for (const std::string& layer : layers) {
    const Node* node = graph.find(layer);
    if (node == nullptr)
      throw Error("auto plan: layer '" + layer + "' to prune is not in the model");
    only.nodes.push_back(*node);
  }
  prune_2_4(only, layers);
  std::map<std::string, HostTensor> out;
  for (Node& node : only.nodes) out[node.name] = std::move(node.find_param("weight")->value);
  return out;
}

bool prunes_any(const std::map<std::string, HostTensor>& pruned,
                const std::map<std::string, LayerChoice>& choices) {
  for (const auto& [layer, choice] : choices)
    if (choice.sparsity == "2:4" && pruned.count(layer) != 0) return true;
  return false;
}

Graph with_pruned_weights(const Graph& graph, const std::map<std::string, HostTensor>& pruned,
                          const std::map<std::string, LayerChoice>& choices) {
  Graph out = graph;
  for (const auto& [layer, choice] : choices) {
    const auto weight = pruned.find(layer);
    if (choice.sparsity != "2:4" || weight == pruned.end()) continue;
    out.find(layer)->find_param("weight")->value = weight->second;
  }
  return out;
}

std::vector<std::string> AutoPlan::pruned_layers() const {
  std::vector<std::string> out;
  for (const LayerCandidates& layer : layers)
    if (layer.chosen >= 0 && layer.candidates[layer.chosen].pruned) out.push_back(layer.layer);
  return out;
}

Graph planned_model(const Graph& graph, const AutoPlan& plan) {
  return with_pruned_weights(graph, plan.pruned_weights, plan.choices());
}

}  // namespace cnnrt
