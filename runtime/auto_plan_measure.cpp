// The measuring side of runtime/auto_plan.h: candidate engines, their step times (a TimingSource
// — auto_plan_timing.cpp — through the TimingCache) and their end-to-end error on the held-out
// set.  Every figure comes from an ordinary engine built with BuildOptions::layer_choices, so
// what the plan promises is what `cnnrt run --plan` runs.  The engines come from one
// EngineFamily (runtime/engine_family.h): the passes run once and each (layer, kernel) is packed
// once, so a candidate engine costs the packing of its own layer, not of the whole model
// (docs/PERFORMANCE.md, run 27: the build time).
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

namespace cnnrt {
namespace {

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

BuildOptions family_options(const AutoPlanSettings& settings) {
  BuildOptions options;
  options.device = settings.device;
  options.calibration = settings.calibration;
  return options;
}

// The model without its own precision and kernel requests: the baseline is the device's native
// precision everywhere, and each candidate sets exactly the layer it is about.
Graph plain_graph(const Graph& graph) {
  Graph plain = graph;
  for (Node& node : plain.nodes) {
    node.precision_request.clear();
    node.kernel_request.clear();
  }
  return plain;
}

std::string device_key(Device device) {
  // A CPU's name says little; its thread count at least separates a laptop from a server.
  if (device == Device::CPU) return "cpu/" + std::to_string(std::thread::hardware_concurrency());
  return std::string(to_string(device)) + "/" + device_info(device).name;
}

// What makes a step's time reusable: the device, the batch, the kernel and its variant, the
// tensors it reads and writes (type and shape) and its weights' shapes and fused epilogue.
std::string step_key(const std::string& device, int batch, const EngineImpl& engine,
                     const Step& step, const PlannedStep& planned) {
  std::string key = device + "|b" + std::to_string(batch) + "|" + planned.kernel + "|" +
                    planned.variant + "|" + planned.precision + "|in";
  for (size_t i = 0; i < step.inputs.size(); ++i)
    key += " " + planned.input_types[i] + shape_to_string(engine.tensors.at(step.inputs[i]).shape);
  key += "|out " + planned.output_type + shape_to_string(engine.tensors.at(step.name).shape);
  if (step.node != nullptr) {
    key += "|op" + std::to_string(static_cast<int>(step.node->op)) + "/a" +
           std::to_string(static_cast<int>(step.node->activation)) +
           (step.node->fused_maxpool ? "/pool" + shape_to_string(step.node->pre_pool_shape) : "");
    for (const Param& param : step.node->params) key += " " + shape_to_string(param.value.shape);
  }
  return key;
}

// The layer's own step alone.
double own_ms(const EngineImpl& engine, const std::vector<double>& times,
              const std::string& layer) {
  for (size_t i = 0; i < engine.steps.size(); ++i)
    if (engine.steps[i].name == layer) return times[i];
  throw Error("auto plan: layer '" + layer + "' vanished from its engine");
}

// The steps a layer's time counts: its own and the conversions into it and out of it.
double layer_ms(const EngineImpl& engine, const std::vector<double>& times,
                const std::string& layer) {
  double ms = 0;
  const auto& steps = engine.steps;
  auto it =
      std::find_if(steps.begin(), steps.end(), [&](const Step& s) { return s.name == layer; });
  if (it == steps.end()) throw Error("auto plan: layer '" + layer + "' vanished from its engine");
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    const bool feeds = s.is_conversion() &&
                       std::find(it->inputs.begin(), it->inputs.end(), s.name) != it->inputs.end();
    const bool drains = s.is_conversion() && !s.inputs.empty() && s.inputs[0] == layer;
    if (&s == &*it || feeds || drains) ms += times[i];
  }
  return ms;
}

std::vector<double> agreement_values(const OutputAgreement& a) {
  return {double(a.samples),  a.rel_l2,           a.top1,          a.top5, a.kl,
          double(a.has_top1), double(a.has_top5), double(a.has_kl)};
}

OutputAgreement agreement_from(const std::vector<double>& v, size_t at) {
  OutputAgreement a;
  if (v.size() < at + 8) throw Error("auto plan: a malformed result in the timing cache");
  a.samples = static_cast<int64_t>(v[at]);
  a.rel_l2 = v[at + 1];
  a.top1 = v[at + 2];
  a.top5 = v[at + 3];
  a.kl = v[at + 4];
  a.has_top1 = v[at + 5] != 0;
  a.has_top5 = v[at + 6] != 0;
  a.has_kl = v[at + 7] != 0;
  return a;
}

std::string choices_text(const std::map<std::string, LayerChoice>& choices) {
  std::string text;
  for (const auto& [layer, choice] : choices)
    text += layer + "=" + choice.kernel + "@" + to_string(choice.precision) +
            (choice.sparsity.empty() ? "" : "/" + choice.sparsity) + ";";
  return text;
}

// The part of a result key that is not the choice: device, batch, model (structure and
// weights), calibration (its JSON) and held-out set (its values), and the evaluation batch.
// A whole forward's time depends on less: not on the held-out set (another set re-times nothing).
std::string timing_context(const std::string& fingerprint, const AutoPlanSettings& settings) {
  const std::string calibration =
      settings.calibration ? calibration_to_json(*settings.calibration) : "";
  return device_key(settings.device) + "|b" + std::to_string(settings.batch) + "|" + fingerprint +
         "|" + text_hash(calibration);
}

std::string result_context(const std::string& fingerprint, const AutoPlanSettings& settings,
                           const std::string& inputs_key) {
  return timing_context(fingerprint, settings) + "/" + inputs_key + "/e" +
         std::to_string(settings.eval_batch);
}

// The fp32 reference outputs depend on less than a result: not on the plan's batch nor on the
// calibration's values (only on whether there is one, which decides the fusion), so a build at
// another batch reuses them.
std::string reference_key(const std::string& fingerprint, const AutoPlanSettings& settings,
                          const std::string& inputs_key) {
  return "reference|" + device_key(settings.device) + "|" + fingerprint + "|" + inputs_key + "/e" +
         std::to_string(settings.eval_batch) + (settings.calibration ? "/calibrated" : "");
}

// The candidate of each layer running `kernels[l]` (unpruned, applicable); empty when a layer
// has no such candidate or the list is short.
std::vector<int> assignment_of(const AutoPlan& plan, const std::vector<std::string>& kernels) {
  std::vector<int> chosen;
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    if (l >= kernels.size()) return {};
    const std::vector<Candidate>& candidates = plan.layers[l].candidates;
    int found = -1;
    for (size_t i = 0; i < candidates.size(); ++i)
      if (candidates[i].applicable && !candidates[i].pruned && candidates[i].kernel == kernels[l])
        found = static_cast<int>(i);
    if (found < 0) return {};
    chosen.push_back(found);
  }
  return chosen;
}

