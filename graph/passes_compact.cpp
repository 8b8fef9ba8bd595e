// Channel compaction (passes_compact.h).  One producer at a time, in graph order: trace where
// its all-zero channels go, and either rewrite the producer and every consumer found, or record
// why not and leave the graph untouched.  Shapes are re-inferred after each rewrite, so the next
// producer's trace sees the current channel counts (concat offsets, flatten sizes).
#include "graph/passes_compact.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "cnnrt/error.h"
#include "graph/ops.h"

namespace cnnrt {
namespace {

// The removed channels' constants as they flow: where they sit in the tensor being read (the
// first removed channel's index is offset + removed[0]), how many values each channel spans
// once flattened (1 before a flatten), and each channel's value.
struct Flow {
  std::string tensor;
  int offset = 0;
  int64_t spatial = 1;
  bool flattened = false;
  std::vector<float> values;  // one per removed channel
};

// A consumer to rewrite: drop input channels offset + removed[i] and fold values[i].
struct Edit {
  size_t node = 0;
  int offset = 0;
  int64_t spatial = 1;
  std::vector<float> values;
};

bool any_nonzero(const std::vector<float>& values) {
  return std::any_of(values.begin(), values.end(), [](float v) { return v != 0.0f; });
}

size_t index_of(const Graph& graph, const std::string& name) {
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    if (graph.nodes[i].name == name) return i;
  throw Error("internal: node '" + name + "' not found");
}

void clamp_all(std::vector<float>& values, float lo, float hi) {
  for (float& v : values) v = std::min(std::max(v, lo), hi);
}

// Follows one flow to the consumers that take the channels away.  Returns the reason it cannot
// ("" when every path ends in a conv or linear that can drop them).
std::string trace(const Graph& graph, const Flow& flow, std::vector<Edit>& edits) {
  if (flow.tensor == graph.output) return "its output reaches the graph output";
  for (const std::string& reader : graph.consumers(flow.tensor)) {
    const size_t index = index_of(graph, reader);
    const Node& node = graph.nodes[index];
    const std::string where = std::string(op_name(node.op)) + " '" + node.name + "'";
    if (flow.flattened && node.op != OpKind::Linear && node.op != OpKind::Dropout)
      return "its flattened output reaches " + where;
    Flow next = flow;
    next.tensor = node.name;
    std::string why;
    switch (node.op) {
      case OpKind::Relu:
        clamp_all(next.values, 0.0f, INFINITY);
        break;
      case OpKind::Relu6:
        clamp_all(next.values, 0.0f, 6.0f);
        break;
      case OpKind::Clip:
        clamp_all(next.values, node.get<ClipAttrs>().min, node.get<ClipAttrs>().max);
        break;
      case OpKind::MaxPool:  // padding is -inf: a window of a constant is that constant
      case OpKind::AdaptiveAvgPool:
      case OpKind::Dropout:
        break;
      case OpKind::AvgPool: {
        const PoolAttrs& pool = node.get<PoolAttrs>();
        if ((pool.pad_h > 0 || pool.pad_w > 0 || pool.ceil_mode) && pool.count_include_pad &&
            any_nonzero(flow.values))
          return "it reaches " + where + ", which averages in padding";
        break;
      }
      case OpKind::Flatten:
        next.spatial = shape_elements(node.input_shapes[0]) / node.input_shapes[0][0];
        next.flattened = true;
        break;
      case OpKind::Concat: {
        int offset = 0;
        for (size_t i = 0; i < node.inputs.size(); ++i) {
          if (node.inputs[i] == flow.tensor) {
            Flow part = flow;
            part.tensor = node.name;
            part.offset = offset + flow.offset;
            why = trace(graph, part, edits);
            if (!why.empty()) return why;
          }
          offset += static_cast<int>(node.input_shapes[i][0]);
        }
        continue;  // each occurrence traced above
      }
      case OpKind::Conv: {
        const ConvAttrs& a = node.get<ConvAttrs>();
        if (a.groups != 1) return "it reaches " + where + ", a grouped conv";
        if (node.inputs[0] != flow.tensor) return "it reaches " + where + " as a residual input";
        const bool pads = a.pad_h > 0 || a.pad_w > 0 || a.pad_bottom() > 0 || a.pad_right() > 0;
        if (pads && any_nonzero(flow.values))
          return "their constant (act(bias) != 0) reaches " + where +
                 ", which pads (border taps would read zeros instead)";
        edits.push_back({index, flow.offset, 1, flow.values});
        continue;
      }
      case OpKind::Linear: {
        // A linear may read a [C, H, W] map directly: its features are (c, h, w) like a flatten's.
        const Shape& in = node.input_shapes[0];
        const int64_t spatial = flow.flattened ? flow.spatial : shape_elements(in) / in[0];
        edits.push_back({index, flow.offset, spatial, flow.values});
        continue;
      }
      default:
        return "it reaches " + where + " (channels cannot be removed through a " +
               op_name(node.op) + ")";
    }
    why = trace(graph, next, edits);
    if (!why.empty()) return why;
  }
  return "";
}

// Removes input channels offset + removed[i] of a consumer, folding their constants into its
// bias.  Conv weight [O, C, KH, KW]; linear weight [O, C·spatial].
void rewrite_consumer(Node& node, const Edit& edit, const std::vector<int>& removed) {
  Param* weight = node.find_param("weight");
  const int64_t rows = weight->value.shape[0];
  const int64_t columns = weight->value.elements() / rows;  // C·taps or features
  const int64_t per_channel =
      node.op == OpKind::Conv ? columns / node.input_shapes[0][0] : edit.spatial;
  std::vector<bool> drop(static_cast<size_t>(columns), false);
  std::vector<double> folded(static_cast<size_t>(rows), 0.0);
  for (size_t r = 0; r < removed.size(); ++r) {
    const int64_t first = (edit.offset + removed[r]) * per_channel;
    for (int64_t k = first; k < first + per_channel; ++k) {
      drop[static_cast<size_t>(k)] = true;
      for (int64_t o = 0; o < rows; ++o)
        folded[o] += static_cast<double>(weight->value.data[o * columns + k]) * edit.values[r];
    }
  }
  HostVector<float> kept;
  for (int64_t o = 0; o < rows; ++o)
    for (int64_t k = 0; k < columns; ++k)
      if (!drop[static_cast<size_t>(k)]) kept.push_back(weight->value.data[o * columns + k]);
  weight->value.data = std::move(kept);
  weight->value.shape[1] -=
      static_cast<int64_t>(removed.size()) * (node.op == OpKind::Conv ? 1 : per_channel);
  if (!any_nonzero(edit.values)) return;
  Param* bias = node.find_param("bias");
  if (bias == nullptr) {  // a constant to fold needs a bias
    node.params.push_back(Param{"bias", node.name + ".bias (folded)", {{rows}, {}}});
    bias = &node.params.back();
    bias->value.data.assign(static_cast<size_t>(rows), 0.0f);
  }
  for (int64_t o = 0; o < rows; ++o)
    bias->value.data[o] = static_cast<float>(bias->value.data[o] + folded[o]);
}

void remove_rows(Node& node, const std::vector<int>& removed) {
  for (Param& param : node.params) {
    const int64_t rows = param.value.shape[0];
    const int64_t per_row = param.value.elements() / rows;
    HostVector<float> kept;
    for (int64_t o = 0; o < rows; ++o)
      if (!std::binary_search(removed.begin(), removed.end(), static_cast<int>(o)))
        kept.insert(kept.end(), param.value.data.begin() + o * per_row,
                    param.value.data.begin() + (o + 1) * per_row);
    param.value.data = std::move(kept);
    param.value.shape[0] = rows - static_cast<int64_t>(removed.size());
  }
  const int after = static_cast<int>(node.params[0].value.shape[0]);
  if (node.op == OpKind::Conv)
    node.get<ConvAttrs>().out_channels = after;
  else
    node.get<LinearAttrs>().out_features = after;
}

// The constant each removed channel carries out of its producer: the fused activation of its
// bias (a fused max-pool of a constant is the constant).
std::vector<float> constants_of(const Node& node, const std::vector<int>& removed) {
  const Param* bias = node.find_param("bias");
  std::vector<float> values;
  for (int o : removed) values.push_back(bias != nullptr ? bias->value.data[o] : 0.0f);
  if (node.activation != Activation::None) {
    const ActivationBounds b = activation_bounds(node);
    clamp_all(values, b.lo, b.hi);
  }
  return values;
}

// The reason `node` cannot be compacted at all, "" when it may be.
std::string producer_refusal(const Node& node, const std::vector<int>& zero, int rows) {
  if (node.fused_residual) return "its conv adds a residual";
  if (static_cast<int>(zero.size()) == rows) return "every channel is zero";
  return "";
}

}  // namespace

std::vector<int> zero_output_channels(const Node& node) {
  std::vector<int> zero;
  if (node.op != OpKind::Conv && node.op != OpKind::Linear) return zero;
  if (node.op == OpKind::Conv && node.get<ConvAttrs>().groups != 1) return zero;
  const Param* weight = node.find_param("weight");
  if (weight == nullptr || weight->value.data.empty()) return zero;
  const int64_t rows = weight->value.shape[0];
  const int64_t per_row = weight->value.elements() / rows;
  for (int64_t o = 0; o < rows; ++o) {
    const float* row = weight->value.data.data() + o * per_row;
    if (std::all_of(row, row + per_row, [](float v) { return v == 0.0f; }))
      zero.push_back(static_cast<int>(o));
  }
  return zero;
}

CompactionReport compact_pruned_channels(Graph& graph) {
  CompactionReport report;
  for (size_t p = 0; p < graph.nodes.size(); ++p) {
    const std::vector<int> zero = zero_output_channels(graph.nodes[p]);
    if (zero.empty()) continue;
    const Node& producer = graph.nodes[p];
    const int rows = static_cast<int>(producer.params[0].value.shape[0]);
    const std::string head = producer.name + ": " + std::to_string(zero.size()) + " of " +
                             std::to_string(rows) + " output channels are all zero, kept: ";
    std::string why = producer_refusal(producer, zero, rows);
    std::vector<Edit> edits;
    if (why.empty())
      why = trace(graph, Flow{producer.name, 0, 1, false, constants_of(producer, zero)}, edits);
    for (size_t i = 0; i < edits.size() && why.empty(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (edits[i].node == edits[j].node)
          why = "it reaches '" + graph.nodes[edits[i].node].name + "' by two paths";
    if (!why.empty()) {
      report.kept.push_back(head + why);
      continue;
    }
    CompactedLayer done{producer.name, rows, rows - static_cast<int>(zero.size()), {}};
    for (const Edit& edit : edits) {
      rewrite_consumer(graph.nodes[edit.node], edit, zero);
      done.consumers.push_back(graph.nodes[edit.node].name);
    }
    remove_rows(graph.nodes[p], zero);
    report.layers.push_back(done);
    infer_shapes(graph);
  }
  return report;
}

std::string CompactionReport::to_text() const {
  std::string text;
  for (const CompactedLayer& layer : layers) {
    text += layer.layer + ": " + std::to_string(layer.channels_before) + " -> " +
            std::to_string(layer.channels_after) + " output channels (all-zero ones removed";
    if (!layer.consumers.empty()) {
      text += "; input channels of";
      for (const std::string& consumer : layer.consumers) text += " " + consumer;
    }
    text += ")\n";
  }
  for (const std::string& line : kept) text += line + "\n";
  return text;
}

}  // namespace cnnrt
