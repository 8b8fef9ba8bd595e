// IR helpers: shape printing, op names, lookups.  Kept apart from ops.cpp so the op table stays
// the only place that knows about individual ops' semantics.
#include "graph/ir.h"

#include <algorithm>
#include <limits>

#include "graph/host_parallel.h"
#include "graph/ops.h"

namespace cnnrt {

int64_t shape_elements(const Shape& shape) {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  return count;
}

HostTensor::HostTensor(const HostTensor& other) : shape(other.shape) { *this = other; }

HostTensor& HostTensor::operator=(const HostTensor& other) {
  if (this == &other) return *this;
  shape = other.shape;
  // 1 MB (256 Ki values) a piece: small tensors stay on the calling thread.
  constexpr size_t kPiece = size_t{1} << 18;
  const size_t count = other.data.size();
  data.resize(count);  // not zeroed: every value is written below
  parallel_for((count + kPiece - 1) / kPiece, 4, [&](size_t begin, size_t end) {
    const float* from = other.data.data();
    std::copy(from + begin * kPiece, from + std::min(count, end * kPiece),
              data.data() + begin * kPiece);
  });
  return *this;
}

std::string shape_to_string(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

const char* op_name(OpKind op) { return op_info(op).name; }

ActivationBounds activation_bounds(const Node& node) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  switch (node.activation) {
    case Activation::None:
      return {-kInf, kInf};
    case Activation::Relu:
      return {0.0f, kInf};
    case Activation::Relu6:
      return {0.0f, 6.0f};
    case Activation::Clip:
      return {node.clip_min, node.clip_max};
  }
  return {-kInf, kInf};
}

const char* activation_name(Activation activation) {
  switch (activation) {
    case Activation::None:
      return "none";
    case Activation::Relu:
      return "relu";
    case Activation::Relu6:
      return "relu6";
    case Activation::Clip:
      return "clip";
  }
  return "?";
}

const Param* Node::find_param(const std::string& role) const {
  for (const Param& param : params)
    if (param.role == role) return &param;
  return nullptr;
}

Param* Node::find_param(const std::string& role) {
  for (Param& param : params)
    if (param.role == role) return &param;
  return nullptr;
}

const Node* Graph::find(const std::string& node_name) const {
  for (const Node& node : nodes)
    if (node.name == node_name) return &node;
  return nullptr;
}

Node* Graph::find(const std::string& node_name) {
  for (Node& node : nodes)
    if (node.name == node_name) return &node;
  return nullptr;
}

// A node that reads the same tensor twice (add(x, x)) is listed once: passes ask "how many
// nodes depend on this tensor", not "how many input slots".
std::vector<std::string> Graph::consumers(const std::string& tensor) const {
  std::vector<std::string> names;
  for (const Node& node : nodes) {
    for (const std::string& input : node.inputs) {
      if (input == tensor) {
        names.push_back(node.name);
        break;
      }
    }
  }
  return names;
}

}  // namespace cnnrt
