// Weight resolution and device/precision choice for the CLIs; see model_setup.h.
#include "apps/common/model_setup.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>

#include "graph/model_loader.h"

namespace cnnrt::apps {
namespace {

bool is_regular_file(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

}  // namespace

std::vector<FlagSpec> weight_flags() {
  return {{"--weights", FlagKind::Value}, {"--random-weights", FlagKind::OptionalValue}};
}

std::vector<FlagSpec> device_flags() {
  return {{"--device", FlagKind::Value},
          {"--precision", FlagKind::Value},
          {"--plan", FlagKind::Value},
          {"--calib", FlagKind::Value}};
}

std::vector<FlagSpec> join_flags(std::vector<std::vector<FlagSpec>> tables) {
  std::vector<FlagSpec> all;
  for (auto& table : tables) all.insert(all.end(), table.begin(), table.end());
  return all;
}

Graph load_graph_with_weights(const std::string& model_path, const Args& args) {
  Graph graph = load_model(model_path);
  bind_weights_from_args(graph, model_path, args);
  return graph;
}

void bind_weights_from_args(Graph& graph, const std::string& model_path, const Args& args) {
  if (args.has("--weights") && args.has("--random-weights")) {
    args.fail("--weights and --random-weights exclude each other");
  }
  if (args.has("--weights")) {
    load_weights(graph, args.require("--weights"));
    return;
  }
  if (args.has("--random-weights")) {
    const int64_t seed =
        args.get_int("--random-weights", 0, 0, std::numeric_limits<int64_t>::max());
    bind_random_weights(graph, static_cast<uint64_t>(seed));
    std::cerr << "note: random weights (seed " << seed << "): labels are meaningless\n";
    return;
  }
  if (graph.weights_file.empty()) {
    ErrorSite site;
    site.file = model_path;
    throw_error(site,
                "the model names no weight file (no `weights:` key); pass --weights W "
                "or --random-weights");
  }
  if (!is_regular_file(graph.weights_file)) {
    throw Error("no weight file: " + graph.weights_file +
                " not found. Export torchvision's pretrained weights with `python3 "
                "tools/export_torchvision.py --out " +
                graph.weights_file + "` (needs torch+torchvision), or run with --random-weights");
  }
  load_weights(graph, graph.weights_file);
}

DeviceChoice resolve_device(const std::string& text) {
  const Device requested = parse_device(text);
  DeviceChoice choice;
  const bool have_cuda = cuda_available();
  if (requested == Device::CUDA && !have_cuda) {
#ifdef CNNRT_WITH_CUDA
    throw Error("--device cuda: no usable CUDA device found");
#else
    throw Error("--device cuda: this build of cnnrt has no CUDA backend");
#endif
  }
  choice.device = requested == Device::Auto ? (have_cuda ? Device::CUDA : Device::CPU) : requested;
  choice.name = device_info(choice.device).name;
  const std::string kind = to_string(choice.device);
  std::string detail = choice.name;
  if (requested == Device::Auto && !have_cuda) detail = "no CUDA device found";
  choice.summary = detail.empty() || detail == kind ? kind : kind + " (" + detail + ")";
  return choice;
}

BuildOptions build_options(const Args& args, const DeviceChoice& device) {
  BuildOptions options;
  options.device = device.device;
  options.precision = parse_precision(args.get_string("--precision", "auto"));
  if (args.has("--plan"))
    options.layer_choices = load_plan_file(args.get_string("--plan", ""), &options.choices_model);
  if (args.has("--calib")) options.calibration = load_calibration(args.get_string("--calib", ""));
  return options;
}

ModelInfo model_info_from_graph(const Graph& graph) {
  ModelInfo info;
  info.name = graph.name;
  info.input_shape = graph.input.shape;
  info.mean = graph.input.mean;
  info.std = graph.input.std;
  if (const Node* out = graph.find(graph.output)) info.output_shape = out->output_shape;
  return info;
}

}  // namespace cnnrt::apps
