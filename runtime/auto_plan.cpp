// The budget and the choice of runtime/auto_plan.h, and the report of a plan (explain, JSON).
// The measuring side (engines, timings, cache) is in auto_plan_measure.cpp, so this part is a
// pure function of the measured table and testable with made-up numbers.
#include "runtime/auto_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

namespace cnnrt {
namespace {

// Greedy order ties and divisions by a zero error: a candidate that costs no error at all is
// worth any time it saves.
constexpr double kTinyError = 1e-12;

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// The most accurate applicable candidate (ties: the faster, then the first listed).
int most_accurate(const LayerCandidates& layer) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(layer.candidates.size()); ++i) {
    const Candidate& c = layer.candidates[i];
    if (!c.applicable) continue;
    if (best < 0) {
      best = i;
      continue;
    }
    const Candidate& b = layer.candidates[best];
    if (c.error < b.error || (c.error == b.error && c.ms < b.ms)) best = i;
  }
  return best;
}

// The fastest applicable candidate faster than `than_ms` whose error alone is within `limit` and
// below `below_error` (the back-off's bound); -1 when none.
int fastest_within(const LayerCandidates& layer, double than_ms, double limit, double below_error) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(layer.candidates.size()); ++i) {
    const Candidate& c = layer.candidates[i];
    if (!c.applicable || c.ms >= than_ms || c.error > limit || c.error >= below_error) continue;
    if (best < 0 || c.ms < layer.candidates[best].ms) best = i;
  }
  return best;
}

struct Move {
  int layer = 0, candidate = 0;
  double saved_ms = 0, added_error = 0;
};

void set_verdicts(std::vector<LayerCandidates>& layers, const Budget& budget,
                  const std::vector<std::vector<int>>& backed_off) {
  for (size_t l = 0; l < layers.size(); ++l) {
    LayerCandidates& layer = layers[l];
    const double chosen_ms = layer.candidates[layer.chosen].ms;
    for (int i = 0; i < static_cast<int>(layer.candidates.size()); ++i) {
      Candidate& c = layer.candidates[i];
      const bool was_backed_off =
          std::find(backed_off[l].begin(), backed_off[l].end(), i) != backed_off[l].end();
      if (i == layer.chosen)
        c.verdict = "chosen";
      else if (!c.applicable)
        c.verdict = "not applicable: " + c.why_not;
      else if (c.error > budget.limit())
        c.verdict = "over budget alone";
      else if (was_backed_off)
        c.verdict = "backed off: whole network over budget with it";
      else if (c.ms >= chosen_ms)
        c.verdict = "slower";
      else
        c.verdict = "not taken: budget spent on better trades";
    }
  }
}

// After the budget is met: what the estimate skipped may still fit, as errors of different
// layers partly cancel.  Each layer, in greedy order, tries its faster candidates (fastest first,
// within budget alone, never one already backed off), each verified end to end; the first that
// keeps the whole within budget stays.  At most one verification per candidate.
void fill(const std::vector<LayerCandidates>& layers, const std::vector<Move>& moves, double limit,
          const Budget& budget,
          const std::function<OutputAgreement(const std::vector<int>&)>& verify,
          ChoiceResult& result, std::vector<std::vector<int>>& backed_off) {
  for (const Move& move : moves) {
    const LayerCandidates& layer = layers[move.layer];
    std::vector<int> faster;
    for (int i = 0; i < static_cast<int>(layer.candidates.size()); ++i) {
      const Candidate& c = layer.candidates[i];
      const auto& tried = backed_off[move.layer];
      if (c.applicable && c.error <= limit &&
          c.ms < layer.candidates[result.chosen[move.layer]].ms &&
          std::find(tried.begin(), tried.end(), i) == tried.end())
        faster.push_back(i);
    }
    std::stable_sort(faster.begin(), faster.end(),
                     [&](int a, int b) { return layer.candidates[a].ms < layer.candidates[b].ms; });
    for (int candidate : faster) {
      std::vector<int> trial = result.chosen;
      trial[move.layer] = candidate;
      const OutputAgreement agreement = verify(trial);
      const double error = budget.error_of(agreement);
      const bool fits = error <= limit;
      result.log.push_back("retry " + layer.layer + " -> " + layer.candidates[candidate].label() +
                           ": " + budget.describe(error) + (fits ? " (kept)" : " (over, undone)"));
      if (!fits) {
        backed_off[move.layer].push_back(candidate);
        continue;
      }
      result.chosen = trial;
      result.agreement = agreement;
      result.error = error;
      break;
    }
  }
}

}  // namespace

