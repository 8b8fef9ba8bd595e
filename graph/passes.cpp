// Graph passes (see passes.h for the list and order).
//
// One matcher, many small rules (the opposite of ncnn's 2,851 lines of near-duplicate fuse_*):
// match_chain finds a straight chain of ops A → B → C, and every rule is a table entry of
// patterns, a rule-specific check and a rewrite.  The matcher enforces the preconditions every
// rule shares, so no rule can forget them:
//   * each later node of the chain reads exactly one tensor, the previous node's output;
//   * each intermediate tensor (all outputs but the last) has exactly one consumer, the next
//     node of the chain: fusing it away must not starve another reader;
//   * no intermediate tensor is the graph output: the user asked to see it;
//   * no later node names its own kernel (`impl:`): the user asked for that layer's kernel.
// The last node's output may have any number of consumers and may be the graph output; those
// readers are rewired to the surviving node, whose name (= tensor name) is the first node's.
#include "graph/passes.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "cnnrt/error.h"
#include "graph/model_loader.h"

namespace cnnrt {
namespace {

using Chain = std::vector<size_t>;  // indices into graph.nodes, producer first
using Pattern = std::vector<OpKind>;

size_t index_of(const Graph& graph, const std::string& name) {
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    if (graph.nodes[i].name == name) return i;
  throw Error("internal: node '" + name + "' not found");
}

std::optional<Chain> match_chain(const Graph& graph, size_t start, const Pattern& pattern) {
  if (graph.nodes[start].op != pattern[0]) return std::nullopt;
  Chain chain{start};
  for (size_t k = 1; k < pattern.size(); ++k) {
    const std::string& tensor = graph.nodes[chain.back()].name;
    if (tensor == graph.output) return std::nullopt;  // intermediate must not be the output
    const std::vector<std::string> readers = graph.consumers(tensor);
    if (readers.size() != 1) return std::nullopt;  // intermediate must have one consumer
    const size_t next = index_of(graph, readers[0]);
    const Node& node = graph.nodes[next];
    if (node.op != pattern[k] || node.inputs.size() != 1) return std::nullopt;
    // A layer that names its own kernel (`impl:`) stays a layer of its own.
    if (!node.kernel_request.empty()) return std::nullopt;
    chain.push_back(next);
  }
  return chain;
}

// Makes every reader of tensor `from` (and the graph output) read `to` instead.
void rewire(Graph& graph, const std::string& from, const std::string& to) {
  for (Node& node : graph.nodes)
    for (std::string& input : node.inputs)
      if (input == from) input = to;
  if (graph.output == from) graph.output = to;
}

void erase_nodes(Graph& graph, Chain indices) {
  std::sort(indices.rbegin(), indices.rend());
  for (size_t index : indices) graph.nodes.erase(graph.nodes.begin() + static_cast<long>(index));
}

// A per-layer precision on any source layer applies to the fused node; two different ones
// cannot both be honoured.
void merge_request(const Graph& graph, Node& head, const Node& absorbed, std::string Node::*request,
                   const char* what) {
  const std::string& value = absorbed.*request;
  if (value.empty() || value == head.*request) return;
  if (!(head.*request).empty())
    throw_error({graph.source_file, absorbed.line, absorbed.column, absorbed.name, ""},
                std::string("asks for ") + what + " '" + value + "' but it is fused into layer '" +
                    head.name + "', which asks for '" + head.*request +
                    "' (one fused layer runs one kernel)");
  head.*request = value;
}

// The common rewrite of a fusion: the head absorbs the rest of the chain.
void absorb_chain(Graph& graph, const Chain& chain) {
  Node& head = graph.nodes[chain[0]];
  for (size_t k = 1; k < chain.size(); ++k) {
    const Node& absorbed = graph.nodes[chain[k]];
    head.source_layers.insert(head.source_layers.end(), absorbed.source_layers.begin(),
                              absorbed.source_layers.end());
    merge_request(graph, head, absorbed, &Node::precision_request, "precision");
  }
  const std::string last = graph.nodes[chain.back()].name;
  const std::string head_name = head.name;
  erase_nodes(graph, Chain(chain.begin() + 1, chain.end()));
  rewire(graph, last, head_name);
}

struct Rule {
  std::vector<Pattern> patterns;  // tried in order: longest first
  bool (*applies)(const Graph&, const Chain&);
  void (*rewrite)(Graph&, const Chain&, PassStats&);
};

PassStats apply_rule(Graph& graph, const Rule& rule) {
  PassStats stats;
  // Rewrites invalidate indices: after each one, scan again from the top.  Graphs are small.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < graph.nodes.size() && !changed; ++i) {
      for (const Pattern& pattern : rule.patterns) {
        std::optional<Chain> chain = match_chain(graph, i, pattern);
        if (chain && rule.applies(graph, *chain)) {
          rule.rewrite(graph, *chain, stats);
          changed = true;
          break;
        }
      }
    }
  }
  return stats;
}

