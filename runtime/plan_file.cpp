// Plan files: per-layer precision and kernel choices kept apart from the model
// (docs/FORMAT.md, "Plan files").
//
//   model: alexnet              # optional; when present the build refuses another model
//   model_hash: 1f0e...         # optional; when present the build refuses other weights
//   device: cpu                 # optional; the CLIs refuse a plan made for another device
//   batch: 64                   # optional, informational: the batch it was tuned at
//   budget: rel_l2=0.01         # optional, informational
//   calibration: digits.calib.json   # optional, relative to this file: the int8 scales
//   weights: plan.yaml.weights.safetensors   # optional, relative to this file: the weights
//                               # it runs on (its pruned layers pruned); model_hash is theirs
//   layers:
//     conv1: {precision: fp16, kernel: conv_fp16_s2d, variant: 64x128}
//     fc6: {precision: fp32}
//     fc7: {sparsity: 2:4}        # 2:4 sparse kernel (the weight must be 2:4)
//
// Every key is checked (unknown keys, a precision that is not fp32/fp16/int8, an empty layer
// entry are errors with file:line:col); layer names are checked against the model at build.
#include "runtime/plan_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "graph/bounded_read.h"
#include "graph/yaml_read.h"
#include "runtime/content_hash.h"

namespace cnnrt {
namespace {

std::string origin_of(const std::string& path, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  return path + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

}  // namespace

namespace {

const char* const kTopKeys[] = {"model",  "model_hash",  "device",  "batch",
                                "budget", "calibration", "weights", "layers"};

void check_top_keys(const YAML::Node& root, const YamlContext& context) {
  for (const auto& entry : root) {
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "?";
    bool known = false;
    for (const char* valid : kTopKeys) known = known || key == valid;
    if (!known)
      context.fail(entry.first, "unknown key '" + key +
                                    "' (valid: model, model_hash, device, batch, budget, "
                                    "calibration, weights, layers)");
  }
}

// One `layers:` entry: {precision, kernel, variant}.
void read_layer(const YAML::Node& spec, YamlContext& context, LayerChoice& choice,
                std::string& variant) {
  if (!spec.IsMap() || spec.size() == 0)
    context.fail(spec, "expected a map {precision: ..., kernel: ...}");
  for (const auto& field : spec) {
    const std::string key = field.first.IsScalar() ? field.first.Scalar() : "?";
    if (key == "precision") {
      const std::string value = read_string(field.second, context, "precision");
      if (value != "fp32" && value != "fp16" && value != "int8")
        context.fail(field.second, "unknown precision '" + value + "' (valid: fp32, fp16, int8)");
      choice.precision = parse_precision(value);
    } else if (key == "kernel") {
      choice.kernel = read_string(field.second, context, "kernel");
    } else if (key == "variant") {
      variant = read_string(field.second, context, "variant");
    } else if (key == "sparsity") {
      choice.sparsity = read_string(field.second, context, "sparsity");
      if (choice.sparsity != "2:4" && choice.sparsity != "dense")
        context.fail(field.second,
                     "unknown sparsity '" + choice.sparsity + "' (valid: 2:4, dense)");
    } else {
      context.fail(field.first,
                   "unknown key '" + key + "' (valid: precision, kernel, variant, sparsity)");
    }
  }
}

// content_hash.h's hashes, 64-bit: stable across platforms of one endianness, which is all a
// plan file needs (it is rebuilt, not shipped between machines of different byte order).
struct Fnv64 {
  uint64_t hash = kHashSeed;
  void bytes(const void* data, size_t size) { hash = hash_fnv1a(data, size, hash); }
  void text(const std::string& value) { bytes(value.c_str(), value.size() + 1); }
  void number(int64_t value) { bytes(&value, sizeof value); }
  void shape(const Shape& shape) {
    number(static_cast<int64_t>(shape.size()));
    for (int64_t d : shape) number(d);
  }
  // Weights: 8 bytes at a time, big tensors in blocks on the host's cores (content_hash.h).
  void floats(const HostVector<float>& values) {
    hash = hash_bytes_blocked(values.data(), values.size() * sizeof(float), hash);
  }
};

}  // namespace

PlanFile read_plan_file(const std::string& path) {
  // A plan lists each layer once in a line or two: 4 MiB is thousands of layers.
  constexpr uint64_t kMaxPlanBytes = 4u << 20;
  const YAML::Node root = load_yaml_checked(
      read_bounded_text_file(path, "plan file", kMaxPlanBytes), path, "not valid YAML");
  YamlContext context{path, ""};
  if (!root.IsMap()) context.fail(root, "a plan file must be a YAML map with a 'layers' map");
  check_top_keys(root, context);
  PlanFile plan;
  if (const YAML::Node node = root["model"]) plan.model = read_string(node, context, "model");
  if (const YAML::Node node = root["model_hash"])
    plan.model_hash = read_string(node, context, "model_hash");
  if (const YAML::Node node = root["device"]) {
    plan.device = read_string(node, context, "device");
    if (plan.device != "cpu" && plan.device != "cuda")
      context.fail(node, "unknown device '" + plan.device + "' (valid: cpu, cuda)");
  }
  if (const YAML::Node node = root["batch"]) plan.batch = read_positive_int(node, context, "batch");
  if (const YAML::Node node = root["budget"]) plan.budget = read_string(node, context, "budget");
  // Files a plan names are relative to the plan, so a plan and its files move together.
  auto beside_plan = [&](const std::string& written) {
    return std::filesystem::path(written).is_absolute()
               ? written
               : (std::filesystem::path(path).parent_path() / written).string();
  };
  if (const YAML::Node node = root["calibration"]) {
    plan.calibration = read_string(node, context, "calibration");
    plan.calibration_path = beside_plan(plan.calibration);
  }
  if (const YAML::Node node = root["weights"]) {
    plan.weights = read_string(node, context, "weights");
    if (plan.weights.empty()) context.fail(node, "'weights' names no file");
    plan.weights_path = beside_plan(plan.weights);
  }
  const YAML::Node layers = root["layers"];
  if (!layers || !layers.IsMap()) context.fail(root, "missing the 'layers' map");
  for (const auto& entry : layers) {
    const std::string layer = read_string(entry.first, context, "layer name");
    context.layer = layer;
    LayerChoice choice;
    choice.origin = origin_of(path, entry.first);
    std::string variant;
    read_layer(entry.second, context, choice, variant);
    if (plan.layers.count(layer) != 0) context.fail(entry.first, "layer listed twice");
    plan.layers[layer] = choice;
    plan.order.push_back(layer);
    if (!variant.empty()) plan.variants[layer] = variant;
  }
  return plan;
}

std::map<std::string, LayerChoice> load_plan_file(const std::string& path,
                                                  std::string* model_name) {
  PlanFile plan = read_plan_file(path);
  if (model_name != nullptr && !plan.model.empty()) *model_name = plan.model;
  return plan.layers;
}

void apply_plan_file(const std::string& path, BuildOptions& options) {
  const PlanFile plan = read_plan_file(path);
  if (!plan.device.empty()) {
    const Device planned = parse_device(plan.device);
    if (options.device == Device::Auto) {
      options.device = planned;
    } else if (options.device != planned) {
      throw Error(path + ": the plan was made for device " + plan.device + ", not " +
                  to_string(options.device));
    }
  }
  options.layer_choices = plan.layers;
  options.choices_model = plan.model;
  options.choices_fingerprint = plan.model_hash;
  options.choices_weights = plan.weights_path;
  // The scales its int8 layers were chosen with, unless the caller gave others.
  if (options.calibration == nullptr && !plan.calibration_path.empty())
    options.calibration = load_calibration(plan.calibration_path);
}

std::string plan_file_text(const PlanFile& plan, const std::string& header) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  auto scalar = [&](const char* key, const std::string& value) {
    if (!value.empty()) out << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << value;
  };
  scalar("model", plan.model);
  scalar("model_hash", plan.model_hash);
  scalar("device", plan.device);
  if (plan.batch > 0) out << YAML::Key << "batch" << YAML::Value << plan.batch;
  scalar("budget", plan.budget);
  scalar("calibration", plan.calibration);
  scalar("weights", plan.weights);
  out << YAML::Key << "layers" << YAML::Value << YAML::BeginMap;
  std::vector<std::string> order = plan.order;
  for (const auto& entry : plan.layers)
    if (std::find(order.begin(), order.end(), entry.first) == order.end())
      order.push_back(entry.first);
  for (const std::string& layer : order) {
    const auto found = plan.layers.find(layer);
    if (found == plan.layers.end()) continue;
    const LayerChoice& choice = found->second;
    // Quoted: a plain key keeps brackets and quotes as text, which the reader's text-level
    // nesting guard would count (a layer named `a[[[...` written plain was refused on reading).
    // A long name is an explicit key ("? name"): an implicit one may not pass 1,024 characters
    // once escaped (YAML 1.2), and a control character escapes to up to 10.
    out << YAML::Key;
    if (layer.size() > 100) out << YAML::LongKey;
    out << YAML::DoubleQuoted << layer << YAML::Value << YAML::Flow << YAML::BeginMap;
    if (choice.precision != Precision::Auto)
      out << YAML::Key << "precision" << YAML::Value << to_string(choice.precision);
    if (!choice.kernel.empty())
      out << YAML::Key << "kernel" << YAML::Value << YAML::DoubleQuoted << choice.kernel;
    if (!choice.sparsity.empty())
      out << YAML::Key << "sparsity" << YAML::Value << YAML::DoubleQuoted << choice.sparsity;
    auto variant = plan.variants.find(layer);
    if (variant != plan.variants.end() && !variant->second.empty())
      out << YAML::Key << "variant" << YAML::Value << YAML::DoubleQuoted << variant->second;
    out << YAML::EndMap;
  }
  out << YAML::EndMap << YAML::EndMap;
  std::string text;
  std::stringstream lines(header);
  for (std::string line; std::getline(lines, line);) text += "# " + line + "\n";
  return text + out.c_str() + "\n";
}

std::string model_fingerprint(const Graph& graph) {
  Fnv64 h;
  h.text(graph.name);
  h.shape(graph.input.shape);
  for (const Node& node : graph.nodes) {
    h.text(node.name);
    h.number(static_cast<int64_t>(node.op));
    for (const std::string& input : node.inputs) h.text(input);
    for (const Shape& shape : node.input_shapes) h.shape(shape);
    h.shape(node.output_shape);
    for (const Param& param : node.params) {
      h.text(param.role);
      h.text(param.key);
      h.shape(param.value.shape);
      h.floats(param.value.data);
    }
  }
  return hash_hex(h.hash);
}

}  // namespace cnnrt
