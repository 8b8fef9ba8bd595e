// Profile tables, JSON and traces; see profile_report.h.
#include "apps/common/profile_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace cnnrt::apps {
namespace {

double tflops_of(const LayerProfile& layer) {
  return layer.median_ms > 0 ? layer.flops / (layer.median_ms * 1e-3) / 1e12 : 0.0;
}
double gbs_of(const LayerProfile& layer) {
  return layer.median_ms > 0 ? layer.bytes / (layer.median_ms * 1e-3) / 1e9 : 0.0;
}
}  // namespace

// Rates span GFLOP/s on the CPU to hundreds of TFLOP/s on a GPU: three significant digits
// keep both readable in one column.
std::string significant(double value) {
  if (value <= 0) return "0";
  char buffer[64];
  const int digits = value >= 100  ? 0
                     : value >= 10 ? 1
                     : value >= 1
                         ? 2
                         : std::min(9, 2 - static_cast<int>(std::floor(std::log10(value))));
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

namespace {

std::string percent_of(double achieved, double peak) {
  return peak > 0 ? significant(100.0 * achieved / peak) : "-";
}
bool looks_numeric(const std::string& cell) {
  if (cell.empty() || cell == "-") return !cell.empty();
  return std::isdigit(static_cast<unsigned char>(cell[0])) ||
         (cell.size() > 1 && (cell[0] == '-' || cell[0] == '.'));
}

}  // namespace

std::string fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

double peak_tflops(const DeviceInfo& device, const std::string& precision) {
  if (precision == "fp16") return device.peak_fp16_tflops;
  if (precision == "fp32") return device.peak_fp32_tflops;
  if (precision == "int8") return 2.0 * device.peak_fp16_tflops;
  return 0.0;
}

std::string join_sources(const LayerProfile& layer) {
  if (layer.sources.empty()) return layer.name;
  std::string out;
  for (size_t i = 0; i < layer.sources.size(); ++i) out += (i ? "+" : "") + layer.sources[i];
  return out;
}

double total_ms(const std::vector<LayerProfile>& layers) {
  double total = 0;
  for (const LayerProfile& layer : layers) total += layer.median_ms;
  return total;
}

std::string format_text_table(const std::vector<std::string>& header,
                              const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  };
  measure(header);
  for (const auto& row : rows) measure(row);
  std::ostringstream out;
  auto emit = [&](const std::vector<std::string>& row, bool is_header) {
    std::string line;
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      const std::string pad(widths[i] - cell.size(), ' ');
      if (i) line += "  ";
      line += (!is_header && looks_numeric(cell)) ? pad + cell : cell + pad;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  };
  emit(header, true);
  size_t rule = 0;
  for (size_t w : widths) rule += w;
  rule += 2 * (widths.empty() ? 0 : widths.size() - 1);
  out << std::string(rule, '-') << "\n";
  for (const auto& row : rows) emit(row, false);
  return out.str();
}

namespace {

// Rates read best in GFLOP/s on a CPU and in TFLOP/s on a GPU: the unit follows the total rate.
struct RateUnit {
  const char* header;
  double per_tflop;  // cells are tflops * per_tflop
};
RateUnit rate_unit(double total_tflops) {
  return total_tflops >= 1.0 ? RateUnit{"TFLOP/s", 1.0} : RateUnit{"GFLOP/s", 1000.0};
}

bool knows_a_peak(const std::vector<LayerProfile>& layers, const DeviceInfo& device) {
  for (const LayerProfile& layer : layers)
    if (peak_tflops(device, layer.precision) > 0) return true;
  return false;
}

// Drops column `index` from the header and every row.
void drop_column(std::vector<std::string>& header, std::vector<std::vector<std::string>>& rows,
                 size_t index) {
  header.erase(header.begin() + static_cast<std::ptrdiff_t>(index));
  for (auto& row : rows)
    if (index < row.size()) row.erase(row.begin() + static_cast<std::ptrdiff_t>(index));
}

}  // namespace

