// `cnnrt accuracy MODEL (--weights W | --random-weights [SEED]) --calib CALIB.json
// (--images DIR | --input X.npy) [--samples N] [--batch B] [--layers L1,L2 | --whole-only]
// [--json OUT.json]`: the int8 accuracy report (runtime/accuracy.h, docs/QUANTIZATION.md):
// per layer the change of the network output when that layer alone runs in int8, and when every
// layer does, against fp32 on the CPU, as a table on stdout and optionally as JSON (written
// through a temporary file and a rename).
//
// The flags are parsed here; everything else is `run_accuracy`, so the command can be
// registered on another parser by filling AccuracyCommand.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <sstream>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "apps/common/npy.h"
#include "cnnrt/image.h"
#include "graph/atomic_write.h"
#include "runtime/accuracy.h"

namespace cnnrt::apps {

struct AccuracyCommand {
  std::string calib_path;
  std::string images_dir;  // exactly one of images_dir and input_path
  std::string input_path;
  std::string json_path;  // "" = no JSON
  int samples = 0;        // 0 = all
  int batch = 8;
  std::vector<std::string> layers;  // empty = every int8 layer
  bool whole_only = false;
};
int run_accuracy(const Graph& graph, const AccuracyCommand& command);

namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ','))
    if (!item.empty()) items.push_back(item);
  return items;
}

bool is_image_name(const std::filesystem::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension == ".png" || extension == ".jpg" || extension == ".jpeg" || extension == ".bmp";
}

// The image files of `directory`, sorted by name (as `cnnrt calibrate` takes them).
std::vector<std::string> list_images(const std::string& directory) {
  ErrorSite site;
  site.file = directory;
  std::error_code error;
  if (!std::filesystem::is_directory(directory, error))
    throw_error(site, "--images needs a directory of images");
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error))
    if (entry.is_regular_file(error) && is_image_name(entry.path()))
      paths.push_back(entry.path().string());
  if (error) throw_error(site, "cannot list the directory: " + error.message());
  if (paths.empty())
    throw_error(site, "the input set is empty: no .png, .jpg, .jpeg or .bmp files");
  std::sort(paths.begin(), paths.end());
  return paths;
}

// Reads an [N, C, H, W] float32 .npy of the model's input shape; errors name the file.
NpyArray read_input_set(const std::string& path, const ModelInfo& model, const std::string& name) {
  NpyArray array = read_npy(path);
  std::vector<int64_t> expected = {-1};
  expected.insert(expected.end(), model.input_shape.begin(), model.input_shape.end());
  bool matches = array.shape.size() == expected.size();
  for (size_t i = 1; matches && i < expected.size(); ++i) matches = array.shape[i] == expected[i];
  ErrorSite site;
  site.file = path;
  if (!matches)
    throw_error(site, "input shape " + shape_to_string(array.shape) + " does not match model '" +
                          name + "' input [N, " + shape_to_string(model.input_shape).substr(1));
  if (array.shape[0] < 1) throw_error(site, "the input set is empty (N = 0)");
  if (array.shape[0] > std::numeric_limits<int>::max()) throw_error(site, "too many samples");
  for (size_t i = 0; i < array.data.size(); ++i)
    if (!std::isfinite(array.data[i]))
      throw_error(site, "sample " + std::to_string(i / shape_elements(model.input_shape)) +
                            " has a NaN or infinite value");
  return array;
}

}  // namespace

int run_accuracy(const Graph& graph, const AccuracyCommand& command) {
  if (!command.json_path.empty()) check_output_path(command.json_path);
  const ModelInfo model = model_info_from_graph(graph);
  const int64_t sample_elements = shape_elements(model.input_shape);
  const auto calibration = load_calibration(command.calib_path);

  CalibrationInputs inputs;
  NpyArray array;
  std::vector<std::string> images;
  if (!command.input_path.empty()) {
    array = read_input_set(command.input_path, model, graph.name);
    inputs.samples = static_cast<int>(array.shape[0]);
    inputs.load = [&array, sample_elements](int first, int count, float* out) {
      std::copy_n(array.data.begin() + first * sample_elements, count * sample_elements, out);
    };
  } else {
    images = list_images(command.images_dir);
    inputs.samples = static_cast<int>(images.size());
    inputs.load = [&images, &model, sample_elements](int first, int count, float* out) {
      for (int i = 0; i < count; ++i) {
        const std::vector<float> tensor = load_image_tensor(images[first + i], model);
        std::copy(tensor.begin(), tensor.end(), out + i * sample_elements);
      }
    };
  }

  AccuracySettings settings;
  settings.batch = command.batch;
  settings.max_samples = command.samples;
  settings.layers = command.layers;
  settings.per_layer = !command.whole_only;
  if (::isatty(STDERR_FILENO) == 1)
    settings.progress = [](int done, int total, const std::string& name) {
      std::cerr << "\raccuracy [" << done << "/" << total << "] " << name << "\033[K"
                << (done == total ? "\n" : "") << std::flush;
    };
  const AccuracyReport report = accuracy_report(graph, calibration, inputs, settings);
  if (!command.json_path.empty()) write_text_file(command.json_path, report.to_json());
  std::cout << report.to_table();
  return 0;
}

int cmd_accuracy(const Arguments& arguments) {
  const Args args = parse_command_args("accuracy",
                                       join_flags({weight_flags(),
                                                   {{"--calib", FlagKind::Value},
                                                    {"--images", FlagKind::Value},
                                                    {"--input", FlagKind::Value},
                                                    {"--samples", FlagKind::Value},
                                                    {"--batch", FlagKind::Value},
                                                    {"--layers", FlagKind::Value},
                                                    {"--whole-only", FlagKind::Switch},
                                                    {"--json", FlagKind::Value}}}),
                                       arguments, 1, 1);
  AccuracyCommand command;
  command.calib_path = args.require("--calib");
  if (args.has("--images") == args.has("--input"))
    args.fail("give the input set as exactly one of --images DIR or --input X.npy");
  command.images_dir = args.get_string("--images", "");
  command.input_path = args.get_string("--input", "");
  command.json_path = args.get_string("--json", "");
  command.samples =
      static_cast<int>(args.get_int("--samples", 0, 1, std::numeric_limits<int>::max()));
  command.batch = static_cast<int>(args.get_int("--batch", 8, 1, kMaxBatch));
  if (args.has("--layers") && args.has("--whole-only"))
    args.fail("--layers and --whole-only exclude each other");
  command.layers = split_list(args.get_string("--layers", ""));
  if (args.has("--layers") && command.layers.empty()) args.fail("--layers needs layer names");
  command.whole_only = args.has("--whole-only");
  return run_accuracy(load_graph_with_weights(args.positional()[0], args), command);
}

}  // namespace cnnrt::apps
