// `cnnrt init-weights MODEL -o FILE --seed N [--dtype f32|f16]`: deterministic initial weights
// in the layout the model expects, e.g. for tests and for running without pretrained weights.
#include <iostream>
#include <limits>

#include "apps/common/cmd_util.h"
#include "graph/atomic_write.h"
#include "graph/model_loader.h"
#include "graph/safetensors.h"

namespace cnnrt::apps {

int cmd_init_weights(const Arguments& arguments) {
  const Args args = parse_command_args(
      "init-weights",
      {{"-o", FlagKind::Value}, {"--seed", FlagKind::Value}, {"--dtype", FlagKind::Value}},
      arguments, 1, 1);
  const std::string output = args.require("-o");
  check_output_path(output);
  const int64_t seed = args.get_int("--seed", 0, 0, std::numeric_limits<int64_t>::max());
  const std::string dtype_text = args.get_string("--dtype", "f32");
  StoredDType dtype = StoredDType::F32;
  if (dtype_text == "f16") {
    dtype = StoredDType::F16;
  } else if (dtype_text != "f32") {
    args.fail("--dtype must be f32 or f16, got '" + dtype_text + "'");
  }

  const Graph graph = load_model(args.positional()[0]);
  const auto tensors = init_weights(graph, static_cast<uint64_t>(seed));
  write_safetensors(output, tensors, dtype,
                    {{"model", graph.name}, {"init_seed", std::to_string(seed)}});
  std::cout << "wrote " << tensors.size() << " tensors (" << dtype_text << ", seed " << seed
            << ") to " << output << "\n";
  return 0;
}

}  // namespace cnnrt::apps
