// `cnnrt build MODEL (--weights W | --random-weights [SEED]) --precision auto --budget SPEC
// [--batch N] [--device cpu|cuda] [--calib CALIB.json] [--images DIR | --input X.npy]
// [--precisions fp32,fp16,int8] [--allow-prune 2:4] [--timing-cache FILE] [--timing-runs N]
// -o PLAN.yaml [--explain] [--json FILE]`: the automatic per-layer precision and kernel choice
// (runtime/auto_plan.h) written as a plan file (docs/FORMAT.md, "Plan files") that `cnnrt run /
// bench / profile / plan` and alexnet_infer take with --plan.
//
// Without --calib and with an input set, int8 candidates get a calibration made here (entropy)
// from the first half of the set; the second half is the held-out set the errors are measured
// on, so no sample both sets scales and judges them.  The calibration is written next to the
// plan (PLAN.calib.json) and named in it.  With --timing-cache the calibration is kept there
// too (keyed by model, inputs and method), so a warm build does not calibrate again.  Nothing is
// written when the budget cannot be met.
//
// With --allow-prune 2:4 a layer may also be pruned 2:4 by magnitude and run on a sparse kernel
// (runtime/auto_plan_prune.h).  When the plan prunes any layer, the model's weights with those
// layers pruned go next to the plan (PLAN.yaml.weights.safetensors, every tensor, fp32), and the
// plan names the file (`weights:`) and carries its hash (model_hash): `--plan` alone loads them,
// other weights are a stale plan.  Written before the plan, so a plan never names a missing
// file; removed again if the plan cannot be written.  No pruned layer: no file, the plan as
// without the option.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "apps/common/progress.h"
#include "graph/atomic_write.h"
#include "graph/safetensors.h"
#include "runtime/auto_plan.h"
#include "runtime/build_trace.h"
#include "runtime/plan_file.h"

