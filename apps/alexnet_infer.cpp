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

#include "apps/common/cli.h"
#include "apps/common/model_setup.h"
#include "apps/common/paths.h"
#include "apps/common/profile_report.h"
#include "cnnrt/image.h"
#include "graph/model_loader.h"

namespace {

using namespace cnnrt;
using namespace cnnrt::apps;

const char kUsage[] =
    "usage: alexnet_infer IMAGE [--model M] [--weights W | --random-weights [SEED]] "
    "[--device auto|cpu|cuda] [--precision auto|fp32|fp16|int8] [--plan PLAN.yaml] "
    "[--calib CALIB.json] [--top K] [--profile]\n"
    "  --model M   any classifier model YAML (default: models/alexnet.yaml), e.g.\n"
    "              models/efficientnet_lite0.yaml after tools/convert_efficientnet_lite0.py";

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

int infer(int argc, char** argv) {
  Args args(kUsage, join_flags({weight_flags(),
                                device_flags(),
                                {{"--model", FlagKind::Value},
                                 {"--top", FlagKind::Value},
                                 {"--profile", FlagKind::Switch}}}));
  args.parse(argc, argv, 1, 1, 1);
  const std::string image_path = args.positional()[0];
  const int top_k = static_cast<int>(args.get_int("--top", 5, 1, 1 << 20));
  const std::string model_path =
      args.has("--model") ? args.require("--model") : find_shipped_file("models/alexnet.yaml");
  const DeviceChoice device = resolve_device(args.get_string("--device", "auto"));
  const BuildOptions options = build_options(args, device);
  std::cout << "device: " << device.summary << "\n";

  // Cheap checks first: the YAML and the image, before reading the weights.
  Graph graph = load_model(model_path);
  const std::vector<float> input = load_image_tensor(image_path, model_info_from_graph(graph));
  bind_weights_from_args(graph, model_path, args);
  const auto engine = Engine::build(graph, options);
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

  std::cout << "model: " << engine->model().name << " (" << model_path << "), precision "
            << to_string(engine->precision()) << "\n"
            << "image: " << image_path << "\n\n";
  std::vector<std::vector<std::string>> rows;
  for (size_t rank = 0; rank < shown; ++rank) {
    const size_t index = order[rank];
    rows.push_back({std::to_string(rank + 1), fixed(probabilities[index], 4), std::to_string(index),
                    index < labels.size() ? labels[index] : "class " + std::to_string(index)});
  }
  std::cout << format_text_table({"rank", "probability", "class", "label"}, rows);

  if (args.has("--profile")) {
    std::cout << "\nper-layer profile (batch 1, median of 20 runs):\n"
              << format_profile_table(context->profile(20), device_info(device.device));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return cnnrt::apps::run_main([&] { return infer(argc, argv); });
}