std::string Candidate::label() const { return pruned ? kernel + " (pruned 2:4)" : kernel; }

LayerChoice Candidate::choice() const {
  return LayerChoice{precision, kernel, "auto plan", pruned ? "2:4" : ""};
}

void mark_verdicts(std::vector<LayerCandidates>& layers, const Budget& budget) {
  set_verdicts(layers, budget, std::vector<std::vector<int>>(layers.size()));
}

double Budget::error_of(const OutputAgreement& agreement) const {
  switch (metric) {
    case Metric::RelL2:
      return agreement.rel_l2;
    case Metric::Top1Agreement:
      return 1.0 - agreement.top1;
    case Metric::None:
      break;
  }
  return agreement.rel_l2;  // ordered by rel L2 even without a bound
}

double Budget::limit() const {
  switch (metric) {
    case Metric::RelL2:
      return value;
    case Metric::Top1Agreement:
      return 1.0 - value;
    case Metric::None:
      break;
  }
  return std::numeric_limits<double>::infinity();
}

std::string Budget::to_string() const {
  char text[64];
  switch (metric) {
    case Metric::RelL2:
      std::snprintf(text, sizeof text, "rel_l2=%g", value);
      return text;
    case Metric::Top1Agreement:
      std::snprintf(text, sizeof text, "top1_agreement=%g", value);
      return text;
    case Metric::None:
      break;
  }
  return "none";
}

std::string Budget::describe(double error) const {
  if (metric == Metric::Top1Agreement) return "top1_agreement " + fixed(1.0 - error, 4);
  char text[64];
  std::snprintf(text, sizeof text, "rel_l2 %.3g", error);
  return text;
}

Budget parse_budget(const std::string& spec) {
  const std::string usage =
      " (valid: rel_l2=X with X >= 0, top1_agreement=X with X in [0, 1], none)";
  Budget budget;
  if (spec == "none") return budget;
  const size_t equals = spec.find('=');
  const std::string name = spec.substr(0, equals);
  if (equals == std::string::npos || (name != "rel_l2" && name != "top1_agreement"))
    throw Error("budget '" + spec + "': unknown form" + usage);
  const std::string number = spec.substr(equals + 1);
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (number.empty() || used != number.size() || !std::isfinite(value))
    throw Error("budget '" + spec + "': '" + number + "' is not a number" + usage);
  if (value < 0 || (name == "top1_agreement" && value > 1))
    throw Error("budget '" + spec + "': out of range" + usage);
  budget.metric = name == "rel_l2" ? Budget::Metric::RelL2 : Budget::Metric::Top1Agreement;
  budget.value = value;
  return budget;
}

