// Helpers shared by the CPU tests: fresh random data (seed printed on failure so a failing
// case can be replayed), tolerance comparison abs + |ref|·rel.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace cnnrt::test {

// A new seed each run; SCOPED_TRACE(seed_trace(seed)) names it in any failure message.
inline uint32_t fresh_seed() { return std::random_device{}(); }
inline std::string seed_trace(uint32_t seed) { return "random seed " + std::to_string(seed); }

// Uniform in [lo, hi), never exactly zero-filled.
inline std::vector<float> random_vector(size_t count, std::mt19937& rng, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

inline int random_int(std::mt19937& rng, int lo, int hi) {  // inclusive
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

// Element-wise |actual - expected| <= abs_tol + rel_tol * |expected|; reports the first few
// mismatches with their index.
inline void expect_all_near(const std::vector<float>& actual, const std::vector<float>& expected,
                            double abs_tol, double rel_tol, const std::string& what = "") {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double tolerance = abs_tol + rel_tol * std::fabs(expected[i]);
    const bool ok = std::fabs(static_cast<double>(actual[i]) - expected[i]) <= tolerance;
    if (!ok && reported++ < 5)
      ADD_FAILURE() << what << " index " << i << ": got " << actual[i] << ", expected "
                    << expected[i] << " (tolerance " << tolerance << ")";
  }
}

}  // namespace cnnrt::test
