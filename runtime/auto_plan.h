// Automatic per-layer precision and kernel choice under an accuracy budget (`cnnrt build
// --precision auto`, docs/ARCHITECTURE.md "Automatic plans").
//
// Data flow (auto_plan below):
//   1. the baseline engine (every layer at the device's native precision) names the layers;
//   2. candidates per layer: every non-baseline registry entry of the layer's op on the device at
//      every allowed precision (int8 only with a calibration).  A precision is one more loop
//      value: a `sparse` precision (2:4 or pruned weights) slots in as another Precision whose
//      entries say in supports() whether the layer's weights allow it, with no change here.
//      With AutoPlanSettings::allow_prune_2_4 a conv / linear whose weight is not 2:4 also gets
//      the sparse kernels that would serve it once pruned 2:4 by magnitude, as candidates marked
//      `pruned` (runtime/auto_plan_prune.h): their engines run on that layer's pruned weight, so
//      their error includes the pruning, and the plan then runs on planned_model()'s weights;
//   3. each candidate is an ordinary engine with that one layer changed (BuildOptions::
//      layer_choices), so its time includes the conversion steps it forces at its boundaries and
//      its error is the end-to-end error of exactly what `cnnrt run --plan` would run.  Times
//      come from a TimingSource (the engine's own per-step profile; stubs in tests) through a
//      TimingCache keyed by device, batch, kernel, variant, types and shapes; errors from
//      running the engine over the held-out set against the fp32 reference (on the build's device,
//      cached);
//   4. choose_assignment: greedy by time saved per unit of error, verified end to end with every
//      choice applied, backing off the layer with the worst error while over budget, then
//      retrying (each verified) the faster candidates the estimate had skipped;
//   5. the result is measured again as a whole (time and error), next to the native baseline and
//      the uniform seeds (every layer at its fastest kernel of one precision); the fastest of
//      them within budget is the plan, written as a plan file.
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
  // The layer's weight pruned 2:4 by magnitude for this candidate (a sparse kernel; only with
  // AutoPlanSettings::allow_prune_2_4).  Its choice carries sparsity "2:4", which both names the
  // pruned weight to the measuring engines and makes the plan refuse a dense one.
  bool pruned = false;
  std::string variant;     // what the kernel prepares at the plan's batch
  bool applicable = true;  // false: could not be built (why_not says why)
  std::string why_not;
  double ms = 0;  // the layer's step plus the conversions it forces, median
  // The layer's step alone: what the kernel costs in any engine, conversions or not (the lower
  // bound a whole assignment's time is checked against before it is built; 0: unknown).
  double step_ms = 0;
  bool has_error = false;     // false when no held-out set was given (budget none)
  OutputAgreement agreement;  // this layer alone changed, the rest at the baseline
  double error = 0;           // budget.error_of(agreement)
  // The agreement is the layer's first int8 candidate's: every int8 kernel computes the same
  // integers (auto_plan_measure.cpp), so one held-out run serves them all.
  bool error_shared = false;
  std::string verdict;  // chosen / slower / over budget / backed off / not applicable

  std::string label() const;   // "KERNEL", or "KERNEL (pruned 2:4)": reports and logs
  LayerChoice choice() const;  // what a plan (or a measuring engine) asks of the layer
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

// A whole assignment measured end to end (time and error, like the final verification): the
// greedy's result, the native baseline and each uniform seed.  The per-layer candidates are
// measured with only that layer changed, so an int8 layer among fp16 ones pays two conversions
// and never looks worth it, and a run of int8 layers is never considered; the seeds are.
struct WholeAssignment {
  std::string name;  // "greedy", "all-fp16 (native)", "uniform int8", ...
  std::vector<int> chosen;
  double ms = 0;  // its engine's forward, TimingSource::replay_ms
  OutputAgreement agreement;
  double error = 0;
  bool met = false;
  // Not built: its kernels alone (their step_ms summed) already take longer than a measured
  // assignment within budget, so it can only be slower; `ms` is that lower bound.  (A uniform
  // fp32 seed on CUDA runs the reference kernels: ~0.6 s a forward at AlexNet's batch 256.)
  bool bounded = false;
  // Runs on the graph a build without a calibration makes — residual adds fused into their
  // convs, as `--precision fp16` runs it — with `fused_choices` per layer of that graph (none:
  // the builder's defaults).  Only assignments without int8 or pruned layers have such a twin.
  bool residuals_fused = false;
  std::map<std::string, LayerChoice> fused_choices;
  std::string verdict;  // chosen / slower / over budget / slower: kernels alone ...
};

