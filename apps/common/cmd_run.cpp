// `cnnrt run MODEL --weights W --input X.npy --output Y.npy`: batch inference from and to
// NumPy files, the bridge to Python comparisons.  The input must be [N, ...model input shape];
// the output is [N, ...model output shape] fp32, written via temp file + rename.
#include <iostream>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "apps/common/npy.h"
#include "graph/atomic_write.h"
#include "graph/model_loader.h"

namespace cnnrt::apps {

int cmd_run(const Arguments& arguments) {
  const Args args = parse_command_args(
      "run",
      join_flags({weight_flags(),
                  device_flags(),
                  {{"--input", FlagKind::Value}, {"--output", FlagKind::Value}}}),
      arguments, 1, 1);
  const std::string input_path = args.require("--input");
  const std::string output_path = args.require("--output");
  check_output_path(output_path);
  const DeviceChoice device = resolve_device(args.get_string("--device", "auto"));
  const BuildOptions options = build_options(args, device);

  const NpyArray input = read_npy(input_path);
  const Graph graph = load_graph_with_weights(args.positional()[0], args);
  std::vector<int64_t> expected = {-1};
  expected.insert(expected.end(), graph.input.shape.begin(), graph.input.shape.end());
  bool matches = input.shape.size() == expected.size() && !input.shape.empty() &&
                 input.shape[0] >= 1 && input.shape[0] <= kMaxBatch;
  for (size_t i = 1; matches && i < expected.size(); ++i) matches = input.shape[i] == expected[i];
  if (!matches) {
    ErrorSite site;
    site.file = input_path;
    throw_error(site, "input shape " + shape_to_string(input.shape) + " does not match model '" +
                          graph.name + "' input [N, " +
                          shape_to_string(graph.input.shape).substr(1) + " (N from 1 to " +
                          std::to_string(kMaxBatch) + ")");
  }
  const int batch = static_cast<int>(input.shape[0]);

  const auto engine = Engine::build(graph, options);
  const auto context = engine->create_context(batch);
  const ModelInfo& model = engine->model();
  std::vector<int64_t> output_shape = {batch};
  output_shape.insert(output_shape.end(), model.output_shape.begin(), model.output_shape.end());
  std::vector<float> output(static_cast<size_t>(shape_elements(output_shape)));
  context->run(input.data.data(), output.data());
  write_npy(output_path, output_shape, output);
  std::cerr << "device: " << device.summary << ", precision " << to_string(engine->precision())
            << "\n";
  std::cout << "wrote " << shape_to_string(output_shape) << " to " << output_path << "\n";
  return 0;
}

}  // namespace cnnrt::apps
