// `cnnrt info MODEL [--json FILE]`: the graph as loaded, then as the engine would run it after
// the default passes.  Needs no weights: shapes, params and FLOPs come from the YAML alone (the
// fused view binds placeholder weights, because folding a batchnorm computes new conv weights).
#include <iostream>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "graph/model_loader.h"
#include "graph/ops.h"
#include "graph/passes.h"

namespace cnnrt::apps {
namespace {

struct InfoArgs {
  std::string model;
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
  bind_random_weights(fused, 0);
  const PassStats stats = run_default_passes(fused);

  std::ostream& out = report_stream();
  out << "model " << graph.name << " (" << args.model << ")\n\n" << describe_graph(graph);
  out << "\nafter fusion: " << stats.dropouts_removed << " dropout removed, "
      << stats.identities_removed << " identity pool removed, " << stats.batchnorms_folded
      << " batchnorm folded, " << stats.conv_activations_fused << " conv+activation and "
      << stats.conv_pools_fused << " conv+pool fused, " << stats.linear_activations_fused
      << " linear+activation fused\n\n"
      << describe_graph(fused);
  args.json.write({{"model", graph.name},
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
  args->json.add_option(command);
  return [args] { return run_info(*args); };
}

}  // namespace cnnrt::apps
