// `cnnrt info MODEL [--weights W] [--json FILE]`: the graph as loaded, then as the engine would
// run it after the default passes.  Needs no weights: shapes, params and FLOPs come from the YAML
// alone (the fused view binds placeholder weights, because folding a batchnorm computes new conv
// weights).  With --weights W the fused view uses those weights, so it also shows what the
// build's channel compaction removes from a pruned model (graph/passes_compact.h) and which
// layers have 2:4 weights (graph/passes_sparsity.h).
#include <iostream>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "graph/model_loader.h"
#include "graph/ops.h"
#include "graph/passes.h"
#include "graph/passes_compact.h"
#include "graph/passes_sparsity.h"

namespace cnnrt::apps {
namespace {

struct InfoArgs {
  std::string model, weights;
  JsonOutput json;
};

nlohmann::json graph_json(const Graph& graph) {
  nlohmann::json layers = nlohmann::json::array();
  int64_t params = 0;
  double flops = 0;
  for (const Node& node : graph.nodes) {
    nlohmann::json layer = {{"name", node.name},
                            {"op", op_name(node.op)},
                            {"inputs", node.inputs},
                            {"output_shape", node.output_shape},
                            {"params", node_param_count(node)},
                            {"flops", node_flops(node)}};
    if (node.activation != Activation::None) layer["activation"] = activation_name(node.activation);
    if (node.fused_maxpool) layer["fused_maxpool"] = true;
    if (!node.source_layers.empty()) layer["sources"] = node.source_layers;
    params += node_param_count(node);
    flops += node_flops(node);
    layers.push_back(std::move(layer));
  }
  return {{"layers", layers}, {"params", params}, {"flops_per_sample", flops}};
}

int run_info(const InfoArgs& args) {
  args.json.prepare();
  const Graph graph = load_model(args.model);
  Graph fused = graph;
  if (args.weights.empty())
    bind_random_weights(fused, 0);
  else
    bind_weights_from_args(fused, args.model, WeightArgs{args.weights, ""});
  const PassStats stats = run_default_passes(fused);
  CompactionReport compaction;
  std::vector<std::string> sparse_layers;
  if (!args.weights.empty()) {
    compaction = compact_pruned_channels(fused);
    sparsity::mark_2_4_weights(fused);
    for (const Node& node : fused.nodes)
      if (node.weight_2_4) sparse_layers.push_back(node.name);
  }

  std::ostream& out = report_stream();
  out << "model " << graph.name << " (" << args.model << ")\n\n" << describe_graph(graph);
  out << "\nafter fusion: " << stats.dropouts_removed << " dropout removed, "
      << stats.identities_removed << " identity pool removed, " << stats.batchnorms_folded
      << " batchnorm folded, " << stats.conv_activations_fused << " conv+activation and "
      << stats.conv_pools_fused << " conv+pool fused, " << stats.linear_activations_fused
      << " linear+activation fused\n\n"
      << describe_graph(fused);
  if (!args.weights.empty()) {
    out << "\ncompaction (all-zero output channels): "
        << (compaction.empty() ? "none\n" : "\n" + compaction.to_text());
    out << "2:4 weights (sparse kernels offered):";
    for (const std::string& name : sparse_layers) out << " " << name;
    out << (sparse_layers.empty() ? " none\n" : "\n");
  }
  std::vector<std::string> compaction_lines;
  for (const CompactedLayer& layer : compaction.layers)
    compaction_lines.push_back(layer.layer + ": " + std::to_string(layer.channels_before) + " -> " +
                               std::to_string(layer.channels_after));
  args.json.write({{"model", graph.name},
                   {"compacted", compaction_lines},
                   {"compaction_kept", compaction.kept},
                   {"sparse_2_4", sparse_layers},
                   {"file", args.model},
                   {"input_shape", graph.input.shape},
                   {"output", graph.output},
                   {"loaded", graph_json(graph)},
                   {"fused", graph_json(fused)},
                   {"passes",
                    {{"dropouts_removed", stats.dropouts_removed},
                     {"identities_removed", stats.identities_removed},
                     {"batchnorms_folded", stats.batchnorms_folded},
                     {"conv_activations_fused", stats.conv_activations_fused},
                     {"conv_pools_fused", stats.conv_pools_fused},
                     {"linear_activations_fused", stats.linear_activations_fused}}}});
  return 0;
}

}  // namespace

RunCommand add_info(CLI::App& command) {
  auto args = std::make_shared<InfoArgs>();
  add_model_argument(command, args->model);
  command
      .add_option("--weights", args->weights, "show compaction and 2:4 layers for these weights")
      ->type_name("W.safetensors")
      ->check(no_stdin());
  args->json.add_option(command);
  return [args] { return run_info(*args); };
}

}  // namespace cnnrt::apps
