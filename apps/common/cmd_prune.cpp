// `cnnrt prune MODEL --weights W (--pattern 2:4 | --channels FRACTION) [--layers a,b]
// -o OUT.safetensors (--images DIR | --input X.npy) [--samples N] [--batch B] [--json FILE]`:
// prunes the weights (graph/passes_prune.h), reports per layer the kept fraction and the error
// vs the dense model on the given set, and writes the pruned weights, same tensors and shapes,
// through an atomic write (nothing is left behind on an error).
//
// The error rows are ordinary CPU engines, like `cnnrt accuracy`'s: the dense model as the
// reference, one engine per layer with only that layer pruned, and the whole pruned model; the
// channel-pruned ones run compacted, so the figures are what the compacted model computes.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "graph/atomic_write.h"
#include "graph/passes_prune.h"
#include "graph/passes_sparsity.h"
#include "graph/safetensors.h"
#include "runtime/accuracy.h"

namespace cnnrt::apps {
namespace {

struct PruneArgs {
  std::string model, pattern, layers, output, images_dir, input_path;
  double channels = 0;  // share of output channels kept; 0 = not given
  int samples = 0, batch = 8;
  WeightArgs weights;
  JsonOutput json;
};

// The evaluation set as [N, sample] floats (at most --samples of it when given).
std::vector<float> load_set(const PruneArgs& args, const Graph& graph, int& count) {
  SampleSet set;
  read_sample_source(set, args.input_path, args.images_dir, graph, "input set");
  count = args.samples > 0 ? std::min(set.inputs.samples, args.samples) : set.inputs.samples;
  std::vector<float> data(static_cast<size_t>(count) *
                          shape_elements(model_info_from_graph(graph).input_shape));
  set.inputs.load(0, count, data.data());
  return data;
}

// The graph's outputs on the set, batch by batch, on the CPU (run_over_inputs: one context per
// batch size, not per batch).
std::vector<float> outputs_of(const Graph& graph, const std::vector<float>& set, int count,
                              int batch) {
  BuildOptions options;
  options.device = Device::CPU;
  const std::shared_ptr<Engine> engine = Engine::build(graph, options);
  const int64_t in = shape_elements(engine->model().input_shape);
  CalibrationInputs inputs;
  inputs.samples = count;
  inputs.load = [&set, in](int first, int n, float* out) {
    std::copy_n(set.data() + first * in, n * in, out);
  };
  return run_over_inputs(*engine, inputs, count, std::min(batch, count));
}

OutputAgreement agreement(const Graph& graph, const std::vector<float>& reference,
                          const std::vector<float>& test, int count) {
  const Node* last = graph.find(graph.output);
  AgreementAccumulator accumulator(static_cast<int64_t>(reference.size()) / count,
                                   last != nullptr && last->op == OpKind::Softmax);
  accumulator.add(reference.data(), test.data(), count);
  return accumulator.result();
}

nlohmann::json row_json(const std::string& layer, double kept, int channels, int kept_channels,
                        const OutputAgreement& a) {
  nlohmann::json row = {{"layer", layer},
                        {"kept_fraction", kept},
                        {"channels", channels},
                        {"kept_channels", kept_channels},
                        {"rel_l2", a.rel_l2}};
  if (a.has_top1) row["top1_agreement"] = a.top1;
  return row;
}

std::string row_text(const std::string& layer, double kept, int channels, int kept_channels,
                     const OutputAgreement& a) {
  char top1[32] = "-", line[200];
  if (a.has_top1) std::snprintf(top1, sizeof top1, "%.2f%%", a.top1 * 100);
  const std::string channel_text =
      channels > 0 ? std::to_string(channels) + " -> " + std::to_string(kept_channels) : "-";
  std::snprintf(line, sizeof line, "%-16s %8.4f %14s %12.3e %10s\n", layer.c_str(), kept,
                channel_text.c_str(), a.rel_l2, top1);
  return line;
}

int run_prune(const PruneArgs& args) {
  check_output_path(args.output);
  args.json.prepare();
  const bool channels = args.channels != 0;
  const Graph dense = load_graph_with_weights(args.model, args.weights);
  Graph pruned = dense;
  const std::vector<std::string> layers =
      layers_to_prune(pruned, split_comma_list(args.layers), channels);
  const std::vector<PrunedLayer> rows =
      channels ? prune_channels(pruned, layers, args.channels) : prune_2_4(pruned, layers);
  if (channels) check_channels_removable(pruned, rows);
  sparsity::mark_2_4_weights(pruned);  // a layer the model says is 2:4 must be, after pruning

  int count = 0;
  const std::vector<float> set = load_set(args, dense, count);
  const std::vector<float> reference = outputs_of(dense, set, count, args.batch);
  std::ostream& out = report_stream();
  out << "model " << dense.name << ": " << (channels ? "channels" : "2:4") << " pruning, error vs "
      << "the dense model on " << count << " samples (CPU)\n";
  out << "layer                kept       channels       rel L2      top-1\n";
  nlohmann::json json_rows = nlohmann::json::array();
  int64_t weights = 0, kept = 0;
  for (const PrunedLayer& row : rows) {
    Graph one = dense;  // only this layer pruned
    Node* node = one.find(row.layer);
    for (Param& param : node->params) param = *pruned.find(row.layer)->find_param(param.role);
    const OutputAgreement a =
        agreement(dense, reference, outputs_of(one, set, count, args.batch), count);
    out << row_text(row.layer, row.kept_fraction(), row.channels, row.kept_channels, a);
    json_rows.push_back(
        row_json(row.layer, row.kept_fraction(), row.channels, row.kept_channels, a));
    weights += row.weights;
    kept += row.kept_weights;
  }
  const OutputAgreement whole =
      agreement(dense, reference, outputs_of(pruned, set, count, args.batch), count);
  const double kept_share = weights > 0 ? static_cast<double>(kept) / weights : 1.0;
  out << row_text("(all pruned)", kept_share, 0, 0, whole);

  std::map<std::string, HostTensor> tensors;
  for (const Node& node : pruned.nodes)
    for (const Param& param : node.params) tensors[param.key] = param.value;
  write_safetensors(args.output, tensors, StoredDType::F32,
                    {{"model", dense.name},
                     {"pruned", channels ? "channels " + std::to_string(args.channels) : "2:4"}});
  if (verbosity() != Verbosity::Quiet) note("wrote the pruned weights to " + args.output);
  args.json.write({{"model", dense.name},
                   {"pattern", channels ? "channels" : "2:4"},
                   {"samples", count},
                   {"layers", json_rows},
                   {"whole", row_json("", kept_share, 0, 0, whole)},
                   {"output", args.output}});
  return 0;
}

}  // namespace

RunCommand add_prune(CLI::App& command) {
  auto args = std::make_shared<PruneArgs>();
  add_model_argument(command, args->model);
  add_weight_options(command, args->weights);
  CLI::Option* pattern =
      command.add_option("--pattern", args->pattern, "2:4: magnitude 2:4 along input channels")
          ->type_name("2:4")
          ->check(one_of({"2:4"}));
  CLI::Option* channels =
      command
          .add_option("--channels", args->channels,
                      "share of output channels kept per layer, in (0, 1), smallest L1 removed")
          ->type_name("FRACTION");
  pattern->excludes(channels);
  command.add_option("--layers", args->layers, "only these YAML layers (comma-separated)")
      ->type_name("L1,L2");
  command.add_option("-o,--output", args->output, "the pruned .safetensors file to write")
      ->type_name("OUT.safetensors")
      ->required()
      ->check(no_stdout("weights go to a .safetensors file; give its name"));
  CLI::Option* images =
      command.add_option("--images", args->images_dir, "evaluation images folder")
          ->type_name("DIR")
          ->check(no_stdin());
  CLI::Option* input =
      command.add_option("--input", args->input_path, "evaluation set as [N, ...] .npy")
          ->type_name("X.npy")
          ->check(no_stdin());
  images->excludes(input);
  command.add_option("--samples", args->samples, "use the first N samples (0: all)")
      ->type_name("N")
      ->check(int_range(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  command.add_option("--batch", args->batch, "samples per engine run")
      ->type_name("B")
      ->check(int_range(1, kMaxBatch))
      ->capture_default_str();
  args->json.add_option(command);
  return [args] {
    if (args->pattern.empty() == (args->channels == 0))
      throw UsageError("give exactly one of --pattern 2:4 or --channels FRACTION");
    if (args->channels != 0 && !(args->channels > 0 && args->channels < 1))
      throw UsageError("--channels " + std::to_string(args->channels) +
                       ": the share of channels kept must be in (0, 1)");
    if (args->images_dir.empty() == args->input_path.empty())
      throw UsageError("give the evaluation set as exactly one of --images DIR or --input X.npy");
    if (!args->layers.empty() && split_comma_list(args->layers).empty())
      throw UsageError("--layers needs layer names");
    return run_prune(*args);
  };
}

}  // namespace cnnrt::apps