bool head_has_no_epilogue(const Graph& graph, const Chain& chain) {
  const Node& head = graph.nodes[chain[0]];
  return head.activation == Activation::None && !head.fused_maxpool;
}

// --- drop_dropout, drop_identity_ops -------------------------------------------------------

// A removed node's readers read its input instead.  The graph must keep at least one node
// producing its output, so a node that is the output and reads the graph input stays.
bool bypassable(const Graph& graph, const Chain& chain) {
  const Node& node = graph.nodes[chain[0]];
  return !(node.name == graph.output && node.inputs[0] == "input");
}

void bypass(Graph& graph, const Chain& chain) {
  const Node& node = graph.nodes[chain[0]];
  const std::string from = node.name, to = node.inputs[0];
  erase_nodes(graph, chain);
  rewire(graph, from, to);
}

void rewrite_dropout(Graph& graph, const Chain& chain, PassStats& stats) {
  bypass(graph, chain);
  ++stats.dropouts_removed;
}

// Pools that map every pixel to itself: an adaptive average pool whose output extent equals its
// input extent (torchvision's AlexNet ends its features with AdaptiveAvgPool2d(6) on a 6x6 map),
// and 1x1 max/avg pools with stride 1 and no padding.
bool is_identity_pool(const Graph& graph, const Chain& chain) {
  const Node& node = graph.nodes[chain[0]];
  if (!bypassable(graph, chain) || node.input_shapes.size() != 1 ||
      node.input_shapes[0] != node.output_shape)
    return false;
  if (node.op == OpKind::AdaptiveAvgPool) return true;
  const PoolAttrs& pool = node.get<PoolAttrs>();
  return pool.kernel_h == 1 && pool.kernel_w == 1 && pool.stride_h == 1 && pool.stride_w == 1 &&
         pool.pad_h == 0 && pool.pad_w == 0;
}

void rewrite_identity(Graph& graph, const Chain& chain, PassStats& stats) {
  bypass(graph, chain);
  ++stats.identities_removed;
}

// --- fold_batchnorm -----------------------------------------------------------------------

bool conv_bn_foldable(const Graph& graph, const Chain& chain) {
  if (!head_has_no_epilogue(graph, chain)) return false;
  for (size_t index : chain) {
    const Node& node = graph.nodes[index];
    for (const Param& param : node.params)
      if (param.value.data.empty())
        throw Error("layer '" + node.name + "': fold_batchnorm needs bound weights ('" + param.key +
                    "' has none): load or initialise weights before the passes");
  }
  return true;
}

// y = gamma * (conv(x) + b - mean) / sqrt(var + eps) + beta
//   = conv_{W * s}(x) + (b - mean) * s + beta,   s = gamma / sqrt(var + eps), per out channel.
void rewrite_conv_bn(Graph& graph, const Chain& chain, PassStats& stats) {
  Node& conv = graph.nodes[chain[0]];
  const Node& bn = graph.nodes[chain[1]];
  const int channels = conv.get<ConvAttrs>().out_channels;
  const float eps = bn.get<BatchNormAttrs>().eps;
  const HostVector<float>& gamma = bn.find_param("weight")->value.data;
  const HostVector<float>& beta = bn.find_param("bias")->value.data;
  const HostVector<float>& mean = bn.find_param("running_mean")->value.data;
  const HostVector<float>& var = bn.find_param("running_var")->value.data;

  if (conv.find_param("bias") == nullptr)
    conv.params.push_back(Param{"bias", bn.name + ".folded_bias",
                                HostTensor{{channels}, HostVector<float>(channels, 0.0f)}});
  HostVector<float>& weight = conv.find_param("weight")->value.data;
  HostVector<float>& bias = conv.find_param("bias")->value.data;
  const size_t per_channel = weight.size() / static_cast<size_t>(channels);
  for (int c = 0; c < channels; ++c) {
    const double scale = gamma[c] / std::sqrt(static_cast<double>(var[c]) + eps);
    for (size_t i = 0; i < per_channel; ++i) {
      float& w = weight[static_cast<size_t>(c) * per_channel + i];
      w = static_cast<float>(w * scale);
    }
    bias[c] = static_cast<float>((static_cast<double>(bias[c]) - mean[c]) * scale + beta[c]);
  }
  absorb_chain(graph, chain);
  ++stats.batchnorms_folded;
}