ChoiceResult choose_assignment(
    std::vector<LayerCandidates>& layers, const Budget& budget,
    const std::function<OutputAgreement(const std::vector<int>&)>& verify) {
  ChoiceResult result;
  const double limit = budget.limit();
  std::vector<Move> moves;
  for (size_t l = 0; l < layers.size(); ++l) {
    LayerCandidates& layer = layers[l];
    layer.reference = most_accurate(layer);
    if (layer.reference < 0) throw Error("auto plan: layer '" + layer.layer + "' has no kernel");
    const Candidate& reference = layer.candidates[layer.reference];
    const int target =
        fastest_within(layer, reference.ms, limit, std::numeric_limits<double>::infinity());
    result.chosen.push_back(layer.reference);
    if (target >= 0) {
      const Candidate& t = layer.candidates[target];
      moves.push_back({static_cast<int>(l), target, reference.ms - t.ms,
                       std::max(t.error - reference.error, 0.0)});
    }
  }
  // Most time saved per unit of error first; stable, so ties keep network order.
  std::stable_sort(moves.begin(), moves.end(), [](const Move& a, const Move& b) {
    return a.saved_ms / (a.added_error + kTinyError) > b.saved_ms / (b.added_error + kTinyError);
  });
  // Admission by the sum of the single-layer errors: an estimate (errors of different layers
  // partly cancel, partly compound); the verification below is what decides.
  double spent = 0;
  std::vector<int> admitted;
  for (const Move& move : moves) {
    if (spent + move.added_error > limit) {
      result.log.push_back("skip " + layers[move.layer].layer + " -> " +
                           layers[move.layer].candidates[move.candidate].label() +
                           ": estimated error would exceed the budget");
      continue;
    }
    spent += move.added_error;
    result.chosen[move.layer] = move.candidate;
    admitted.push_back(move.layer);
    result.log.push_back("take " + layers[move.layer].layer + " -> " +
                         layers[move.layer].candidates[move.candidate].label() + " (saves " +
                         fixed(move.saved_ms, 4) + " ms)");
  }
  std::vector<std::vector<int>> backed_off(layers.size());
  for (;;) {
    result.agreement = verify(result.chosen);
    result.error = budget.error_of(result.agreement);
    result.met = budget.metric == Budget::Metric::None || result.error <= limit;
    result.log.push_back("verify: " + budget.describe(result.error) +
                         (result.met ? " (within budget)" : " (over budget)"));
    if (result.met || admitted.empty()) break;
    // Back off the admitted layer whose own error is the largest (first in network order).
    std::sort(admitted.begin(), admitted.end());
    int worst = admitted.front();
    for (int l : admitted)
      if (layers[l].candidates[result.chosen[l]].error >
          layers[worst].candidates[result.chosen[worst]].error)
        worst = l;
    LayerCandidates& layer = layers[worst];
    const Candidate& current = layer.candidates[result.chosen[worst]];
    backed_off[worst].push_back(result.chosen[worst]);
    const int next =
        fastest_within(layer, layer.candidates[layer.reference].ms, limit, current.error);
    result.chosen[worst] = next >= 0 ? next : layer.reference;
    if (next < 0) admitted.erase(std::find(admitted.begin(), admitted.end(), worst));
    result.log.push_back("back off " + layer.layer + ": " + current.label() + " -> " +
                         layer.candidates[result.chosen[worst]].label());
  }
  if (result.met && budget.metric != Budget::Metric::None)
    fill(layers, moves, limit, budget, verify, result, backed_off);
  for (size_t l = 0; l < layers.size(); ++l) layers[l].chosen = result.chosen[l];
  set_verdicts(layers, budget, backed_off);
  return result;
}

std::vector<int> uniform_assignment(const std::vector<LayerCandidates>& layers, Precision precision,
                                    const std::vector<int>& fallback) {
  std::vector<int> chosen = fallback;
  bool any = false;
  for (size_t l = 0; l < layers.size(); ++l) {
    int best = -1;
    for (int i = 0; i < static_cast<int>(layers[l].candidates.size()); ++i) {
      const Candidate& c = layers[l].candidates[i];
      if (c.applicable && !c.pruned && c.precision == precision &&
          (best < 0 || c.ms < layers[l].candidates[best].ms))
        best = i;
    }
    if (best >= 0) chosen[l] = best;
    any = any || best >= 0;
  }
  return any ? chosen : std::vector<int>{};
}

int pick_fastest_met(std::vector<WholeAssignment>& wholes) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(wholes.size()); ++i)
    if (wholes[i].met && !wholes[i].bounded && (best < 0 || wholes[i].ms < wholes[best].ms))
      best = i;
  for (int i = 0; i < static_cast<int>(wholes.size()); ++i)
    wholes[i].verdict = i == best           ? "chosen"
                        : wholes[i].bounded ? "slower: its kernels alone take longer, not built"
                        : !wholes[i].met    ? "over budget"
                                            : "slower";
  return best;
}

void back_off_fastest_seed(
    const std::vector<LayerCandidates>& layers, std::vector<WholeAssignment>& wholes,
    size_t first_seed, const std::vector<int>& fallback,
    const std::function<WholeAssignment(const std::string&, const std::vector<int>&)>& measure) {
  // (The order and the search: runtime/auto_plan.h.)
  double best_met = std::numeric_limits<double>::infinity();
  for (const WholeAssignment& w : wholes)
    if (w.met && !w.bounded) best_met = std::min(best_met, w.ms);
  int seed_index = -1;
  for (size_t w = first_seed; w < wholes.size(); ++w)
    if (!wholes[w].met && !wholes[w].bounded && wholes[w].ms < best_met &&
        (seed_index < 0 || wholes[w].ms < wholes[seed_index].ms))
      seed_index = static_cast<int>(w);
  if (seed_index < 0) return;
  const std::string seed_name = wholes[seed_index].name;
  const std::vector<int> seed = wholes[seed_index].chosen;
  std::vector<size_t> order;
  for (size_t l = 0; l < seed.size(); ++l) {
    if (seed[l] == fallback[l]) continue;
    if (!layers[l].candidates[seed[l]].has_error) return;  // no per-layer errors to order by
    order.push_back(l);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Candidate& x = layers[a].candidates[seed[a]];
    const Candidate& y = layers[b].candidates[seed[b]];
    return x.error != y.error ? x.error > y.error : x.agreement.rel_l2 > y.agreement.rel_l2;
  });
  // lo: a count known over budget (0: the seed); hi: one assumed within (all back: the fallback).
  size_t lo = 0, hi = order.size();
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    std::vector<int> chosen = seed;
    for (size_t i = 0; i < mid; ++i) chosen[order[i]] = fallback[order[i]];
    wholes.push_back(measure(seed_name + ", " + std::to_string(mid) + " most sensitive of " +
                                 std::to_string(order.size()) + " layers backed off",
                             chosen));
    const WholeAssignment& probe = wholes.back();
    if (probe.met)
      hi = mid;
    else if (probe.ms >= best_met)
      break;
    else
      lo = mid;
  }
}

