// The automatic plan (runtime/auto_plan.h) and the plan file around it (runtime/plan_file.h):
//  * choose_assignment on made-up tables: it prefers the faster candidate within budget, never
//    takes a candidate over budget alone, spends the budget on the best time-per-error trades,
//    backs off the worst layer (to a milder candidate first) while the verified error is over,
//    reports an unmeetable budget, and is deterministic;
//  * budget SPEC parsing;
//  * the whole pipeline on a small model with stub timings (int8 steps cheaper): the chosen plan's
//    error, recomputed independently from an engine built with its choices, is within budget;
//    a second build with the same timing cache times nothing and chooses the same;
//  * plan files round-trip; a plan whose model_hash does not match the model or its weights is
//    refused at build.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "graph/model_loader.h"
#include "random_test_util.h"
#include "runtime/auto_plan.h"
#include "runtime/engine_impl.h"
#include "runtime/plan_file.h"

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

// --- The pipeline on a real (small) model, with stub timings ---------------------------------

const char* kModel =
    "name: auto_ops\ninput: {shape: [3, 11, 9]}\nlayers:\n"
    "  - {name: c1, op: conv, out_channels: 8, kernel: 3, padding: 1, weight: a, bias: b}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: p1, op: maxpool, kernel: 2, stride: 2, ceil_mode: true}\n"
    "  - {name: c2, op: conv, out_channels: 6, kernel: 3, weight: c, bias: d}\n"
    "  - {name: flat, op: flatten}\n"
    "  - {name: fc, op: linear, out_features: 5, weight: f, bias: g}\n";
constexpr int kInputElements = 3 * 11 * 9;

// int8 steps 1 ms, fp32 steps 3 ms, conversions 0.25 ms; counts its calls.
class StubTiming : public TimingSource {
 public:
  int calls = 0;
  std::vector<double> step_times(const Engine& engine, int /*batch*/) override {
    ++calls;
    std::vector<double> times;
    for (const Step& step : engine.impl().steps)
      times.push_back(step.is_conversion() ? 0.25 : step.precision == Precision::INT8 ? 1.0 : 3.0);
    return times;
  }
};

class AutoPlanPipeline : public ::testing::Test {
 protected:
  void SetUp() override {
    graph_ = parse_model(kModel, "auto_ops.yaml");
    bind_random_weights(graph_, 7);
    std::mt19937 rng(11);
    calib_data_ = test::random_vector(size_t(40) * kInputElements, rng, 0.0f, 1.0f);
    held_out_ = test::random_vector(size_t(24) * kInputElements, rng, 0.0f, 1.0f);
    CalibrationSettings settings;
    settings.method = parse_calibration_method("minmax");
    calibration_ =
        std::make_shared<const Calibration>(calibrate(graph_, inputs(calib_data_), settings));
    dir_ = std::filesystem::temp_directory_path() /
           ("cnnrt_auto_plan_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static CalibrationInputs inputs(const std::vector<float>& data) {
    CalibrationInputs in;
    in.samples = static_cast<int>(data.size() / kInputElements);
    in.load = [&data](int first, int count, float* out) {
      std::copy_n(data.begin() + int64_t(first) * kInputElements, int64_t(count) * kInputElements,
                  out);
    };
    return in;
  }

  AutoPlan plan(const std::string& budget, TimingSource& timing, TimingCache* cache = nullptr) {
    AutoPlanSettings settings;
    settings.device = Device::CPU;
    settings.batch = 4;
    settings.budget = parse_budget(budget);
    settings.calibration = calibration_;
    settings.timing = &timing;
    settings.cache = cache;
    return auto_plan(graph_, inputs(held_out_), settings);
  }

  std::vector<float> run(const BuildOptions& options) {
    auto engine = Engine::build(graph_, options);
    const int batch = static_cast<int>(held_out_.size() / kInputElements);
    auto context = engine->create_context(batch);
    std::vector<float> out(context->output_count());
    context->run(held_out_.data(), out.data());
    return out;
  }

  // rel L2 of the plan's engine against fp32, computed here, not by the chooser.
  double independent_rel_l2(const AutoPlan& p) {
    BuildOptions reference;
    reference.device = Device::CPU;
    BuildOptions chosen = reference;
    chosen.calibration = calibration_;
    chosen.layer_choices = p.choices();
    const std::vector<float> r = run(reference), y = run(chosen);
    double err = 0, ref = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      err += (double(y[i]) - r[i]) * (double(y[i]) - r[i]);
      ref += double(r[i]) * r[i];
    }
    return std::sqrt(err / ref);
  }

