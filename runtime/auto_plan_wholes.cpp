// Assignments measured whole (runtime/auto_plan.h): the greedy's result, the native baseline and
// per precision the builder's default engine and the uniform assignment, each built and replayed
// as `cnnrt bench` times it; the fastest within budget becomes the plan.  Per-layer gains are
// estimates (conversions between two changed layers vanish, others appear), and a run of int8
// layers only pays off together: the wholes decide.
#include "runtime/auto_plan_measurer.h"

namespace cnnrt::auto_plan_detail {
namespace {

// `choices` (one per layer of the family's graph, where residual adds stay separate) on the
// fused family's graph: each node takes the choice of the layer it is named after (a conv that
// absorbed its add keeps the conv's name); a kernel that cannot read a fused residual gives way
// to its precision's default.  Empty when some choice is int8 (no int8 kernel has a residual
// epilogue, and the int8 layers' scales are those of the unfused tensors) or sparse (a pruned
// candidate's weights are not the fused family's).
std::map<std::string, LayerChoice> on_fused_graph(const Graph& fused,
                                                  const std::map<std::string, LayerChoice>& choices,
                                                  Device device) {
  for (const auto& named : choices)
    if (named.second.precision == Precision::INT8 || !named.second.sparsity.empty()) return {};
  std::map<std::string, LayerChoice> out;
  for (const Node& node : fused.nodes) {
    auto it = choices.find(node.name);
    if (it == choices.end()) continue;
    LayerChoice choice = it->second;
    const KernelEntry* entry = KernelRegistry::instance().find(choice.kernel);
    if (entry != nullptr && (entry->device != device || !entry->supports(node)))
      choice.kernel.clear();
    out[node.name] = choice;
  }
  return out;
}

// The plan's layers when the pick runs on the fused graph: per step of its engine (conversions
// aside) the kernel, precision and variant, so the plan file names what was measured.
std::vector<AutoPlan::FusedLayer> fused_layers_of(const Engine& engine, int batch) {
  std::vector<AutoPlan::FusedLayer> layers;
  const ExecutionPlan planned = engine.plan(batch);
  const std::vector<Step>& steps = engine.impl().steps;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].is_conversion()) continue;
    AutoPlan::FusedLayer layer;
    layer.layer = steps[i].name;
    layer.choice.precision = steps[i].precision;
    layer.choice.kernel = steps[i].kernel_name;
    layer.variant = planned.steps[i].variant;
    layers.push_back(layer);
  }
  return layers;
}

// on_fused_graph through the cache: a warm build answers it without making the fused family.
std::map<std::string, LayerChoice> fused_choices(Measurer& measure,
                                                 const std::map<std::string, LayerChoice>& choices,
                                                 Device device) {
  const std::string what = "fused choices|" + choices_text(choices);
  std::vector<double> values;
  std::string text;
  if (measure.cached("structure", what, &values, &text)) return choices_from_json(text);
  const EngineFamily* fused = measure.fused_family();
  if (fused == nullptr)  // the cache said there is one: it was edited, or made otherwise
    throw Error("auto plan: a malformed result in the timing cache (fused family)");
  std::map<std::string, LayerChoice> out = on_fused_graph(fused->graph(), choices, device);
  measure.remember("structure", what, {}, choices_to_json(out));
  return out;
}

// fused_layers_of the fused family's engine of `choices`, through the cache.
std::vector<AutoPlan::FusedLayer> fused_layers(Measurer& measure,
                                               const std::map<std::string, LayerChoice>& choices,
                                               int batch) {
  const std::string what = "fused layers|" + choices_text(choices);
  std::vector<double> values;
  std::string text;
  if (measure.cached("structure", what, &values, &text)) {
    try {
      std::vector<AutoPlan::FusedLayer> layers;
      for (const nlohmann::json& item : nlohmann::json::parse(text)) {
        AutoPlan::FusedLayer layer;
        layer.layer = item.at("layer").get<std::string>();
        layer.choice.kernel = item.at("kernel").get<std::string>();
        layer.choice.precision = parse_precision(item.at("precision").get<std::string>());
        layer.variant = item.at("variant").get<std::string>();
        layers.push_back(layer);
      }
      return layers;
    } catch (const nlohmann::json::exception&) {
      throw Error("auto plan: a malformed result in the timing cache (fused layers)");
    }
  }
  const std::vector<AutoPlan::FusedLayer> layers =
      fused_layers_of(*measure.build_fused(choices), batch);
  nlohmann::json items = nlohmann::json::array();
  for (const AutoPlan::FusedLayer& layer : layers)
    items.push_back({{"layer", layer.layer},
                     {"kernel", layer.choice.kernel},
                     {"precision", to_string(layer.choice.precision)},
                     {"variant", layer.variant}});
  measure.remember("structure", what, {}, items.dump());
  return layers;
}

