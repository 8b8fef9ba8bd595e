// Plan files: per-layer precision and kernel choices kept apart from the model
// (docs/FORMAT.md, "Plan files").
//
//   model: alexnet              # optional; when present the build refuses another model
//   layers:
//     conv1: {precision: fp16, kernel: conv_fp16_s2d}
//     fc6: {precision: fp32}
//     fc7: {sparsity: 2:4}        # 2:4 sparse kernel (the weight must be 2:4)
//
// Every key is checked (unknown keys, a precision that is not fp32/fp16/int8, an empty layer
// entry are errors with file:line:col); layer names are checked against the model at build.
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "cnnrt/cnnrt.h"
#include "graph/yaml_read.h"

namespace cnnrt {
namespace {

std::string origin_of(const std::string& path, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  return path + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

}  // namespace

std::map<std::string, LayerChoice> load_plan_file(const std::string& path,
                                                  std::string* model_name) {
  std::ifstream file(path);
  if (!file) throw Error(path + ": cannot read the plan file");
  std::stringstream text;
  text << file.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& error) {
    throw Error(path + ":" + std::to_string(error.mark.line + 1) + ":" +
                std::to_string(error.mark.column + 1) + ": not valid YAML: " + error.msg);
  }
  YamlContext context{path, ""};
  if (!root.IsMap()) context.fail(root, "a plan file must be a YAML map with a 'layers' map");
  for (const auto& entry : root) {
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "?";
    if (key != "model" && key != "layers")
      context.fail(entry.first, "unknown key '" + key + "' (valid: model, layers)");
  }
  if (const YAML::Node model = root["model"]) {
    const std::string name = read_string(model, context, "model");
    if (model_name != nullptr) *model_name = name;
  }
  const YAML::Node layers = root["layers"];
  if (!layers || !layers.IsMap()) context.fail(root, "missing the 'layers' map");
  std::map<std::string, LayerChoice> choices;
  for (const auto& entry : layers) {
    const std::string layer = read_string(entry.first, context, "layer name");
    context.layer = layer;
    const YAML::Node spec = entry.second;
    if (!spec.IsMap() || spec.size() == 0)
      context.fail(spec, "expected a map {precision: ..., kernel: ...}");
    LayerChoice choice;
    choice.origin = origin_of(path, entry.first);
    for (const auto& field : spec) {
      const std::string key = field.first.IsScalar() ? field.first.Scalar() : "?";
      if (key == "precision") {
        const std::string value = read_string(field.second, context, "precision");
        if (value != "fp32" && value != "fp16" && value != "int8")
          context.fail(field.second, "unknown precision '" + value + "' (valid: fp32, fp16, int8)");
        choice.precision = parse_precision(value);
      } else if (key == "sparsity") {
        choice.sparsity = read_string(field.second, context, "sparsity");
        if (choice.sparsity != "2:4" && choice.sparsity != "dense")
          context.fail(field.second,
                       "unknown sparsity '" + choice.sparsity + "' (valid: 2:4, dense)");
      } else if (key == "kernel") {
        choice.kernel = read_string(field.second, context, "kernel");
      } else {
        context.fail(field.first, "unknown key '" + key + "' (valid: precision, kernel, sparsity)");
      }
    }
    if (choices.count(layer) != 0) context.fail(entry.first, "layer listed twice");
    choices[layer] = choice;
  }
  return choices;
}

}  // namespace cnnrt
