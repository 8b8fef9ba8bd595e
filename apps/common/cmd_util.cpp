// See cmd_util.h.
#include "apps/common/cmd_util.h"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "graph/atomic_write.h"

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

}  // namespace cnnrt::apps
