// The measuring side of runtime/auto_plan.h: the candidates of each layer (every registry kernel
// at every allowed precision), their step times (a TimingSource — auto_plan_timing.cpp — through
// the TimingCache) and their end-to-end error on the held-out set, then the pipeline itself
// (auto_plan).  The Measurer that builds and measures engines is in runtime/auto_plan_measurer.h;
// the assignments measured whole and the final pick in runtime/auto_plan_wholes.cpp.
#include "runtime/auto_plan_measurer.h"

namespace cnnrt {
namespace auto_plan_detail {

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

// The kernels this build of cnnrt has, and their priorities: a build with another kernel lists
// other candidates, picks other defaults and fuses for other kernels, so nothing a build with
// other kernels measured is reused.
std::string registry_key() {
  std::string kernels;
  for (const KernelEntry& entry : KernelRegistry::instance().entries())
    kernels += entry.name + "@" + to_string(entry.device) + "/" + to_string(entry.precision) + "/" +
               std::to_string(entry.priority) + (entry.baseline ? "/baseline" : "") + ";";
  return text_hash(kernels);
}

// The part of a result key that is not the choice: device, batch, model (structure and
// weights), calibration (its JSON), the registry's kernels, held-out set (its values), and the
// evaluation batch.
// A whole forward's time depends on less: not on the held-out set (another set re-times nothing).
std::string timing_context(const std::string& fingerprint, const AutoPlanSettings& settings) {
  const std::string calibration =
      settings.calibration ? calibration_to_json(*settings.calibration) : "";
  return device_key(settings.device) + "|b" + std::to_string(settings.batch) + "|" + fingerprint +
         "|" + text_hash(calibration) + "|k" + registry_key();
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

std::string choices_to_json(const std::map<std::string, LayerChoice>& choices) {
  nlohmann::json items = nlohmann::json::object();
  for (const auto& [layer, choice] : choices)
    items[layer] = {to_string(choice.precision), choice.kernel, choice.sparsity};
  return items.dump();
}

std::map<std::string, LayerChoice> choices_from_json(const std::string& text) {
  try {
    std::map<std::string, LayerChoice> choices;
    const nlohmann::json root = nlohmann::json::parse(text);  // (items() does not keep it alive)
    for (const auto& [layer, item] : root.items())
      choices[layer] =
          LayerChoice{parse_precision(item.at(0).get<std::string>()), item.at(1).get<std::string>(),
                      "auto plan", item.at(2).get<std::string>()};
    return choices;
  } catch (const nlohmann::json::exception&) {
    throw Error("auto plan: a malformed result in the timing cache (layer choices)");
  }
}

// The kernel `engine` runs for each of the plan's layers, in layer order.
std::vector<std::string> kernels_of(const AutoPlan& plan, const Engine& engine) {
  std::vector<std::string> kernels;
  for (const LayerCandidates& layer : plan.layers)
    for (const Step& step : engine.impl().steps)
      if (step.name == layer.layer) kernels.push_back(step.kernel_name);
  return kernels;
}

}  // namespace auto_plan_detail

namespace {

using namespace auto_plan_detail;  // NOLINT: this file's own internals

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

// What a build knows before it measures anything: the baseline engine's layers, each with its
// candidates (listed, not measured) and the kernel the baseline runs there.  Kept in the cache
// (kind "structure"), so that a warm build builds no engine at all.
struct Skeleton {
  std::string baseline_precision;
  std::vector<LayerCandidates> layers;
  std::vector<std::string> kernels;  // the baseline's kernel per layer
};

std::string skeleton_to_json(const Skeleton& skeleton) {
  nlohmann::json layers = nlohmann::json::array();
  for (size_t l = 0; l < skeleton.layers.size(); ++l) {
    const LayerCandidates& layer = skeleton.layers[l];
    nlohmann::json candidates = nlohmann::json::array();
    for (const Candidate& c : layer.candidates)
      candidates.push_back({c.kernel, to_string(c.precision), c.pruned, c.applicable, c.why_not});
    layers.push_back({{"layer", layer.layer},
                      {"sources", layer.sources},
                      {"kernel", skeleton.kernels[l]},
                      {"candidates", candidates}});
  }
  return nlohmann::json{{"baseline", skeleton.baseline_precision}, {"layers", layers}}.dump();
}

Skeleton skeleton_from_json(const std::string& text) {
  try {
    const nlohmann::json root = nlohmann::json::parse(text);
    Skeleton skeleton;
    skeleton.baseline_precision = root.at("baseline").get<std::string>();
    for (const nlohmann::json& item : root.at("layers")) {
      LayerCandidates layer;
      layer.layer = item.at("layer").get<std::string>();
      layer.sources = item.at("sources").get<std::vector<std::string>>();
      for (const nlohmann::json& entry : item.at("candidates")) {
        Candidate c;
        c.kernel = entry.at(0).get<std::string>();
        c.precision = parse_precision(entry.at(1).get<std::string>());
        c.pruned = entry.at(2).get<bool>();
        c.applicable = entry.at(3).get<bool>();
        c.why_not = entry.at(4).get<std::string>();
        layer.candidates.push_back(c);
      }
      skeleton.kernels.push_back(item.at("kernel").get<std::string>());
      // As a build makes them: every layer has candidates.  (A cache edited by hand fails
      // here, not later.)
      if (layer.candidates.empty())
        throw Error("auto plan: a malformed result in the timing cache (layer '" + layer.layer +
                    "' has no candidates)");
      skeleton.layers.push_back(std::move(layer));
    }
    if (skeleton.layers.empty()) throw Error("auto plan: a malformed result in the timing cache");
    return skeleton;
  } catch (const nlohmann::json::exception&) {
    throw Error("auto plan: a malformed result in the timing cache (the layers)");
  }
}

// What the candidate lists depend on besides the cache's context (device, batch, model,
// calibration, the registry's kernels): the precisions allowed and pruning.
std::string skeleton_key(const AutoPlanSettings& settings) {
  std::string key = "layers|";
  for (Precision p : settings.precisions) key += std::string(to_string(p)) + ",";
  return key + (settings.allow_prune_2_4 ? "|prune 2:4" : "|no pruning");
}

// The skeleton of `baseline` (the builder's default engine): its non-conversion steps, each with
// its candidates (and, with --allow-prune 2:4, the pruned ones) and the kernel it runs.
Skeleton skeleton_of(const Engine& baseline, const Graph& graph, const AutoPlanSettings& settings) {
  Skeleton skeleton;
  skeleton.baseline_precision = to_string(baseline.precision());
  for (const Step& step : baseline.impl().steps) {
    if (step.is_conversion()) continue;
    LayerCandidates layer;
    layer.layer = step.name;
    layer.sources = step.sources;
    layer.candidates = candidate_list(step, settings);
    if (settings.allow_prune_2_4) {
      const std::vector<Candidate> pruned = pruned_candidates(step, graph, settings);
      layer.candidates.insert(layer.candidates.end(), pruned.begin(), pruned.end());
    }
    skeleton.layers.push_back(std::move(layer));
    skeleton.kernels.push_back(step.kernel_name);
  }
  return skeleton;
}

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

// `baseline_kernel`: the kernel the baseline engine runs for the layer; its candidate takes the
// baseline's own figures (on a layer with one kernel, every candidate: nothing is built for it).
void measure_candidates(LayerCandidates& layer, const std::string& baseline_kernel,
                        Measurer& measure, const OutputAgreement& baseline_agreement,
                        const AutoPlanSettings& settings, bool has_error,
                        const std::function<void(const std::string&)>& progress) {
  const std::string& name = layer.layer;
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
    progress(name + " " + c.label());
    const bool is_baseline = !c.pruned && c.kernel == baseline_kernel;
    const std::string what =
        name + "|" + c.kernel + "@" + to_string(c.precision) + (c.pruned ? "|pruned 2:4" : "");
    std::vector<double> values;
    std::string text;
    if (measure.cached("candidate", what, &values, &text)) {
      restore_candidate(c, values, text, settings.budget);
      if (int8_measured == nullptr && same_integers(c)) int8_measured = &c;
      continue;
    }
    std::shared_ptr<Engine> built;
    try {
      if (!is_baseline) built = measure.build({{name, c.choice()}});
    } catch (const Error& error) {
      c.applicable = false;
      c.why_not = error.what();
      measure.remember("candidate", what, {0.0}, c.why_not);
      continue;
    }
    const Engine& engine = is_baseline ? measure.baseline() : *built;
    c.variant = measure.variant_of(engine, name);
    const std::vector<double> times =
        is_baseline ? measure.baseline_times() : measure.times(engine);
    c.ms = layer_ms(engine.impl(), times, name);
    c.step_ms = own_ms(engine.impl(), times, name);
    if (has_error) {
      c.has_error = true;
      c.error_shared = !is_baseline && int8_measured != nullptr && same_integers(c);
      c.agreement = is_baseline      ? baseline_agreement
                    : c.error_shared ? int8_measured->agreement
                                     : measure.error(engine);
      c.error = settings.budget.error_of(c.agreement);
      if (int8_measured == nullptr && same_integers(c)) int8_measured = &c;
    }
    measure.remember("candidate", what, candidate_values(c), c.variant);
  }
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

