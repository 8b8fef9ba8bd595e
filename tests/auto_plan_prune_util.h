// What the tests of the automatic plan with --allow-prune 2:4 share: the library's
// (tests/runtime/test_auto_plan_prune.cpp) and the CLI's (tests/apps/build_prune_test.cpp, which
// serve the stub times to `cnnrt build` through its timing cache).
#pragma once

#include <vector>

#include "runtime/auto_plan.h"
#include "runtime/engine_impl.h"

namespace cnnrt::test {

// 8 input channels, so 2:4 along them changes c1's weight too (3 would leave one zero-padded
// group per tap, with at most 2 non-zeros already).
inline const char* const kPruneModel =
    "name: prune_ops\ninput: {shape: [8, 9, 9]}\nlayers:\n"
    "  - {name: c1, op: conv, out_channels: 8, kernel: 3, padding: 1, weight: a, bias: b}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, out_channels: 8, kernel: 3, weight: c, bias: d}\n"
    "  - {name: flat, op: flatten}\n"
    "  - {name: fc, op: linear, out_features: 5, weight: f, bias: g}\n";
constexpr int kPruneModelInputElements = 8 * 9 * 9;

// Stub step times: a sparse conv step 1 ms, a sparse linear step 5 ms, every other step 3 ms, a
// conversion 0.25 ms — so pruning pays on a conv and not on a linear.
class SparseConvFaster : public TimingSource {
 public:
  int calls = 0;
  std::vector<double> step_times(const Engine& engine, int /*batch*/) override {
    ++calls;
    std::vector<double> times;
    for (const Step& step : engine.impl().steps) {
      if (step.is_conversion())
        times.push_back(0.25);
      else if (step.entry->sparse_2_4)
        times.push_back(step.node->op == OpKind::Conv ? 1.0 : 5.0);
      else
        times.push_back(3.0);
    }
    return times;
  }
};

}  // namespace cnnrt::test