// --- activation fusion --------------------------------------------------------------------

// Every activation op is a clamp (see Activation in ir.h), so fusing one only records which
// clamp the epilogue applies; the kernels read the interval through activation_bounds().
void absorb_activation(Node& head, const Node& activation) {
  switch (activation.op) {
    case OpKind::Relu:
      head.activation = Activation::Relu;
      break;
    case OpKind::Relu6:
      head.activation = Activation::Relu6;
      break;
    case OpKind::Clip:
      head.activation = Activation::Clip;
      head.clip_min = activation.get<ClipAttrs>().min;
      head.clip_max = activation.get<ClipAttrs>().max;
      break;
    default:
      throw Error("internal: '" + activation.name + "' is not an activation");
  }
}

void rewrite_conv_activation(Graph& graph, const Chain& chain, PassStats& stats) {
  Node& conv = graph.nodes[chain[0]];
  absorb_activation(conv, graph.nodes[chain[1]]);
  ++stats.conv_activations_fused;
  if (chain.size() == 3) {
    const Node& pool = graph.nodes[chain[2]];
    conv.fused_maxpool = pool.get<PoolAttrs>();
    conv.pre_pool_shape = conv.output_shape;
    conv.output_shape = pool.output_shape;
    ++stats.conv_pools_fused;
  }
  absorb_chain(graph, chain);
}

void rewrite_linear_activation(Graph& graph, const Chain& chain, PassStats& stats) {
  absorb_activation(graph.nodes[chain[0]], graph.nodes[chain[1]]);
  absorb_chain(graph, chain);
  ++stats.linear_activations_fused;
}

// head → activation (→ maxpool) for each activation op, longest first.
std::vector<Pattern> activation_patterns(OpKind head, bool with_maxpool) {
  std::vector<Pattern> patterns;
  for (OpKind activation : {OpKind::Relu, OpKind::Relu6, OpKind::Clip}) {
    if (with_maxpool) patterns.push_back({head, activation, OpKind::MaxPool});
    patterns.push_back({head, activation});
  }
  return patterns;
}

// --- fuse_conv_residual -------------------------------------------------------------------
//
// conv → add(conv, r) (→ relu | relu6 | clip)  ⇒  one conv node reading [x, r] with
// fused_residual: y = clamp(conv(x) + b + r), the ResNet / MobileNet / EfficientNet block end.
// The add reads two tensors, so match_chain (one input per later node) cannot find it; this rule
// checks the matcher's shared preconditions itself, plus its own:
//   * the conv has no epilogue yet (activation, pool, residual): clamp(conv) + r is not
//     clamp(conv + r), and a pooled conv's output is not the add's operand;
//   * the conv names no kernel of its own (`impl:`): that kernel may not take a residual;
//   * the conv's output has exactly one consumer, the add, and is not the graph output;
//   * r is not the conv's own output (add(c, c)) and is produced before the conv in node order
//     (or is the graph input), so the fused node, which stays where the conv was, can read it;
//   * the add (and the activation) name no kernel; the add has no epilogue of its own;
//   * an activation is absorbed only when it is the add output's one consumer, reads only it,
//     and the add's output is not the graph output;
//   * no node of the chain asks for int8 (`precision: int8`): the int8 kernels have no residual
//     epilogue (docs/QUANTIZATION.md), so such an add stays an int8 add.
// When both add inputs qualify (a ResNet downsample block: main path and shortcut are both
// convs), the later conv absorbs the add and reads the earlier one's output as r.

struct ResidualMatch {
  Chain chain;  // conv, add (, activation)
  std::string residual;
};

bool is_activation(OpKind op) {
  return op == OpKind::Relu || op == OpKind::Relu6 || op == OpKind::Clip;
}

// Position of the node producing `tensor` in node order; -1 for the graph input.
long producer_position(const Graph& graph, const std::string& tensor) {
  return tensor == "input" ? -1 : static_cast<long>(index_of(graph, tensor));
}

// The activation that reads only the add's output, when it may be absorbed.
std::optional<size_t> absorbable_activation(const Graph& graph, const Node& add) {
  if (add.name == graph.output) return std::nullopt;
  const std::vector<std::string> readers = graph.consumers(add.name);
  if (readers.size() != 1) return std::nullopt;
  const size_t index = index_of(graph, readers[0]);
  const Node& node = graph.nodes[index];
  if (!is_activation(node.op) || node.inputs.size() != 1 || !node.kernel_request.empty())
    return std::nullopt;
  return index;
}

bool asks_int8(const Node& node) { return node.precision_request == "int8"; }

