// `cnnrt build --allow-prune 2:4` inside the automatic plan (runtime/auto_plan.h): the
// candidates that pruning opens, and the weights the engines that measure them run on.
//
// Pruning is one more per-layer candidate, not a pass before the choice: a conv / linear pruned
// 2:4 by magnitude (graph/passes_prune.h, the pruning of `cnnrt prune --pattern 2:4`) runs on a
// sparse kernel, and its engine's error against the dense model's fp32 reference includes what
// the pruning costs.  So the budget decides, layer by layer as for int8, whether a layer's
// speed-up is worth its pruning, and the end-to-end verification runs with exactly the chosen
// layers pruned.  Only a pruned candidate's own layer is pruned in its engine; the weights are
// pruned once per build (pruned_weights) and swapped in per engine (with_pruned_weights).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "runtime/auto_plan.h"
#include "runtime/engine_impl.h"

namespace cnnrt {

// The sparse kernels that would run `step`'s layer once its weight is pruned 2:4, at the allowed
// precisions, as pruned candidates.  None when 2:4 does not apply to the layer (a grouped conv,
// a layer of another op), its weight is 2:4 already (its sparse kernels are ordinary candidates
// then), the model asks `sparsity: dense` for it, `graph` (the unfused model) has no conv /
// linear of that name, or no sparse kernel of the device serves its shape.
std::vector<Candidate> pruned_candidates(const Step& step, const Graph& graph,
                                         const AutoPlanSettings& settings);

// The weight of each of `layers` (conv / linear layers of `graph`) pruned 2:4 by magnitude, by
// layer name; the graph itself is not copied.
std::map<std::string, HostTensor> pruned_weights(const Graph& graph,
                                                 const std::vector<std::string>& layers);

// Whether `choices` run a layer of `pruned` pruned: a choice that asks sparsity 2:4 of it.
bool prunes_any(const std::map<std::string, HostTensor>& pruned,
                const std::map<std::string, LayerChoice>& choices);

// `graph` with the weight of every layer that `choices` run pruned (prunes_any) replaced by its
// pruned one; every other layer keeps its weights.
Graph with_pruned_weights(const Graph& graph, const std::map<std::string, HostTensor>& pruned,
                          const std::map<std::string, LayerChoice>& choices);

}  // namespace cnnrt
