// `cnnrt run MODEL --input X.npy --output Y.npy [--weights W | --random-weights] ...`: batch
// inference from and to NumPy files, the bridge to Python comparisons.  The input must be
// [N, ...model input shape]; the output is [N, ...model output shape] fp32, written via temp
// file + rename.  Either may be "-" (stdin / stdout), for pipes.
#include <chrono>
#include <iostream>
#include <utility>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "apps/common/npy.h"
#include "graph/atomic_write.h"
#include "graph/model_loader.h"
#include "runtime/build_trace.h"

namespace cnnrt::apps {
namespace {

struct RunArgs {
  std::string model, input, output;
  WeightArgs weights;
  DeviceArgs device;
  JsonOutput json;
};

int run_run(const RunArgs& args) {
  if (is_std_stream(args.output))
    claim_stdout("--output");
  else
    check_output_path(args.output);
  args.json.prepare();
  BuildTrace trace("[cnnrt run] ");  // CNNRT_TRACE_BUILD=1: the phases of this command
  start_device(args.device.device);  // CUDA starts while the files are read
  BuildOptions options = build_options(args.device);

  const NpyArray input =
      is_std_stream(args.input) ? parse_npy(read_input("-"), "<stdin>") : read_npy(args.input);
  trace.mark("input read");
  Graph graph = load_graph_with_weights(args.model, weights_for(args.weights, options));
  trace.mark("model and weights loaded");
  const DeviceChoice device = resolve_device(args.device.device);
  options.device = device.device;
  trace.mark("device resolved");
  std::vector<int64_t> expected = {-1};
  expected.insert(expected.end(), graph.input.shape.begin(), graph.input.shape.end());
  bool matches = input.shape.size() == expected.size() && !input.shape.empty() &&
                 input.shape[0] >= 1 && input.shape[0] <= kMaxBatch;
  for (size_t i = 1; matches && i < expected.size(); ++i) matches = input.shape[i] == expected[i];
  if (!matches) {
    ErrorSite site;
    site.file = is_std_stream(args.input) ? "<stdin>" : args.input;
    throw_error(site, "input shape " + shape_to_string(input.shape) + " does not match model '" +
                          graph.name + "' input [N, " +
                          shape_to_string(graph.input.shape).substr(1) + " (N from 1 to " +
                          std::to_string(kMaxBatch) + ")");
  }
  const int batch = static_cast<int>(input.shape[0]);

  using Clock = std::chrono::steady_clock;
  const auto build_start = Clock::now();
  const auto engine = Engine::build(std::move(graph), options);  // no copy of the weights
  trace.mark("engine built");
  const auto context = engine->create_context(batch);
  trace.mark("context created");
  const auto run_start = Clock::now();
  const ModelInfo& model = engine->model();
  std::vector<int64_t> output_shape = {batch};
  output_shape.insert(output_shape.end(), model.output_shape.begin(), model.output_shape.end());
  std::vector<float> output(static_cast<size_t>(shape_elements(output_shape)));
  context->run(input.data.data(), output.data());
  const auto run_end = Clock::now();
  detail(engine->describe());
  trace.mark("forward");
  write_output(args.output, serialize_npy(output_shape, output));
  trace.mark("output written");
  const std::string precision = to_string(engine->precision());
  note("device " + device.summary + ", precision " + precision);
  if (verbosity() != Verbosity::Quiet)
    report_stream() << "wrote " << shape_to_string(output_shape) << " to " << args.output << "\n";
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  args.json.write({{"model", model.name},
                   {"device", to_string(device.device)},
                   {"device_name", device.name},
                   {"precision", precision},
                   {"batch", batch},
                   {"input_shape", input.shape},
                   {"output_shape", output_shape},
                   {"output", args.output},
                   {"build_and_context_ms", ms(run_start - build_start)},
                   {"run_ms", ms(run_end - run_start)}});
  return 0;
}

}  // namespace

RunCommand add_run(CLI::App& command) {
  auto args = std::make_shared<RunArgs>();
  add_model_argument(command, args->model);
  command.add_option("--input", args->input, "[N, ...input shape] float32 .npy ('-': stdin)")
      ->type_name("X.npy")
      ->required();
  command.add_option("--output", args->output, "where the fp32 output .npy goes ('-': stdout)")
      ->type_name("Y.npy")
      ->required();
  add_weight_options(command, args->weights);
  add_device_options(command, args->device);
  args->json.add_option(command);
  return [args] { return run_run(*args); };
}

}  // namespace cnnrt::apps
