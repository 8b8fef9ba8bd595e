// `cnnrt init-weights MODEL -o FILE [--seed N] [--dtype f32|f16]`: deterministic initial
// weights in the layout the model expects, e.g. for tests and for running without pretrained
// weights.
#include <iostream>
#include <limits>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "graph/atomic_write.h"
#include "graph/model_loader.h"
#include "graph/safetensors.h"

namespace cnnrt::apps {
namespace {

struct InitWeightsArgs {
  std::string model, output, dtype = "f32";
  int64_t seed = 0;
};

int run_init_weights(const InitWeightsArgs& args) {
  check_output_path(args.output);
  const StoredDType dtype = args.dtype == "f16" ? StoredDType::F16 : StoredDType::F32;
  const Graph graph = load_model(args.model);
  const auto tensors = init_weights(graph, static_cast<uint64_t>(args.seed));
  write_safetensors(args.output, tensors, dtype,
                    {{"model", graph.name}, {"init_seed", std::to_string(args.seed)}});
  if (verbosity() != Verbosity::Quiet)
    std::cout << "wrote " << tensors.size() << " tensors (" << args.dtype << ", seed " << args.seed
              << ") to " << args.output << "\n";
  return 0;
}

}  // namespace

RunCommand add_init_weights(CLI::App& command) {
  auto args = std::make_shared<InitWeightsArgs>();
  add_model_argument(command, args->model);
  command.add_option("-o,--output", args->output, "the .safetensors file to write")
      ->type_name("FILE")
      ->required()
      ->check(no_stdout("weights go to a .safetensors file; give its name"));
  command.add_option("--seed", args->seed, "random seed")
      ->type_name("N")
      ->check(int_range(0, std::numeric_limits<int64_t>::max()))
      ->capture_default_str();
  command.add_option("--dtype", args->dtype, "stored dtype: f32 or f16")
      ->type_name("DTYPE")
      ->check(one_of({"f32", "f16"}))
      ->capture_default_str();
  return [args] { return run_init_weights(*args); };
}

}  // namespace cnnrt::apps
