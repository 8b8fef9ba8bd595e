// `alexnet_infer IMAGE`: top-K ImageNet classes of a picture — the first thing anyone runs.
// `--model M` takes any classifier in the model format (models/efficientnet_lite0.yaml, the
// zoo, an ONNX import): AlexNet is only the default.
//
// Order of work is chosen so mistakes surface before anything slow happens: arguments, device,
// model YAML, labels and image are checked first; only then are the weights read (244 MB for
// AlexNet in fp32) and the engine built.  Probabilities are a softmax over the logits computed
// here on the host (max-subtracted, accumulated in double), so they do not depend on the model
// ending in a softmax layer.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <numeric>
#include <utility>

#include "apps/common/cli.h"
#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "apps/common/paths.h"
#include "apps/common/profile_report.h"
#include "cnnrt/image.h"
#include "graph/model_loader.h"

namespace {

using namespace cnnrt;
using namespace cnnrt::apps;

struct InferArgs {
  std::string image, model;
  int64_t top = 5;
  bool profile = false;
  WeightArgs weights;
  DeviceArgs device;
  JsonOutput json;
};

std::vector<double> softmax(const std::vector<float>& logits) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  std::vector<double> probabilities(logits.size());
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    probabilities[i] = std::exp(static_cast<double>(logits[i]) - max_logit);
    total += probabilities[i];
  }
  for (double& p : probabilities) p /= total;
  return probabilities;
}

int infer(const InferArgs& args) {
  args.json.prepare();
  const std::string& image_path = args.image;
  const int top_k = static_cast<int>(args.top);
  const std::string model_path =
      args.model.empty() ? find_shipped_file("models/alexnet.yaml") : args.model;
  const DeviceChoice device = resolve_device(args.device.device);
  const BuildOptions options = build_options(args.device, device);
  std::ostream& out = report_stream();
  out << "device: " << device.summary << "\n";

  // Cheap checks first: the YAML and the image, before reading the weights.
  Graph graph = load_model(model_path);
  const std::vector<float> input = load_image_tensor(image_path, model_info_from_graph(graph));
  bind_weights_from_args(graph, model_path, weights_for(args.weights, options));
  const auto engine = Engine::build(std::move(graph), options);  // no copy of the weights
  const std::vector<std::string>& labels = engine->model().labels;
  const auto context = engine->create_context(1);
  const size_t classes = static_cast<size_t>(shape_elements(engine->model().output_shape));
  std::vector<float> logits(classes);
  context->run(input.data(), logits.data());

  const std::vector<double> probabilities = softmax(logits);
  std::vector<size_t> order(classes);
  std::iota(order.begin(), order.end(), size_t{0});
  const size_t shown = std::min<size_t>(static_cast<size_t>(top_k), classes);
  std::partial_sort(order.begin(), order.begin() + shown, order.end(),
                    [&](size_t a, size_t b) { return probabilities[a] > probabilities[b]; });

  out << "model: " << engine->model().name << " (" << model_path << "), precision "
      << to_string(engine->precision()) << "\n"
      << "image: " << image_path << "\n\n";
  std::vector<std::vector<std::string>> rows;
  nlohmann::json top = nlohmann::json::array();
  for (size_t rank = 0; rank < shown; ++rank) {
    const size_t index = order[rank];
    const std::string label =
        index < labels.size() ? labels[index] : "class " + std::to_string(index);
    rows.push_back(
        {std::to_string(rank + 1), fixed(probabilities[index], 4), std::to_string(index), label});
    top.push_back({{"class", index}, {"probability", probabilities[index]}, {"label", label}});
  }
  out << format_text_table({"rank", "probability", "class", "label"}, rows);

  nlohmann::json report = {{"model", engine->model().name},
                           {"model_file", model_path},
                           {"image", image_path},
                           {"device", to_string(device.device)},
                           {"device_name", device.name},
                           {"precision", to_string(engine->precision())},
                           {"top", top}};
  if (args.profile) {
    const std::vector<LayerProfile> layers = context->profile(20);
    out << "\nper-layer profile (batch 1, median of 20 runs):\n"
        << format_profile_table(layers, device_info(device.device));
    report["profile"] = nlohmann::json::array();
    for (const LayerProfile& layer : layers)
      report["profile"].push_back(layer_json(layer, total_ms(layers)));
  }
  args.json.write(report);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::unique_ptr<CLI::App> program = make_program(
      "alexnet_infer", "top-K ImageNet classes of a picture, by AlexNet or any classifier YAML");
  InferArgs args;
  program->add_option("IMAGE", args.image, "a .png, .jpg or .bmp picture")
      ->type_name("")
      ->required()
      ->check(no_stdin());
  program
      ->add_option("--model", args.model,
                   "any classifier model YAML, e.g. models/efficientnet_lite0.yaml after "
                   "tools/convert_efficientnet_lite0.py (default: the shipped models/alexnet.yaml)")
      ->type_name("MODEL.yaml")
      ->check(no_stdin());
  program->add_option("--top", args.top, "how many classes to list")
      ->type_name("K")
      ->check(int_range(1, 1 << 20))
      ->capture_default_str();
  program->add_flag("--profile", args.profile, "also print per-layer timings (batch 1)");
  add_weight_options(*program, args.weights);
  add_device_options(*program, args.device);
  args.json.add_option(*program);
  return end_process(run_program(*program, argc, argv, [&] { return infer(args); }));
}
