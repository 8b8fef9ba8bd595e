// Whole-graph shape inference: walks the nodes in order, resolves each node's input shapes from
// the tensors produced so far, lets the op table infer its output (graph/ops.cpp), and checks
// what only the graph-wide walk can: tensor sizes against the kernels' int limit, and every
// parameter's shape against what the op expects now (after passes rewrote weights).  It runs
// after loading and again after the passes, so rules that depend on the input size (conv
// `padding: same`) are resolved here, never in the parser.
#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include "cnnrt/error.h"
#include "graph/ops.h"

namespace cnnrt {

namespace {

// Kernels take per-sample dimensions and feature counts as int, so every tensor of one sample
// must fit in an int; checking here, with an overflow-safe product, keeps all later size
// arithmetic (per-sample elements x batch x sizeof(float)) far from int64/size_t overflow.
constexpr int64_t kMaxTensorElements = std::numeric_limits<int32_t>::max();

bool fits_tensor_limit(const Shape& shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim <= 0) return true;  // rejected by shape inference with its own message
    if (count > kMaxTensorElements / dim) return false;
    count *= dim;
  }
  return true;
}

}  // namespace

void infer_shapes(Graph& graph) {
  if (!fits_tensor_limit(graph.input.shape))
    throw_error(ErrorSite{graph.source_file, 0, 0, "", "input"},
                "input " + shape_to_string(graph.input.shape) + " is too large (over " +
                    std::to_string(kMaxTensorElements) + " elements per sample)");
  std::map<std::string, Shape> known{{"input", graph.input.shape}};
  for (Node& node : graph.nodes) {
    const ErrorSite site{graph.source_file, node.line, node.column, node.name, ""};
    node.input_shapes.clear();
    for (const std::string& input : node.inputs) {
      auto found = known.find(input);
      if (found == known.end())
        throw_error(site, "input '" + input + "' is not produced by an earlier layer");
      node.input_shapes.push_back(found->second);
    }
    infer_node_shape(node, graph.source_file);
    if (!fits_tensor_limit(node.output_shape))
      throw_error(site, "output " + shape_to_string(node.output_shape) + " is too large (over " +
                            std::to_string(kMaxTensorElements) + " elements per sample)");
    // Params: unbound ones learn their expected shape; bound ones must still fit (this is what
    // catches a pass that rewrote weights inconsistently).
    for (Param& param : node.params) {
      const Shape expected = expected_param_shape(node, param.role);
      if (!fits_tensor_limit(expected)) {
        ErrorSite param_site = site;
        param_site.tensor = param.key;
        throw_error(param_site, "'" + param.role + "' of shape " + shape_to_string(expected) +
                                    " is too large (over " + std::to_string(kMaxTensorElements) +
                                    " elements)");
      }
      if (param.value.data.empty()) {
        param.value.shape = expected;
      } else if (param.value.shape != expected ||
                 static_cast<int64_t>(param.value.data.size()) != shape_elements(expected)) {
        ErrorSite param_site = site;
        param_site.tensor = param.key;
        throw_error(param_site, "'" + param.role + "' has shape " +
                                    shape_to_string(param.value.shape) + ", expected " +
                                    shape_to_string(expected));
      }
    }
    if (!known.emplace(node.name, node.output_shape).second)
      throw_error(site, "duplicate tensor name");
  }
  if (known.count(graph.output) == 0)
    throw_error(ErrorSite{graph.source_file, 0, 0, "", ""},
                "graph output '" + graph.output + "' is not a tensor of the graph");
}

}  // namespace cnnrt