namespace cnnrt::apps {
namespace {

struct BuildArgs {
  std::string model, device = "auto", precision, budget, calib, images, input, precisions;
  std::string timing_cache, output, json, allow_prune;
  int batch = 1, samples = 0, timing_runs = 10;
  bool explain = false;
  WeightArgs weights;
};

// Samples [first, first + count) of `all`.
CalibrationInputs slice(const CalibrationInputs& all, int first, int count) {
  CalibrationInputs part;
  part.samples = count;
  part.load = [load = all.load, first](int at, int n, float* out) { load(first + at, n, out); };
  return part;
}

std::vector<Precision> parse_precisions(const std::string& text) {
  std::vector<Precision> out;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');) {
    if (item != "fp32" && item != "fp16" && item != "int8")
      throw UsageError("--precisions: unknown precision '" + item + "' (valid: fp32, fp16, int8)");
    out.push_back(parse_precision(item));
  }
  if (!text.empty() && out.empty()) throw UsageError("--precisions needs precisions");
  return out;
}

bool allows(const std::vector<Precision>& precisions, Precision p) {
  return precisions.empty() ||
         std::find(precisions.begin(), precisions.end(), p) != precisions.end();
}

// A calibration file path as the plan should name it: relative to the plan's folder.
std::string relative_to_plan(const std::string& file, const std::string& plan) {
  namespace fs = std::filesystem;
  const fs::path folder = fs::absolute(plan).parent_path();
  return fs::absolute(file).lexically_normal().lexically_relative(folder).string();
}

// The model as the plan runs it (the chosen layers pruned), written whole so that it is the one
// weight file a `--plan` needs; its hash must be the plan's, or the plan would refuse it.
void write_planned_weights(const Graph& graph, const AutoPlan& plan, const std::string& path) {
  const Graph planned = planned_model(graph, plan);
  if (model_fingerprint(planned) != plan.fingerprint)
    throw Error("internal: the pruned weights do not hash to the plan's model_hash");
  std::map<std::string, HostTensor> tensors;
  for (const Node& node : planned.nodes)
    for (const Param& param : node.params) tensors[param.key] = param.value;
  std::string layers;
  for (const std::string& layer : plan.pruned_layers())
    layers += (layers.empty() ? "" : ",") + layer;
  write_safetensors(path, tensors, StoredDType::F32,
                    {{"model", graph.name}, {"pruned", "2:4"}, {"pruned_layers", layers}});
}

std::string plan_header(const AutoPlan& plan, const std::string& calibration_note) {
  std::string text = "made by cnnrt build --precision auto --budget " + plan.budget.to_string() +
                     " (batch " + std::to_string(plan.batch) + ", " + plan.device + ")\n";
  char line[256];
  std::snprintf(line, sizeof line,
                "time %.4f ms (a whole forward, as cnnrt bench times it) vs %s %.4f ms\n",
                plan.chosen_ms, plan.baseline_name.c_str(), plan.baseline_ms);
  text += line;
  if (plan.has_error)
    text += "error " + plan.budget.describe(plan.choice.error) + " on the held-out set\n";
  std::string pruned;
  for (const std::string& layer : plan.pruned_layers())
    pruned += (pruned.empty() ? "" : ", ") + layer;
  if (!pruned.empty())
    text += "pruned 2:4 by this build (magnitude): " + pruned + "; run with the weights it names\n";
  return text + calibration_note;
}

bool any_pruned_candidate(const AutoPlan& plan) {
  for (const LayerCandidates& layer : plan.layers)
    for (const Candidate& c : layer.candidates)
      if (c.pruned) return true;
  return false;
}

int run_build(const BuildArgs& args) {
  BuildTrace trace("[cnnrt build] ");  // CNNRT_TRACE_BUILD=1: the phases of this command
  const Budget budget = parse_budget(args.budget);  // a bad SPEC fails before any work
  const std::vector<Precision> precisions = parse_precisions(args.precisions);
  check_output_path(args.output);
  JsonOutput json;
  json.path = args.json;
  json.prepare();
  // A build without a timing cache builds engines: CUDA starts while the files are read.  With
  // one, most builds are answered by it and build none, so a warm build makes no context at all
  // (creating one and tearing it down is ~0.35 s of CUDA's process floor); it only asks the
  // driver which device this is (the cache's key), on a thread while the files are read — the
  // driver's initialisation, ~0.1-0.2 s.  A cache that misses creates the context at its first
  // engine instead, without the overlap.
  std::future<DeviceChoice> device_query;
  if (args.timing_cache.empty() || !std::filesystem::exists(args.timing_cache))
    start_device(args.device);
  else
    device_query =
        std::async(std::launch::async, [&args] { return resolve_device(args.device, false); });
  const Graph graph = load_graph_with_weights(args.model, args.weights);
  trace.mark("model and weights loaded");
  const DeviceChoice device =
      device_query.valid() ? device_query.get() : resolve_device(args.device, false);
  trace.mark("device");
  SampleSet set;
  read_sample_source(set, args.input, args.images, graph, "input set");
  trace.mark("input set read");
  if (args.samples > 0 && set.inputs.samples > args.samples) set.inputs.samples = args.samples;

  AutoPlanSettings settings;
  settings.device = device.device;
  settings.batch = args.batch;
  settings.budget = budget;
  settings.precisions = precisions;
  settings.allow_prune_2_4 = args.allow_prune == "2:4";
  // Opened first: it holds the calibration this build makes too, not only the timings.
  std::unique_ptr<TimingCache> cache =
      args.timing_cache.empty() ? nullptr : std::make_unique<TimingCache>(args.timing_cache);
  settings.cache = cache.get();
  CalibrationInputs held_out = set.inputs;
  std::string calib_file, calib_json, calib_note;
  if (!args.calib.empty()) {
    settings.calibration = load_calibration(args.calib);
    calib_file = relative_to_plan(args.calib, args.output);
    // A calibration of another model fails here, naming the file and the tensor, instead of
    // turning every int8 candidate into "not applicable".
    BuildOptions check;
    check.device = Device::CPU;
    check.precision = Precision::INT8;
    check.calibration = settings.calibration;
    Engine::build(graph, check);
  } else if (allows(precisions, Precision::INT8) && set.inputs.samples >= 2) {
    const int half = set.inputs.samples / 2;
    note("no --calib: calibrating int8 (entropy) on the first " + std::to_string(half) +
         " inputs; errors are measured on the other " + std::to_string(set.inputs.samples - half));
    CalibrationSettings calibrate_settings;
    calibrate_settings.method = parse_calibration_method("entropy");
    calibrate_settings.device = device.device;  // on the GPU: ~0.1 s instead of ~20 for AlexNet
    bool computed = true;
    std::shared_ptr<Engine> fp32_engine;  // the calibration's: the held-out reference runs on it
    auto calibration = std::make_shared<Calibration>(
        *cached_calibration(graph, slice(set.inputs, 0, half), calibrate_settings, cache.get(),
                            &computed, &fp32_engine));
    settings.reference_engine = fp32_engine;  // null when the cache answered
    if (!computed) note("calibration: from the timing cache (same model, inputs and method)");
    calib_file = std::filesystem::path(args.output).filename().string() + ".calib.json";
    calibration->source = calib_file;
    calib_json = calibration_to_json(*calibration);
    settings.calibration = calibration;
    held_out = slice(set.inputs, half, set.inputs.samples - half);
    calib_note = "calibration made by this build from " + std::to_string(half) + " inputs\n";
  } else if (allows(precisions, Precision::INT8)) {
    note("no --calib and no input set: int8 candidates are not applicable");
  }
  trace.mark("calibration");
  settings.eval_batch = std::max(1, std::min(args.batch, 64));
  const auto timing = profile_timing(args.timing_runs);
  settings.timing = timing.get();
  if (::isatty(STDERR_FILENO) == 1)
    settings.progress = [](const std::string& what) {
      std::cerr << "\rbuild: " << what << "\033[K" << std::flush;
    };
  const AutoPlan plan = auto_plan(graph, held_out, settings);
  if (settings.progress) std::cerr << "\r\033[K" << std::flush;
  trace.mark("auto plan");

  if (settings.allow_prune_2_4 && !any_pruned_candidate(plan))
    note("--allow-prune 2:4: no layer has a sparse kernel on " + plan.device +
         " at the candidate precisions (or every weight is 2:4 already)");
  const std::vector<std::string> pruned = plan.pruned_layers();
  const std::string weights_file =
      pruned.empty()
          ? ""
          : std::filesystem::path(args.output).filename().string() + ".weights.safetensors";

  std::ostream& out = report_stream();
  if (args.explain) out << plan.explain();
  nlohmann::json report = nlohmann::json::parse(plan.to_json());
  if (plan.choice.met && !weights_file.empty()) report["weights_file"] = weights_file;
  json.write(report);
  if (!plan.choice.met)
    throw Error("budget " + budget.to_string() + " cannot be met: the most accurate assignment " +
                "of the candidates reaches " + budget.describe(plan.choice.error) +
                " on the held-out set (nothing written)");

  PlanFile file;
  file.model = plan.model;
  file.model_hash = plan.fingerprint;
  file.device = plan.device;
  file.batch = plan.batch;
  file.budget = budget.to_string();
  // A pick that runs on the graph with residual adds fused (no int8 layer) lists that graph's
  // layers and names no calibration, so that `--plan` builds that graph again
  // (runtime/builder.cpp, pass_options).
  const bool residuals_fused = !plan.fused_layers.empty();
  if (residuals_fused) {
    for (const AutoPlan::FusedLayer& layer : plan.fused_layers) {
      file.layers[layer.layer] = layer.choice;
      file.order.push_back(layer.layer);
      if (!layer.variant.empty()) file.variants[layer.layer] = layer.variant;
    }
  } else {
    for (const LayerCandidates& layer : plan.layers) {
      const Candidate& c = layer.candidates[layer.chosen];
      file.layers[layer.layer] = c.choice();  // a pruned layer: sparsity "2:4"
      file.layers[layer.layer].origin.clear();
      file.order.push_back(layer.layer);
      if (!c.variant.empty()) file.variants[layer.layer] = c.variant;
    }
  }
  // Otherwise the calibration is named even when no layer took int8: a build with one keeps
  // residual adds unfused (runtime/builder.cpp, pass_options), so the plan's layers are those of
  // that graph, and an engine built from the plan must be the one that was measured.
  if (settings.calibration != nullptr && !residuals_fused) {
    file.calibration = calib_file;
    if (!calib_json.empty())
      write_text_file((std::filesystem::path(args.output).parent_path() / calib_file).string(),
                      calib_json);
  }
  const std::string weights_path =
      weights_file.empty()
          ? ""
          : (std::filesystem::path(args.output).parent_path() / weights_file).string();
  if (!weights_file.empty()) {
    file.weights = weights_file;
    write_planned_weights(graph, plan, weights_path);
  }
  try {
    write_text_file(args.output, plan_file_text(file, plan_header(plan, calib_note)));
  } catch (...) {
    std::error_code ignored;  // the plan's own error is the one to report
    if (!weights_path.empty()) std::filesystem::remove(weights_path, ignored);  // no plan names it
    throw;
  }
  trace.mark("plan written");
  if (verbosity() != Verbosity::Quiet) {
    int int8_layers = 0;
    for (const auto& [layer, choice] : file.layers)
      int8_layers += choice.precision == Precision::INT8 ? 1 : 0;
    const std::string pruned_count =
        pruned.empty() ? "" : ", " + std::to_string(pruned.size()) + " pruned 2:4";
    char line[256];
    std::snprintf(line, sizeof line,
                  ": %d layers (%d int8%s), %.4f ms vs %s %.4f ms, built in %.2f s",
                  static_cast<int>(file.layers.size()), int8_layers, pruned_count.c_str(),
                  plan.chosen_ms, plan.baseline_name.c_str(), plan.baseline_ms, plan.seconds);
    (args.explain ? out : std::cerr)
        << "wrote " << args.output << line
        << (weights_path.empty() ? "" : "; the pruned weights: " + weights_path) << "\n";
  }
  return 0;
}

}  // namespace

