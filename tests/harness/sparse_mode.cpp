// The 2:4 sparse mode of the harness (harness.h): a sparse entry runs each case of its op on the
// case's own weights pruned 2:4 by magnitude (graph/passes_sparsity.h), against the dense CPU
// reference on those same pruned weights.  Cases whose node cannot be 2:4 (grouped convs) are
// skipped like any case an entry does not support.  The pruned weights keep half of every group
// non-zero, so a kernel that skipped a kept weight or read a dropped one fails the comparison.
#include <optional>

#include "graph/passes_sparsity.h"
#include "harness.h"

namespace cnnrt::harness {

std::optional<CaseData> sparse_case_data(const OpCase& op_case) {
  if (!sparsity::can_be_2_4(op_case.node())) return std::nullopt;
  CaseData data = case_data(op_case);  // a copy: the cached dense case stays as it is
  Node& node = data.graph.nodes.back();
  Param* weight = node.find_param("weight");
  sparsity::prune_magnitude(weight->value.data.data(), sparsity::weight_shape_of(node));
  node.weight_2_4 = true;
  data.expected = reference_output(node, data.inputs, op_case.batch);
  return data;
}

}  // namespace cnnrt::harness
