// `cnnrt accuracy MODEL (--weights W | --random-weights [SEED]) --calib CALIB.json
// (--images DIR | --input X.npy) [--samples N] [--batch B] [--layers L1,L2 | --whole-only]
// [--json OUT.json]`: the int8 accuracy report (runtime/accuracy.h, docs/QUANTIZATION.md):
// per layer the change of the network output when that layer alone runs in int8, and when every
// layer does, against fp32 on the CPU, as a table on stdout and optionally as JSON (written
// through a temporary file and a rename).
//
// The flags are declared in add_accuracy (CLI11, apps/common/cli.h); everything else is
// `run_accuracy`.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "apps/common/npy.h"
#include "runtime/accuracy.h"

namespace cnnrt::apps {

struct AccuracyCommand {
  std::string calib_path;
  std::string images_dir;  // exactly one of images_dir and input_path
  std::string input_path;
  std::string json_path;  // "" = no JSON
  int samples = 0;        // 0 = all
  int batch = 8;
  std::vector<std::string> layers;  // empty = every int8 layer
  bool whole_only = false;
};
int run_accuracy(const Graph& graph, const AccuracyCommand& command);

int run_accuracy(const Graph& graph, const AccuracyCommand& command) {
  JsonOutput json;
  json.path = command.json_path;
  json.prepare();
  const auto calibration = load_calibration(command.calib_path);

  SampleSet set;
  read_sample_source(set, command.input_path, command.images_dir, graph, "input set");

  AccuracySettings settings;
  settings.batch = command.batch;
  settings.max_samples = command.samples;
  settings.layers = command.layers;
  settings.per_layer = !command.whole_only;
  if (::isatty(STDERR_FILENO) == 1)
    settings.progress = [](int done, int total, const std::string& name) {
      std::cerr << "\raccuracy [" << done << "/" << total << "] " << name << "\033[K"
                << (done == total ? "\n" : "") << std::flush;
    };
  const AccuracyReport report = accuracy_report(graph, calibration, set.inputs, settings);
  report_stream() << report.to_table();
  json.write(nlohmann::json::parse(report.to_json()));
  return 0;
}

RunCommand add_accuracy(CLI::App& command) {
  struct Args {
    std::string model, layers;
    WeightArgs weights;
    AccuracyCommand command;
  };
  auto args = std::make_shared<Args>();
  add_model_argument(command, args->model);
  add_weight_options(command, args->weights);
  command.add_option("--calib", args->command.calib_path, "calibration JSON (cnnrt calibrate)")
      ->type_name("CALIB.json")
      ->required()
      ->check(no_stdin());
  CLI::Option* images =
      command.add_option("--images", args->command.images_dir, "held-out images folder")
          ->type_name("DIR")
          ->check(no_stdin());
  CLI::Option* input =
      command.add_option("--input", args->command.input_path, "held-out set as [N, ...] .npy")
          ->type_name("X.npy")
          ->check(no_stdin());
  images->excludes(input);
  command.add_option("--samples", args->command.samples, "use the first N samples (0: all)")
      ->type_name("N")
      ->check(int_range(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  command.add_option("--batch", args->command.batch, "samples per engine run")
      ->type_name("B")
      ->check(int_range(1, kMaxBatch))
      ->capture_default_str();
  CLI::Option* layers =
      command.add_option("--layers", args->layers, "only these fused layers (comma-separated)")
          ->type_name("L1,L2");
  CLI::Option* whole =
      command.add_flag("--whole-only", args->command.whole_only, "only the all-int8 row");
  layers->excludes(whole);
  command
      .add_option("--json", args->command.json_path,
                  "also write the report as JSON to FILE ('-': to stdout, instead of the text)")
      ->type_name("FILE");
  return [args] {
    if (args->command.images_dir.empty() == args->command.input_path.empty())
      throw UsageError("give the input set as exactly one of --images DIR or --input X.npy");
    args->command.layers = split_comma_list(args->layers);
    if (!args->layers.empty() && args->command.layers.empty())
      throw UsageError("--layers needs layer names");
    return run_accuracy(load_graph_with_weights(args->model, args->weights), args->command);
  };
}

}  // namespace cnnrt::apps
