// libFuzzer target: the YAML model loader (parsing, key checks, shape inference), and for
// models small enough to run in well under a millisecond, weight binding, the default passes,
// an engine build and one CPU forward pass.  Any cnnrt::Error is a correct answer.
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/model_loader.h"
#include "graph/ops.h"

namespace {

// Bounds that keep one execution fast; the code paths do not depend on size.
constexpr double kMaxFlops = 2e6;
constexpr int64_t kMaxElements = 1 << 16;

bool small_enough(const cnnrt::Graph& graph) {
  double flops = 0;
  int64_t params = 0;
  if (cnnrt::shape_elements(graph.input.shape) > kMaxElements) return false;
  for (const cnnrt::Node& node : graph.nodes) {
    flops += cnnrt::node_flops(node);
    params += cnnrt::node_param_count(node);
    if (cnnrt::shape_elements(node.output_shape) > kMaxElements) return false;
  }
  return flops <= kMaxFlops && params <= kMaxElements;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    cnnrt::Graph graph = cnnrt::parse_model(text, "fuzz.yaml");
    if (!small_enough(graph)) return 0;
    graph.labels_file.clear();  // a path in the input must not make the fuzzer read files
    cnnrt::bind_random_weights(graph, 1);
    cnnrt::BuildOptions options;
    options.device = cnnrt::Device::CPU;
    const auto engine = cnnrt::Engine::build(graph, options);
    const auto context = engine->create_context(1);
    std::vector<float> input(static_cast<size_t>(cnnrt::shape_elements(graph.input.shape)), 0.5f);
    std::vector<float> output(
        static_cast<size_t>(cnnrt::shape_elements(engine->model().output_shape)));
    context->run(input.data(), output.data());
  } catch (const cnnrt::Error&) {
  }
  return 0;
}
