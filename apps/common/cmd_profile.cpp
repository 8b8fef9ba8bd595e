// `cnnrt profile MODEL --batch N ...`: per-layer timings of the engine as built (and, with
// --compare, of every candidate kernel of every layer), as a table, JSON and a Chrome trace.
#include <iostream>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "apps/common/profile_report.h"
#include "graph/atomic_write.h"

namespace cnnrt::apps {

int cmd_profile(const Arguments& arguments) {
  const Args args = parse_command_args("profile",
                                       join_flags({weight_flags(),
                                                   device_flags(),
                                                   {{"--batch", FlagKind::Value},
                                                    {"--iterations", FlagKind::Value},
                                                    {"--json", FlagKind::Value},
                                                    {"--trace", FlagKind::Value},
                                                    {"--compare", FlagKind::Switch}}}),
                                       arguments, 1, 1);
  const int batch = static_cast<int>(args.get_int("--batch", 1, 1, kMaxBatch));
  const int iterations = static_cast<int>(args.get_int("--iterations", 20, 1, 100000));
  const std::string json_path = args.get_string("--json", "");
  const std::string trace_path = args.get_string("--trace", "");
  if (args.has("--json") && json_path.empty()) args.fail("--json needs a file name");
  if (args.has("--trace") && trace_path.empty()) args.fail("--trace needs a file name");
  for (const std::string& path : {json_path, trace_path})  // before the profile, not after
    if (!path.empty()) check_output_path(path);
  const DeviceChoice device = resolve_device(args.get_string("--device", "auto"));
  const BuildOptions options = build_options(args, device);

  const Graph graph = load_graph_with_weights(args.positional()[0], args);
  const auto engine = Engine::build(graph, options);
  const auto context = engine->create_context(batch);
  const std::vector<LayerProfile> layers = context->profile(iterations);
  std::vector<LayerProfile> candidates;
  if (args.has("--compare")) candidates = context->compare_kernels(iterations);

  const DeviceInfo info = device_info(device.device);
  const std::string precision = to_string(engine->precision());
  std::cout << "model " << engine->model().name << ", device " << device.summary << ", precision "
            << precision << ", batch " << batch << ", median of " << iterations << " runs\n\n"
            << format_profile_table(layers, info);
  if (args.has("--compare")) {
    std::cout << "\nevery candidate kernel per layer:\n" << format_compare_table(candidates, info);
  }

  const double total = total_ms(layers);
  if (!json_path.empty()) {
    nlohmann::json report = {{"model", engine->model().name},
                             {"device", to_string(device.device)},
                             {"device_name", info.name},
                             {"precision", precision},
                             {"batch", batch},
                             {"iterations", iterations},
                             {"total_ms", total},
                             {"layers", nlohmann::json::array()}};
    for (const LayerProfile& layer : layers) report["layers"].push_back(layer_json(layer, total));
    if (args.has("--compare")) {
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
    write_text_file(json_path, report.dump(2) + "\n");
    std::cout << "\nwrote " << json_path << "\n";
  }
  if (!trace_path.empty()) {
    write_text_file(trace_path, trace_json(layers).dump(1) + "\n");
    std::cout << "wrote " << trace_path << " (open in ui.perfetto.dev or chrome://tracing)\n";
  }
  return 0;
}

}  // namespace cnnrt::apps
