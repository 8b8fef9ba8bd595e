// `cnnrt calibrate MODEL (--weights W | --random-weights [SEED]) (--images DIR | --input X.npy)
// --method minmax|percentile[:P]|entropy [--batches N] [--batch B] -o CALIB.json`: runs the
// model in fp32 on the CPU over a calibration set and writes the scale of every tensor an int8
// layer may read or write (docs/QUANTIZATION.md).  Images are preprocessed as `cnnrt run` does;
// each is decoded when its batch runs (once per pass), so a large set is never held in memory.
// Progress goes to stderr when it is a terminal; the file is written through a temporary file
// and a rename, so a failed run leaves nothing behind.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>

#include "apps/common/cmd_util.h"
#include "apps/common/model_setup.h"
#include "apps/common/npy.h"
#include "cnnrt/image.h"
#include "graph/atomic_write.h"
#include "runtime/calibration.h"

namespace cnnrt::apps {
namespace {

bool is_image_name(const std::filesystem::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension == ".png" || extension == ".jpg" || extension == ".jpeg" || extension == ".bmp";
}

// The image files of `directory`, sorted by name (so the set and its batches are reproducible).
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
    throw_error(site, "the calibration set is empty: no .png, .jpg, .jpeg or .bmp files");
  std::sort(paths.begin(), paths.end());
  return paths;
}

// A one-line progress bar on stderr, redrawn in place; silent when stderr is not a terminal.
class ProgressBar {
 public:
  ProgressBar() : enabled_(::isatty(STDERR_FILENO) == 1) {}
  ~ProgressBar() {
    if (drawn_) std::cerr << "\n";
  }
  void update(int done, int total) {
    if (!enabled_ || total <= 0) return;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(static_cast<int64_t>(done) * kWidth / total);
    std::cerr << "\rcalibrating [" << std::string(filled, '#') << std::string(kWidth - filled, '.')
              << "] " << done << "/" << total << " batches" << std::flush;
    drawn_ = true;
  }

 private:
  bool enabled_;
  bool drawn_ = false;
};

}  // namespace

int cmd_calibrate(const Arguments& arguments) {
  const Args args = parse_command_args("calibrate",
                                       join_flags({weight_flags(),
                                                   {{"--images", FlagKind::Value},
                                                    {"--input", FlagKind::Value},
                                                    {"--method", FlagKind::Value},
                                                    {"--batches", FlagKind::Value},
                                                    {"--batch", FlagKind::Value},
                                                    {"-o", FlagKind::Value}}}),
                                       arguments, 1, 1);
  const std::string output_path = args.require("-o");
  check_output_path(output_path);  // before the calibration run, not after it
  if (args.has("--images") == args.has("--input"))
    args.fail("give the calibration set as exactly one of --images DIR or --input X.npy");
  CalibrationSettings settings;
  settings.method = parse_calibration_method(args.require("--method"));
  settings.batch = static_cast<int>(args.get_int("--batch", 16, 1, kMaxBatch));
  settings.max_batches =
      static_cast<int>(args.get_int("--batches", 0, 1, std::numeric_limits<int>::max()));

  const std::string model_path = args.positional()[0];
  const Graph graph = load_graph_with_weights(model_path, args);
  const ModelInfo model = model_info_from_graph(graph);
  const int64_t sample_elements = shape_elements(model.input_shape);

  CalibrationInputs inputs;
  NpyArray array;
  std::vector<std::string> images;
  if (args.has("--input")) {
    const std::string input_path = args.require("--input");
    array = read_npy(input_path);
    std::vector<int64_t> expected = {-1};
    expected.insert(expected.end(), model.input_shape.begin(), model.input_shape.end());
    bool matches = array.shape.size() == expected.size() && !array.shape.empty();
    for (size_t i = 1; matches && i < expected.size(); ++i) matches = array.shape[i] == expected[i];
    ErrorSite site;
    site.file = input_path;
    if (!matches)
      throw_error(site, "input shape " + shape_to_string(array.shape) + " does not match model '" +
                            graph.name + "' input [N, " +
                            shape_to_string(model.input_shape).substr(1));
    if (array.shape[0] < 1) throw_error(site, "the calibration set is empty (N = 0)");
    if (array.shape[0] > std::numeric_limits<int>::max())
      throw_error(site, "too many samples for one calibration");
    for (size_t i = 0; i < array.data.size(); ++i)
      if (!std::isfinite(array.data[i]))
        throw_error(
            site, "sample " + std::to_string(i / sample_elements) + " has a NaN or infinite value");
    inputs.samples = static_cast<int>(array.shape[0]);
    inputs.load = [&array, sample_elements](int first, int count, float* out) {
      std::copy_n(array.data.begin() + first * sample_elements, count * sample_elements, out);
    };
  } else {
    images = list_images(args.require("--images"));
    inputs.samples = static_cast<int>(images.size());
    inputs.load = [&images, &model, sample_elements](int first, int count, float* out) {
      for (int i = 0; i < count; ++i) {
        const std::vector<float> tensor = load_image_tensor(images[first + i], model);
        std::copy(tensor.begin(), tensor.end(), out + i * sample_elements);
      }
    };
  }

  Calibration calibration;
  {
    ProgressBar progress;
    settings.progress = [&progress](int done, int total) { progress.update(done, total); };
    calibration = calibrate(graph, inputs, settings);
  }
  write_text_file(output_path, calibration_to_json(calibration));

  std::printf("%-24s %14s %14s\n", "tensor", "amax", "scale");
  for (const auto& [name, entry] : calibration.tensors)
    std::printf("%-24s %14.6g %14.6g\n", name.c_str(), static_cast<double>(entry.amax),
                static_cast<double>(entry.scale));
  std::printf("wrote %zu tensors (%s, %lld samples) to %s\n", calibration.tensors.size(),
              calibration.method.c_str(), static_cast<long long>(calibration.samples),
              output_path.c_str());
  return 0;
}

}  // namespace cnnrt::apps