// Applies wholes[pick] as the plan's choice (when it is not the greedy's own result).
void apply_whole(AutoPlan& plan, Measurer& measure, const std::vector<WholeAssignment>& wholes,
                 int pick, const AutoPlanSettings& settings) {
  const WholeAssignment& whole = wholes[pick];
  char line[200];
  std::snprintf(line, sizeof line, "whole: %s %.4f ms is the fastest within budget",
                whole.name.c_str(), whole.ms);
  plan.choice.log.push_back(line);
  plan.chosen_ms = whole.ms;
  if (pick == 0) return;  // the greedy's result: its verdicts stand
  if (whole.residuals_fused)
    plan.fused_layers = fused_layers(measure, whole.fused_choices, settings.batch);
  if (whole.chosen.size() == plan.layers.size()) {
    for (size_t l = 0; l < plan.layers.size(); ++l) plan.layers[l].chosen = whole.chosen[l];
    plan.choice.chosen = whole.chosen;
  }
  plan.choice.agreement = whole.agreement;
  plan.choice.error = whole.error;
  plan.choice.met = whole.met;
  mark_verdicts(plan.layers, settings.budget);
}

// The wholes without int8 layers again on the fused family's graph (Measurer::fused_family),
// and first the builder's default engine there — exactly `--precision <native>`, which is then
// the baseline the plan is reported against.  A plan without int8 layers runs that graph: int8
// candidates kept every residual add separate, and a build with a calibration would too.
void measure_fused_wholes(
    AutoPlan& plan, Measurer& measure, const std::vector<int>& native,
    const AutoPlanSettings& settings,
    const std::function<std::map<std::string, LayerChoice>(const std::vector<int>&)>& choices_of,
    const std::function<void(const std::string&)>& progress) {
  if (!measure.has_fused_family()) return;
  std::vector<WholeAssignment>& wholes = plan.wholes;
  const size_t unfused = wholes.size();
  // "all-fp16 (--precision fp16)": the engine that flag builds, residual adds fused.
  const std::string native_name = plan.baseline_name + " (--precision " +
                                  plan.baseline_name.substr(plan.baseline_name.find('-') + 1) + ")";
  progress("whole " + native_name);
  wholes.push_back(measure.fused_whole(native_name, native, {}));
  plan.baseline_ms = wholes.back().ms;
  std::vector<std::string> measured = {choices_text({})};
  for (size_t w = 0; w < unfused; ++w) {
    if (wholes[w].bounded || wholes[w].chosen.size() != plan.layers.size()) continue;
    const std::map<std::string, LayerChoice> choices =
        fused_choices(measure, choices_of(wholes[w].chosen), settings.device);
    const std::string text = choices_text(choices);
    if (choices.empty() || std::find(measured.begin(), measured.end(), text) != measured.end())
      continue;
    measured.push_back(text);
    const std::string name = wholes[w].name + ", residuals fused";
    progress("whole " + name);
    // (push_back may reallocate: wholes[w] is not read after it.)
    const std::vector<int> chosen = wholes[w].chosen;
    wholes.push_back(measure.fused_whole(name, chosen, choices));
  }
}

}  // namespace

// The greedy's result, the native baseline and per precision two seeds (the builder's default
// engine and the uniform assignment), each measured as a whole: per-layer gains are estimates
// (conversions between two changed layers vanish, others appear), and a run of int8 layers only
// pays off together.  The fastest within budget becomes the plan.
void measure_wholes(
    AutoPlan& plan, Measurer& measure, const std::vector<int>& native,
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
    std::vector<double> values;
    std::string text;
    if (measure.cached("replay", "baseline engine", &values, &text) && values.size() == 1) {
      plan.baseline_ms = values[0];
    } else {
      plan.baseline_ms = measure.replay(measure.baseline());
      if (!settings.timing->single_run())
        measure.remember("replay", "baseline engine", {plan.baseline_ms});
    }
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
  const size_t first_seed = wholes.size();
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
  if (plan.has_error)
    back_off_fastest_seed(plan.layers, wholes, first_seed, fallback,
                          [&](const std::string& name, const std::vector<int>& chosen) {
                            progress("whole " + name);
                            return measure.whole(name, chosen, choices_of(chosen));
                          });
  measure_fused_wholes(plan, measure, native, settings, choices_of, progress);
  const int pick = pick_fastest_met(wholes);
  if (pick >= 0)
    apply_whole(plan, measure, wholes, pick, settings);
  else
    plan.chosen_ms = wholes[0].ms;  // nothing meets the budget: the greedy's most accurate try
}

}  // namespace cnnrt::auto_plan_detail
