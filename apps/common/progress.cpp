// See progress.h.
#include "apps/common/progress.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "apps/common/cli.h"

namespace cnnrt::apps {

ProgressBar::ProgressBar(std::string what, std::string unit)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      enabled_(::isatty(STDERR_FILENO) == 1 && verbosity() != Verbosity::Quiet),
      start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() {
  if (drawn_) std::cerr << "\n";
}

void ProgressBar::update(int64_t done, int64_t total) {
  if (!enabled_ || total <= 0) return;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(done * kWidth / total);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char eta[32] = "";
  if (done > 0 && done < total)
    std::snprintf(eta, sizeof eta, ", ~%.0f s left", elapsed * (total - done) / done);
  std::cerr << "\r" << what_ << " [" << std::string(filled, '#')
            << std::string(kWidth - filled, '.') << "] " << done << "/" << total << " " << unit_
            << eta << "   " << std::flush;
  drawn_ = true;
}

}  // namespace cnnrt::apps
