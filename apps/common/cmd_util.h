// Helpers shared by the cmd_*.cpp subcommands: limits and latency statistics.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/common/cli.h"
#include "apps/common/commands.h"
#include "apps/common/npy.h"
#include "cnnrt/cnnrt.h"
#include "runtime/calibration.h"

namespace cnnrt::apps {

// Largest batch a command accepts; bigger ones are almost certainly typos and would only fail
// later with an out-of-memory error.
constexpr int64_t kMaxBatch = 1 << 16;

struct LatencyStats {
  double median_ms = 0, min_ms = 0, p90_ms = 0;
};
// Median (mean of the two middle values for an even count), minimum, and the nearest-rank
// 90th percentile.  Throws Error for an empty sample.
LatencyStats latency_stats(std::vector<double> samples_ms);

// --json FILE: the report as JSON to FILE, or to stdout for "-" (instead of the
// text report).  Checks FILE is writable before any slow work.
struct JsonOutput {
  std::string path;  // empty: not asked for
  void add_option(CLI::App& command);
  // Call before the work: claims stdout for "-", checks a file's folder.
  void prepare() const;
  // Writes `report` (if asked for) and says where on the report stream.
  void write(const nlohmann::json& report) const;
};

// "a,b,,c" -> {"a", "b", "c"}: a comma-separated list of names (layers), empty items dropped.
std::vector<std::string> split_comma_list(const std::string& text);

// The image files (.png, .jpg, .jpeg, .bmp) of `directory`, sorted by name so that a set and its
// batches are reproducible.  Errors name the directory: not a directory, unreadable, or no
// image in it (`what` says which set: "calibration set", "input set").
std::vector<std::string> list_images(const std::string& directory, const std::string& what);

// An [N, <model input shape>] float32 .npy as a sample set ('-': stdin): errors name the file
// for a shape that does not match model `model_name`, N = 0, or a NaN / infinite value.
NpyArray read_sample_set(const std::string& path, const ModelInfo& model,
                         const std::string& model_name, const std::string& what);

// A sample set from an [N, <input shape>] .npy ('-': stdin; read_sample_set's checks) or from a
// folder of images (list_images; each decoded and preprocessed for the model when loaded), as
// CalibrationInputs — what calibrate, accuracy, build and prune read.  `inputs` refers to the
// members, so the set is neither copied nor moved.
struct SampleSet {
  NpyArray array;
  std::vector<std::string> images;
  CalibrationInputs inputs;  // samples 0 when neither source was given
  SampleSet() = default;
  SampleSet(const SampleSet&) = delete;
  SampleSet& operator=(const SampleSet&) = delete;
};
// Fills `set` from `npy_path` if given, else from `images_dir` if given; `what` names the set in
// errors ("calibration set", "input set").
void read_sample_source(SampleSet& set, const std::string& npy_path, const std::string& images_dir,
                        const Graph& graph, const std::string& what);

}  // namespace cnnrt::apps
