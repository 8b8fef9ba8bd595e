// `cnnrt plan MODEL --batch N [--device D] [--target T] [--precision P] [--plan PLAN.yaml]
// [--weights W] [--json FILE]`: what a context of that batch will run — per step the layer, its
// source layers, kernel, variant, precision and tensor types; per tensor its bytes, arena offset
// and lifetime.  Computed by Engine::plan without allocating the arena.  The plan depends on
// weight values only through channel compaction (all-zero channels of a pruned model are
// removed at build, and the tensors sized for what remains): with --weights W it is planned for
// those weights and lists what was compacted; without, random weights are bound.
//
// A CUDA plan depends on the device — its architecture decides which conv kernels can run (the
// wgmma ones need compute capability 9.0 and the sm_90a image), its SM count the small-batch
// split-K fallbacks, its shared memory the tilings — but only on those facts
// (kernels/cuda/device_traits.h).  So `--target h100|a100|...|smXY:SMS` plans for a described
// device on any machine, GPU or not, and the build then touches no GPU (weights are sized, not
// uploaded; cuBLASLt's algorithm is picked on the device, the plan names the kernel).  Without
// --target the GPU present is planned for, or the H100 preset when there is none (the header
// says which).
#include <iostream>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "graph/model_loader.h"
#ifdef CNNRT_WITH_CUDA
#include "kernels/cuda/device_traits.h"
#endif

namespace cnnrt::apps {
namespace {

constexpr const char* kDefaultTarget = "h100";

struct PlanArgs {
  std::string model, weights;
  int64_t batch = 1;
  DeviceArgs device;
  std::string target;  // empty: the GPU present, else kDefaultTarget
  JsonOutput json;
};

// The device line of the report for a described target (a usage error when it is unknown).
std::string target_summary(const std::string& target, bool defaulted) {
#ifdef CNNRT_WITH_CUDA
  std::string name;
  try {
    name = cuda::target_traits(target).name;
  } catch (const Error& error) {
    throw UsageError(std::string("--target: ") + error.what());
  }
  return "cuda (" + name + ", planned without a device" +
         (defaulted ? "; no GPU here, so the default target " + std::string(kDefaultTarget) +
                          " (--target chooses another)"
                    : std::string()) +
         "; cuBLASLt picks its algorithm on the device)";
#else
  (void)target;
  (void)defaulted;
  throw Error("--target: this build of cnnrt has no CUDA backend");
#endif
}

int run_plan(const PlanArgs& args) {
  args.json.prepare();
  if (!args.target.empty() && args.device.device != "cuda")
    throw UsageError("--target describes a CUDA device; it needs --device cuda");
  std::string target = args.target;
#ifdef CNNRT_WITH_CUDA
  const bool defaulted = target.empty() && args.device.device == "cuda" && !cuda_available();
#else
  const bool defaulted = false;  // resolve_device says this build has no CUDA backend
#endif
  if (defaulted) target = kDefaultTarget;
  DeviceChoice device;
  if (target.empty()) {
    device = resolve_device(args.device.device);
  } else {
    device.device = Device::CUDA;
    device.summary = target_summary(target, defaulted);
  }
  Graph graph = load_model(args.model);
  BuildOptions options = build_options(args.device, device);
  // A plan that pruned layers names its weights: its sparse kernels need their 2:4 zeros.
  const WeightArgs weights = weights_for(WeightArgs{args.weights, ""}, options);
  if (weights.weights.empty())
    bind_random_weights(graph, 0);
  else
    bind_weights_from_args(graph, args.model, weights);
  // Random stand-in weights cannot match a plan file's model_hash (which covers the real
  // weights); what runs does not depend on weight values, except through compaction.
  if (weights.weights.empty()) options.choices_fingerprint.clear();
  options.plan_target = target;
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
  command
      .add_option("--target", args->target,
                  "with --device cuda: plan for this GPU instead of the one present, no GPU "
                  "needed — h100, h100-pcie, h200, a100, l4, l40s, or smXY:SMS (e.g. sm90:132); "
                  "default: the GPU present, else h100")
      ->type_name("GPU");
  command.add_option("--weights", args->weights, "plan for these weights (shows compaction)")
      ->type_name("W.safetensors")
      ->check(no_stdin());
  args->json.add_option(command);
  return [args] { return run_plan(*args); };
}

}  // namespace cnnrt::apps