RunCommand add_build(CLI::App& command) {
  auto args = std::make_shared<BuildArgs>();
  add_model_argument(command, args->model);
  add_weight_options(command, args->weights);
  command.add_option("--device", args->device, "cpu, cuda or auto")
      ->check(one_of({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  CLI::Option* precision =
      command.add_option("--precision", args->precision, "auto: choose per layer (the only mode)")
          ->required()
          ->check(one_of({"auto"}));
  command
      .add_option("--budget", args->budget,
                  "end-to-end error bound vs fp32: rel_l2=X, top1_agreement=X or none")
      ->type_name("SPEC")
      ->required();
  command.add_option("--batch", args->batch, "the batch the plan is tuned at")
      ->type_name("N")
      ->check(int_range(1, kMaxBatch))
      ->capture_default_str();
  command.add_option("--calib", args->calib, "int8 scales (cnnrt calibrate); made if absent")
      ->type_name("CALIB.json")
      ->check(no_stdin());
  CLI::Option* images = command.add_option("--images", args->images, "held-out images folder")
                            ->type_name("DIR")
                            ->check(no_stdin());
  CLI::Option* input = command.add_option("--input", args->input, "held-out set as [N, ...] .npy")
                           ->type_name("X.npy")
                           ->check(no_stdin());
  images->excludes(input);
  command.add_option("--samples", args->samples, "use the first N inputs (0: all)")
      ->type_name("N")
      ->check(int_range(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  command.add_option("--precisions", args->precisions, "candidate precisions (default: all)")
      ->type_name("fp32,fp16,int8");
  command
      .add_option("--allow-prune", args->allow_prune,
                  "also try each conv/linear pruned 2:4 by magnitude on a sparse kernel; the "
                  "pruned weights are written next to the plan")
      ->type_name("2:4")
      ->check(one_of({"2:4"}))
      ->needs(precision);
  command.add_option("--timing-cache", args->timing_cache, "step times reused across builds")
      ->type_name("FILE")
      ->check(no_stdin());
  command.add_option("--timing-runs", args->timing_runs, "timed runs per step (median)")
      ->type_name("N")
      ->check(int_range(1, 10000))
      ->capture_default_str();
  command.add_option("-o,--output", args->output, "the plan file to write")
      ->type_name("PLAN.yaml")
      ->required()
      ->check(no_stdin());
  command.add_flag("--explain", args->explain, "print every candidate, its verdict and totals");
  command.add_option("--json", args->json, "the full report as JSON to FILE ('-': stdout)")
      ->type_name("FILE");
  return [args] { return run_build(*args); };
}

}  // namespace cnnrt::apps
