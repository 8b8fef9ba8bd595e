// The stub timing source the automatic plan's CPU tests share (tests/runtime/test_auto_plan.cpp,
// test_auto_plan_residual.cpp): made-up step times, so the choice they test does not depend on
// a noisy machine.  Whole forwards are TimingSource's default, the sum of the steps.
#pragma once

#include <vector>

#include "runtime/auto_plan.h"
#include "runtime/engine_impl.h"

namespace cnnrt::test {

// int8 steps 1 ms, every other step 3 ms, conversions 0.25 ms; counts its calls.
class Int8StepsFaster : public TimingSource {
 public:
  int calls = 0;
  std::vector<double> step_times(const Engine& engine, int /*batch*/) override {
    ++calls;
    std::vector<double> times;
    for (const Step& step : engine.impl().steps)
      times.push_back(step.is_conversion() ? 0.25 : step.precision == Precision::INT8 ? 1.0 : 3.0);
    return times;
  }
};

}  // namespace cnnrt::test