std::map<std::string, LayerChoice> AutoPlan::choices() const {
  std::map<std::string, LayerChoice> out;
  for (const FusedLayer& fused : fused_layers) out[fused.layer] = fused.choice;
  if (!fused_layers.empty()) return out;
  for (const LayerCandidates& layer : layers)
    out[layer.layer] = layer.candidates[layer.chosen].choice();
  return out;
}

std::string AutoPlan::explain() const {
  std::string out = "auto plan for " + model + " on " + device + ", batch " +
                    std::to_string(batch) + ", budget " + budget.to_string() + "\n";
  char line[512];
  // The kernel column fits the longest label ("conv_fp16_sparse24_wgmma (pruned 2:4)").
  int width = 26;
  for (const LayerCandidates& layer : layers)
    for (const Candidate& c : layer.candidates)
      width = std::max(width, static_cast<int>(c.label().size()));
  for (const LayerCandidates& layer : layers) {
    std::string sources;
    for (const std::string& s : layer.sources) sources += (sources.empty() ? "" : "+") + s;
    out += "layer " + layer.layer + " (" + sources + ")\n";
    for (const Candidate& c : layer.candidates) {
      const std::string error = !c.applicable || !c.has_error ? "-" : budget.describe(c.error);
      std::snprintf(line, sizeof line, "  %-*s %-5s %-18s %10s ms  %-24s %s\n", width,
                    c.label().c_str(), to_string(c.precision),
                    c.variant.empty() ? "-" : c.variant.c_str(),
                    c.applicable ? fixed(c.ms, 4).c_str() : "-", error.c_str(), c.verdict.c_str());
      out += line;
    }
  }
  for (const WholeAssignment& whole : wholes) {
    std::snprintf(line, sizeof line, "whole %-42s %10s ms  %-24s %s\n", whole.name.c_str(),
                  ((whole.bounded ? ">= " : "") + fixed(whole.ms, 4)).c_str(),
                  has_error && !whole.bounded ? budget.describe(whole.error).c_str() : "-",
                  whole.verdict.c_str());
    out += line;
  }
  const double speedup = chosen_ms > 0 ? baseline_ms / chosen_ms : 0;
  out += "total: " + fixed(chosen_ms, 4) + " ms (a whole forward, as cnnrt bench times it) vs " +
         baseline_name + " " + fixed(baseline_ms, 4) + " ms: " + fixed(speedup, 2) + "x\n";
  if (has_error)
    out += "error: " + budget.describe(choice.error) +
           " (measured, every choice applied) vs budget " + budget.to_string() +
           (choice.met ? ": met" : ": NOT met") + "; " + baseline_name + " " +
           budget.describe(budget.error_of(baseline_agreement)) + "\n";
  if (!fused_layers.empty())
    out += "residual adds fused into their convs (no int8 layer): the plan lists the " +
           std::to_string(fused_layers.size()) + " layers of that graph and names no calibration\n";
  const std::vector<std::string> pruned = pruned_layers();
  if (!pruned.empty()) {
    std::string names;
    for (const std::string& layer : pruned) names += (names.empty() ? "" : ", ") + layer;
    out += "pruned 2:4 (magnitude): " + names +
           "; the plan runs on these pruned weights, the error above includes the pruning\n";
  }
  out += "timing: " + std::to_string(engines_timed) + " engines profiled, " +
         std::to_string(steps_cached) + " step times from the cache, " +
         std::to_string(reference_runs) + " fp32 reference runs; " + fixed(seconds, 2) +
         " s in all: " + std::to_string(engines_built) + " engines built (" +
         std::to_string(kernels_created) + " layer kernels created) " + fixed(build_seconds, 2) +
         " s, profiling " + fixed(timing_seconds, 2) + " s, " + std::to_string(held_out_runs) +
         " held-out runs " + fixed(error_seconds, 2) + " s, the rest " +
         fixed(seconds - build_seconds - timing_seconds - error_seconds, 2) + " s\n";
  return out;
}

