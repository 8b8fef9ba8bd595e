// CudaContext's L2 prefetch (the why: kernels/cuda/l2_prefetch.h; the graph's side branch:
// enqueue_forward in cuda_context.cpp): the candidates at creation (plan_l2_prefetch), the
// choice among them by timing captured graphs (capture_fastest) and its report (describe()).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "runtime/cuda/cuda_context.h"

namespace cnnrt::cuda {

std::vector<CudaContext::PrefetchChoice> CudaContext::plan_l2_prefetch() {
  const std::vector<KernelPlan>& plans = prepared_.kernel_plans;
  // The streamed weights of the steps after the first (step 0 has nothing before it to overlap).
  std::vector<WeightStream> streams;
  std::vector<size_t> stream_steps;
  for (size_t step = 1; step < plans.size(); ++step)
    if (plans[step].streamed_weights != nullptr) {
      streams.push_back({plans[step].streamed_weights, plans[step].streamed_weight_bytes});
      stream_steps.push_back(step);
    }
  if (streams.empty()) return {};
  // Fork after the step with the most activation bytes ahead of the first stream (the later
  // steps' traffic is smaller, so it evicts less of what the prefetch brings).
  double heaviest = -1.0;
  for (size_t step = 0; step < stream_steps.front(); ++step) {
    const Step& s = engine_->steps[step];
    const double bytes = step_bytes(*engine_, s, batch_) - double(s.kernel->weight_bytes());
    if (bytes > heaviest) {
      heaviest = bytes;
      prefetch_fork_step_ = step + 1;
    }
  }
  int device = 0, l2_bytes = 0;
  CNNRT_CUDA_CHECK(cudaGetDevice(&device));
  CNNRT_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
  // No prefetch, 0.23 and 0.34 of the L2 (12.1 and 17.8 MB on an H100): on AlexNet at batch 1
  // the best budget moved between leases and precisions (fp16 -4 us at 12 MB in three leases and
  // nothing at 17.8 MB in two, int8 -8 us at 17.8 MB; docs/PERFORMANCE.md run 47), so the context
  // times them (capture_fastest).
  std::vector<size_t> budgets = {0, size_t(0.23 * l2_bytes), size_t(0.34 * l2_bytes)};
  if (const char* knob = std::getenv("CNNRT_L2_PREFETCH_MB")) {
    char* end = nullptr;
    const double mb = std::strtod(knob, &end);
    if (end == knob || *end != '\0' || !(mb >= 0) || mb > 1e6)
      throw Error("CNNRT_L2_PREFETCH_MB must be a number of megabytes >= 0, got '" +
                  std::string(knob) + "'");
    budgets = {size_t(mb * 1e6)};
  }
  std::vector<PrefetchChoice> choices;
  bool any = false;
  for (size_t budget : budgets) {
    PrefetchChoice choice;
    choice.budget_bytes = budget;
    size_t last = 0;
    for (const PlannedPrefetch& p : l2_prefetch_plan(streams, budget)) {
      choice.patterns.push_back(p.pattern);
      choice.pattern_steps.push_back(stream_steps[p.stream_index]);
      last = std::max(last, p.stream_index);
    }
    // A stream read before a later one whose bytes were prefetched reads evict-first.
    for (size_t i = 0; i < last; ++i) choice.evict_first_steps.push_back(stream_steps[i]);
    any = any || !choice.patterns.empty();
    const bool repeat = std::any_of(choices.begin(), choices.end(), [&](const PrefetchChoice& c) {
      return c.patterns == choice.patterns && c.evict_first_steps == choice.evict_first_steps;
    });
    if (!repeat) choices.push_back(std::move(choice));
  }
  if (!any) return {};
  cudaStream_t side = nullptr;
  CNNRT_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  side_stream_.reset(side);
  for (EventHandle* event : {&fork_event_, &join_event_}) {
    cudaEvent_t handle = nullptr;
    CNNRT_CUDA_CHECK(cudaEventCreateWithFlags(&handle, cudaEventDisableTiming));
    event->reset(handle);
  }
  return choices;
}

void CudaContext::apply_prefetch(const PrefetchChoice& choice) {
  prefetch_ = choice.patterns;
  for (KernelArgs& args : step_args_) args.stream_evict_first = false;
  for (size_t step : choice.evict_first_steps) step_args_[step].stream_evict_first = true;
}

std::string CudaContext::describe_prefetch(const PrefetchChoice& choice) const {
  auto mb = [](size_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MB", double(bytes) / 1e6);
    return std::string(text);
  };
  if (choice.patterns.empty()) return "none";
  std::string text;
  for (size_t i = 0; i < choice.patterns.size(); ++i) {
    const L2PrefetchPattern& p = choice.patterns[i];
    text += (i ? ", " : "") + engine_->steps[choice.pattern_steps[i]].name + " " +
            (p.prefetched_bytes() == p.bytes ? mb(p.bytes) + " (whole)"
                                             : mb(p.prefetched_bytes()) + " of " + mb(p.bytes));
  }
  if (!choice.evict_first_steps.empty()) {
    text += "; read evict-first:";
    for (size_t step : choice.evict_first_steps) text += " " + engine_->steps[step].name;
  }
  return text + "; from " + engine_->steps[prefetch_fork_step_].name;
}

CudaContext::CapturedGraph CudaContext::capture_fastest(const std::vector<PrefetchChoice>& choices,
                                                        bool timed) {
  if (choices.size() <= 1 || !timed) {
    if (!choices.empty()) {
      apply_prefetch(choices.back());
      prefetch_report_ =
          "L2 prefetch: " + describe_prefetch(choices.back()) +
          (choices.size() == 1 ? " (CNNRT_L2_PREFETCH_MB)" : " (untimed: the largest budget)");
    }
    return capture_graph(step_args_);
  }
  std::vector<CapturedGraph> graphs;
  for (const PrefetchChoice& choice : choices) {
    apply_prefetch(choice);
    graphs.push_back(capture_graph(step_args_));
  }
  // Rounds of a few replays of each graph (timed as benchmark() times), interleaved so that
  // drift (clocks, the L2's state) meets all alike; the lowest median wins.  At AlexNet's batch
  // 1 the three take ~15 ms.
  constexpr int kRounds = 5, kReplays = 8;
  std::vector<std::vector<double>> times(graphs.size());
  for (int round = 0; round < kRounds; ++round)
    for (size_t g = 0; g < graphs.size(); ++g) {
      const std::vector<double> some = replay_times(graphs[g].exec.get(), 1, kReplays);
      times[g].insert(times[g].end(), some.begin(), some.end());
    }
  size_t best = 0;
  double best_ms = std::numeric_limits<double>::infinity();
  std::string medians;
  for (size_t g = 0; g < graphs.size(); ++g) {
    const double ms = median(times[g]);
    if (ms < best_ms) {
      best_ms = ms;
      best = g;
    }
    char text[64];
    std::snprintf(text, sizeof text, "%s%.1f MB %.4f ms", g ? ", " : "",
                  double(choices[g].budget_bytes) / 1e6, ms);
    medians += text;
  }
  apply_prefetch(choices[best]);
  prefetch_report_ = "L2 prefetch: " + describe_prefetch(choices[best]) +
                     " (the fastest of budgets " + medians + ")";
  return std::move(graphs[best]);
}

}  // namespace cnnrt::cuda