// A uniform seed: per layer the fastest applicable candidate of `precision` (same-precision
// candidates pay the same conversions, so their single-layer times order them), `fallback`'s
// choice on a layer without one.  Empty when no layer has one.  Pruned candidates are left out:
// a seed keeps the model's own weights (pruning is the greedy's per-layer trade, error by error).
std::vector<int> uniform_assignment(const std::vector<LayerCandidates>& layers, Precision precision,
                                    const std::vector<int>& fallback);
// The fastest assignment within budget (ties: the first listed; a bounded one is never
// picked), or -1; sets every verdict.
int pick_fastest_met(std::vector<WholeAssignment>& wholes);
// The fastest seed whole (wholes[first_seed..]) that is over budget but faster than every whole
// within budget, with its most sensitive layers backed off to `fallback`'s choice: the fewest
// that meet the budget.  A layer that only pays off in a run of its precision (an int8 conv
// between int8 neighbours) is never taken by the greedy, which changes one layer at a time; so
// the seed's run is kept and only the layers whose own error (that layer alone changed) is
// largest go back, ordered by that error, then rel L2.  The count is found by bisection, each
// probe one `measure(name, assignment)` appended to `wholes` (the whole's error falls as layers
// go back, its time rises); a probe over budget already slower than the best within budget ends
// the search, since more layers back only slow it further.  Nothing happens without such a seed
// or without per-layer errors.
void back_off_fastest_seed(
    const std::vector<LayerCandidates>& layers, std::vector<WholeAssignment>& wholes,
    size_t first_seed, const std::vector<int>& fallback,
    const std::function<WholeAssignment(const std::string&, const std::vector<int>&)>& measure);

// Sets every candidate's verdict from each layer's `chosen` (what choose_assignment ends with;
// also after the caller changes the choice).
void mark_verdicts(std::vector<LayerCandidates>& layers, const Budget& budget);

// Where times come from: per step (candidates) and per whole forward (assignments).  The real
// source (profile_timing) profiles and replays a context; tests inject stubs.
class TimingSource {
 public:
  virtual ~TimingSource() = default;
  // Median milliseconds of every step of `engine` (engine.impl().steps order) at `batch`.
  virtual std::vector<double> step_times(const Engine& engine, int batch) = 0;
  // Median milliseconds of a whole forward as `cnnrt bench` times it (CUDA-graph replay): how
  // whole assignments are compared, since summed per-step medians miss launch gaps and event
  // overheads that decide between plans a few microseconds apart (EfficientNet-Lite0 at batch
  // 1: 61 steps).  Stubs: the sum of step_times.
  virtual double replay_ms(const Engine& engine, int batch);
  // Whether the last call timed its engine by one cold run (a candidate far slower than the
  // baseline): such times are used but not put in the timing cache.
  virtual bool single_run() const { return false; }
};
// Per-step times: ContextImpl::first_run alone for an engine whose first forward takes >= 50 ms
// and >= 4x the baseline's, else profile() with up to `iterations` runs after a warm-up
// (auto_plan_measure.cpp); whole forwards: ContextImpl::benchmark, as many replays as fit in
// 100 ms (1 to 100).
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
  // `cnnrt build --allow-prune 2:4`: also consider every conv / linear pruned 2:4 by magnitude
  // with a sparse kernel (Candidate::pruned); the plan then needs planned_model()'s weights.
  bool allow_prune_2_4 = false;
  TimingSource* timing = nullptr;  // required
  TimingCache* cache = nullptr;    // optional
  // Optional: an fp32 engine of the model that the held-out reference runs on instead of one
  // built here — the calibration's (cached_calibration), whose fp32 packing of every layer
  // (AlexNet: ~0.3 s on an H100's host) a cold build would otherwise pay twice.  Its outputs
  // are the fp32 model's, as the family's fp32 engine's are (same graph, adds unfused).  Not
  // used when it is on another device (a calibration that fell back to the CPU) or the model
  // has `impl:` requests (the calibration keeps those layers unfused; the plan's engines drop
  // the requests and fuse them).
  std::shared_ptr<const Engine> reference_engine;
  std::function<void(const std::string& what)> progress;
};

