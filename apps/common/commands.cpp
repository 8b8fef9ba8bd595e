// The subcommand table and the `cnnrt` program built from it.
#include "apps/common/commands.h"

#include <map>
#include <string>

#include "apps/common/cli.h"

namespace cnnrt::apps {

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"info", "describe the model graph, before and after fusion", add_info},
      {"init-weights", "write deterministic PyTorch-style initial weights", add_init_weights},
      {"plan", "print the kernel and memory plan of a context", add_plan},
      {"run", "run inference on an [N, C, H, W] float32 .npy", add_run},
      {"profile", "per-layer timings (and every candidate kernel with --compare)", add_profile},
      {"bench", "end-to-end latency and throughput per batch size", add_bench},
      {"calibrate", "int8 tensor scales from a calibration set (docs/QUANTIZATION.md)",
       add_calibrate},
      {"accuracy", "int8 vs fp32 per layer and for the whole network (docs/QUANTIZATION.md)",
       add_accuracy},
      {"build", "choose precision and kernel per layer under an error budget, write a plan",
       add_build},
      {"prune", "2:4 or channel pruning with the error it causes (docs/SPARSITY.md)", add_prune},
  };
  return table;
}

int cnnrt_main(int argc, char** argv) {
  const std::unique_ptr<CLI::App> program =
      make_program("cnnrt", "cnnrt: inference for CNNs described in YAML (docs/FORMAT.md)");
  program->require_subcommand(1);
  std::map<const CLI::App*, RunCommand> runners;
  for (const Command& command : commands()) {
    CLI::App* app = add_subcommand(*program, command.name, command.summary);
    runners[app] = command.add(*app);
  }
  // `cnnrt help [COMMAND]` is `cnnrt [COMMAND] --help`.
  std::vector<char*> arguments(argv, argv + argc);
  if (arguments.size() >= 2 && std::string(arguments[1]) == "help") {
    static char help_flag[] = "--help";
    arguments.erase(arguments.begin() + 1);
    arguments.push_back(help_flag);
  }
  return run_program(*program, static_cast<int>(arguments.size()), arguments.data(), [&]() -> int {
    const CLI::App* chosen = program->get_subcommands().front();
    return runners.at(chosen)();
  });
}

}  // namespace cnnrt::apps
