// The timing side of runtime/auto_plan.h: the real TimingSource (profile_timing) — per-step
// times of a candidate engine and replayed whole forwards, from contexts of the engine's own
// backend — and the stubs' default replay (summed step times).
#include <algorithm>
#include <memory>
#include <vector>

#include "runtime/auto_plan.h"
#include "runtime/engine_impl.h"

namespace cnnrt {
namespace {

// Timed runs per engine.  The first engine a source times is the plan's baseline.  An engine
// whose first forward (ContextImpl::first_run: the one its context ran at creation) takes at
// least kSlowFactor times the baseline's and at least kSingleRunMs is timed by that run alone: a
// candidate that slow (a CUDA fp32 reference layer at batch 256 takes 0.1-0.2 s against the
// fp16 engine's 1.6 ms; the int8 direct conv ~0.1 s) loses by far more than one run's noise or
// its one-time costs, and more runs of it would cost a second per candidate.  The rule is
// relative so that a model that is slow everywhere (AlexNet on the CPU reference kernels, ~2 s
// a forward) is still timed properly.  Others get as many runs as fit in kRunBudgetMs after a
// warm-up: 1 to the asked iterations for per-step times, 1 to kMaxReplays for whole forwards
// (an fp16 AlexNet gets 60-100; AlexNet on the CPU, ~2 s a forward, one).  Whole forwards
// measured once per distinct assignment (the native one is the greedy's when they agree).  A single
// run's times are not cached (single_run()): they carry one-time costs.
constexpr double kSingleRunMs = 50;
constexpr double kSlowFactor = 4;
constexpr double kRunBudgetMs = 100;
constexpr int kMaxReplays = 100;

double summed(const std::vector<double>& times) {
  double total = 0;
  for (double ms : times) total += ms;
  return total;
}

class ProfileTiming : public TimingSource {
 public:
  explicit ProfileTiming(int iterations) : iterations_(std::max(1, iterations)) {}
  std::vector<double> step_times(const Engine& engine, int batch) override {
    Started started = start(engine, batch);
    if (single_run_) return started.first;
    return medians(started.context->profile(runs(started.forward_ms, 1, iterations_)));
  }
  double replay_ms(const Engine& engine, int batch) override {
    Started started = start(engine, batch);
    if (single_run_) return started.forward_ms;
    // As many replays as fit in the run budget (the first run was the warm-up); two more warm-up
    // replays only for a fast forward, whose first one may still run at idle clocks.
    const int replays = runs(started.forward_ms, 1, kMaxReplays);
    return median(started.context->benchmark(started.forward_ms < kRunBudgetMs ? 2 : 0, replays));
  }
  bool single_run() const override { return single_run_; }

 private:
  struct Started {
    std::unique_ptr<ContextImpl> context;
    std::vector<double> first;  // per step, the creation forward
    double forward_ms = 0;
  };
  Started start(const Engine& engine, int batch) {
    Started started;
    // Untimed choices: the build creates dozens of these contexts (ContextOptions).
    started.context = engine.impl().backend->create_context(
        engine.shared_impl(), batch, {/*keep_all_tensors=*/false, /*timed_choices=*/false});
    started.first = medians(started.context->first_run());
    started.forward_ms = summed(started.first);
    if (baseline_ms_ < 0) baseline_ms_ = started.forward_ms;
    single_run_ = started.forward_ms >= std::max(kSingleRunMs, kSlowFactor * baseline_ms_);
    return started;
  }
  static int runs(double forward_ms, int least, int most) {
    return std::clamp(static_cast<int>(kRunBudgetMs / std::max(forward_ms, 1e-3)), least, most);
  }
  static std::vector<double> medians(const std::vector<LayerProfile>& rows) {
    std::vector<double> times;
    for (const LayerProfile& row : rows) times.push_back(row.median_ms);
    return times;
  }

  int iterations_;
  double baseline_ms_ = -1;  // the first engine's first forward
  bool single_run_ = false;  // of the last engine timed
};

}  // namespace

double TimingSource::replay_ms(const Engine& engine, int batch) {
  return summed(step_times(engine, batch));
}

std::unique_ptr<TimingSource> profile_timing(int iterations) {
  return std::make_unique<ProfileTiming>(iterations);
}

}  // namespace cnnrt
