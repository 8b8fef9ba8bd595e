// 2:4 structured sparsity at the graph level: the grouping rule of a weight (which 4 weights
// form a group), finding 2:4 structure in loaded weights, and magnitude pruning.  The compressed
// format and the kernels that read it are in kernels/cpu/sparse24.h; docs/SPARSITY.md says why
// the groups run along the input channels (the K order (kh, kw, c) of the NHWC implicit GEMM,
// with the weights as the sparse operand A of the tensor cores).
#pragma once

#include <string>

#include "graph/ir.h"

namespace cnnrt::sparsity {

// The grouping of a conv (groups == 1) or linear weight: rows (output channels) × channels ×
// taps in PyTorch order [rows][channels][taps] (conv: taps = KH·KW; linear: channels = IN,
// taps = 1).  A group is 4 consecutive channels at one row and tap; the last group of a tap is
// padded with zeros when channels % 4 != 0.
struct WeightShape {
  int rows = 0, channels = 0, taps = 1;
  int groups_per_tap() const { return (channels + 3) / 4; }
  int groups_per_row() const { return taps * groups_per_tap(); }
};

// Whether 2:4 applies to the node at all (conv with groups == 1, linear; shapes inferred).
bool can_be_2_4(const Node& node);
// The node's weight grouping; throws cnnrt::Error naming the layer when !can_be_2_4(node).
WeightShape weight_shape_of(const Node& node);

// "" when every group holds at most 2 non-zeros, else where the first one that does not is
// ("output channel 3, tap 4, input channels 8..11 hold 3 non-zeros ...").
std::string first_violation(const float* weight, const WeightShape& shape);
// The same for a node's loaded weight ("" also when the node cannot be 2:4 at all is NOT
// returned: such a node gets "conv with groups 32 cannot be 2:4" and the like).
std::string node_violation(const Node& node);

// Magnitude pruning in place: in every group the two largest |w| stay (ties: the lower index).
void prune_magnitude(float* weight, const WeightShape& shape);

// Sets Node::weight_2_4 on every conv / linear whose loaded weight is 2:4 (so sparse kernels
// are offered for it) and returns how many.  A layer whose model asks `sparsity: 2:4` for a
// weight that is not is an Error naming the layer and the first offending group.
int mark_2_4_weights(Graph& graph);

}  // namespace cnnrt::sparsity
