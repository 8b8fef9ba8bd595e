// `cnnrt calibrate MODEL (--weights W | --random-weights[=SEED]) (--images DIR | --input X.npy)
// --method minmax|percentile[:P]|entropy|mse [--batches N] [--batch B] [--device auto|cpu|cuda]
// -o CALIB.json`: runs the model in fp32 (on the GPU when there is one, else the CPU: --device)
// over a calibration set and writes the scale of every tensor an int8
// layer may read or write (docs/QUANTIZATION.md).  Images are preprocessed as `cnnrt run` does;
// each is decoded when its batch runs (once per pass), so a large set is never held in memory.
// Progress goes to stderr when it is a terminal; the file is written through a temporary file
// and a rename, so a failed run leaves nothing behind ("-o -" writes the JSON to stdout).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "apps/common/npy.h"
#include "apps/common/progress.h"
#include "graph/atomic_write.h"
#include "runtime/calibration.h"

namespace cnnrt::apps {
namespace {

struct CalibrateArgs {
  std::string model, images, input, method, output, device = "auto";
  int64_t batch = 16, batches = 0;
  WeightArgs weights;
};

int run_calibrate(const CalibrateArgs& args) {
  if (is_std_stream(args.output))
    claim_stdout("--output");
  else
    check_output_path(args.output);  // before the calibration run, not after it
  CalibrationSettings settings;
  settings.method = parse_calibration_method(args.method);
  settings.batch = static_cast<int>(args.batch);
  settings.max_batches = static_cast<int>(args.batches);
  settings.device = resolve_device(args.device).device;

  const std::string& model_path = args.model;
  const Graph graph = load_graph_with_weights(model_path, args.weights);

  SampleSet set;
  read_sample_source(set, args.input, args.images, graph, "calibration set");

  Calibration calibration;
  {
    ProgressBar progress("calibrating", "batches");
    settings.progress = [&progress](int done, int total) { progress.update(done, total); };
    calibration = calibrate(graph, set.inputs, settings);
  }
  write_output(args.output, calibration_to_json(calibration));

  std::ostream& out = report_stream();
  char line[160];
  std::snprintf(line, sizeof line, "%-24s %14s %14s\n", "tensor", "amax", "scale");
  out << line;
  for (const auto& [name, entry] : calibration.tensors) {
    std::snprintf(line, sizeof line, "%-24s %14.6g %14.6g\n", name.c_str(),
                  static_cast<double>(entry.amax), static_cast<double>(entry.scale));
    out << line;
  }
  if (verbosity() != Verbosity::Quiet)
    out << "wrote " << calibration.tensors.size() << " tensors (" << calibration.method << ", "
        << calibration.samples << " samples) to " << args.output << "\n";
  return 0;
}

}  // namespace

RunCommand add_calibrate(CLI::App& command) {
  auto args = std::make_shared<CalibrateArgs>();
  add_model_argument(command, args->model);
  add_weight_options(command, args->weights);
  CLI::Option* images =
      command.add_option("--images", args->images, "calibration images (.png/.jpg/.bmp) folder")
          ->type_name("DIR")
          ->check(no_stdin());
  CLI::Option* input =
      command.add_option("--input", args->input, "calibration set as [N, ...] .npy ('-': stdin)")
          ->type_name("X.npy");
  images->excludes(input);
  command
      .add_option("--method", args->method,
                  "minmax, percentile[:P] (P default 99.99), entropy or mse")
      ->type_name("METHOD")
      ->required()
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            try {
              parse_calibration_method(text);
              return "";
            } catch (const Error& error) {
              return error.what();
            }
          },
          ""));
  command.add_option("--batch", args->batch, "samples per calibration batch")
      ->type_name("B")
      ->check(int_range(1, kMaxBatch))
      ->capture_default_str();
  command.add_option("--batches", args->batches, "use at most N batches (0: the whole set)")
      ->type_name("N")
      ->check(int_range(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  command.add_option("--device", args->device, "where the fp32 passes run: cpu, cuda or auto")
      ->check(one_of({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  command.add_option("-o,--output", args->output, "calibration JSON to write ('-': stdout)")
      ->type_name("CALIB.json")
      ->required();
  return [args] {
    if (args->images.empty() == args->input.empty())
      throw UsageError("give the calibration set as exactly one of --images DIR or --input X.npy");
    return run_calibrate(*args);
  };
}

}  // namespace cnnrt::apps
