// The labels an engine binds (issue 14): a label file whose line count differs from the
// model's classes shifted every label silently.  The builder reads them with
// read_labels(path, classes) (graph/model_loader.h), which checks the count.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cnnrt/cnnrt.h"
#include "graph/model_loader.h"

namespace cnnrt {
namespace {

TEST(EngineLabels, LabelCountDifferentFromClassesIsAnError) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("cnnrt_labels_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "labels.txt") << "background\na\nb\nc\nd\ne\n";  // 6 lines, 5 classes
  Graph graph = parse_model(
      "name: t\ninput: {shape: [4]}\nlabels: labels.txt\nlayers:\n"
      "  - {name: fc, op: linear, out_features: 5, weight: w}\n",
      (dir / "m.yaml").string());
  bind_random_weights(graph, 1);
  BuildOptions options;
  options.device = Device::CPU;
  try {
    Engine::build(graph, options);
    ADD_FAILURE() << "a 6-line label file was accepted for 5 classes";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("has 6 lines but the model has 5 classes"),
              std::string::npos)
        << error.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cnnrt
