// `cnnrt bench MODEL --batch 1,16,64 ...`: end-to-end forward latency per batch size
// (device-resident input, CUDA graph replay on the GPU), with the memory each context needs and
// the host time to build the engine and to create each context (plan, allocation, warm-up run,
// graph capture).
#include <chrono>
#include <iostream>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "apps/common/profile_report.h"
#include "graph/atomic_write.h"

namespace cnnrt::apps {

// Fewer timed runs make the median and especially p90 too noisy to compare.
constexpr int64_t kMinBenchIterations = 50;

int cmd_bench(const Arguments& arguments) {
  const Args args = parse_command_args("bench",
                                       join_flags({weight_flags(),
                                                   device_flags(),
                                                   {{"--batch", FlagKind::Value},
                                                    {"--warmup", FlagKind::Value},
                                                    {"--iterations", FlagKind::Value},
                                                    {"--json", FlagKind::Value}}}),
                                       arguments, 1, 1);
  const std::vector<int64_t> batches =
      args.get_int_list("--batch", args.require("--batch"), 1, kMaxBatch);
  const int warmup = static_cast<int>(args.get_int("--warmup", 20, 0, 1000000));
  const int iterations =
      static_cast<int>(args.get_int("--iterations", 100, kMinBenchIterations, 1000000));
  const std::string json_path = args.get_string("--json", "");
  if (args.has("--json") && json_path.empty()) args.fail("--json needs a file name");
  if (!json_path.empty()) check_output_path(json_path);  // not after minutes of benchmarking
  const DeviceChoice device = resolve_device(args.get_string("--device", "auto"));
  const BuildOptions options = build_options(args, device);

  const Graph graph = load_graph_with_weights(args.positional()[0], args);
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  };
  const auto build_start = Clock::now();
  const auto engine = Engine::build(graph, options);
  const double build_ms = ms_since(build_start);
  const std::string precision = to_string(engine->precision());
  std::cout << "model " << engine->model().name << ", device " << device.summary << ", precision "
            << precision << ", " << warmup << " warm-up + " << iterations << " timed runs\n"
            << "engine build " << fixed(build_ms, 1) << " ms (host)\n\n";

  nlohmann::json results = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows;
  for (int64_t batch : batches) {
    const auto context_start = Clock::now();
    const auto context = engine->create_context(static_cast<int>(batch));
    const double context_ms = ms_since(context_start);
    const LatencyStats stats = latency_stats(context->benchmark(warmup, iterations));
    const double images_per_s = stats.median_ms > 0 ? batch * 1000.0 / stats.median_ms : 0.0;
    const size_t arena = context->arena_bytes();
    rows.push_back({std::to_string(batch), fixed(stats.median_ms, 4), fixed(stats.min_ms, 4),
                    fixed(stats.p90_ms, 4), fixed(images_per_s, 1), significant(arena / 1048576.0),
                    significant(engine->weight_bytes() / 1048576.0), fixed(context_ms, 1)});
    results.push_back({{"batch", batch},
                       {"median_ms", stats.median_ms},
                       {"min_ms", stats.min_ms},
                       {"p90_ms", stats.p90_ms},
                       {"images_per_s", images_per_s},
                       {"arena_bytes", arena},
                       {"weight_bytes", engine->weight_bytes()},
                       {"context_create_ms", context_ms}});
  }
  std::cout << format_text_table({"batch", "median ms", "min ms", "p90 ms", "images/s", "arena MiB",
                                  "weights MiB", "context ms"},
                                 rows);
  if (!json_path.empty()) {
    const nlohmann::json report = {{"model", engine->model().name},
                                   {"device", to_string(device.device)},
                                   {"device_name", device_info(device.device).name},
                                   {"precision", precision},
                                   {"warmup", warmup},
                                   {"iterations", iterations},
                                   {"build_ms", build_ms},
                                   {"results", results}};
    write_text_file(json_path, report.dump(2) + "\n");
    std::cout << "\nwrote " << json_path << "\n";
  }
  return 0;
}

}  // namespace cnnrt::apps
