// `cnnrt info MODEL`: the graph as loaded, then as the engine would run it after the default
// passes.  Needs no weights: shapes, params and FLOPs come from the YAML alone (the fused view
// binds placeholder weights, because folding a batchnorm computes new conv weights).
#include <iostream>

#include "apps/common/cmd_util.h"
#include "graph/model_loader.h"
#include "graph/passes.h"

namespace cnnrt::apps {

int cmd_info(const Arguments& arguments) {
  const Args args = parse_command_args("info", {}, arguments, 1, 1);
  const Graph graph = load_model(args.positional()[0]);
  std::cout << "model " << graph.name << " (" << args.positional()[0] << ")\n\n"
            << describe_graph(graph);

  Graph fused = graph;
  bind_random_weights(fused, 0);
  const PassStats stats = run_default_passes(fused);
  std::cout << "\nafter fusion: " << stats.dropouts_removed << " dropout removed, "
            << stats.identities_removed << " identity pool removed, " << stats.batchnorms_folded
            << " batchnorm folded, " << stats.conv_activations_fused << " conv+activation and "
            << stats.conv_pools_fused << " conv+pool fused, " << stats.linear_activations_fused
            << " linear+activation fused\n\n"
            << describe_graph(fused);
  return 0;
}

}  // namespace cnnrt::apps
