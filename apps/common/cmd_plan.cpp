// `cnnrt plan MODEL --batch N [--device D] [--precision P] [--plan PLAN.yaml] [--json FILE]`:
// what a context of that batch will run — per step the layer, its source layers, kernel,
// variant, precision and tensor types; per tensor its bytes, arena offset and lifetime.
// Computed by Engine::plan without allocating the arena.  The plan depends on weight values only
// through channel compaction (all-zero channels of a pruned model are removed at build, and the
// tensors sized for what remains): with --weights W it is planned for those weights and lists
// what was compacted; without, random weights are bound.
//
// A CUDA plan does depend on the device, though: its architecture decides which conv kernels
// can run (the wgmma ones need compute capability 9.0 and the sm_90a image) and its SM count
// the small-batch split-K fallbacks (runtime/cuda/cuda_registry.h), and building the engine
// uploads the weights.  So `--device cuda` needs a usable GPU, and says so when there is none.
#include <iostream>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "graph/model_loader.h"

namespace cnnrt::apps {
namespace {

const char* find_cuda_problem() {
#ifdef CNNRT_WITH_CUDA
  return "none is usable here";
#else
  return "this build of cnnrt has no CUDA backend";
#endif
}

struct PlanArgs {
  std::string model, weights;
  int64_t batch = 1;
  DeviceArgs device;
  JsonOutput json;
};

int run_plan(const PlanArgs& args) {
  args.json.prepare();
  if (args.device.device == "cuda" && !cuda_available())
    throw Error("plan --device cuda needs a usable CUDA GPU, and " +
                std::string(find_cuda_problem()) +
                ": a CUDA plan depends on the device (its architecture picks the conv kernels, "
                "its SM count the small-batch fallbacks); plan on a GPU machine, or for "
                "--device cpu");
  const DeviceChoice device = resolve_device(args.device.device);
  Graph graph = load_model(args.model);
  if (args.weights.empty())
    bind_random_weights(graph, 0);
  else
    bind_weights_from_args(graph, args.model, WeightArgs{args.weights, ""});
  BuildOptions options = build_options(args.device, device);
  // Random stand-in weights cannot match a plan file's model_hash (which covers the real
  // weights); what runs does not depend on weight values, except through compaction.
  if (args.weights.empty()) options.choices_fingerprint.clear();
  const auto engine = Engine::build(graph, options);
  const ExecutionPlan plan = engine->plan(static_cast<int>(args.batch));
  report_stream() << "device " << device.summary << "\n" << plan.to_table();
  if (!args.json.path.empty()) args.json.write(nlohmann::json::parse(plan.to_json()));
  return 0;
}

}  // namespace

RunCommand add_plan(CLI::App& command) {
  auto args = std::make_shared<PlanArgs>();
  args->device.device = "cpu";  // a plan is for reading; the CPU one needs no GPU
  add_model_argument(command, args->model);
  command.add_option("--batch", args->batch, "batch size of the planned context")
      ->type_name("N")
      ->check(int_range(1, kMaxBatch))
      ->capture_default_str();
  add_device_options(command, args->device);
  command.add_option("--weights", args->weights, "plan for these weights (shows compaction)")
      ->type_name("W.safetensors")
      ->check(no_stdin());
  args->json.add_option(command);
  return [args] { return run_plan(*args); };
}

}  // namespace cnnrt::apps