std::string format_profile_table(const std::vector<LayerProfile>& layers,
                                 const DeviceInfo& device) {
  const double total = total_ms(layers);
  double total_flops = 0, total_bytes = 0;
  for (const LayerProfile& layer : layers) {
    total_flops += layer.flops;
    total_bytes += layer.bytes;
  }
  LayerProfile sum;
  sum.median_ms = total;
  sum.flops = total_flops;
  sum.bytes = total_bytes;
  const RateUnit unit = rate_unit(tflops_of(sum));
  std::vector<std::vector<std::string>> rows;
  for (const LayerProfile& layer : layers) {
    const double peak = peak_tflops(device, layer.precision);
    rows.push_back(
        {layer.name, join_sources(layer), layer.kernel, layer.precision, fixed(layer.median_ms, 4),
         total > 0 ? fixed(100.0 * layer.median_ms / total, 1) : "-",
         significant(tflops_of(layer) * unit.per_tflop), percent_of(tflops_of(layer), peak),
         significant(gbs_of(layer)), percent_of(gbs_of(layer), device.peak_bandwidth_gbs)});
  }
  rows.push_back({"total", "", "", "", fixed(total, 4), total > 0 ? "100.0" : "-",
                  significant(tflops_of(sum) * unit.per_tflop), "", significant(gbs_of(sum)), ""});
  std::vector<std::string> header = {"layer",   "sources",   "kernel", "prec", "median ms",
                                     "share %", unit.header, "% peak", "GB/s", "% bw"};
  // A peak the device does not know (the CPU's) is left out, not made up.
  if (device.peak_bandwidth_gbs <= 0) drop_column(header, rows, 9);
  if (!knows_a_peak(layers, device)) drop_column(header, rows, 7);
  return format_text_table(header, rows);
}

std::string format_compare_table(const std::vector<LayerProfile>& candidates,
                                 const DeviceInfo& device) {
  double most_tflops = 0;
  for (const LayerProfile& row : candidates) most_tflops = std::max(most_tflops, tflops_of(row));
  const RateUnit unit = rate_unit(most_tflops);
  std::vector<std::vector<std::string>> rows;
  double chosen_ms = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const LayerProfile& row = candidates[i];
    // Rows of one layer are adjacent with the chosen kernel first.
    const bool chosen = i == 0 || candidates[i - 1].name != row.name;
    if (chosen) chosen_ms = row.median_ms;
    const double relative = row.median_ms > 0 ? chosen_ms / row.median_ms : 0.0;
    rows.push_back({chosen ? row.name : "", (chosen ? "* " : "  ") + row.kernel, row.precision,
                    fixed(row.median_ms, 4), fixed(relative, 2) + "x",
                    significant(tflops_of(row) * unit.per_tflop),
                    percent_of(tflops_of(row), peak_tflops(device, row.precision)),
                    significant(gbs_of(row))});
  }
  std::vector<std::string> header = {"layer",     "kernel (* = chosen)", "prec",   "median ms",
                                     "vs chosen", unit.header,           "% peak", "GB/s"};
  if (!knows_a_peak(candidates, device)) drop_column(header, rows, 6);
  return format_text_table(header, rows);
}

nlohmann::json layer_json(const LayerProfile& layer, double total) {
  return {{"name", layer.name},           {"sources", layer.sources},
          {"kernel", layer.kernel},       {"precision", layer.precision},
          {"median_ms", layer.median_ms}, {"share", total > 0 ? layer.median_ms / total : 0.0},
          {"tflops", tflops_of(layer)},   {"gbs", gbs_of(layer)},
          {"flops", layer.flops},         {"bytes", layer.bytes}};
}

nlohmann::json trace_json(const std::vector<LayerProfile>& layers) {
  nlohmann::json events = nlohmann::json::array();
  double start_us = 0;
  for (const LayerProfile& layer : layers) {
    const double duration_us = layer.median_ms * 1000.0;
    events.push_back({{"name", layer.name},
                      {"cat", "layer"},
                      {"ph", "X"},
                      {"ts", start_us},
                      {"dur", duration_us},
                      {"pid", 0},
                      {"tid", 0},
                      {"args",
                       {{"kernel", layer.kernel},
                        {"sources", join_sources(layer)},
                        {"precision", layer.precision}}}});
    start_us += duration_us;
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace cnnrt::apps
