// Helpers shared by the cmd_*.cpp subcommands: argument tables bound to the command's usage
// line, and latency statistics.
#pragma once

#include <string>
#include <vector>

#include "apps/common/cli.h"
#include "apps/common/commands.h"

namespace cnnrt::apps {

// Parses `arguments` for subcommand `command` (its usage line comes from the table).
Args parse_command_args(const char* command, std::vector<FlagSpec> flags,
                        const Arguments& arguments, size_t min_positional, size_t max_positional);

// Largest batch a command accepts; bigger ones are almost certainly typos and would only fail
// later with an out-of-memory error.
constexpr int64_t kMaxBatch = 1 << 16;

struct LatencyStats {
  double median_ms = 0, min_ms = 0, p90_ms = 0;
};
// Median (mean of the two middle values for an even count), minimum, and the nearest-rank
// 90th percentile.  Throws Error for an empty sample.
LatencyStats latency_stats(std::vector<double> samples_ms);

}  // namespace cnnrt::apps
