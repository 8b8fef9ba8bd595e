// See cmd_util.h.
#include "apps/common/cmd_util.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <sstream>

#include "apps/common/model_setup.h"
#include "cnnrt/image.h"
#include "graph/atomic_write.h"
#include "graph/ir.h"

namespace cnnrt::apps {

LatencyStats latency_stats(std::vector<double> samples_ms) {
  if (samples_ms.empty()) throw Error("no timing samples");
  std::sort(samples_ms.begin(), samples_ms.end());
  const size_t n = samples_ms.size();
  LatencyStats stats;
  stats.min_ms = samples_ms.front();
  stats.median_ms = n % 2 ? samples_ms[n / 2] : 0.5 * (samples_ms[n / 2 - 1] + samples_ms[n / 2]);
  const size_t rank = static_cast<size_t>(std::ceil(0.9 * static_cast<double>(n)));
  stats.p90_ms = samples_ms[std::max<size_t>(rank, 1) - 1];
  return stats;
}

void JsonOutput::add_option(CLI::App& command) {
  command
      .add_option("--json", path,
                  "also write the report as JSON to FILE ('-': to stdout, instead of the text)")
      ->type_name("FILE");
}

void JsonOutput::prepare() const {
  if (path.empty()) return;
  if (is_std_stream(path))
    claim_stdout("--json");
  else
    check_output_path(path);
}

void JsonOutput::write(const nlohmann::json& report) const {
  if (path.empty()) return;
  write_output(path, report.dump(2) + "\n");
  if (!is_std_stream(path) && verbosity() != Verbosity::Quiet)
    report_stream() << "wrote " << path << "\n";
}

namespace {
bool is_image_name(const std::filesystem::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension == ".png" || extension == ".jpg" || extension == ".jpeg" || extension == ".bmp";
}
}  // namespace

std::vector<std::string> split_comma_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ','))
    if (!item.empty()) items.push_back(item);
  return items;
}

std::vector<std::string> list_images(const std::string& directory, const std::string& what) {
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
    throw_error(site, "the " + what + " is empty: no .png, .jpg, .jpeg or .bmp files");
  std::sort(paths.begin(), paths.end());
  return paths;
}

NpyArray read_sample_set(const std::string& path, const ModelInfo& model,
                         const std::string& model_name, const std::string& what) {
  const std::string name = is_std_stream(path) ? "<stdin>" : path;
  NpyArray array = is_std_stream(path) ? parse_npy(read_input("-"), name) : read_npy(name);
  std::vector<int64_t> expected = {-1};
  expected.insert(expected.end(), model.input_shape.begin(), model.input_shape.end());
  bool matches = array.shape.size() == expected.size();
  for (size_t i = 1; matches && i < expected.size(); ++i) matches = array.shape[i] == expected[i];
  ErrorSite site;
  site.file = name;
  if (!matches)
    throw_error(site, "input shape " + shape_to_string(array.shape) + " does not match model '" +
                          model_name + "' input [N, " +
                          shape_to_string(model.input_shape).substr(1));
  if (array.shape[0] < 1) throw_error(site, "the " + what + " is empty (N = 0)");
  if (array.shape[0] > std::numeric_limits<int>::max()) throw_error(site, "too many samples");
  const int64_t sample_elements = shape_elements(model.input_shape);
  for (size_t i = 0; i < array.data.size(); ++i)
    if (!std::isfinite(array.data[i]))
      throw_error(site,
                  "sample " + std::to_string(i / sample_elements) + " has a NaN or infinite value");
  return array;
}

void read_sample_source(SampleSet& set, const std::string& npy_path, const std::string& images_dir,
                        const Graph& graph, const std::string& what) {
  const ModelInfo model = model_info_from_graph(graph);
  const int64_t elements = shape_elements(model.input_shape);
  if (!npy_path.empty()) {
    set.array = read_sample_set(npy_path, model, graph.name, what);
    set.inputs.samples = static_cast<int>(set.array.shape[0]);
    const NpyArray* array = &set.array;
    set.inputs.load = [array, elements](int first, int count, float* out) {
      std::copy_n(array->data.begin() + first * elements, count * elements, out);
    };
  } else if (!images_dir.empty()) {
    set.images = list_images(images_dir, what);
    set.inputs.samples = static_cast<int>(set.images.size());
    const std::vector<std::string>* images = &set.images;
    set.inputs.load = [images, model, elements](int first, int count, float* out) {
      for (int i = 0; i < count; ++i) {
        const std::vector<float> tensor = load_image_tensor((*images)[first + i], model);
        std::copy(tensor.begin(), tensor.end(), out + i * elements);
      }
    };
  }
}

}  // namespace cnnrt::apps