// The kernel `engine` runs for each of the plan's layers, in layer order.
std::vector<std::string> kernels_of(const AutoPlan& plan, const Engine& engine) {
  std::vector<std::string> kernels;
  for (const LayerCandidates& layer : plan.layers)
    for (const Step& step : engine.impl().steps)
      if (step.name == layer.layer) kernels.push_back(step.kernel_name);
  return kernels;
}

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
        device_(device_key(settings.device)),
        family_(plain_graph(graph), family_options(settings)) {}

  // A candidate's or an assignment's engine.  One with pruned layers has other weights than the
  // family's graph: it is built whole (`--allow-prune` builds pay that).
  std::shared_ptr<Engine> build(const std::map<std::string, LayerChoice>& choices,
                                Precision precision = Precision::Auto) {
    Stopwatch watch(plan_.build_seconds);
    ++plan_.engines_built;
    if (!prunes_any(pruned_, choices)) {
      const int before = family_.kernels_created();
      std::shared_ptr<Engine> engine = family_.build(choices, precision);
      plan_.kernels_created += family_.kernels_created() - before;
      return engine;
    }
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
  std::string key(const std::string& kind, const std::string& what) const {
    const bool timing = kind == "replay" || kind == "default";  // not on the held-out set
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

  // An assignment's end-to-end agreement with fp32, from the cache or measured (on `built`
  // when given, else on an engine built for it).
  OutputAgreement verified(const std::map<std::string, LayerChoice>& choices,
                           const Engine* built = nullptr) {
    std::vector<double> values;
    std::string text;
    const std::string what = choices_text(choices);
    if (cached("verify", what, &values, &text)) return agreement_from(values, 0);
    std::shared_ptr<Engine> engine;
    if (built == nullptr) built = (engine = build(choices)).get();
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
    std::vector<double> values;
    std::string text;
    const std::string what = choices_text(choices);
    std::shared_ptr<Engine> engine;
    if (cached("replay", what, &values, &text) && values.size() == 1) {
      out.ms = values[0];
    } else {
      engine = build(choices);
      out.ms = replay(*engine);
      if (!settings_.timing->single_run()) remember("replay", what, {out.ms});
    }
    if (known != nullptr)
      out.agreement = *known;
    else if (has_inputs())
      out.agreement = verified(choices, engine.get());
    out.error = settings_.budget.error_of(out.agreement);
    out.met = !has_inputs() || settings_.budget.met(out.agreement);
    return out;
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
    // The family's graph: the same fusion as every candidate (the calibration decides it).
    const auto engine = build({}, Precision::FP32);
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
    CalibrationInputs loaded;
    loaded.samples = inputs_.samples;
    loaded.load = [&](int first, int count, float* out) {
      std::copy_n(held_out_.data() + first * sample_size, count * sample_size, out);
    };
    return run_over_inputs(engine, loaded, inputs_.samples, batch);
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

  EngineFamily family_;
  std::optional<Graph> plain_;
  std::map<std::string, HostTensor> pruned_;
  std::vector<float> held_out_;
  std::vector<float> reference_;
  bool probabilities_ = false;
  int64_t outputs_ = 0;
};

// Every registry entry of the layer's op on the device at the allowed precisions; when none is
// allowed for this op (e.g. only int8 asked, and flatten has no int8 kernel), the native ones.
std::vector<Candidate> candidate_list(const Step& step, const AutoPlanSettings& settings) {
  const KernelRegistry& registry = KernelRegistry::instance();
  std::vector<Precision> precisions = settings.precisions;
  if (precisions.empty()) precisions = {Precision::FP32, Precision::FP16, Precision::INT8};
  std::vector<Candidate> out;
  for (int pass = 0; pass < 2 && out.empty(); ++pass) {
    if (pass == 1) precisions = {Precision::FP32, Precision::FP16, Precision::INT8};
    for (Precision precision : precisions)
      for (const KernelEntry* entry : registry.candidates(*step.node, settings.device, precision)) {
        if (entry->baseline) continue;  // cuDNN and the like: comparison only, never chosen
        Candidate c;
        c.kernel = entry->name;
        c.precision = precision;
        if (precision == Precision::INT8 && settings.calibration == nullptr) {
          c.applicable = false;
          c.why_not = "int8 needs a calibration";
        }
        out.push_back(c);
      }
  }
  return out;
}

// The baseline engine's own figures, reused for the candidate of each layer it already runs (on
// a layer with one kernel, that is every candidate: nothing is built for it).
struct BaselineFigures {
  const Engine* engine;
  std::vector<double> times;
  OutputAgreement agreement;
};

// A candidate's figures as a cached result: [applicable, ms, has_error, agreement (8 values),
// step_ms, error_shared], and its variant (or why it is not applicable) as the text.
std::vector<double> candidate_values(const Candidate& c) {
  std::vector<double> values = {double(c.applicable), c.ms, double(c.has_error)};
  const std::vector<double> agreement = agreement_values(c.agreement);
  values.insert(values.end(), agreement.begin(), agreement.end());
  values.push_back(c.step_ms);
  values.push_back(c.error_shared ? 1.0 : 0.0);
  return values;
}

void restore_candidate(Candidate& c, const std::vector<double>& values, const std::string& text,
                       const Budget& budget) {
  c.applicable = !values.empty() && values[0] != 0;
  if (!c.applicable) {
    c.why_not = text;
    return;
  }
  if (values.size() < 3) throw Error("auto plan: a malformed result in the timing cache");
  c.ms = values[1];
  c.variant = text;
  c.has_error = values[2] != 0;
  c.agreement = agreement_from(values, 3);
  c.error = c.has_error ? budget.error_of(c.agreement) : 0;
  c.step_ms = values.size() > 11 ? values[11] : 0;  // a cache written before step_ms: no bound
  c.error_shared = values.size() > 12 && values[12] != 0;
}

void measure_candidates(LayerCandidates& layer, const Step& step, Measurer& measure,
                        const BaselineFigures& base, const AutoPlanSettings& settings,
                        bool has_error, const std::function<void(const std::string&)>& progress) {
  // Every int8 kernel computes the integer reference's values bit for bit (docs/QUANTIZATION.md,
  // held by the kernel harness), so the int8 candidates of a layer give one output: the first
  // one measured stands for the rest (its held-out run is the cost of a candidate on
  // EfficientNet, 9 of 16 s).  Pruned candidates change weights and are measured apiece.
  const Candidate* int8_measured = nullptr;
  auto same_integers = [](const Candidate& c) {
    return c.precision == Precision::INT8 && !c.pruned && c.has_error;
  };
  for (Candidate& c : layer.candidates) {
    if (!c.applicable) continue;
    progress(step.name + " " + c.label());
    const bool is_baseline = !c.pruned && c.kernel == step.kernel_name;
    const std::string what =
        step.name + "|" + c.kernel + "@" + to_string(c.precision) + (c.pruned ? "|pruned 2:4" : "");
    std::vector<double> values;
    std::string text;
    if (!is_baseline && measure.cached("candidate", what, &values, &text)) {
      restore_candidate(c, values, text, settings.budget);
      if (int8_measured == nullptr && same_integers(c)) int8_measured = &c;
      continue;
    }
    std::shared_ptr<Engine> built;
    try {
      if (!is_baseline) built = measure.build({{step.name, c.choice()}});
    } catch (const Error& error) {
      c.applicable = false;
      c.why_not = error.what();
      measure.remember("candidate", what, {0.0}, c.why_not);
      continue;
    }
    const Engine& engine = is_baseline ? *base.engine : *built;
    c.variant = measure.variant_of(engine, step.name);
    const std::vector<double> times = is_baseline ? base.times : measure.times(engine);
    c.ms = layer_ms(engine.impl(), times, step.name);
    c.step_ms = own_ms(engine.impl(), times, step.name);
    if (has_error) {
      c.has_error = true;
      c.error_shared = !is_baseline && int8_measured != nullptr && same_integers(c);
      c.agreement = is_baseline      ? base.agreement
                    : c.error_shared ? int8_measured->agreement
                                     : measure.error(engine);
      c.error = settings.budget.error_of(c.agreement);
      if (int8_measured == nullptr && same_integers(c)) int8_measured = &c;
    }
    if (!is_baseline) measure.remember("candidate", what, candidate_values(c), c.variant);
  }
}

// Applies wholes[pick] as the plan's choice (when it is not the greedy's own result).
void apply_whole(AutoPlan& plan, const std::vector<WholeAssignment>& wholes, int pick,
                 const Budget& budget) {
  const WholeAssignment& whole = wholes[pick];
  char line[200];
  std::snprintf(line, sizeof line, "whole: %s %.4f ms is the fastest within budget",
                whole.name.c_str(), whole.ms);
  plan.choice.log.push_back(line);
  plan.chosen_ms = whole.ms;
  if (pick == 0) return;  // the greedy's result: its verdicts stand
  for (size_t l = 0; l < plan.layers.size(); ++l) plan.layers[l].chosen = whole.chosen[l];
  plan.choice.chosen = whole.chosen;
  plan.choice.agreement = whole.agreement;
  plan.choice.error = whole.error;
  plan.choice.met = whole.met;
  mark_verdicts(plan.layers, budget);
}

// The greedy's result, the native baseline and per precision two seeds (the builder's default
// engine and the uniform assignment), each measured as a whole: per-layer gains are estimates
// (conversions between two changed layers vanish, others appear), and a run of int8 layers only
// pays off together.  The fastest within budget becomes the plan.
void measure_wholes(
    AutoPlan& plan, Measurer& measure, const Engine& baseline, const std::vector<int>& native,
    const AutoPlanSettings& settings,
    const std::function<std::map<std::string, LayerChoice>(const std::vector<int>&)>& choices_of,
    const std::function<void(const std::string&)>& progress) {
  std::vector<WholeAssignment>& wholes = plan.wholes;
  progress("whole greedy");
  wholes.push_back(measure.whole("greedy", plan.choice.chosen, choices_of(plan.choice.chosen),
                                 plan.has_error ? &plan.choice.agreement : nullptr));
  progress("whole native");
  if (!native.empty() && native == wholes.front().chosen) {
    // The greedy kept every layer native: one engine, one measurement (two replays of one
    // engine would differ by noise and report a speed-up of nothing).
    WholeAssignment same = wholes.front();
    same.name = plan.baseline_name + " (native)";
    wholes.push_back(same);
    plan.baseline_ms = same.ms;
  } else if (!native.empty()) {
    wholes.push_back(measure.whole(plan.baseline_name + " (native)", native, choices_of(native),
                                   plan.has_error ? &plan.baseline_agreement : nullptr));
    plan.baseline_ms = wholes.back().ms;  // replayed like every whole, not summed
  } else {
    // Not among the candidates (a --precisions list without the native precision): timed as
    // a whole all the same, so that the report compares replay with replay.
    plan.baseline_ms = measure.replay(baseline);
  }
  std::vector<int> fallback = native;
  if (fallback.empty())
    for (const LayerCandidates& layer : plan.layers) fallback.push_back(layer.reference);
  std::vector<Precision> precisions = settings.precisions;
  if (precisions.empty()) precisions = {Precision::FP16, Precision::INT8, Precision::FP32};
  // Per precision two seeds: the builder's default engine at that precision (`--precision p`,
  // its priority heuristic), so the plan is never slower than a single-precision engine within
  // budget, as measured; and the uniform one (per layer the fastest kernel of p by its own
  // measurement), which can beat it.
  std::vector<std::pair<std::string, std::vector<int>>> seeds;
  for (Precision precision : precisions) {
    const std::vector<int> default_seed =
        precision != Precision::INT8 || settings.calibration != nullptr
            ? measure.default_assignment(plan, precision)
            : std::vector<int>{};
    seeds.emplace_back(std::string("default ") + to_string(precision), default_seed);
    seeds.emplace_back(std::string("uniform ") + to_string(precision),
                       uniform_assignment(plan.layers, precision, fallback));
  }
  for (const auto& named_seed : seeds) {
    // (Not a structured binding: C++17 lambdas cannot capture one.)
    const std::string& name = named_seed.first;
    const std::vector<int>& seed = named_seed.second;
    if (seed.empty() || std::any_of(wholes.begin(), wholes.end(),
                                    [&](const WholeAssignment& w) { return w.chosen == seed; }))
      continue;  // no kernel of this precision, or an assignment already measured
    // Its kernels alone, before any engine: a seed that cannot beat an assignment already
    // measured within budget is not built (conversions only add to it).
    double lower = 0, best_met = std::numeric_limits<double>::infinity();
    for (size_t l = 0; l < plan.layers.size(); ++l) {
      const double step = plan.layers[l].candidates[seed[l]].step_ms;
      lower = step > 0 && lower >= 0 ? lower + step : -1;  // -1: some step unknown, no bound
    }
    for (const WholeAssignment& w : wholes)
      if (w.met && !w.bounded) best_met = std::min(best_met, w.ms);
    if (lower > 0 && lower >= kBoundMargin * best_met) {
      WholeAssignment bounded;
      bounded.name = name;
      bounded.chosen = seed;
      bounded.ms = lower;
      bounded.bounded = true;
      wholes.push_back(bounded);
      continue;
    }
    progress("whole " + name);
    wholes.push_back(measure.whole(name, seed, choices_of(seed)));
  }
  const int pick = pick_fastest_met(wholes);
  if (pick >= 0)
    apply_whole(plan, wholes, pick, settings.budget);
  else
    plan.chosen_ms = wholes[0].ms;  // nothing meets the budget: the greedy's most accurate try
}

}  // namespace

AutoPlan auto_plan(const Graph& graph, const CalibrationInputs& inputs,
                   const AutoPlanSettings& settings) {
  const auto start = std::chrono::steady_clock::now();
  if (settings.timing == nullptr) throw Error("auto plan: no timing source");
  if (settings.batch < 1) throw Error("auto plan: the batch must be at least 1");
  if (settings.budget.metric != Budget::Metric::None && (inputs.samples < 1 || !inputs.load))
    throw Error("auto plan: budget " + settings.budget.to_string() +
                " needs a held-out input set (--images DIR or --input X.npy)");
  AutoPlan plan;
  plan.model = graph.name;
  plan.fingerprint = model_fingerprint(graph);
  plan.device = to_string(settings.device);
  plan.batch = settings.batch;
  plan.budget = settings.budget;
  plan.has_error = inputs.samples > 0 && inputs.load;
  Measurer measure(graph, inputs, settings, plan);
  if (settings.cache != nullptr) {
    const std::string inputs_key = input_set_key(graph, inputs);
    measure.set_context(result_context(plan.fingerprint, settings, inputs_key),
                        timing_context(plan.fingerprint, settings));
    measure.set_reference_key(reference_key(plan.fingerprint, settings, inputs_key));
  }
  auto progress = [&](const std::string& what) {
    if (settings.progress) settings.progress(what);
  };

  progress("baseline");
  const auto baseline = measure.build({});
  plan.baseline_name = std::string("all-") + to_string(baseline->precision());
  if (plan.has_error) plan.baseline_agreement = measure.verified({}, baseline.get());

  const BaselineFigures base{baseline.get(), measure.times(*baseline), plan.baseline_agreement};
  std::vector<const Step*> layer_steps;
  std::vector<std::string> prunable;
  for (const Step& step : baseline->impl().steps) {
    if (step.is_conversion()) continue;
    LayerCandidates layer;
    layer.layer = step.name;
    layer.sources = step.sources;
    layer.candidates = candidate_list(step, settings);
    if (settings.allow_prune_2_4) {
      const std::vector<Candidate> pruned = pruned_candidates(step, graph, settings);
      if (!pruned.empty()) prunable.push_back(step.name);
      layer.candidates.insert(layer.candidates.end(), pruned.begin(), pruned.end());
    }
    plan.layers.push_back(std::move(layer));
    layer_steps.push_back(&step);
  }
  if (!prunable.empty()) measure.set_pruned(pruned_weights(graph, prunable));
  for (size_t l = 0; l < plan.layers.size(); ++l)
    measure_candidates(plan.layers[l], *layer_steps[l], measure, base, settings, plan.has_error,
                       progress);

  auto choices_of = [&](const std::vector<int>& chosen) {
    std::map<std::string, LayerChoice> choices;
    for (size_t l = 0; l < plan.layers.size(); ++l)
      choices[plan.layers[l].layer] = plan.layers[l].candidates[chosen[l]].choice();
    return choices;
  };
  plan.choice =
      choose_assignment(plan.layers, settings.budget, [&](const std::vector<int>& chosen) {
        progress("verify");
        return plan.has_error ? measure.verified(choices_of(chosen)) : OutputAgreement{};
      });
  measure_wholes(plan, measure, *baseline, assignment_of(plan, kernels_of(plan, *baseline)),
                 settings, choices_of, progress);
  // The plan's hash is that of what it runs: with pruned layers, the pruned weights.
  for (const std::string& layer : plan.pruned_layers())
    plan.pruned_weights[layer] = measure.pruned().at(layer);
  if (!plan.pruned_weights.empty())
    plan.fingerprint = model_fingerprint(planned_model(graph, plan));
  if (settings.cache != nullptr) settings.cache->save();
  plan.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

}  // namespace cnnrt
