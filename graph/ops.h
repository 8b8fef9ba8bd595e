// The op table: for each op, how its YAML attributes are parsed, which weights it takes, how its
// output shape follows from its inputs, and what it costs.  Adding an op = one table row in
// ops.cpp plus a CPU reference kernel; there is no if/else chain over op names elsewhere.
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"

namespace YAML {
class Node;
}

namespace cnnrt {

struct OpInfo {
  OpKind op;
  const char* name;                         // YAML spelling
  std::vector<const char*> attribute_keys;  // accepted YAML keys besides name/op/input(s)/params
  std::vector<const char*> param_roles;     // weight roles, in order (may be optional, see below)
  std::vector<const char*> optional_param_roles;  // subset of param_roles that may be absent
  int min_inputs, max_inputs;                     // max_inputs < 0: unbounded
};

// nullptr when unknown.
const OpInfo* find_op(const std::string& name);
const OpInfo& op_info(OpKind op);

// Infers node.output_shape from node.input_shapes (and, for a fused conv, pre_pool_shape);
// throws Error naming the layer when the shapes do not fit the op.
void infer_node_shape(Node& node, const std::string& source_file);

// Shape inference over the whole graph (graph/shape_inference.cpp): every node's input and
// output shapes, conv `same` padding resolved, bound weights checked against their expected
// shapes.  Run by the loader and again after the passes; throws Error naming file:line:col and
// the layer.
void infer_shapes(Graph& graph);

// Expected shape of a weight given the node's input shapes, e.g. conv weight
// [out_channels, in_channels/groups, kh, kw].  Used to validate loaded weights and to create
// initial ones.
Shape expected_param_shape(const Node& node, const std::string& role);

// Multiply-adds count twice.  Per sample, for the node as it stands (fused epilogues included).
double node_flops(const Node& node);
int64_t node_param_count(const Node& node);

// Conv output extent along one axis with possibly different padding before and after:
// floor((in + pad_begin + pad_end - dilation*(kernel-1) - 1) / stride) + 1, or 0 when the dilated
// kernel does not fit.
int64_t conv_output_size(int64_t in, int kernel, int stride, int pad_begin, int pad_end,
                         int dilation);

// `padding: same` (TensorFlow semantics), for the given input extent: out = ceil(in / stride),
// total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - in, 0), top/left = total / 2,
// bottom/right = the rest.  Sets pad_h/pad_w and pad_h_extra/pad_w_extra (0 or 1).
void resolve_same_padding(ConvAttrs& attrs, int64_t in_h, int64_t in_w);

// Pool output extent, PyTorch rules (ceil_mode: the last window must start inside the input or
// left padding).
int64_t pool_output_size(int64_t in, int kernel, int stride, int pad, int dilation, bool ceil_mode);

}  // namespace cnnrt