  // The layers and their candidates: from the baseline engine on a cold build, from the cache on
  // a warm one (which then builds no engine unless some figure is missing).
  Skeleton skeleton;
  std::vector<double> values;
  std::string text;
  if (measure.cached("structure", skeleton_key(settings), &values, &text)) {
    skeleton = skeleton_from_json(text);
  } else {
    progress("baseline");
    skeleton = skeleton_of(measure.baseline(), graph, settings);
    measure.remember("structure", skeleton_key(settings), {}, skeleton_to_json(skeleton));
  }
  plan.baseline_name = "all-" + skeleton.baseline_precision;
  if (plan.has_error) plan.baseline_agreement = measure.verified({});
  plan.layers = skeleton.layers;
  std::vector<std::string> prunable;
  for (const LayerCandidates& layer : plan.layers)
    if (std::any_of(layer.candidates.begin(), layer.candidates.end(),
                    [](const Candidate& c) { return c.pruned; }))
      prunable.push_back(layer.layer);
  if (!prunable.empty()) measure.set_pruned(pruned_weights(graph, prunable));
  for (size_t l = 0; l < plan.layers.size(); ++l)
    measure_candidates(plan.layers[l], skeleton.kernels[l], measure, plan.baseline_agreement,
                       settings, plan.has_error, progress);

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
  measure_wholes(plan, measure, assignment_of(plan, skeleton.kernels), settings, choices_of,
                 progress);
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
