// `cnnrt bench MODEL --batch 1,16,64 ...`: end-to-end forward latency per batch size
// (device-resident input, CUDA graph replay on the GPU), with the memory each context needs and
// the host time to build the engine and to create each context (plan, allocation, warm-up run,
// graph capture).
//
// With a progress bar (stderr is a terminal, no --quiet) the timed runs are taken in chunks so
// the bar can move; each sample is still one timed forward, so on the CPU the numbers are the
// same.  On the GPU a chunk starts after a synchronisation, which can add host launch latency
// to the first run of each chunk (about 1 in 20): the median and minimum do not see it.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "apps/common/profile_report.h"
#include "apps/common/progress.h"

namespace cnnrt::apps {
namespace {

// Fewer timed runs make the median and especially p90 too noisy to compare.
constexpr int64_t kMinBenchIterations = 50;
// Work expected to take longer than this gets a progress bar.
constexpr double kProgressAfterMs = 2000;

struct BenchArgs {
  std::string model;
  std::vector<int64_t> batches;
  int64_t warmup = 20, iterations = 100;
  WeightArgs weights;
  DeviceArgs device;
  JsonOutput json;
};

// context->benchmark(warmup, iterations), in chunks with a progress bar when that is worth it.
std::vector<double> timed_runs(ExecutionContext& context, int warmup, int iterations,
                               int64_t batch) {
  ProgressBar progress("bench batch " + std::to_string(batch), "runs");
  if (!progress.enabled()) return context.benchmark(warmup, iterations);
  const int probe = std::min(iterations, 5);
  std::vector<double> samples = context.benchmark(warmup, probe);
  const bool show = latency_stats(samples).median_ms * iterations > kProgressAfterMs;
  const int chunk = show ? std::max(1, iterations / 20) : iterations;
  while (static_cast<int>(samples.size()) < iterations) {
    if (show) progress.update(static_cast<int64_t>(samples.size()), iterations);
    const int count = std::min(chunk, iterations - static_cast<int>(samples.size()));
    const std::vector<double> more = context.benchmark(0, count);
    samples.insert(samples.end(), more.begin(), more.end());
  }
  if (show) progress.update(iterations, iterations);
  return samples;
}

// How many of the engine's layers run in each precision (its plan at `batch`, conversion steps
// left out): with --plan or --precision auto the engine's own precision is only the default of
// the layers the plan does not name.
std::map<std::string, int> layer_precisions(const Engine& engine, int batch) {
  std::map<std::string, int> counts;
  for (const PlannedStep& step : engine.plan(batch).steps)
    if (!step.sources.empty()) ++counts[step.precision];
  return counts;
}
// "int8" when every layer runs in one precision, else e.g. "mixed (fp16 2, int8 7)".
std::string precision_label(const std::map<std::string, int>& counts) {
  if (counts.size() == 1) return counts.begin()->first;
  std::string label = "mixed (";
  for (const auto& [precision, count] : counts)
    label += (label.back() == '(' ? "" : ", ") + precision + " " + std::to_string(count);
  return label + ")";
}

int run_bench(const BenchArgs& args) {
  args.json.prepare();  // not after minutes of benchmarking
  const DeviceChoice device = resolve_device(args.device.device);
  const BuildOptions options = build_options(args.device, device);
  const int warmup = static_cast<int>(args.warmup);
  const int iterations = static_cast<int>(args.iterations);

  const Graph graph = load_graph_with_weights(args.model, weights_for(args.weights, options));
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  };
  const auto build_start = Clock::now();
  const auto engine = Engine::build(graph, options);
  const double build_ms = ms_since(build_start);
  detail(engine->describe());
  const std::map<std::string, int> precisions =
      layer_precisions(*engine, static_cast<int>(args.batches.front()));
  const std::string precision = precision_label(precisions);
  std::ostream& out = report_stream();
  out << "model " << engine->model().name << ", device " << device.summary << ", precision "
      << precision << ", " << warmup << " warm-up + " << iterations << " timed runs\n"
      << "engine build " << fixed(build_ms, 1) << " ms (host)\n\n";

  nlohmann::json results = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows;
  for (int64_t batch : args.batches) {
    const auto context_start = Clock::now();
    const auto context = engine->create_context(static_cast<int>(batch));
    const double context_ms = ms_since(context_start);
    if (const std::string decided = context->describe(); !decided.empty())
      detail("batch " + std::to_string(batch) + ": " + decided);
    const LatencyStats stats = latency_stats(timed_runs(*context, warmup, iterations, batch));
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
  out << format_text_table({"batch", "median ms", "min ms", "p90 ms", "images/s", "arena MiB",
                            "weights MiB", "context ms"},
                           rows);
  if (!args.json.path.empty()) out << "\n";
  args.json.write({{"model", engine->model().name},
                   {"device", to_string(device.device)},
                   {"device_name", device.name},
                   {"precision", precision},
                   {"layer_precisions", precisions},
                   {"warmup", warmup},
                   {"iterations", iterations},
                   {"build_ms", build_ms},
                   {"results", results}});
  return 0;
}

}  // namespace

RunCommand add_bench(CLI::App& command) {
  auto args = std::make_shared<BenchArgs>();
  add_model_argument(command, args->model);
  command.add_option("--batch", args->batches, "batch sizes, comma-separated (e.g. 1,16,64)")
      ->type_name("N[,N...]")
      ->delimiter(',')
      ->required()
      ->check(int_range(1, kMaxBatch));
  command.add_option("--warmup", args->warmup, "untimed runs before timing each batch size")
      ->type_name("K")
      ->check(int_range(0, 1000000))
      ->capture_default_str();
  command
      .add_option("--iterations", args->iterations,
                  "timed runs per batch size, at least " + std::to_string(kMinBenchIterations) +
                      " (fewer make the median and p90 too noisy)")
      ->type_name("K")
      ->check(int_range(kMinBenchIterations, 1000000))
      ->capture_default_str();
  add_weight_options(command, args->weights);
  add_device_options(command, args->device);
  args->json.add_option(command);
  return [args] { return run_bench(*args); };
}

}  // namespace cnnrt::apps
