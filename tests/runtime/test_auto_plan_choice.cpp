// The automatic plan's choice (runtime/auto_plan.h) on made-up tables, no engine built:
//  * choose_assignment prefers the faster candidate within budget, never takes a candidate over
//    budget alone, spends the budget on the best time-per-error trades, backs off the worst layer
//    (to a milder candidate first) while the verified error is over, reports an unmeetable
//    budget, and is deterministic;
//  * uniform seeds and the fastest whole assignment within budget;
//  * budget SPEC parsing.
// The pipeline on a real model with stub timings is in test_auto_plan.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "runtime/auto_plan.h"

namespace cnnrt {
namespace {

Candidate make(const std::string& kernel, Precision precision, double ms, double error) {
  Candidate c;
  c.kernel = kernel;
  c.precision = precision;
  c.ms = ms;
  c.error = error;
  c.has_error = true;
  return c;
}

// A layer with fp32 (slow, exact), optionally fp16 and int8 (fast, lossy) candidates.
LayerCandidates layer(const std::string& name, double int8_ms, double int8_error,
                      double fp16_ms = -1, double fp16_error = 0) {
  LayerCandidates l;
  l.layer = name;
  l.sources = {name};
  l.candidates.push_back(make(name + "_fp32", Precision::FP32, 10, 0));
  if (fp16_ms > 0)
    l.candidates.push_back(make(name + "_fp16", Precision::FP16, fp16_ms, fp16_error));
  l.candidates.push_back(make(name + "_int8", Precision::INT8, int8_ms, int8_error));
  return l;
}

// The verified error of an assignment: `factor` × the sum of the chosen candidates' errors
// (factor > 1 models errors that compound).
std::function<OutputAgreement(const std::vector<int>&)> summed(
    const std::vector<LayerCandidates>& layers, double factor, int* calls = nullptr) {
  return [&layers, factor, calls](const std::vector<int>& chosen) {
    if (calls != nullptr) ++*calls;
    OutputAgreement a;
    for (size_t l = 0; l < layers.size(); ++l) a.rel_l2 += layers[l].candidates[chosen[l]].error;
    a.rel_l2 *= factor;
    return a;
  };
}

std::string chosen_kernel(const LayerCandidates& l) { return l.candidates[l.chosen].kernel; }

TEST(AutoPlanChoice, PrefersTheFasterCandidateWithinBudget) {
  std::vector<LayerCandidates> layers = {layer("a", 4, 0.01), layer("b", 3, 0.02, 6, 0.001)};
  const ChoiceResult result =
      choose_assignment(layers, parse_budget("rel_l2=0.05"), summed(layers, 1));
  EXPECT_TRUE(result.met);
  EXPECT_EQ(chosen_kernel(layers[0]), "a_int8");
  EXPECT_EQ(chosen_kernel(layers[1]), "b_int8");  // faster than b_fp16, and within budget
  EXPECT_NEAR(result.error, 0.03, 1e-12);
  EXPECT_EQ(layers[1].candidates[0].verdict, "slower");
  EXPECT_EQ(layers[1].candidates[1].verdict, "slower");
}

TEST(AutoPlanChoice, NeverTakesACandidateOverBudgetAlone) {
  std::vector<LayerCandidates> layers = {layer("a", 1, 0.2, 5, 0.01)};
  const ChoiceResult result =
      choose_assignment(layers, parse_budget("rel_l2=0.05"), summed(layers, 1));
  EXPECT_TRUE(result.met);
  EXPECT_EQ(chosen_kernel(layers[0]), "a_fp16");
  EXPECT_EQ(layers[0].candidates[2].verdict, "over budget alone");
}

TEST(AutoPlanChoice, SpendsTheBudgetOnTheBestTimePerError) {
  // a saves 6 ms for 0.03, b saves 8 ms for 0.03, c saves 1 ms for 0.03: with 0.07 of budget
  // two fit, and they must be b then a.
  std::vector<LayerCandidates> layers = {layer("a", 4, 0.03), layer("b", 2, 0.03),
                                         layer("c", 9, 0.03)};
  const ChoiceResult result =
      choose_assignment(layers, parse_budget("rel_l2=0.07"), summed(layers, 1));
  EXPECT_TRUE(result.met);
  EXPECT_EQ(chosen_kernel(layers[0]), "a_int8");
  EXPECT_EQ(chosen_kernel(layers[1]), "b_int8");
  EXPECT_EQ(chosen_kernel(layers[2]), "c_fp32");
  // c was skipped by the estimate, then retried with everything else applied: over, undone.
  EXPECT_EQ(layers[2].candidates[1].verdict, "backed off: whole network over budget with it");
  EXPECT_NE(std::find(result.log.begin(), result.log.end(),
                      "retry c -> c_int8: rel_l2 0.09 (over, undone)"),
            result.log.end());
  EXPECT_LE(result.error, 0.07);
}

TEST(AutoPlanChoice, BacksOffTheWorstLayerWhileTheVerifiedErrorIsOver) {
  // The estimate (0.01 + 0.03 = 0.04) fits 0.05, but errors compound (×2 = 0.08): the worst
  // layer, b, backs off to its milder fp16 candidate (0.01 + 0.004 → 0.028 verified).
  std::vector<LayerCandidates> layers = {layer("a", 4, 0.01), layer("b", 3, 0.03, 6, 0.004)};
  int calls = 0;
  const ChoiceResult result =
      choose_assignment(layers, parse_budget("rel_l2=0.05"), summed(layers, 2, &calls));
  EXPECT_TRUE(result.met);
  EXPECT_EQ(calls, 2);  // one verification over budget, one within
  EXPECT_EQ(chosen_kernel(layers[0]), "a_int8");
  EXPECT_EQ(chosen_kernel(layers[1]), "b_fp16");
  EXPECT_NEAR(result.error, 0.028, 1e-12);
  EXPECT_EQ(layers[1].candidates[2].verdict, "backed off: whole network over budget with it");

  // Compounding ×5: b backs off to fp16 (0.014 × 5 = 0.07, over); now a (0.01) is the worst
  // admitted layer and backs off to fp32: 0.004 × 5 = 0.02 is within.
  std::vector<LayerCandidates> harsh = {layer("a", 4, 0.01), layer("b", 3, 0.03, 6, 0.004)};
  int harsh_calls = 0;
  const ChoiceResult harsh_result =
      choose_assignment(harsh, parse_budget("rel_l2=0.05"), summed(harsh, 5, &harsh_calls));
  EXPECT_TRUE(harsh_result.met);
  EXPECT_EQ(harsh_calls, 3);
  EXPECT_EQ(chosen_kernel(harsh[0]), "a_fp32");
  EXPECT_EQ(chosen_kernel(harsh[1]), "b_fp16");
  EXPECT_NEAR(harsh_result.error, 0.02, 1e-12);
  EXPECT_EQ(harsh[0].candidates[1].verdict, "backed off: whole network over budget with it");
}

TEST(AutoPlanChoice, RetriesWhatTheEstimateSkippedWhenErrorsCancel) {
  // Summed, a and b (0.03 each) exceed 0.05, but verified together they measure 0.04 (×2/3):
  // the retry keeps both.
  std::vector<LayerCandidates> layers = {layer("a", 4, 0.03), layer("b", 2, 0.03)};
  const ChoiceResult result =
      choose_assignment(layers, parse_budget("rel_l2=0.05"), summed(layers, 2.0 / 3.0));
  EXPECT_TRUE(result.met);
  EXPECT_EQ(chosen_kernel(layers[0]), "a_int8");
  EXPECT_EQ(chosen_kernel(layers[1]), "b_int8");
  EXPECT_NEAR(result.error, 0.04, 1e-12);
}

TEST(AutoPlanChoice, ReportsAnUnmeetableBudget) {
  // Only lossy candidates: the most accurate assignment is still over the budget.
  std::vector<LayerCandidates> layers = {layer("a", 4, 0.01)};
  layers[0].candidates.erase(layers[0].candidates.begin());
  const ChoiceResult result =
      choose_assignment(layers, parse_budget("rel_l2=0.001"), summed(layers, 1));
  EXPECT_FALSE(result.met);
  EXPECT_NEAR(result.error, 0.01, 1e-12);  // the best achievable, for the message
}

TEST(AutoPlanChoice, TopOneBudgetAndNoBudget) {
  std::vector<LayerCandidates> layers = {layer("a", 4, 0.005)};
  const Budget top1 = parse_budget("top1_agreement=0.99");
  auto verify = [](const std::vector<int>& chosen) {
    OutputAgreement a;
    a.has_top1 = true;
    a.top1 = chosen[0] == 1 ? 0.995 : 1.0;
    return a;
  };
  EXPECT_TRUE(choose_assignment(layers, top1, verify).met);
  EXPECT_EQ(chosen_kernel(layers[0]), "a_int8");
  // none: the fastest, whatever its error.
  std::vector<LayerCandidates> lossy = {layer("a", 4, 0.5)};
  EXPECT_TRUE(choose_assignment(lossy, parse_budget("none"), summed(lossy, 1)).met);
  EXPECT_EQ(chosen_kernel(lossy[0]), "a_int8");
}

TEST(AutoPlanChoice, IsDeterministic) {
  auto table = [] {
    return std::vector<LayerCandidates>{layer("a", 4, 0.02), layer("b", 4, 0.02),
                                        layer("c", 4, 0.02, 7, 0.01)};
  };
  std::vector<LayerCandidates> first = table(), second = table();
  const ChoiceResult r1 = choose_assignment(first, parse_budget("rel_l2=0.05"), summed(first, 1.2));
  const ChoiceResult r2 =
      choose_assignment(second, parse_budget("rel_l2=0.05"), summed(second, 1.2));
  EXPECT_EQ(r1.chosen, r2.chosen);
  EXPECT_EQ(r1.log, r2.log);
  // Equal trades keep network order: a and b are taken, c is not.
  EXPECT_EQ(chosen_kernel(first[0]), "a_int8");
  EXPECT_EQ(chosen_kernel(first[1]), "b_int8");
  EXPECT_NE(chosen_kernel(first[2]), "c_int8");
}

TEST(AutoPlanBudget, Parses) {
  EXPECT_EQ(parse_budget("none").metric, Budget::Metric::None);
  const Budget rel = parse_budget("rel_l2=0.01");
  EXPECT_EQ(rel.metric, Budget::Metric::RelL2);
  EXPECT_DOUBLE_EQ(rel.limit(), 0.01);
  EXPECT_EQ(rel.to_string(), "rel_l2=0.01");
  const Budget top1 = parse_budget("top1_agreement=0.99");
  EXPECT_NEAR(top1.limit(), 0.01, 1e-15);
  EXPECT_TRUE(std::isinf(parse_budget("none").limit()));
  for (const char* bad : {"", "rel_l2", "rel_l2=", "rel_l2=abc", "rel_l2=0.1x", "rel_l2=-1",
                          "top1_agreement=1.5", "top5=0.9", "rel_l2=nan", "NONE"}) {
    try {
      parse_budget(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("budget '" + std::string(bad) + "'"),
                std::string::npos)
          << error.what();
    }
  }
}

TEST(AutoPlanChoice, UniformSeedsAndTheFastestWithinBudget) {
  std::vector<LayerCandidates> layers = {layer("a", 4, 0.01, 6, 0.001), layer("b", 3, 0.02)};
  layers[1].candidates[1].applicable = false;  // b has no usable int8 kernel
  const std::vector<int> int8 = uniform_assignment(layers, Precision::INT8, {0, 0});
  EXPECT_EQ(int8, (std::vector<int>{2, 0}));  // b keeps its fallback
  EXPECT_EQ(uniform_assignment(layers, Precision::FP16, {0, 0}), (std::vector<int>{1, 0}));
  EXPECT_TRUE(uniform_assignment(layers, Precision::Auto, {0, 0}).empty());  // none has it

  std::vector<WholeAssignment> wholes(3);
  wholes[0].ms = 5, wholes[0].met = true;   // the greedy
  wholes[1].ms = 3, wholes[1].met = false;  // fastest, but over budget
  wholes[2].ms = 4, wholes[2].met = true;
  EXPECT_EQ(pick_fastest_met(wholes), 2);
  EXPECT_EQ(wholes[0].verdict, "slower");
  EXPECT_EQ(wholes[1].verdict, "over budget");
  EXPECT_EQ(wholes[2].verdict, "chosen");
  wholes[2].ms = 5;  // a tie keeps the first listed
  EXPECT_EQ(pick_fastest_met(wholes), 0);
  wholes[0].met = wholes[2].met = false;
  EXPECT_EQ(pick_fastest_met(wholes), -1);
}

// A uniform int8 seed faster than every whole within budget but over it: its most sensitive
// layers go back to the fallback, the fewest that meet the budget, found with few probes.
TEST(AutoPlanChoice, BacksOffAFastSeedsMostSensitiveLayers) {
  // Eight layers; int8 (candidate 2) errors 0.001 except layers 5 and 2 (0.05 and 0.03).
  std::vector<LayerCandidates> layers;
  for (int l = 0; l < 8; ++l)
    layers.push_back(layer("l" + std::to_string(l), 1, l == 5 ? 0.05 : l == 2 ? 0.03 : 0.001, 2));
  const std::vector<int> fallback(8, 1);  // fp16
  const std::vector<int> seed(8, 2);      // uniform int8
  auto whole_of = [&](const std::string& name, const std::vector<int>& chosen) {
    WholeAssignment w;
    w.name = name;
    w.chosen = chosen;
    for (size_t l = 0; l < chosen.size(); ++l) {
      w.ms += layers[l].candidates[chosen[l]].ms;
      w.error += layers[l].candidates[chosen[l]].error;
    }
    w.met = w.error <= 0.02;  // the budget
    return w;
  };
  std::vector<WholeAssignment> wholes = {whole_of("native", fallback), whole_of("uniform", seed)};
  int probes = 0;
  back_off_fastest_seed(layers, wholes, 1, fallback,
                        [&](const std::string& name, const std::vector<int>& chosen) {
                          ++probes;
                          return whole_of(name, chosen);
                        });
  const int pick = pick_fastest_met(wholes);
  ASSERT_GE(pick, 2) << "a back-off probe is chosen";
  std::vector<int> expected = seed;
  expected[5] = expected[2] = 1;  // exactly the two sensitive layers back
  EXPECT_EQ(wholes[pick].chosen, expected);
  EXPECT_EQ(wholes[pick].name, "uniform, 2 most sensitive of 8 layers backed off");
  EXPECT_LE(probes, 3);  // bisection over 8 layers

  // No seed over budget that beats the native one: nothing measured.
  std::vector<WholeAssignment> none = {whole_of("native", fallback)};
  none.push_back(whole_of("slow", fallback));
  none[1].met = false, none[1].ms = 100;
  back_off_fastest_seed(layers, none, 1, fallback,
                        [&](const std::string&, const std::vector<int>&) -> WholeAssignment {
                          ADD_FAILURE() << "measured a probe of a seed slower than the native";
                          return {};
                        });
  EXPECT_EQ(none.size(), 2u);
}

}  // namespace
}  // namespace cnnrt
