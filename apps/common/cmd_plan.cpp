// `cnnrt plan MODEL --batch N [--device D] [--json]`: the activation memory plan a context of
// that batch gets.  The plan does not depend on weight values, so random ones are bound.
#include <iostream>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "graph/model_loader.h"
#include "runtime/memory_planner.h"

namespace cnnrt::apps {

int cmd_plan(const Arguments& arguments) {
  const Args args = parse_command_args(
      "plan",
      {{"--batch", FlagKind::Value}, {"--device", FlagKind::Value}, {"--json", FlagKind::Switch}},
      arguments, 1, 1);
  const int batch = static_cast<int>(args.get_int("--batch", 1, 1, kMaxBatch));
  const DeviceChoice device = resolve_device(args.get_string("--device", "cpu"));

  Graph graph = load_model(args.positional()[0]);
  bind_random_weights(graph, 0);
  BuildOptions options;
  options.device = device.device;
  const auto engine = Engine::build(graph, options);
  const auto context = engine->create_context(batch);
  const MemoryPlan& plan = context->memory_plan();
  if (args.has("--json")) {
    std::cout << plan.to_json() << "\n";
  } else {
    std::cout << "model " << engine->model().name << ", device " << device.summary << ", batch "
              << batch << "\n"
              << plan.to_table();
  }
  return 0;
}

}  // namespace cnnrt::apps
