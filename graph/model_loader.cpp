// YAML model → validated Graph; weights → params.
//
// The loader reads in one direction: top-level keys, the input spec, then each layer (name, op,
// inputs, the op's own attributes through the op table, parameter keys), and finally shape
// inference over the whole graph.  Every key is checked against what the op accepts (darknet's
// silent "option_unused" is the failure mode we avoid), and every error carries the YAML mark of
// the offending value, so the user sees file:line:col, the layer and the key.
//
// Inputs may only name "input" or an earlier layer: the YAML order is the topological order,
// which keeps the runtime's schedule equal to what the user wrote.
#include "graph/model_loader.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <sstream>

#include "cnnrt/error.h"
#include "graph/bounded_read.h"
#include "graph/op_parse.h"
#include "graph/safetensors.h"
#include "graph/yaml_read.h"

namespace cnnrt {
namespace {

const char* const kTopLevelKeys[] = {"name", "input", "weights", "labels", "output", "layers"};
const char* const kLayerCommonKeys[] = {"name",      "op",   "input",   "inputs",
                                        "precision", "impl", "sparsity"};

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string resolve_relative(const std::string& source_name, const std::string& value) {
  const std::filesystem::path path(value);
  if (path.is_absolute()) return value;
  const std::filesystem::path dir = std::filesystem::path(source_name).parent_path();
  return dir.empty() ? value : (dir / path).string();
}

InputSpec parse_input_spec(const YAML::Node& node, const YamlContext& context) {
  if (!node.IsMap()) context.fail(node, "'input' must be a map {shape: [C, H, W], mean, std}");
  for (const auto& entry : node) {
    const std::string key = entry.first.Scalar();
    if (key != "shape" && key != "mean" && key != "std")
      context.fail(entry.first, "unknown key 'input." + key + "' (valid: shape, mean, std)");
  }
  InputSpec spec;
  const YAML::Node shape = node["shape"];
  if (!shape) context.fail(node, "'input' is missing required key 'shape'");
  if (!shape.IsSequence() || (shape.size() != 3 && shape.size() != 1))
    context.fail(shape, "'input.shape' must be [C, H, W] or [features]");
  for (const YAML::Node& dim : shape)
    spec.shape.push_back(read_positive_int(dim, context, "input.shape"));
  // Keeps every later element count far from int64 overflow.
  if (spec.shape.size() == 3 && spec.shape[0] * spec.shape[1] > (int64_t{1} << 40) / spec.shape[2])
    context.fail(shape, "'input.shape' is absurdly large");

  auto read_channel_list = [&](const char* key, std::vector<float>& out) {
    const YAML::Node list = node[key];
    if (!list) return;
    if (!list.IsSequence() || static_cast<int64_t>(list.size()) != spec.shape[0])
      context.fail(list, std::string("'input.") + key + "' must list one number per channel (" +
                             std::to_string(spec.shape[0]) + ")");
    for (const YAML::Node& value : list)
      out.push_back(static_cast<float>(read_number(value, context, std::string("input.") + key)));
  };
  read_channel_list("mean", spec.mean);
  read_channel_list("std", spec.std);
  if (spec.mean.empty() != spec.std.empty())
    context.fail(node, "'input' needs both 'mean' and 'std', or neither");
  for (float value : spec.std)
    if (!(value > 0.0f)) context.fail(node["std"], "'input.std' entries must be positive");
  return spec;
}

// Reads `input:` / `inputs:` and checks each name refers to the graph input or an earlier layer.
std::vector<std::string> parse_layer_inputs(const YAML::Node& layer, const YamlContext& context,
                                            const OpInfo& info, const std::string& previous,
                                            const std::set<std::string>& defined,
                                            const std::set<std::string>& all_names) {
  const YAML::Node single = layer["input"];
  const YAML::Node list = layer["inputs"];
  if (single && list) context.fail(layer, "give either 'input' or 'inputs', not both");
  std::vector<std::pair<std::string, YAML::Node>> names;
  if (single) {
    names.push_back({read_string(single, context, "input"), single});
  } else if (list) {
    if (!list.IsSequence() || list.size() == 0)
      context.fail(list, "'inputs' must be a non-empty list of layer names");
    for (const YAML::Node& item : list)
      names.push_back({read_string(item, context, "inputs"), item});
  } else {
    names.push_back({previous, layer});
  }
  std::vector<std::string> inputs;
  for (const auto& [name, mark_node] : names) {
    if (name != "input" && defined.count(name) == 0) {
      if (all_names.count(name) != 0)
        context.fail(mark_node,
                     "input '" + name + "' refers to a later layer; list layers in order");
      context.fail(mark_node, "input '" + name + "' is not a known layer");
    }
    inputs.push_back(name);
  }
  const int count = static_cast<int>(inputs.size());
  if (count < info.min_inputs || (info.max_inputs >= 0 && count > info.max_inputs))
    context.fail(layer, std::string(info.name) + " takes " +
                            (info.min_inputs == info.max_inputs
                                 ? std::to_string(info.min_inputs)
                                 : "at least " + std::to_string(info.min_inputs)) +
                            " input(s), got " + std::to_string(count) +
                            (list || single ? "" : " (use 'inputs: [a, b]')"));
  return inputs;
}

void check_layer_keys(const YAML::Node& layer, const YamlContext& context, const OpInfo& info) {
  std::vector<std::string> valid(std::begin(kLayerCommonKeys), std::end(kLayerCommonKeys));
  for (const char* key : info.attribute_keys) valid.push_back(key);
  for (const char* key : info.param_roles) valid.push_back(key);
  for (const auto& entry : layer) {
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "?";
    if (std::find(valid.begin(), valid.end(), key) == valid.end())
      context.fail(entry.first, "unknown key '" + key + "' for op " + info.name +
                                    " (valid: " + join(valid) + ")");
  }
}

Node parse_layer(const YAML::Node& layer, YamlContext context, const std::string& previous,
                 const std::set<std::string>& defined, const std::set<std::string>& all_names) {
  if (!layer.IsMap()) context.fail(layer, "each layer must be a map {name: ..., op: ...}");
  Node node;
  const YAML::Node name = layer["name"];
  if (!name) context.fail(layer, "layer is missing required key 'name'");
  node.name = read_string(name, context, "name");
  context.layer = node.name;
  if (node.name == "input") context.fail(name, "'input' is reserved for the graph input");
  if (defined.count(node.name) != 0) context.fail(name, "duplicate layer name");

  const YAML::Node op = layer["op"];
  if (!op) context.fail(layer, "missing required key 'op'");
  const OpInfo* info = find_op(read_string(op, context, "op"));
  if (info == nullptr)
    context.fail(op, "unknown op '" + op.Scalar() + "' (valid ops: " + valid_op_names() + ")");
  node.op = info->op;
  check_layer_keys(layer, context, *info);

  node.inputs = parse_layer_inputs(layer, context, *info, previous, defined, all_names);
  node.attrs = parse_op_attrs(*info, layer, context);
  for (const char* role : info->param_roles) {
    const YAML::Node key = layer[role];
    if (!key) {
      const auto& optional = info->optional_param_roles;
      if (std::find_if(optional.begin(), optional.end(),
                       [&](const char* r) { return std::string(r) == role; }) != optional.end())
        continue;
      context.fail(layer, std::string("missing required key '") + role +
                              "' (the weight's name in the weight file)");
    }
    node.params.push_back(Param{role, read_string(key, context, role), {}});
  }
  if (const YAML::Node precision = layer["precision"]) {
    node.precision_request = read_string(precision, context, "precision");
    if (node.precision_request != "fp32" && node.precision_request != "fp16" &&
        node.precision_request != "int8")
      context.fail(precision,
                   "unknown precision '" + node.precision_request + "' (valid: fp32, fp16, int8)");
  }
  // `sparsity: 2:4` (only conv and linear weights can be 2:4) or `dense` (never a sparse
  // kernel); the weight itself is checked after the passes (graph/passes_sparsity.h).
  if (const YAML::Node sparsity = layer["sparsity"]) {
    node.sparsity_request = read_string(sparsity, context, "sparsity");
    if (node.sparsity_request != "2:4" && node.sparsity_request != "dense")
      context.fail(sparsity,
                   "unknown sparsity '" + node.sparsity_request + "' (valid: 2:4, dense)");
    if (node.sparsity_request == "2:4" && node.op != OpKind::Conv && node.op != OpKind::Linear)
      context.fail(sparsity, "sparsity 2:4 applies to conv and linear layers only");
  }
  // `impl`, not `kernel`: conv and pool layers already use `kernel` for the window size.
  if (const YAML::Node impl = layer["impl"])
    node.kernel_request = read_string(impl, context, "impl");
  const ErrorSite site = context.site(layer);
  node.line = site.line;
  node.column = site.column;
  node.source_layers = {node.name};
  return node;
}

Graph parse_root(const YAML::Node& root, const std::string& source_name) {
  YamlContext context{source_name, ""};
  if (!root.IsMap())
    context.fail(root, "a model file must be a YAML map with keys name, input, layers");
  for (const auto& entry : root) {
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "?";
    if (std::find(std::begin(kTopLevelKeys), std::end(kTopLevelKeys), key) ==
        std::end(kTopLevelKeys))
      context.fail(entry.first, "unknown top-level key '" + key +
                                    "' (valid: name, input, weights, labels, output, layers)");
  }
  auto required = [&](const char* key) {
    const YAML::Node value = root[key];
    if (!value) context.fail(root, std::string("missing required top-level key '") + key + "'");
    return value;
  };
  Graph graph;
  graph.source_file = source_name;
  graph.name = read_string(required("name"), context, "name");
  graph.input = parse_input_spec(required("input"), context);
  if (root["weights"])
    graph.weights_file =
        resolve_relative(source_name, read_string(root["weights"], context, "weights"));
  if (root["labels"])
    graph.labels_file =
        resolve_relative(source_name, read_string(root["labels"], context, "labels"));

  const YAML::Node layers = required("layers");
  if (!layers.IsSequence() || layers.size() == 0)
    context.fail(layers, "'layers' must be a non-empty list");
  std::set<std::string> all_names;  // to tell "later layer" from "unknown layer"
  for (const YAML::Node& layer : layers)
    if (layer.IsMap() && layer["name"] && layer["name"].IsScalar())
      all_names.insert(layer["name"].Scalar());
  std::set<std::string> defined;
  std::string previous = "input";
  for (const YAML::Node& layer : layers) {
    graph.nodes.push_back(parse_layer(layer, context, previous, defined, all_names));
    previous = graph.nodes.back().name;
    defined.insert(previous);
  }

  graph.output = graph.nodes.back().name;
  if (root["output"]) {
    const YAML::Node output = root["output"];
    graph.output = read_string(output, context, "output");
    if (defined.count(graph.output) == 0)
      context.fail(output, "output '" + graph.output + "' is not a layer");
  }
  infer_shapes(graph);
  return graph;
}

}  // namespace

Graph parse_model(const std::string& yaml_text, const std::string& source_name) {
  const YAML::Node root = load_yaml_checked(yaml_text, source_name);
  try {
    return parse_root(root, source_name);
  } catch (const YAML::Exception& e) {
    // yaml-cpp conversions we did not anticipate still become our one error type.
    ErrorSite site{source_name, e.mark.line >= 0 ? e.mark.line + 1 : 0,
                   e.mark.column >= 0 ? e.mark.column + 1 : 0, "", ""};
    throw_error(site, std::string("invalid model: ") + e.what());
  }
}

Graph load_model(const std::string& yaml_path) {
  // A model file is a few kilobytes; 16 MiB leaves room for generated ones and keeps a wrong
  // path (a disk image, /dev/zero) from being read into memory.
  constexpr uintmax_t kMaxModelBytes = 16u << 20;
  return parse_model(read_bounded_text_file(yaml_path, "model file", kMaxModelBytes), yaml_path);
}

void bind_weights(Graph& graph, std::map<std::string, HostTensor> weights,
                  const std::string& weights_path) {
  // Check everything first so a bad file leaves the graph untouched.
  for (const Node& node : graph.nodes) {
    for (const Param& param : node.params) {
      const ErrorSite site{weights_path, 0, 0, node.name, param.key};
      const Shape expected = expected_param_shape(node, param.role);
      auto found = weights.find(param.key);
      if (found == weights.end())
        throw_error(site, std::string("missing from the weight file (needed as ") +
                              op_name(node.op) + " '" + param.role + "' of shape " +
                              shape_to_string(expected) + ")");
      const HostTensor& tensor = found->second;
      if (tensor.shape != expected)
        throw_error(site, "shape mismatch for '" + param.role + "': expected " +
                              shape_to_string(expected) + ", the file has " +
                              shape_to_string(tensor.shape));
      if (static_cast<int64_t>(tensor.data.size()) != tensor.elements())
        throw_error(site, "holds " + std::to_string(tensor.data.size()) + " values for shape " +
                              shape_to_string(tensor.shape));
      // A NaN or Inf weight makes every output NaN without any other sign; say where it is.
      const auto bad = std::find_if(tensor.data.begin(), tensor.data.end(),
                                    [](float v) { return !std::isfinite(v); });
      if (bad != tensor.data.end())
        throw_error(site, "value " + std::to_string(*bad) + " at index " +
                              std::to_string(bad - tensor.data.begin()) +
                              " is not finite (NaN or Inf weights make every output NaN)");
    }
  }
  // Moved, not copied (AlexNet: 244 MB once more and its page faults, on every load); a key
  // several params share is copied to all but its last user.
  std::map<std::string, int> users;
  for (const Node& node : graph.nodes)
    for (const Param& param : node.params) ++users[param.key];
  for (Node& node : graph.nodes)
    for (Param& param : node.params) {
      HostTensor& tensor = weights.at(param.key);
      if (--users[param.key] == 0)
        param.value = std::move(tensor);
      else
        param.value = tensor;
    }
}

void load_weights(Graph& graph, const std::string& weights_path) {
  bind_weights(graph, read_safetensors(weights_path), weights_path);
}

std::vector<std::string> read_labels(const std::string& path) {
  // ImageNet's 1000 labels are 10 kB; a wrong path to a disk image must not be read whole, and
  // a directory must not read as "no labels".
  constexpr uint64_t kMaxLabelBytes = 16u << 20;
  std::istringstream in(read_bounded_text_file(path, "label file", kMaxLabelBytes));
  std::vector<std::string> labels;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    labels.push_back(line);
  }
  return labels;
}

std::vector<std::string> read_labels(const std::string& path, int64_t classes) {
  std::vector<std::string> labels = read_labels(path);
  // One optional empty last line (an editor's trailing blank line) is not a class.
  if (static_cast<int64_t>(labels.size()) == classes + 1 && labels.back().empty())
    labels.pop_back();
  if (static_cast<int64_t>(labels.size()) != classes)
    throw_error(ErrorSite{path, 0, 0, "", ""},
                "label file has " + std::to_string(labels.size()) + " lines but the model has " +
                    std::to_string(classes) +
                    " classes (one label per line, in class order; a header line or a missing "
                    "label would shift every name)");
  return labels;
}

}  // namespace cnnrt
