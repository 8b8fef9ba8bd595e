// The measuring engine of the automatic plan (runtime/auto_plan.h), shared by its two halves:
// runtime/auto_plan_measure.cpp (candidates per layer, the pipeline) and
// runtime/auto_plan_wholes.cpp (assignments measured whole, the final pick).  Internal: not
// installed, not part of the library's API.
//
// A Measurer builds candidate engines from one EngineFamily (runtime/engine_family.h: the passes
// once, each (layer, kernel) packed once), times them through the build's TimingSource and the
// TimingCache, and measures their end-to-end error on the held-out set against the fp32
// reference.  Every figure comes from an ordinary engine built with BuildOptions::layer_choices,
// so what the plan promises is what `cnnrt run --plan` runs.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "graph/atomic_write.h"
#include "graph/tensor_type.h"
#include "runtime/accuracy.h"
#include "runtime/auto_plan.h"
#include "runtime/auto_plan_prune.h"
#include "runtime/engine_family.h"
#include "runtime/engine_impl.h"
#include "runtime/kernel.h"
#include "runtime/plan_file.h"

namespace cnnrt::auto_plan_detail {

// A seed is left unbuilt when its kernels' own times summed exceed the best measured plan within
// budget by this factor: per-step times carry event overheads a replay does not, so the sum is
// a lower bound only up to them (the seeds it is for are 10-400x slower: CUDA fp32 references).
constexpr double kBoundMargin = 1.25;
// The held-out set is kept in memory up to this size (~1,700 ImageNet-sized samples).
constexpr double kMaxHeldOutBytes = 1 << 30;

// Adds the wall time of its scope to a total (AutoPlan's breakdown of the build time).
class Stopwatch {
 public:
  explicit Stopwatch(double& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~Stopwatch() {
    total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  Stopwatch(const Stopwatch&) = delete;
  Stopwatch& operator=(const Stopwatch&) = delete;

 private:
  double& total_;
  std::chrono::steady_clock::time_point start_;
};

// The family's build options: device and calibration of the settings, nothing chosen.
BuildOptions family_options(const AutoPlanSettings& settings);
// The model without its own precision and kernel requests: the baseline is the device's native
// precision everywhere, and each candidate sets exactly the layer it is about.
Graph plain_graph(const Graph& graph);
std::string device_key(Device device);
// What makes a step's time reusable: the device, the batch, the kernel and its variant, the
// tensors it reads and writes (type and shape) and its weights' shapes and fused epilogue.
std::string step_key(const std::string& device, int batch, const EngineImpl& engine,
                     const Step& step, const PlannedStep& planned);
std::vector<double> agreement_values(const OutputAgreement& a);
OutputAgreement agreement_from(const std::vector<double>& v, size_t at);
std::string choices_text(const std::map<std::string, LayerChoice>& choices);
// The candidate of each layer running `kernels[l]` (unpruned, applicable); empty when a layer
// has no such candidate or the list is short.
std::vector<int> assignment_of(const AutoPlan& plan, const std::vector<std::string>& kernels);
// The kernel `engine` runs for each of the plan's layers, in layer order.
std::vector<std::string> kernels_of(const AutoPlan& plan, const Engine& engine);

class Measurer {
 public:
  // `graph`: the model as given (its own precision and kernel requests are dropped for the
  // family and the pruned engines alike: plain_graph).
  Measurer(const Graph& graph, const CalibrationInputs& inputs, const AutoPlanSettings& settings,
           AutoPlan& plan)
      : graph_(graph),
        inputs_(inputs),
        settings_(settings),
        plan_(plan),
        device_(device_key(settings.device)) {}

  // A candidate's or an assignment's engine.  One with pruned layers has other weights than the
  // family's graph: it is built whole (`--allow-prune` builds pay that).
  std::shared_ptr<Engine> build(const std::map<std::string, LayerChoice>& choices,
                                Precision precision = Precision::Auto) {
    if (!prunes_any(pruned_, choices)) return build_in(family(), choices, precision);
    Stopwatch watch(plan_.build_seconds);
    ++plan_.engines_built;
    BuildOptions options = family_options(settings_);
    options.layer_choices = choices;
    std::shared_ptr<Engine> engine =
        Engine::build(with_pruned_weights(plain(), pruned_, choices), options);
    for (const Step& step : engine->impl().steps) plan_.kernels_created += !step.is_conversion();
    return engine;
  }

  // The weights of the layers pruned candidates may prune (auto_plan_prune.h), set once the
  // candidates are known and before any of them is built.
  void set_pruned(std::map<std::string, HostTensor> pruned) { pruned_ = std::move(pruned); }
  const std::map<std::string, HostTensor>& pruned() const { return pruned_; }

  // What every whole result of this build depends on besides the choices: set once the
  // fingerprint, calibration and held-out set are known (result_context, timing_context above;
  // a "replay" — a whole forward's time — has the second, without the held-out set).
  void set_context(std::string context, std::string timing) {
    context_ = std::move(context);
    timing_context_ = std::move(timing);
  }

  bool cached(const std::string& kind, const std::string& what, std::vector<double>* values,
              std::string* text) const {
    return settings_.cache != nullptr &&
           settings_.cache->lookup_result(key(kind, what), values, text);
  }
  void remember(const std::string& kind, const std::string& what, const std::vector<double>& values,
                const std::string& text = "") const {
    if (settings_.cache != nullptr) settings_.cache->store_result(key(kind, what), values, text);
  }
  // Kinds "replay" (a whole forward's time), "default" (the kernels of a default engine) and
  // "structure" (the layers, their candidates and the fused graph's choices) do not depend on
  // the held-out set; "candidate" and "verify" do.
  std::string key(const std::string& kind, const std::string& what) const {
    const bool timing = kind == "replay" || kind == "default" || kind == "structure";
    return kind + "|" + (timing ? timing_context_ : context_) + "|" + what;
  }

  // The candidate of each layer that the builder's default engine at `precision` runs (empty
  // when none builds, or some layer's kernel is not a candidate).  Cached as the kernel names
  // per layer (candidate lists differ between builds with other --precisions), so a warm build
  // builds no such engine.
  std::vector<int> default_assignment(const AutoPlan& plan, Precision precision) {
    const std::string what = to_string(precision);
    std::vector<double> values;
    std::string text;  // "kernel;kernel;..." in layer order, "" when none builds
    if (!cached("default", what, &values, &text)) {
      try {
        for (const std::string& kernel : kernels_of(plan, *build({}, precision)))
          text += kernel + ";";
      } catch (const Error&) {
        // No engine of that precision builds for this model: no default seed.
      }
      remember("default", what, {}, text);
    }
    std::vector<std::string> kernels;
    std::istringstream names(text);
    for (std::string kernel; std::getline(names, kernel, ';');) kernels.push_back(kernel);
    return assignment_of(plan, kernels);
  }

  // A whole engine's forward (TimingSource::replay_ms).
  double replay(const Engine& engine) {
    Stopwatch watch(plan_.timing_seconds);
    ++plan_.engines_timed;
    return settings_.timing->replay_ms(engine, settings_.batch);
  }

  // Per-step medians, from the cache when every step is in it.
  std::vector<double> times(const Engine& engine) {
    const ExecutionPlan planned = engine.plan(settings_.batch);
    const EngineImpl& impl = engine.impl();
    std::vector<std::string> keys;
    std::vector<double> times(impl.steps.size());
    bool all = settings_.cache != nullptr;
    for (size_t i = 0; i < impl.steps.size(); ++i) {
      keys.push_back(step_key(device_, settings_.batch, impl, impl.steps[i], planned.steps[i]));
      all = all && settings_.cache->lookup(keys.back(), &times[i]);
    }
    if (all) {
      plan_.steps_cached += static_cast<int>(keys.size());
      return times;
    }
    {
      Stopwatch watch(plan_.timing_seconds);
      times = settings_.timing->step_times(engine, settings_.batch);
    }
    if (times.size() != impl.steps.size())
      throw Error("auto plan: the timing source returned " + std::to_string(times.size()) +
                  " step times for " + std::to_string(impl.steps.size()) + " steps");
    ++plan_.engines_timed;
    if (settings_.cache != nullptr && !settings_.timing->single_run())
      // The first time of a step stays: every candidate is then compared with the same figure
      // for the steps they share, instead of with a later, differently noisy run.
      for (size_t i = 0; i < keys.size(); ++i) {
        double known = 0;
        if (settings_.cache->lookup(keys[i], &known))
          times[i] = known;
        else
          settings_.cache->store(keys[i], times[i]);
      }
    return times;
  }

  // The builder's default engine (no choices) and its per-step times, made on first use: a cold
  // build's layers are its steps; a warm one has every figure it gives in the cache.
  const Engine& baseline() {
    if (!baseline_) baseline_ = build({});
    return *baseline_;
  }
  const std::vector<double>& baseline_times() {
    if (!baseline_times_) baseline_times_ = times(baseline());
    return *baseline_times_;
  }

  // An assignment's end-to-end agreement with fp32, from the cache or measured (on `built`
  // when given, else on an engine built for it; no choices: the baseline).
  OutputAgreement verified(const std::map<std::string, LayerChoice>& choices,
                           const Engine* built = nullptr) {
    std::vector<double> values;
    std::string text;
    const std::string what = choices_text(choices);
    if (cached("verify", what, &values, &text)) return agreement_from(values, 0);
    std::shared_ptr<Engine> engine;
    if (built == nullptr) built = choices.empty() ? &baseline() : (engine = build(choices)).get();
    const OutputAgreement agreement = error(*built);
    remember("verify", what, agreement_values(agreement));
    return agreement;
  }

  // An assignment measured as a whole: its replayed forward and (with a held-out set) its
  // agreement, building its engine at most once and not at all when both are cached.
  // `known`: its agreement when already verified (the greedy's result).
  WholeAssignment whole(const std::string& name, const std::vector<int>& chosen,
                        const std::map<std::string, LayerChoice>& choices,
                        const OutputAgreement* known = nullptr) {
    WholeAssignment out;
    out.name = name;
    out.chosen = chosen;
    return measured(
        std::move(out), choices_text(choices), [&] { return build(choices); }, known);
  }

  // The graph as a build without a calibration fuses it — residual adds into their convs, as
  // `cnnrt bench --precision fp16` runs it — as a second family, for the assignments without
  // int8 layers (runtime/auto_plan_wholes.cpp).  nullptr when that fuses nothing more than the
  // family did (no residual add, or no calibration: the family fused them already).
  EngineFamily* fused_family() {
    if (!fused_checked_) {
      fused_checked_ = true;
      BuildOptions options = family_options(settings_);
      options.calibration = nullptr;
      const bool has_add = std::any_of(graph_.nodes.begin(), graph_.nodes.end(),
                                       [](const Node& node) { return node.op == OpKind::Add; });
      if (has_add && !pass_options(family_options(settings_)).fuse_residual &&
          pass_options(options).fuse_residual) {
        const size_t unfused_nodes = family().graph().nodes.size();
        Stopwatch watch(plan_.build_seconds);
        fused_.emplace(plain_graph(graph_), options);
        if (fused_->graph().nodes.size() == unfused_nodes) fused_.reset();
      }
    }
    return fused_ ? &*fused_ : nullptr;
  }

  // Whether fused_family() is not nullptr, from the cache when a build of this model, device
  // and calibration answered it (a warm build then makes neither family).
  bool has_fused_family() {
    std::vector<double> values;
    std::string text;
    if (cached("structure", "fused family", &values, &text) && values.size() == 1)
      return values[0] != 0;
    const bool has = fused_family() != nullptr;
    remember("structure", "fused family", {has ? 1.0 : 0.0});
    return has;
  }

  // An engine of the fused family (fused_family() must not be nullptr).
  std::shared_ptr<Engine> build_fused(const std::map<std::string, LayerChoice>& choices) {
    EngineFamily* fused = fused_family();
    if (fused == nullptr) throw Error("internal: no fused family to build an engine in");
    return build_in(*fused, choices, Precision::Auto);
  }

  // As whole(), on the fused family: `choices` are per layer of the fused graph (none: the
  // builder's default engine there).  `chosen` is what it derives from, for the report.
  WholeAssignment fused_whole(const std::string& name, const std::vector<int>& chosen,
                              const std::map<std::string, LayerChoice>& choices) {
    WholeAssignment out;
    out.name = name;
    out.chosen = chosen;
    out.residuals_fused = true;
    out.fused_choices = choices;
    return measured(
        std::move(out), "residuals fused|" + choices_text(choices),
        [&] { return build_fused(choices); }, nullptr);
  }

  std::string variant_of(const Engine& engine, const std::string& layer) const {
    for (const PlannedStep& step : engine.plan(settings_.batch).steps)
      if (step.name == layer) return step.variant;
    return "";
  }

  bool has_inputs() const { return inputs_.samples > 0; }

  // The engine's output over the held-out set against the fp32 reference: on the build's own
  // device (the CUDA fp32 engine is within ~1e-7 of the CPU one, docs/PERFORMANCE.md, and
  // minutes faster on a large model), and from the cache when this model, set and device had
  // it already.
  OutputAgreement error(const Engine& engine) {
    if (reference_.empty()) reference();
    const std::vector<float> outputs = run_all(engine);
    AgreementAccumulator accumulator(outputs_, probabilities_);
    accumulator.add(reference_.data(), outputs.data(), inputs_.samples);
    return accumulator.result();
  }

  void set_reference_key(std::string key) { reference_key_ = std::move(key); }

 private:
  // The family of every unpruned engine, made on the first build: the passes over a copy of
  // the model (AlexNet: its 244 MB of weights) are not paid by a build the cache answers.
  EngineFamily& family() {
    if (!family_) {
      Stopwatch watch(plan_.build_seconds);
      family_.emplace(plain_graph(graph_), family_options(settings_));
    }
    return *family_;
  }

  // An engine of `family`, its build time and new kernels counted in the plan's breakdown.
  std::shared_ptr<Engine> build_in(EngineFamily& family,
                                   const std::map<std::string, LayerChoice>& choices,
                                   Precision precision) {
    Stopwatch watch(plan_.build_seconds);
    ++plan_.engines_built;
    const int before = family.kernels_created();
    std::shared_ptr<Engine> engine = family.build(choices, precision);
    plan_.kernels_created += family.kernels_created() - before;
    return engine;
  }

  // What whole() and fused_whole() share: the replayed forward and (with a held-out set, unless
  // `known`) the agreement, each from the cache under `what` or from the engine `make` builds —
  // at most once, and not at all when both are cached.
  WholeAssignment measured(WholeAssignment out, const std::string& what,
                           const std::function<std::shared_ptr<Engine>()>& make,
                           const OutputAgreement* known) {
    std::shared_ptr<Engine> engine;
    auto built = [&]() -> const Engine& {
      if (!engine) engine = make();
      return *engine;
    };
    std::vector<double> values;
    std::string text;
    if (cached("replay", what, &values, &text) && values.size() == 1) {
      out.ms = values[0];
    } else {
      out.ms = replay(built());
      if (!settings_.timing->single_run()) remember("replay", what, {out.ms});
    }
    if (known != nullptr) {
      out.agreement = *known;
    } else if (has_inputs()) {
      if (cached("verify", what, &values, &text)) {
        out.agreement = agreement_from(values, 0);
      } else {
        out.agreement = error(built());
        remember("verify", what, agreement_values(out.agreement));
      }
    }
    out.error = settings_.budget.error_of(out.agreement);
    out.met = !has_inputs() || settings_.budget.met(out.agreement);
    return out;
  }

  void reference() {
    const Node* output = graph_.find(graph_.output);
    probabilities_ = output != nullptr && output->op == OpKind::Softmax;
    std::vector<double> values;
    std::string text;
    if (settings_.cache != nullptr && !reference_key_.empty() &&
        settings_.cache->lookup_result(reference_key_, &values, &text) && !values.empty() &&
        values.size() % static_cast<size_t>(inputs_.samples) == 0) {
      reference_.assign(values.begin(), values.end());
      outputs_ = static_cast<int64_t>(values.size()) / inputs_.samples;
      return;
    }
    // The family's graph: the same fusion as every candidate (the calibration decides it);
    // or the caller's fp32 engine of the model (the calibration's), where it computes the same.
    const bool requests =
        std::any_of(graph_.nodes.begin(), graph_.nodes.end(),
                    [](const Node& node) { return !node.kernel_request.empty(); });
    const std::shared_ptr<const Engine>& given = settings_.reference_engine;
    const std::shared_ptr<const Engine> engine =
        given && given->device() == settings_.device && !requests ? given
                                                                  : build({}, Precision::FP32);
    reference_ = run_all(*engine);
    outputs_ = shape_elements(engine->model().output_shape);
    ++plan_.reference_runs;
    if (settings_.cache != nullptr && !reference_key_.empty())
      settings_.cache->store_result(reference_key_, {reference_.begin(), reference_.end()}, "");
  }

  // The held-out set is loaded (images decoded) once and kept, up to kMaxHeldOutBytes: every
  // candidate runs over it.  A larger set is read from its source at every run, as before.
  std::vector<float> run_all(const Engine& engine) {
    Stopwatch watch(plan_.error_seconds);
    ++plan_.held_out_runs;
    const int64_t sample_size = shape_elements(graph_.input.shape);
    const int batch = std::min(settings_.eval_batch, inputs_.samples);
    if (static_cast<double>(inputs_.samples) * sample_size * sizeof(float) > kMaxHeldOutBytes)
      return run_over_inputs(engine, inputs_, inputs_.samples, batch);
    if (held_out_.empty()) {
      held_out_.resize(static_cast<size_t>(inputs_.samples * sample_size));
      inputs_.load(0, inputs_.samples, held_out_.data());
    }
    return run_over_inputs(engine, held_out_.data(), inputs_.samples, batch);
  }

  const Graph& graph_;
  const CalibrationInputs& inputs_;
  const AutoPlanSettings& settings_;
  AutoPlan& plan_;
  std::string device_;
  std::string context_, timing_context_, reference_key_;
  // The model without its requests, for the pruned engines (made on the first one).
  const Graph& plain() {
    if (!plain_) plain_ = plain_graph(graph_);
    return *plain_;
  }

  std::optional<EngineFamily> family_;  // family()
  std::optional<EngineFamily> fused_;   // fused_family()
  std::shared_ptr<Engine> baseline_;    // baseline()
  std::optional<std::vector<double>> baseline_times_;
  bool fused_checked_ = false;
  std::optional<Graph> plain_;
  std::map<std::string, HostTensor> pruned_;
  std::vector<float> held_out_;
  std::vector<float> reference_;
  bool probabilities_ = false;
  int64_t outputs_ = 0;
};

// Per-layer choices as JSON text and back (cached structure results; Error on a malformed one).
std::string choices_to_json(const std::map<std::string, LayerChoice>& choices);
std::map<std::string, LayerChoice> choices_from_json(const std::string& text);

// The greedy's result, the native baseline and per precision two seeds, each measured as a
// whole; the fastest within budget becomes the plan (runtime/auto_plan_wholes.cpp).
void measure_wholes(
    AutoPlan& plan, Measurer& measure, const std::vector<int>& native,
    const AutoPlanSettings& settings,
    const std::function<std::map<std::string, LayerChoice>(const std::vector<int>&)>& choices_of,
    const std::function<void(const std::string&)>& progress);

}  // namespace cnnrt::auto_plan_detail