  Graph graph_;
  std::vector<float> calib_data_, held_out_;
  std::shared_ptr<const Calibration> calibration_;
  std::filesystem::path dir_;
};

TEST_F(AutoPlanPipeline, ChoosesInt8WhereItIsFasterAndStaysWithinBudget) {
  StubTiming timing;
  const AutoPlan loose = plan("none", timing);
  for (const LayerCandidates& l : loose.layers)  // none: every layer at its fastest
    EXPECT_EQ(l.candidates[l.chosen].precision,
              l.candidates.size() > 1 ? Precision::INT8 : Precision::FP32)
        << l.layer;
  const double all_int8 = independent_rel_l2(loose);
  ASSERT_GT(all_int8, 0);
  // A budget below the all-int8 error: some layers must stay fp32, and the result is within.
  const double budget = all_int8 * 0.6;
  char spec[64];
  std::snprintf(spec, sizeof spec, "rel_l2=%.9g", budget);
  const AutoPlan tight = plan(spec, timing);
  ASSERT_TRUE(tight.choice.met) << tight.explain();
  EXPECT_LE(independent_rel_l2(tight), budget);
  EXPECT_NEAR(independent_rel_l2(tight), tight.choice.error, 1e-6);
  EXPECT_LT(tight.chosen_ms, tight.baseline_ms + 1e-9);
  EXPECT_EQ(tight.baseline_name, "all-fp32");
  // Every candidate has a verdict; exactly one per layer is chosen.
  for (const LayerCandidates& l : tight.layers) {
    int chosen = 0;
    for (const Candidate& c : l.candidates) {
      EXPECT_FALSE(c.verdict.empty());
      chosen += c.verdict == "chosen" ? 1 : 0;
    }
    EXPECT_EQ(chosen, 1) << l.layer;
  }
  EXPECT_NE(tight.explain().find("chosen"), std::string::npos);
}

TEST_F(AutoPlanPipeline, ASecondBuildWithTheTimingCacheTimesNothing) {
  const std::string path = (dir_ / "timing.json").string();
  StubTiming first_timing;
  TimingCache first_cache(path);
  const AutoPlan first = plan("rel_l2=0.05", first_timing, &first_cache);
  EXPECT_GT(first_timing.calls, 0);
  EXPECT_EQ(first.engines_timed, first_timing.calls);
  ASSERT_TRUE(std::filesystem::exists(path));

  StubTiming second_timing;
  TimingCache second_cache(path);
  EXPECT_EQ(second_cache.size(), first_cache.size());
  const AutoPlan second = plan("rel_l2=0.05", second_timing, &second_cache);
  EXPECT_EQ(second_timing.calls, 0);
  EXPECT_EQ(second.engines_timed, 0);
  EXPECT_GT(second.steps_cached, 0);
  EXPECT_EQ(second.choice.chosen, first.choice.chosen);
  EXPECT_DOUBLE_EQ(second.chosen_ms, first.chosen_ms);
  // The whole results come back too (no candidate engine is built): the same table.
  ASSERT_EQ(second.layers.size(), first.layers.size());
  for (size_t l = 0; l < first.layers.size(); ++l)
    for (size_t i = 0; i < first.layers[l].candidates.size(); ++i) {
      const Candidate &a = first.layers[l].candidates[i], &b = second.layers[l].candidates[i];
      EXPECT_EQ(a.applicable, b.applicable);
      EXPECT_EQ(a.ms, b.ms);
      EXPECT_EQ(a.agreement.rel_l2, b.agreement.rel_l2);
      EXPECT_EQ(a.verdict, b.verdict);
    }
  EXPECT_EQ(second.choice.error, first.choice.error);
  // Another held-out set is another key: its errors are measured again, times still cached.
  held_out_[0] += 0.5f;
  StubTiming third_timing;
  TimingCache third_cache(path);
  const AutoPlan third = plan("rel_l2=0.05", third_timing, &third_cache);
  EXPECT_EQ(third_timing.calls, 0);
  bool any_differs = false;  // served from the first set's results, every error would equal
  for (size_t l = 0; l < first.layers.size(); ++l)
    for (size_t i = 0; i < first.layers[l].candidates.size(); ++i)
      any_differs = any_differs || third.layers[l].candidates[i].agreement.rel_l2 !=
                                       first.layers[l].candidates[i].agreement.rel_l2;
  EXPECT_TRUE(any_differs);

  std::ofstream(path) << "{\"format\": \"something else\"}";
  try {
    TimingCache broken(path);
    ADD_FAILURE() << "a foreign timing cache was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
  }
}

