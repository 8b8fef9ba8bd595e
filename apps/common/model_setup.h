// From command-line flags to a built Engine: weight resolution, device and precision choice.
//
// Weight resolution is the same for every command, in this order:
//   --weights W                 that file
//   --random-weights[=SEED]     deterministic init_weights (seed 0 by default), with a note on
//                               stderr that labels are meaningless
//   the YAML's `weights:` file  when it exists
//   otherwise an error that says how to get the file (tools/export_torchvision.py) or to pass
//   --random-weights.
// Notes go to stderr (apps/common/cli.h: note, detail) so stdout stays machine-readable.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "apps/common/cli.h"
#include "cnnrt/cnnrt.h"
#include "graph/ir.h"

namespace cnnrt::apps {

// --weights W, --random-weights[=SEED]
struct WeightArgs {
  std::string weights;      // --weights (empty: not given)
  std::string random_seed;  // --random-weights' seed, "0" when bare (empty: not given)
};
void add_weight_options(CLI::App& command, WeightArgs& args);

// --device, --precision, --plan FILE.yaml (per-layer precision / kernel choices),
// --calib CALIB.json (int8 tensor scales, from `cnnrt calibrate`)
struct DeviceArgs {
  std::string device = "auto";
  std::string precision = "auto";
  std::string plan;   // empty: none
  std::string calib;  // empty: none
};
void add_device_options(CLI::App& command, DeviceArgs& args);

// The model file positional: "-" is refused (a model names files relative to itself).
CLI::Option* add_model_argument(CLI::App& command, std::string& path);

// Loads the YAML and binds weights as described above.
Graph load_graph_with_weights(const std::string& model_path, const WeightArgs& args);
// The binding step alone, for a graph already loaded from `model_path`.
void bind_weights_from_args(Graph& graph, const std::string& model_path, const WeightArgs& args);

struct DeviceChoice {
  Device device = Device::CPU;
  std::string name;     // device_info(device).name
  std::string summary;  // "cuda (NVIDIA H200)", "cpu (no CUDA device found)"
};
// Resolves auto to CUDA when a device is present, else CPU; an explicit cuda without a device
// is an Error.  With `warm_up`, the chosen device's context is then created on a thread
// (warm_up_device) while the caller reads its inputs; a command that may build no engine at all
// (a `cnnrt build` answered by its timing cache) passes false and creates none.
DeviceChoice resolve_device(const std::string& text, bool warm_up = true);
// Starts the --device's start-up (driver, context) on a thread (warm_up_device), for a command
// to call before it reads its files and resolve_device after: the ~0.3 s of CUDA's start then
// overlaps the reading instead of preceding it.
void start_device(const std::string& text);

// Build options from --device/--precision/--plan/--calib (device already resolved).
BuildOptions build_options(const DeviceArgs& args, const DeviceChoice& device);
// The same before the device is resolved: options.device is the --device as given (auto
// included), for the caller to set from resolve_device.
BuildOptions build_options(const DeviceArgs& args);

// The weights to bind with those options: --weights / --random-weights when given, else the
// weight file a --plan names (BuildOptions::choices_weights: a plan that pruned layers runs on
// its own pruned weights, `cnnrt build --allow-prune 2:4`), else the YAML's.  Other weights than
// a plan's are refused at build by its model_hash (a stale plan).
WeightArgs weights_for(const WeightArgs& args, const BuildOptions& options);

// What an app needs before an engine exists (input shape, mean/std); labels not loaded.
ModelInfo model_info_from_graph(const Graph& graph);

}  // namespace cnnrt::apps
