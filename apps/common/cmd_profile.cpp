// `cnnrt profile MODEL --batch N ...`: per-layer timings of the engine as built (and, with
// --compare, of every candidate kernel of every layer), as a table, JSON and a Chrome trace.
#include <iostream>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "apps/common/profile_report.h"
#include "graph/atomic_write.h"

namespace cnnrt::apps {
namespace {

struct ProfileArgs {
  std::string model, trace;
  int64_t batch = 1, iterations = 20;
  bool compare = false;
  WeightArgs weights;
  DeviceArgs device;
  JsonOutput json;
};

nlohmann::json profile_json(const ProfileArgs& args, const Engine& engine,
                            const DeviceChoice& device, const std::vector<LayerProfile>& layers,
                            const std::vector<LayerProfile>& candidates) {
  const double total = total_ms(layers);
  nlohmann::json report = {{"model", engine.model().name},
                           {"device", to_string(device.device)},
                           {"device_name", device.name},
                           {"precision", to_string(engine.precision())},
                           {"batch", args.batch},
                           {"iterations", args.iterations},
                           {"total_ms", total},
                           {"layers", nlohmann::json::array()}};
  for (const LayerProfile& layer : layers) report["layers"].push_back(layer_json(layer, total));
  if (args.compare) {
    report["candidates"] = nlohmann::json::array();
    double chosen_ms = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const bool chosen = i == 0 || candidates[i - 1].name != candidates[i].name;
      if (chosen) chosen_ms = candidates[i].median_ms;
      nlohmann::json row = layer_json(candidates[i], total);
      row["chosen"] = chosen;
      row["speed_vs_chosen"] =
          candidates[i].median_ms > 0 ? chosen_ms / candidates[i].median_ms : 0.0;
      report["candidates"].push_back(row);
    }
  }
  return report;
}

int run_profile(const ProfileArgs& args) {
  args.json.prepare();  // before the profile, not after it
  if (is_std_stream(args.trace))
    claim_stdout("--trace");
  else if (!args.trace.empty())
    check_output_path(args.trace);
  const DeviceChoice device = resolve_device(args.device.device);
  const BuildOptions options = build_options(args.device, device);

  const Graph graph = load_graph_with_weights(args.model, weights_for(args.weights, options));
  const auto engine = Engine::build(graph, options);
  detail(engine->describe());
  const auto context = engine->create_context(static_cast<int>(args.batch));
  const int iterations = static_cast<int>(args.iterations);
  const std::vector<LayerProfile> layers = context->profile(iterations);
  std::vector<LayerProfile> candidates;
  if (args.compare) candidates = context->compare_kernels(iterations);

  const DeviceInfo info = device_info(device.device);
  std::ostream& out = report_stream();
  out << "model " << engine->model().name << ", device " << device.summary << ", precision "
      << to_string(engine->precision()) << ", batch " << args.batch << ", median of " << iterations
      << " runs\n\n"
      << format_profile_table(layers, info);
  if (args.compare)
    out << "\nevery candidate kernel per layer:\n" << format_compare_table(candidates, info);
  args.json.write(profile_json(args, *engine, device, layers, candidates));
  if (!args.trace.empty()) {
    write_output(args.trace, trace_json(layers).dump(1) + "\n");
    if (!is_std_stream(args.trace) && verbosity() != Verbosity::Quiet)
      out << "wrote " << args.trace << " (open in ui.perfetto.dev or chrome://tracing)\n";
  }
  return 0;
}

}  // namespace

RunCommand add_profile(CLI::App& command) {
  auto args = std::make_shared<ProfileArgs>();
  add_model_argument(command, args->model);
  command.add_option("--batch", args->batch, "batch size")
      ->type_name("N")
      ->check(int_range(1, kMaxBatch))
      ->capture_default_str();
  command.add_option("--iterations", args->iterations, "timed runs per layer (median reported)")
      ->type_name("K")
      ->check(int_range(1, 100000))
      ->capture_default_str();
  command.add_flag("--compare", args->compare, "also time every candidate kernel of each layer");
  add_weight_options(command, args->weights);
  add_device_options(command, args->device);
  args->json.add_option(command);
  command.add_option("--trace", args->trace, "Chrome/Perfetto trace of the layers ('-': stdout)")
      ->type_name("FILE");
  return [args] { return run_profile(*args); };
}

}  // namespace cnnrt::apps
