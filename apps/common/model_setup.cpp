// Weight resolution and device/precision choice for the CLIs; see model_setup.h.
#include "apps/common/model_setup.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include "graph/model_loader.h"

namespace cnnrt::apps {
namespace {

bool is_regular_file(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

}  // namespace

void add_weight_options(CLI::App& command, WeightArgs& args) {
  CLI::Option* weights =
      command.add_option("--weights", args.weights, "weights (.safetensors); default: the YAML's")
          ->type_name("FILE")
          ->check(no_stdin());
  // A switch that takes `=SEED` (cli.cpp joins `--random-weights 42`), so it never swallows
  // the positional after it.  Bound to a string: CLI11 reads an integer flag whose default is
  // 0 as a negation (-1).
  CLI::Option* random =
      command
          .add_flag("--random-weights{0}", args.random_seed,
                    "deterministic random weights instead of a file (seed 0 by default)")
          ->type_name("SEED")
          ->check(int_range(0, std::numeric_limits<int64_t>::max()))
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  weights->excludes(random);
}

void add_device_options(CLI::App& command, DeviceArgs& args) {
  command.add_option("--device", args.device, "where to run: auto (CUDA when present), cpu, cuda")
      ->type_name("DEVICE")
      ->check(one_of({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  command
      .add_option("--precision", args.precision,
                  "default layer precision: auto (fp16 on CUDA, fp32 on CPU), fp32, fp16, int8")
      ->type_name("PRECISION")
      ->check(one_of({"auto", "fp32", "fp16", "int8"}))
      ->capture_default_str();
  command.add_option("--plan", args.plan, "per-layer precision/kernel choices (docs/FORMAT.md)")
      ->type_name("PLAN.yaml")
      ->check(no_stdin());
  command.add_option("--calib", args.calib, "int8 tensor scales from `cnnrt calibrate`")
      ->type_name("CALIB.json")
      ->check(no_stdin());
}

CLI::Option* add_model_argument(CLI::App& command, std::string& path) {
  return command.add_option("MODEL", path, "model YAML (docs/FORMAT.md)")
      ->type_name("")
      ->required()
      ->check(no_stdin());
}

Graph load_graph_with_weights(const std::string& model_path, const WeightArgs& args) {
  detail("loading model " + model_path);
  Graph graph = load_model(model_path);
  bind_weights_from_args(graph, model_path, args);
  return graph;
}

void bind_weights_from_args(Graph& graph, const std::string& model_path, const WeightArgs& args) {
  if (!args.weights.empty()) {
    detail("loading weights " + args.weights);
    load_weights(graph, args.weights);
    return;
  }
  if (!args.random_seed.empty()) {
    // int_range() admitted only integers from 0 to INT64_MAX.
    const uint64_t seed = std::stoull(args.random_seed);
    bind_random_weights(graph, seed);
    note("random weights (seed " + std::to_string(seed) + "): labels are meaningless");
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
  detail("loading weights " + graph.weights_file + " (the model's `weights:`)");
  load_weights(graph, graph.weights_file);
}

DeviceChoice resolve_device(const std::string& text, bool warm_up) {
  const Device requested = parse_device(text);
  DeviceChoice choice;
  const bool have_cuda = cuda_available();
  if (requested == Device::CUDA && !have_cuda) {
#ifdef CNNRT_WITH_CUDA
    throw Error("--device cuda: no usable CUDA device found (--device cpu runs on the CPU)");
#else
    throw Error(
        "--device cuda: this build of cnnrt has no CUDA backend (--device cpu runs on the CPU)");
#endif
  }
  choice.device = requested == Device::Auto ? (have_cuda ? Device::CUDA : Device::CPU) : requested;
  choice.name = device_info(choice.device).name;
  const std::string kind = to_string(choice.device);
  std::string described = choice.name;
  if (requested == Device::Auto && !have_cuda) described = "no CUDA device found";
  choice.summary = described.empty() || described == kind ? kind : kind + " (" + described + ")";
  detail("device: " + choice.summary);
  // The CUDA context is created while the caller reads its model, weights and inputs.
  if (warm_up) warm_up_device(choice.device);
  return choice;
}

void start_device(const std::string& text) { warm_up_device(parse_device(text)); }

BuildOptions build_options(const DeviceArgs& args, const DeviceChoice& device) {
  BuildOptions options = build_options(args);
  options.device = device.device;
  return options;
}

BuildOptions build_options(const DeviceArgs& args) {
  BuildOptions options;
  options.device = parse_device(args.device);
  options.precision = parse_precision(args.precision);
  // --calib overrides the scales a plan names.
  if (!args.calib.empty()) options.calibration = load_calibration(args.calib);
  if (!args.plan.empty()) apply_plan_file(args.plan, options);
  return options;
}

WeightArgs weights_for(const WeightArgs& args, const BuildOptions& options) {
  if (!args.weights.empty() || !args.random_seed.empty() || options.choices_weights.empty())
    return args;
  note("weights: " + options.choices_weights + " (named by the plan: its pruned layers)");
  return WeightArgs{options.choices_weights, ""};
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
