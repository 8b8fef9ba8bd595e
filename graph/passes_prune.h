// Pruning a model's weights (what `cnnrt prune` does before it measures and writes them):
//   prune_2_4        magnitude 2:4 along the input channels (graph/passes_sparsity.h's groups)
//   prune_channels   per layer, the output channels of smallest L1 norm zeroed (weights and
//                    bias), so that the build's channel compaction (graph/passes_compact.h)
//                    removes them with the matching input channels of their consumers.
// Both work on the loaded (unfused) graph, in place, on YAML layer names, and keep every tensor
// shape: the weight file they lead to fits the same model YAML.  check_channels_removable then
// proves on a fused copy that every pruned channel really goes away at build, else it is an
// Error naming the layer and the reason (e.g. the layer feeds a residual add).
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"

namespace cnnrt {

struct PrunedLayer {
  std::string layer;
  int64_t weights = 0, kept_weights = 0;  // non-zero weights before and after
  int channels = 0, kept_channels = 0;    // output channels (channel pruning; else equal)
  double kept_fraction() const {
    return weights > 0 ? static_cast<double>(kept_weights) / static_cast<double>(weights) : 1.0;
  }
};

// The layers a request names, checked: each must exist and be a conv / linear that the pruning
// applies to (`what` names it in errors).  Empty `names`: every layer it applies to, except (for
// channels) the one whose output is the graph output.
std::vector<std::string> layers_to_prune(const Graph& graph, const std::vector<std::string>& names,
                                         bool channels);

std::vector<PrunedLayer> prune_2_4(Graph& graph, const std::vector<std::string>& layers);
// keep_fraction in (0, 1): the share of output channels kept per layer (rounded to nearest); a
// layer that would keep none is an Error.
std::vector<PrunedLayer> prune_channels(Graph& graph, const std::vector<std::string>& layers,
                                        double keep_fraction);
// Runs the default passes and the compaction on a copy; an Error naming the first pruned layer
// whose zeroed channels the build would keep, with the reason.
void check_channels_removable(const Graph& graph, const std::vector<PrunedLayer>& pruned);

}  // namespace cnnrt