std::string AutoPlan::to_json() const {
  nlohmann::ordered_json root;
  root["format"] = "cnnrt-auto-plan";
  root["version"] = 1;
  root["model"] = model;
  root["model_hash"] = fingerprint;
  root["device"] = device;
  root["batch"] = batch;
  root["budget"] = budget.to_string();
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const LayerCandidates& layer : layers) {
    nlohmann::ordered_json item;
    item["layer"] = layer.layer;
    item["sources"] = layer.sources;
    nlohmann::ordered_json candidates = nlohmann::ordered_json::array();
    for (const Candidate& c : layer.candidates) {
      nlohmann::ordered_json entry;
      entry["kernel"] = c.kernel;
      entry["precision"] = to_string(c.precision);
      entry["pruned"] = c.pruned ? nlohmann::ordered_json("2:4") : nlohmann::ordered_json();
      entry["label"] = c.label();
      entry["variant"] = c.variant;
      entry["applicable"] = c.applicable;
      entry["ms"] = c.applicable ? nlohmann::ordered_json(c.ms) : nlohmann::ordered_json();
      entry["rel_l2"] =
          c.has_error ? nlohmann::ordered_json(c.agreement.rel_l2) : nlohmann::ordered_json();
      entry["top1"] = c.has_error && c.agreement.has_top1 ? nlohmann::ordered_json(c.agreement.top1)
                                                          : nlohmann::ordered_json();
      entry["verdict"] = c.verdict;
      entry["error_shared"] = c.error_shared;
      candidates.push_back(entry);
    }
    item["candidates"] = candidates;
    rows.push_back(item);
  }
  root["layers"] = rows;
  nlohmann::ordered_json whole_rows = nlohmann::ordered_json::array();
  for (const WholeAssignment& whole : wholes) {
    nlohmann::ordered_json item;
    item["name"] = whole.name;
    item["ms"] = whole.ms;
    item["rel_l2"] =
        has_error ? nlohmann::ordered_json(whole.agreement.rel_l2) : nlohmann::ordered_json();
    item["top1"] = has_error && whole.agreement.has_top1
                       ? nlohmann::ordered_json(whole.agreement.top1)
                       : nlohmann::ordered_json();
    item["met"] = whole.met;
    item["bounded"] = whole.bounded;
    item["residuals_fused"] = whole.residuals_fused;
    item["verdict"] = whole.verdict;
    whole_rows.push_back(item);
  }
  root["wholes"] = whole_rows;
  root["pruned_layers"] = pruned_layers();
  nlohmann::ordered_json fused_rows = nlohmann::ordered_json::array();
  for (const FusedLayer& fused : fused_layers)
    fused_rows.push_back({{"layer", fused.layer},
                          {"kernel", fused.choice.kernel},
                          {"precision", to_string(fused.choice.precision)},
                          {"variant", fused.variant}});
  root["fused_layers"] = fused_rows;  // empty: the plan runs `layers`' choices
  nlohmann::ordered_json totals;
  totals["chosen_ms"] = chosen_ms;
  totals["baseline"] = baseline_name;
  totals["baseline_ms"] = baseline_ms;
  if (has_error) {
    totals["rel_l2"] = choice.agreement.rel_l2;
    totals["top1"] = choice.agreement.has_top1 ? nlohmann::ordered_json(choice.agreement.top1)
                                               : nlohmann::ordered_json();
    totals["baseline_rel_l2"] = baseline_agreement.rel_l2;
  }
  totals["met"] = choice.met;
  totals["engines_timed"] = engines_timed;
  totals["steps_cached"] = steps_cached;
  totals["reference_runs"] = reference_runs;
  totals["seconds"] = seconds;
  totals["engines_built"] = engines_built;
  totals["kernels_created"] = kernels_created;
  totals["held_out_runs"] = held_out_runs;
  totals["build_seconds"] = build_seconds;
  totals["timing_seconds"] = timing_seconds;
  totals["error_seconds"] = error_seconds;
  root["totals"] = totals;
  root["log"] = choice.log;
  return root.dump(1) + "\n";
}

}  // namespace cnnrt
