// Running `cnnrt ARGS...` in the test's process (cnnrt_main), stdout and stderr captured: the
// CLI tests of every command share it.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "apps/common/cli.h"
#include "apps/common/commands.h"

namespace cnnrt::apps {

struct Outcome {
  int code;
  std::string out, err;
};

inline Outcome run_cnnrt(std::vector<std::string> args) {
  args.insert(args.begin(), "cnnrt");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int code = cnnrt_main(static_cast<int>(argv.size()), argv.data());
  Outcome outcome{code, testing::internal::GetCapturedStdout(),
                  testing::internal::GetCapturedStderr()};
  return outcome;
}

inline int count_lines_starting(const std::string& text, const std::string& prefix) {
  int count = 0;
  size_t start = 0;
  while (start < text.size()) {
    if (text.compare(start, prefix.size(), prefix) == 0) ++count;
    const size_t end = text.find('\n', start);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return count;
}

}  // namespace cnnrt::apps
