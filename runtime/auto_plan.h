// Automatic per-layer precision and kernel choice under an accuracy budget (`cnnrt build
// --precision auto`, docs/ARCHITECTURE.md "Automatic plans").
//
// Data flow (auto_plan below):
//   1. the baseline engine (every layer at the device's native precision) names the layers;
//   2. candidates per layer: every non-baseline registry entry of the layer's op on the device at
//      every allowed precision (int8 only with a calibration).  A precision is one more loop
//      value: a `sparse` precision (2:4 or pruned weights) slots in as another Precision whose
//      entries say in supports() whether the layer's weights allow it, with no change here;
//   3. each candidate is an ordinary engine with that one layer changed (BuildOptions::
//      layer_choices), so its time includes the conversion steps it forces at its boundaries and
//      its error is the end-to-end error of exactly what `cnnrt run --plan` would run.  Times
//      come from a TimingSource (the engine's own per-step profile; stubs in tests) through a
//      TimingCache keyed by device, batch, kernel, variant, types and shapes; errors from
//      running the engine over the held-out set against the fp32 CPU reference;
//   4. choose_assignment: greedy by time saved per unit of error, verified end to end with every
//      choice applied, backing off the layer with the worst error while over budget, then
//      retrying (each verified) the faster candidates the estimate had skipped;
//   5. the result is measured again as a whole (time and error) and written as a plan file.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/ir.h"
#include "runtime/accuracy.h"
#include "runtime/calibration.h"

namespace cnnrt {

// The end-to-end error bound: `rel_l2=X` (X >= 0), `top1_agreement=X` (X in [0, 1]) or `none`.
struct Budget {
  enum class Metric { None, RelL2, Top1Agreement };
  Metric metric = Metric::None;
  double value = 0;
  // The scalar the chooser compares and orders by: rel L2, or 1 - top-1 agreement.
  double error_of(const OutputAgreement& agreement) const;
  double limit() const;  // the largest allowed error_of; +inf for none
  bool met(const OutputAgreement& agreement) const { return error_of(agreement) <= limit(); }
  std::string to_string() const;             // the SPEC it was parsed from, normalised
  std::string describe(double error) const;  // "rel_l2 0.0123" / "top1_agreement 0.995"
};
// Throws Error naming the SPEC and the valid forms.
Budget parse_budget(const std::string& spec);

struct Candidate {
  std::string kernel;  // registry name
  Precision precision = Precision::FP32;
  std::string variant;     // what the kernel prepares at the plan's batch
  bool applicable = true;  // false: could not be built (why_not says why)
  std::string why_not;
  double ms = 0;              // the layer's step plus the conversions it forces, median
  bool has_error = false;     // false when no held-out set was given (budget none)
  OutputAgreement agreement;  // this layer alone changed, the rest at the baseline
  double error = 0;           // budget.error_of(agreement)
  std::string verdict;        // chosen / slower / over budget / backed off / not applicable
};

struct LayerCandidates {
  std::string layer;                 // the fused layer (engine step) name
  std::vector<std::string> sources;  // YAML layers it covers
  std::vector<Candidate> candidates;
  int reference = -1;  // the most accurate applicable candidate: the starting point
  int chosen = -1;
};

struct ChoiceResult {
  std::vector<int> chosen;       // per layer, an index into its candidates
  OutputAgreement agreement;     // measured with every choice applied
  double error = 0;              // budget.error_of(agreement)
  bool met = false;              // false: even the most accurate assignment is over budget
  std::vector<std::string> log;  // what the greedy pass and the back-off did, in order
};

// The choice itself, on measured candidates: sets each layer's `reference`, `chosen` and every
// candidate's verdict.  `verify` measures an assignment end to end.  Deterministic: ties are
// broken by network order, then by candidate order.
ChoiceResult choose_assignment(
    std::vector<LayerCandidates>& layers, const Budget& budget,
    const std::function<OutputAgreement(const std::vector<int>&)>& verify);

// Sets every candidate's verdict from each layer's `chosen` (what choose_assignment ends with;
// also after the caller changes the choice).
void mark_verdicts(std::vector<LayerCandidates>& layers, const Budget& budget);

// Where step times come from.  The real source profiles a context (median per step after
// warm-up); tests inject stubs.
class TimingSource {
 public:
  virtual ~TimingSource() = default;
  // Median milliseconds of every step of `engine` (engine.impl().steps order) at `batch`.
  virtual std::vector<double> step_times(const Engine& engine, int batch) = 0;
};
// ExecutionContext::profile: one warm-up forward, then `iterations` timed runs per step.
std::unique_ptr<TimingSource> profile_timing(int iterations);

// Step times keyed by device, batch, kernel, variant, precision, input/output types and shapes
// and weight shapes, so a second build of the same model times nothing.  A JSON file
// ({"format": "cnnrt-timing-cache", "version": 1, "entries": {key: ms}, "results": {key:
// {"values": [...], "text": "..."}}}); a missing file is an empty cache, a malformed one an
// Error naming it.
class TimingCache {
 public:
  TimingCache() = default;
  explicit TimingCache(std::string path);  // loads it when it exists
  bool lookup(const std::string& key, double* ms) const;
  void store(const std::string& key, double ms);
  // Whole results (a candidate's time, variant and error; an assignment's error or time), keyed
  // by everything they depend on: device, batch, model fingerprint, calibration and held-out
  // set (auto_plan_measure.cpp).  With them a warm build builds no candidate engine at all.
  bool lookup_result(const std::string& key, std::vector<double>* values, std::string* text) const;
  void store_result(const std::string& key, const std::vector<double>& values,
                    const std::string& text);
  void save() const;  // atomically; no-op without a path or when nothing changed
  size_t size() const { return entries_.size(); }

 private:
  std::string path_;
  std::map<std::string, double> entries_;
  std::map<std::string, std::pair<std::vector<double>, std::string>> results_;
  bool dirty_ = false;
};

struct AutoPlanSettings {
  Device device = Device::CPU;
  int batch = 1;
  Budget budget;
  std::vector<Precision> precisions;               // allowed; empty = fp32, fp16, int8
  std::shared_ptr<const Calibration> calibration;  // int8 candidates only with one
  int eval_batch = 16;                             // samples per engine run of the error runs
  TimingSource* timing = nullptr;                  // required
  TimingCache* cache = nullptr;                    // optional
  std::function<void(const std::string& what)> progress;
};

struct AutoPlan {
  std::string model, fingerprint, device;
  int batch = 0;
  Budget budget;
  std::vector<LayerCandidates> layers;
  ChoiceResult choice;
  double chosen_ms = 0;       // every step of the chosen engine, summed per-step medians
  double baseline_ms = 0;     // the same for the all-native engine (fp32 CPU, fp16 CUDA)
  std::string baseline_name;  // "all-fp32" / "all-fp16"
  OutputAgreement baseline_agreement;
  bool has_error = false;  // a held-out set was given
  int engines_timed = 0;   // engines the TimingSource profiled (0: all from the cache)
  int steps_cached = 0;    // step times answered by the cache
  double seconds = 0;      // wall time of auto_plan

  std::map<std::string, LayerChoice> choices() const;
  std::string explain() const;  // per layer every candidate and verdict, then the totals
  std::string to_json() const;
};

// Runs the whole pipeline above on `graph` (weights bound).  `inputs` is the held-out set; it
// may be empty only with budget none (then no errors are measured).  The returned plan may have
// choice.met == false (the caller reports the best error and writes nothing).
AutoPlan auto_plan(const Graph& graph, const CalibrationInputs& inputs,
                   const AutoPlanSettings& settings);

}  // namespace cnnrt
