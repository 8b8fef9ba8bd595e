// Plan files as a whole (docs/FORMAT.md, "Plan files"): the per-layer choices that
// load_plan_file (cnnrt.h) returns, plus what `cnnrt build --precision auto` records so a plan is
// used only for what it was made for: the model's fingerprint (structure and weights), the
// device, the batch it was tuned at, the calibration file its int8 layers read, the weight file
// it runs on when it pruned layers (`cnnrt build --allow-prune 2:4`), and per layer the variant
// the kernel prepared at that batch (informational: variants are decided by prepare()).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/ir.h"

namespace cnnrt {

struct PlanFile {
  std::string model;             // "" = any model
  std::string model_hash;        // model_fingerprint() of the model it was made for; "" = unchecked
  std::string device;            // "cpu" | "cuda" | "" (any)
  int batch = 0;                 // the batch it was tuned at (0: not recorded)
  std::string budget;            // the budget it was chosen under (informational)
  std::string calibration;       // as written (relative to the plan file's folder), "" = none
  std::string calibration_path;  // resolved against the plan file's folder
  // The weights the plan runs on (the model's with its pruned layers pruned), as written
  // (relative to the plan file's folder) and resolved; "" = the model's own.
  std::string weights, weights_path;
  std::map<std::string, LayerChoice> layers;
  std::map<std::string, std::string> variants;  // layer -> variant at `batch` (informational)
  std::vector<std::string> order;  // layers in file order (network order when written by build)
};

// Reads and checks a plan file; errors name file:line:col (and the layer).
PlanFile read_plan_file(const std::string& path);
// The YAML text of `plan` (read_plan_file reads it back to the same fields); `header` lines are
// written first as comments.
std::string plan_file_text(const PlanFile& plan, const std::string& header = "");

// A 64-bit hash (16 hex digits) of what makes a plan valid for a model: its name, the input
// shape, every layer's name, op, inputs and shapes, and every weight's key, shape and bytes.  The
// YAML's layout, comments and file names do not count; any weight change does.
std::string model_fingerprint(const Graph& graph);

}  // namespace cnnrt
