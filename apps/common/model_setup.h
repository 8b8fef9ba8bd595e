// From command-line flags to a built Engine: weight resolution, device and precision choice.
//
// Weight resolution is the same for every command, in this order:
//   --weights W                 that file
//   --random-weights [SEED]     deterministic init_weights (seed 0 by default), with a note on
//                               stderr that labels are meaningless
//   the YAML's `weights:` file  when it exists
//   otherwise an error that says how to get the file (tools/export_torchvision.py) or to pass
//   --random-weights.
// Notes go to stderr so stdout stays machine-readable (`cnnrt plan --json`).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "apps/common/cli.h"
#include "cnnrt/cnnrt.h"
#include "graph/ir.h"

namespace cnnrt::apps {

// --weights W, --random-weights [SEED]
std::vector<FlagSpec> weight_flags();
// --device D, --precision P, --plan FILE.yaml (per-layer precision / kernel choices),
// --calib CALIB.json (int8 tensor scales, from `cnnrt calibrate`)
std::vector<FlagSpec> device_flags();
// Concatenates flag tables.
std::vector<FlagSpec> join_flags(std::vector<std::vector<FlagSpec>> tables);

// Loads the YAML and binds weights as described above.
Graph load_graph_with_weights(const std::string& model_path, const Args& args);
// The binding step alone, for a graph already loaded from `model_path`.
void bind_weights_from_args(Graph& graph, const std::string& model_path, const Args& args);

struct DeviceChoice {
  Device device = Device::CPU;
  std::string name;     // device_info(device).name
  std::string summary;  // "cuda (NVIDIA H200)", "cpu (no CUDA device found)"
};
// Resolves auto to CUDA when a device is present, else CPU; an explicit cuda without a device
// is an Error.
DeviceChoice resolve_device(const std::string& text);

// Build options from --device/--precision/--plan/--calib (device already resolved).
BuildOptions build_options(const Args& args, const DeviceChoice& device);

// What an app needs before an engine exists (input shape, mean/std); labels not loaded.
ModelInfo model_info_from_graph(const Graph& graph);

}  // namespace cnnrt::apps
