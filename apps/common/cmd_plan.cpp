// `cnnrt plan MODEL --batch N [--device D] [--precision P] [--plan PLAN.yaml] [--json]`: what a
// context of that batch will run — per step the layer, its source layers, kernel, variant,
// precision and tensor types; per tensor its bytes, arena offset and lifetime.  Computed by
// Engine::plan without allocating the arena.  The plan does not depend on weight values, so
// random ones are bound.
#include <iostream>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "graph/model_loader.h"

namespace cnnrt::apps {

int cmd_plan(const Arguments& arguments) {
  const Args args = parse_command_args(
      "plan",
      join_flags({{{"--batch", FlagKind::Value}, {"--json", FlagKind::Switch}}, device_flags()}),
      arguments, 1, 1);
  const int batch = static_cast<int>(args.get_int("--batch", 1, 1, kMaxBatch));
  const DeviceChoice device = resolve_device(args.get_string("--device", "cpu"));

  Graph graph = load_model(args.positional()[0]);
  bind_random_weights(graph, 0);
  const auto engine = Engine::build(graph, build_options(args, device));
  const ExecutionPlan plan = engine->plan(batch);
  if (args.has("--json"))
    std::cout << plan.to_json() << "\n";
  else
    std::cout << "device " << device.summary << "\n" << plan.to_table();
  return 0;
}

}  // namespace cnnrt::apps