TEST_F(AutoPlanPipeline, WithoutACalibrationInt8IsNotApplicable) {
  StubTiming timing;
  AutoPlanSettings settings;
  settings.device = Device::CPU;
  settings.budget = parse_budget("none");
  settings.timing = &timing;
  const AutoPlan p = auto_plan(graph_, inputs(held_out_), settings);
  for (const LayerCandidates& l : p.layers) {
    EXPECT_NE(l.candidates[l.chosen].precision, Precision::INT8);
    for (const Candidate& c : l.candidates)
      if (c.precision == Precision::INT8)
        EXPECT_EQ(c.verdict, "not applicable: int8 needs a calibration");
  }
}

TEST_F(AutoPlanPipeline, PlanFilesRoundTripAndStalePlansAreRefused) {
  PlanFile file;
  file.model = graph_.name;
  file.model_hash = model_fingerprint(graph_);
  file.device = "cpu";
  file.batch = 4;
  file.budget = "rel_l2=0.01";
  file.calibration = "scales.json";
  file.layers["c2"] = LayerChoice{Precision::INT8, "cpu_int8_conv", ""};
  file.layers["c1"] = LayerChoice{Precision::FP32, "cpu_ref_conv", ""};
  file.order = {"c2", "c1"};
  file.variants["c1"] = "direct 3x3";
  const std::string path = (dir_ / "plan.yaml").string();
  std::ofstream(path) << plan_file_text(file, "a header\nof two lines");
  const PlanFile back = read_plan_file(path);
  EXPECT_EQ(back.model, file.model);
  EXPECT_EQ(back.model_hash, file.model_hash);
  EXPECT_EQ(back.device, "cpu");
  EXPECT_EQ(back.batch, 4);
  EXPECT_EQ(back.budget, file.budget);
  EXPECT_EQ(back.calibration, "scales.json");
  EXPECT_EQ(back.calibration_path, (dir_ / "scales.json").string());
  EXPECT_EQ(back.order, file.order);
  EXPECT_EQ(back.variants, file.variants);
  ASSERT_EQ(back.layers.size(), 2u);
  EXPECT_EQ(back.layers.at("c2").precision, Precision::INT8);
  EXPECT_EQ(back.layers.at("c2").kernel, "cpu_int8_conv");
  EXPECT_EQ(back.layers.at("c1").kernel, "cpu_ref_conv");

  BuildOptions options;
  options.device = Device::CPU;
  options.calibration = calibration_;
  options.layer_choices = back.layers;
  options.choices_model = back.model;
  options.choices_fingerprint = back.model_hash;
  EXPECT_NO_THROW(Engine::build(graph_, options));
  // One weight changed by one ulp: the same plan is stale.
  Graph changed = graph_;
  float& w = changed.nodes.front().params.front().value.data[5];
  w = std::nextafter(w, 2.0f);
  EXPECT_NE(model_fingerprint(changed), model_fingerprint(graph_));
  try {
    Engine::build(changed, options);
    ADD_FAILURE() << "a stale plan was accepted";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("stale plan"), std::string::npos) << message;
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(back.model_hash), std::string::npos) << message;
  }
  // Another structure (a layer's width) is stale too, even before weights are compared.
  Graph other = parse_model(std::string(kModel).replace(std::string(kModel).find("out_features: 5"),
                                                        15, "out_features: 4"),
                            "auto_ops.yaml");
  bind_random_weights(other, 7);
  EXPECT_NE(model_fingerprint(other), model_fingerprint(graph_));

  std::ofstream(path) << "layers:\n  c1: {precision: fp32, variant: [1]}\n";
  EXPECT_THROW(read_plan_file(path), Error);
  std::ofstream(path) << "device: tpu\nlayers:\n  c1: {precision: fp32}\n";
  EXPECT_THROW(read_plan_file(path), Error);
}

}  // namespace
}  // namespace cnnrt
