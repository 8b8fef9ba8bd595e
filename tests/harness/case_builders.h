// Internal to the harness's case tables (cases.cpp, conv_cases.cpp): the pieces every table
// builds its rows from — the activation a row fuses, a finished case from a node, a node of an
// op over input shapes.  Not part of harness.h: the tests see only the tables.
#pragma once

#include <string>
#include <vector>

#include "graph/ops.h"
#include "harness.h"

namespace cnnrt::harness::cases {

inline std::string join_dims(const Shape& shape) {
  std::string out;
  for (int64_t d : shape) out += (out.empty() ? "" : "x") + std::to_string(d);
  return out;
}

// The activation part of a name and the node fields it sets.
struct Act {
  Activation kind = Activation::None;
  float lo = 0, hi = 0;
  std::string suffix() const {
    switch (kind) {
      case Activation::Relu:
        return "_relu";
      case Activation::Relu6:
        return "_relu6";
      case Activation::Clip:
        return "_clip";
      default:
        return "";
    }
  }
  void apply(Node& node) const {
    node.activation = kind;
    node.clip_min = lo;
    node.clip_max = hi;
  }
};
inline const Act kNone{};
inline const Act kRelu{Activation::Relu};
inline const Act kRelu6{Activation::Relu6};
inline const Act kClip{Activation::Clip, -0.25f, 0.5f};  // both bounds bite on inputs in [-1, 1]
// A clamp whose lower bound is above zero: padding lanes must still be written as zeros.
inline const Act kClipPositive{Activation::Clip, 0.125f, 0.5f};

// A finished case: shapes inferred by the graph's rule, the name checked by the caller.
inline OpCase make_case(std::string name, Node node, int batch, float lo = -1.0f, float hi = 1.0f) {
  node.name = "under_test";
  if (node.source_layers.empty()) node.source_layers = {node.name};
  infer_node_shape(node, "harness");
  OpCase c;
  c.name = std::move(name) + "_b" + std::to_string(batch);
  c.batch = batch;
  c.input_lo = lo;
  c.input_hi = hi;
  c.graph.name = "harness";
  c.graph.source_file = "harness";
  c.graph.nodes.push_back(std::move(node));
  return c;
}

inline Node node_of(OpKind op, std::vector<Shape> inputs, Attrs attrs = EmptyAttrs{}) {
  Node node;
  node.op = op;
  node.attrs = std::move(attrs);
  for (size_t i = 0; i < inputs.size(); ++i)
    node.inputs.push_back(i == 0 ? "input" : "input" + std::to_string(i));
  node.input_shapes = std::move(inputs);
  return node;
}

// The conv table (conv_cases.cpp).
std::vector<OpCase> conv_cases();

}  // namespace cnnrt::harness::cases
