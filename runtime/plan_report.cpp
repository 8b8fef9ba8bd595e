// ExecutionPlan as text and JSON (`cnnrt plan`): the steps a context runs and the tensors its
// arena holds, the plan a user reads before running.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cnnrt/cnnrt.h"

namespace cnnrt {
namespace {

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// Left-aligned columns sized to their widest cell.
std::string columns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) {
      if (widths.size() <= i) widths.push_back(0);
      widths[i] = std::max(widths[i], row[i].size());
    }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::string ExecutionPlan::to_table() const {
  std::string out =
      "model " + model + ", device " + device + ", batch " + std::to_string(batch) + "\n\nsteps\n";
  std::vector<std::vector<std::string>> rows = {{"#", "step", "sources", "kernel", "variant",
                                                 "precision", "input types", "output type",
                                                 "workspace", "in place"}};
  for (size_t i = 0; i < steps.size(); ++i) {
    const PlannedStep& s = steps[i];
    rows.push_back({std::to_string(i), s.name, s.sources.empty() ? "-" : join(s.sources, "+"),
                    s.kernel, s.variant.empty() ? "-" : s.variant, s.precision,
                    join(s.input_types, ", "), s.output_type, std::to_string(s.workspace_bytes),
                    s.in_place ? "yes" : "-"});
  }
  out += columns(rows);
  out += "\ntensors\n";
  rows = {{"tensor", "type", "bytes", "offset", "steps", "aliases"}};
  for (const Tensor& t : tensors)
    rows.push_back({t.name, t.type, std::to_string(t.bytes), std::to_string(t.offset),
                    "[" + std::to_string(t.first_step) + "," + std::to_string(t.last_step) + "]",
                    t.aliases.empty() ? "-" : t.aliases});
  out += columns(rows);
  char line[256];
  const double ratio = lower_bound_bytes > 0 ? static_cast<double>(arena_bytes) /
                                                   static_cast<double>(lower_bound_bytes)
                                             : 1.0;
  std::snprintf(line, sizeof line,
                "arena_bytes %zu  naive_bytes %zu  lower_bound_bytes %zu  arena/lower_bound %.3f\n",
                arena_bytes, naive_bytes, lower_bound_bytes, ratio);
  out += line;
  if (!compacted.empty()) {
    out += "\ncompacted (all-zero channels)\n";
    for (const std::string& entry : compacted) out += "  " + entry + "\n";
  }
  return out;
}

std::string ExecutionPlan::to_json() const {
  nlohmann::json steps_json = nlohmann::json::array();
  for (const PlannedStep& s : steps)
    steps_json.push_back({{"name", s.name},
                          {"sources", s.sources},
                          {"kernel", s.kernel},
                          {"variant", s.variant},
                          {"precision", s.precision},
                          {"inputs", s.inputs},
                          {"input_types", s.input_types},
                          {"output_type", s.output_type},
                          {"workspace_bytes", s.workspace_bytes},
                          {"in_place", s.in_place},
                          {"sparsity", s.sparse_2_4 ? "2:4" : "dense"}});
  nlohmann::json tensors_json = nlohmann::json::array();
  for (const Tensor& t : tensors)
    tensors_json.push_back({{"name", t.name},
                            {"type", t.type},
                            {"bytes", t.bytes},
                            {"offset", t.offset},
                            {"first_step", t.first_step},
                            {"last_step", t.last_step},
                            {"aliases", t.aliases}});
  nlohmann::json plan = {{"model", model},
                         {"device", device},
                         {"batch", batch},
                         {"steps", steps_json},
                         {"tensors", tensors_json},
                         {"arena_bytes", arena_bytes},
                         {"naive_bytes", naive_bytes},
                         {"lower_bound_bytes", lower_bound_bytes},
                         {"compacted", compacted}};
  return plan.dump(2);
}

}  // namespace cnnrt
