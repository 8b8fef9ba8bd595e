// Model loading: YAML → Graph (validated, shapes inferred), then weights bound to nodes.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "graph/ir.h"
#include "graph/ops.h"  // infer_shapes

namespace cnnrt {

// Parses the YAML model, checks every key (unknown keys are errors naming the key, the layer
// and the line), resolves inputs, infers shapes.  Params get their keys and expected shapes
// but no values.  Throws Error with file:line:col.
Graph load_model(const std::string& yaml_path);
// Same from text (source_name is used in messages and to resolve relative paths).
Graph parse_model(const std::string& yaml_text, const std::string& source_name);

// Fills every param's value from the weight file; a missing tensor or a shape mismatch is an
// Error naming the layer, the tensor and both shapes.  Extra tensors in the file are ignored
// (a state_dict may hold training-only buffers such as num_batches_tracked).  The tensors are
// moved out of `weights` (pass a temporary, or a copy to keep yours).
void bind_weights(Graph& graph, std::map<std::string, HostTensor> weights,
                  const std::string& weights_path);
void load_weights(Graph& graph, const std::string& weights_path);

// The class labels file a model names (Graph::labels_file, already resolved against the YAML's
// folder): one label per line, a trailing '\r' removed.  Error naming the file when it cannot
// be read or is a directory.
std::vector<std::string> read_labels(const std::string& path);
// Same, and the file must have exactly `classes` lines (plus at most one empty last line);
// otherwise an Error naming the file and both counts.  What the engine should bind (a label
// file with a "background" line first would shift every label by one, silently).
std::vector<std::string> read_labels(const std::string& path, int64_t classes);

// Deterministic PyTorch-style initial weights for every param of the graph (conv/linear:
// kaiming-uniform(a=sqrt(5)) weights, uniform(±1/sqrt(fan_in)) biases; batchnorm: weight 1,
// bias 0, mean 0, var 1 perturbed slightly so folding is exercised).  Keyed by param key.
std::map<std::string, HostTensor> init_weights(const Graph& graph, uint64_t seed);

// Binds init_weights(graph, seed) to the graph.
void bind_random_weights(Graph& graph, uint64_t seed);

// Text dump used by `cnnrt info`: one row per node with output shape, params and FLOPs.
std::string describe_graph(const Graph& graph);

}  // namespace cnnrt