std::optional<ResidualMatch> match_residual(const Graph& graph, size_t add_index) {
  const Node& add = graph.nodes[add_index];
  if (add.op != OpKind::Add || add.inputs.size() != 2 || add.inputs[0] == add.inputs[1] ||
      add.activation != Activation::None || !add.kernel_request.empty() || asks_int8(add))
    return std::nullopt;
  const long position[2] = {producer_position(graph, add.inputs[0]),
                            producer_position(graph, add.inputs[1])};
  const int first = position[0] >= position[1] ? 0 : 1;  // the later producer first
  for (int pick : {first, 1 - first}) {
    if (position[pick] < 0 || position[1 - pick] >= position[pick]) continue;
    const size_t conv_index = static_cast<size_t>(position[pick]);
    const Node& conv = graph.nodes[conv_index];
    if (conv.op != OpKind::Conv || conv.activation != Activation::None || conv.fused_maxpool ||
        conv.fused_residual || !conv.kernel_request.empty() || asks_int8(conv) ||
        conv.name == graph.output || graph.consumers(conv.name).size() != 1)
      continue;
    ResidualMatch match{{conv_index, add_index}, add.inputs[1 - pick]};
    if (std::optional<size_t> activation = absorbable_activation(graph, add))
      if (!asks_int8(graph.nodes[*activation])) match.chain.push_back(*activation);
    return match;
  }
  return std::nullopt;
}

void rewrite_conv_residual(Graph& graph, const ResidualMatch& match, PassStats& stats) {
  Node& conv = graph.nodes[match.chain[0]];
  const Node& add = graph.nodes[match.chain[1]];
  const size_t residual_slot = add.inputs[0] == match.residual ? 0 : 1;
  conv.inputs.push_back(match.residual);
  if (add.input_shapes.size() == 2) conv.input_shapes.push_back(add.input_shapes[residual_slot]);
  conv.fused_residual = true;
  if (match.chain.size() == 3) absorb_activation(conv, graph.nodes[match.chain[2]]);
  absorb_chain(graph, match.chain);
  ++stats.conv_residuals_fused;
}

PassStats& operator+=(PassStats& total, const PassStats& more) {
  total.dropouts_removed += more.dropouts_removed;
  total.identities_removed += more.identities_removed;
  total.batchnorms_folded += more.batchnorms_folded;
  total.conv_activations_fused += more.conv_activations_fused;
  total.conv_pools_fused += more.conv_pools_fused;
  total.linear_activations_fused += more.linear_activations_fused;
  total.conv_residuals_fused += more.conv_residuals_fused;
  return total;
}

}  // namespace

PassStats drop_dropout(Graph& graph) {
  return apply_rule(graph, Rule{{{OpKind::Dropout}}, bypassable, rewrite_dropout});
}

PassStats drop_identity_ops(Graph& graph) {
  return apply_rule(graph, Rule{{{OpKind::AdaptiveAvgPool}, {OpKind::AvgPool}, {OpKind::MaxPool}},
                                is_identity_pool,
                                rewrite_identity});
}

PassStats fold_batchnorm(Graph& graph) {
  return apply_rule(graph,
                    Rule{{{OpKind::Conv, OpKind::BatchNorm}}, conv_bn_foldable, rewrite_conv_bn});
}

PassStats fuse_conv_activation(Graph& graph) {
  return apply_rule(graph, Rule{activation_patterns(OpKind::Conv, true), head_has_no_epilogue,
                                rewrite_conv_activation});
}

PassStats fuse_conv_residual(Graph& graph) {
  PassStats stats;
  // As apply_rule: a rewrite invalidates indices, so scan again from the top after each.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < graph.nodes.size() && !changed; ++i) {
      if (std::optional<ResidualMatch> match = match_residual(graph, i)) {
        rewrite_conv_residual(graph, *match, stats);
        changed = true;
      }
    }
  }
  return stats;
}

PassStats fuse_linear_activation(Graph& graph) {
  return apply_rule(graph, Rule{activation_patterns(OpKind::Linear, false), head_has_no_epilogue,
                                rewrite_linear_activation});
}

PassStats run_default_passes(Graph& graph, const PassOptions& options) {
  PassStats stats;
  stats += drop_dropout(graph);
  stats += drop_identity_ops(graph);
  stats += fold_batchnorm(graph);
  stats += fuse_conv_activation(graph);
  if (options.fuse_residual) stats += fuse_conv_residual(graph);
  stats += fuse_linear_activation(graph);
  infer_shapes(graph);  // validates the rewritten graph, folded weights included
  return stats;
}

}  // namespace cnnrt
