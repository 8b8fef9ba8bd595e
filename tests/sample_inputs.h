// Test input sets: CalibrationInputs (what calibration, accuracy and the automatic plan read) over
// samples held in a vector, as the runtime tests and the GPU tests build them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/calibration.h"

namespace cnnrt::test {

// Samples [first, first + count) of `data` (`elements` floats each; count -1: to the end).
// Refers to `data`, which must outlive the returned set.
inline CalibrationInputs inputs_over(const std::vector<float>& data, int64_t elements,
                                     int first = 0, int count = -1) {
  CalibrationInputs in;
  in.samples = count >= 0 ? count : static_cast<int>(data.size() / elements) - first;
  in.load = [&data, elements, first](int at, int n, float* out) {
    std::copy_n(data.begin() + (first + at) * elements, n * elements, out);
  };
  return in;
}

}  // namespace cnnrt::test
