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

// Expected shape of a weight given the node's input shapes, e.g. conv weight
// [out_channels, in_channels/groups, kh, kw].  Used to validate loaded weights and to create
// initial ones.
Shape expected_param_shape(const Node& node, const std::string& role);

// Multiply-adds count twice.  Per sample, for the node as it stands (fused epilogues included).
double node_flops(const Node& node);
int64_t node_param_count(const Node& node);

// Pool output extent, PyTorch rules (ceil_mode: the last window must start inside the input or
// left padding).
int64_t pool_output_size(int64_t in, int kernel, int stride, int pad, int dilation, bool ceil_mode);

// Conv output extent along one axis, PyTorch rule with pad_begin rows/columns of zeros before the
// input and pad_end after it (ConvAttrs: pad_h and pad_bottom(), pad_w and pad_right()):
// floor((in + pad_begin + pad_end - dilation * (kernel - 1) - 1) / stride) + 1, or 0 when the
// dilated kernel does not fit the padded input.  Equals pool_output_size(in, kernel, stride, pad,
// dilation, false) for symmetric padding.
int64_t conv_output_size(int64_t in, int kernel, int stride, int pad_begin, int pad_end,
                         int dilation);

}  // namespace cnnrt
