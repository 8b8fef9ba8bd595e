// A one-line progress bar on stderr, redrawn in place, for work that takes more than a couple
// of seconds (bench, calibrate).  Drawn only when stderr is a terminal and --quiet is off, so
// logs and pipes never see carriage returns.
#pragma once

#include <chrono>
#include <string>

namespace cnnrt::apps {

class ProgressBar {
 public:
  // `what` names the work ("calibrating"), `unit` the items counted ("batches").
  ProgressBar(std::string what, std::string unit);
  ~ProgressBar();  // ends the line if anything was drawn
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  bool enabled() const { return enabled_; }
  void update(int64_t done, int64_t total);

 private:
  std::string what_, unit_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace cnnrt::apps
