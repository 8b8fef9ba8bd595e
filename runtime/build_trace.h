// CNNRT_TRACE_BUILD=1 prints the host time of each build phase to stderr, one line per mark:
// "build: <ms since the previous mark> ms  <prefix><what>" — the breakdown behind the build
// times in docs/PERFORMANCE.md (scripts/gpu_auto_check.py sums these lines).  The builder marks
// each layer's kernel creation, `cnnrt build` its phases ("[cnnrt build] "), the calibration its
// fp32 engine and passes ("[calibration] ").  Reads the variable once per trace; costs nothing
// when unset.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace cnnrt {

class BuildTrace {
 public:
  explicit BuildTrace(std::string prefix = "")
      : on_(std::getenv("CNNRT_TRACE_BUILD") != nullptr),
        prefix_(std::move(prefix)),
        last_(Clock::now()) {}
  void mark(const std::string& what) {
    if (!on_) return;
    const Clock::time_point now = Clock::now();
    std::fprintf(stderr, "build: %9.2f ms  %s%s\n",
                 std::chrono::duration<double, std::milli>(now - last_).count(), prefix_.c_str(),
                 what.c_str());
    last_ = now;
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool on_;
  std::string prefix_;
  Clock::time_point last_;
};

}  // namespace cnnrt
