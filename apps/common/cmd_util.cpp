// See cmd_util.h.
#include "apps/common/cmd_util.h"

#include <algorithm>
#include <cmath>

namespace cnnrt::apps {

Args parse_command_args(const char* command, std::vector<FlagSpec> flags,
                        const Arguments& arguments, size_t min_positional, size_t max_positional) {
  const Command* entry = find_command(command);
  Args args(entry ? entry->usage : std::string("usage: cnnrt ") + command, std::move(flags));
  args.parse(arguments, min_positional, max_positional);
  return args;
}

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

}  // namespace cnnrt::apps
