// The three calls of the public API: load/build an Engine, create a context, run.
//   classify MODEL.yaml WEIGHTS.safetensors IMAGE
#include <cnnrt/cnnrt.h>
#include <cnnrt/image.h>

#include <algorithm>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: classify MODEL.yaml WEIGHTS.safetensors IMAGE\n");
    return 2;
  }
  try {
    auto engine = cnnrt::Engine::load(argv[1], argv[2]);  // device auto: GPU when present
    auto context = engine->create_context(/*batch=*/1);
    std::vector<float> input = cnnrt::load_image_tensor(argv[3], engine->model());
    size_t classes = 1;
    for (int64_t d : engine->model().output_shape) classes *= size_t(d);
    std::vector<float> logits(classes);
    context->run(input.data(), logits.data());
    const size_t best = size_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    const auto& labels = engine->model().labels;
    std::printf("class %zu %s (on %s)\n", best, best < labels.size() ? labels[best].c_str() : "",
                cnnrt::to_string(engine->device()));
  } catch (const cnnrt::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