struct AutoPlan {
  // fingerprint: model_fingerprint() of the model as the plan runs it (planned_model(): with the
  // chosen pruned layers pruned), what the plan file's model_hash must hold.
  std::string model, fingerprint, device;
  int batch = 0;
  Budget budget;
  std::vector<LayerCandidates> layers;
  ChoiceResult choice;
  double chosen_ms = 0;       // the chosen engine's forward (TimingSource::replay_ms)
  double baseline_ms = 0;     // the same for the all-native engine (fp32 CPU, fp16 CUDA)
  std::string baseline_name;  // "all-fp32" / "all-fp16"
  OutputAgreement baseline_agreement;
  bool has_error = false;               // a held-out set was given
  std::vector<WholeAssignment> wholes;  // greedy, native and seeds, as measured
  int engines_timed = 0;                // engines the TimingSource profiled (0: all from the cache)
  int reference_runs = 0;  // fp32 reference passes over the held-out set (0: from the cache)
  int steps_cached = 0;    // step times answered by the cache
  double seconds = 0;      // wall time of auto_plan
  // Where the seconds went (the build-time figures of docs/PERFORMANCE.md): engines built (of
  // them through the shared-kernel family, runtime/engine_family.h) and layer kernels created,
  // the wall time of building them, of profiling them, of the held-out runs (the fp32
  // reference's included) and of everything else (candidate lists, pruning, the choice).
  int engines_built = 0;
  int kernels_created = 0;
  int held_out_runs = 0;  // engines run over the held-out set (the reference's included)
  double build_seconds = 0, timing_seconds = 0, error_seconds = 0;
  // When the pick has its residual adds fused (WholeAssignment::residuals_fused): the layers of
  // that graph in network order with the kernel each runs — what the plan file lists (the adds
  // absorbed into their convs are not among them, and it names no calibration, so that `--plan`
  // builds the same graph).  Empty otherwise.  `layers`' `chosen` stay those the pick derives from.
  struct FusedLayer {
    std::string layer;
    LayerChoice choice;
    std::string variant;
  };
  std::vector<FusedLayer> fused_layers;
  // The pruned weight of every layer in pruned_layers(), exactly the tensors its candidate was
  // measured with (pruned once per build); planned_model() puts them in.
  std::map<std::string, HostTensor> pruned_weights;

  // Per layer the choice of the pick (fused_layers' when set: build those without a calibration).
  std::map<std::string, LayerChoice> choices() const;
  // The layers whose chosen candidate is pruned (network order); empty: the plan runs on the
  // weights it was given.
  std::vector<std::string> pruned_layers() const;
  std::string explain() const;  // per layer every candidate and verdict, then the totals
  std::string to_json() const;
};

// Runs the whole pipeline above on `graph` (weights bound).  `inputs` is the held-out set; it
// may be empty only with budget none (then no errors are measured).  The returned plan may have
// choice.met == false (the caller reports the best error and writes nothing).
AutoPlan auto_plan(const Graph& graph, const CalibrationInputs& inputs,
                   const AutoPlanSettings& settings);

// The model as `plan` runs it: `graph` (the one auto_plan was given) with the weights of
// plan.pruned_layers() replaced by plan.pruned_weights — those its pruned candidates were
// measured with — and the rest unchanged; `graph` itself when nothing is pruned.  What `cnnrt
// build` writes next to the plan, and model_fingerprint() of it is plan.fingerprint.
Graph planned_model(const Graph& graph, const AutoPlan& plan);

// A short hash of a text, and the key of an input set (a hash of its values and its count).
std::string text_hash(const std::string& text);
std::string input_set_key(const Graph& graph, const CalibrationInputs& inputs);

// calibrate() through the timing cache: keyed by the model fingerprint (structure and weights),
// the input set's values, the method and the batching, so a warm build does not calibrate again
// and another input set does.  `computed` (optional) says whether it ran.
// `engine` (optional) receives calibrate()'s fp32 engine when it ran, else nullptr.
std::shared_ptr<const Calibration> cached_calibration(const Graph& graph,
                                                      const CalibrationInputs& inputs,
                                                      const CalibrationSettings& settings,
                                                      TimingCache* cache, bool* computed,
                                                      std::shared_ptr<Engine>* engine = nullptr);

}  // namespace cnnrt
