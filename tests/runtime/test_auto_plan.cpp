// The automatic plan (runtime/auto_plan.h) and the plan file around it (runtime/plan_file.h),
// end to end on a small model (the choice on made-up tables: test_auto_plan_choice.cpp):
//  * the whole pipeline with stub timings (int8 steps cheaper): the chosen plan's error,
//    recomputed independently from an engine built with its choices, is within budget; a second
//    build with the same timing cache times nothing and chooses the same;
//  * uniform seeds: with conversions that make every single int8 layer lose, the all-int8 chain
//    is still chosen when it meets the budget, and not when it breaks it; deterministic;
//  * the fp32 reference outputs and the build's calibration come from the timing cache (no
//    reference run / no calibration the second time), and another input set invalidates them;
//  * plan files round-trip; a plan whose model_hash does not match the model or its weights is
//    refused at build.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "auto_plan_stub_timing.h"
#include "graph/model_loader.h"
#include "random_test_util.h"
#include "runtime/auto_plan.h"
#include "runtime/engine_impl.h"
#include "runtime/plan_file.h"

namespace cnnrt {
namespace {

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

using StubTiming = test::Int8StepsFaster;  // int8 steps 1 ms, others 3, conversions 0.25

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

  AutoPlan plan(const std::string& budget, TimingSource& timing, TimingCache* cache = nullptr,
                std::vector<Precision> precisions = {},
                std::shared_ptr<const Engine> reference_engine = nullptr) {
    AutoPlanSettings settings;
    settings.reference_engine = std::move(reference_engine);
    settings.device = Device::CPU;
    settings.batch = 4;
    settings.budget = parse_budget(budget);
    settings.precisions = std::move(precisions);
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

// `cnnrt build` hands the calibration's fp32 engine over as the held-out reference: the plan is
// the one a build that makes its own reference chooses, with one engine fewer built.
TEST_F(AutoPlanPipeline, TheCalibrationsEngineServesAsTheReference) {
  CalibrationSettings settings;
  settings.method = parse_calibration_method("minmax");
  std::shared_ptr<Engine> collector;
  const Calibration again = calibrate(graph_, inputs(calib_data_), settings, &collector);
  ASSERT_NE(collector, nullptr);
  EXPECT_EQ(calibration_to_json(again), calibration_to_json(*calibration_));
  StubTiming own_timing, shared_timing;
  const AutoPlan own = plan("rel_l2=0.05", own_timing);
  const AutoPlan shared = plan("rel_l2=0.05", shared_timing, nullptr, {}, collector);
  EXPECT_EQ(shared.choice.chosen, own.choice.chosen);
  EXPECT_EQ(shared.choice.error, own.choice.error);
  EXPECT_EQ(shared.baseline_agreement.rel_l2, own.baseline_agreement.rel_l2);
  EXPECT_EQ(shared.reference_runs, 1);
  EXPECT_EQ(shared.engines_built, own.engines_built - 1);
}

// The layers and candidate lists a warm build takes from the cache are checked: a damaged entry
// is an Error naming the cache's result, not a crash or a plan with a layer missing.
TEST_F(AutoPlanPipeline, DamagedLayerListsInTheCacheAreErrors) {
  const std::string path = (dir_ / "timing.json").string();
  {
    StubTiming timing;
    TimingCache cache(path);
    plan("rel_l2=0.05", timing, &cache);
  }
  std::ifstream in(path);
  const nlohmann::json original = nlohmann::json::parse(in);
  int damaged = 0;
  for (const char* text : {"[", "{\"baseline\": \"fp32\", \"layers\": []}",
                           "{\"baseline\": \"fp32\", \"layers\": [{\"layer\": \"c1\", "
                           "\"sources\": [], \"kernel\": \"x\", \"candidates\": []}]}"}) {
    nlohmann::json edited = original;
    for (auto& [key, value] : edited["results"].items())
      if (key.rfind("structure|", 0) == 0 && key.find("|layers|") != std::string::npos) {
        value["text"] = text;
        ++damaged;
      }
    std::ofstream(path) << edited.dump();
    StubTiming timing;
    TimingCache cache(path);
    try {
      plan("rel_l2=0.05", timing, &cache);
      ADD_FAILURE() << "a damaged layer list was accepted: " << text;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("malformed result in the timing cache"),
                std::string::npos)
          << error.what();
    }
  }
  EXPECT_EQ(damaged, 3);
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
  // Not even the baseline engine: the layers and their candidates come from the cache too.
  EXPECT_EQ(second.engines_built, 0);
  EXPECT_EQ(second.kernels_created, 0);
  EXPECT_EQ(second.baseline_name, first.baseline_name);
  EXPECT_DOUBLE_EQ(second.baseline_ms, first.baseline_ms);
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
  // A version far outside int's range (fuzz_timing_cache; under UBSan the old check's
  // get<int> was undefined behaviour) is just not ours.
  std::ofstream(path) << "{\"format\": \"cnnrt-timing-cache\", \"version\": "
                         "666666666666666666666666666666666666661, \"entries\": {}}";
  EXPECT_THROW(TimingCache{path}, Error);
  std::ofstream(path) << "{\"format\": \"cnnrt-timing-cache\", \"entries\": " +
                             std::string(100000, '[');
  try {
    TimingCache deep(path);
    ADD_FAILURE() << "a deeply nested timing cache was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("nests deeper than 8 levels"), std::string::npos)
        << error.what();
  }
}

// int8 steps 0.6 ms, fp32 steps 1.0 ms, conversions 0.5 ms: one int8 layer among fp32 ones
// costs 0.6 + 0.5 (+ 0.5) > 1.0 (every single-layer candidate loses), while the all-int8 chain pays
// only the conversions at its two ends and wins.
// The all-int8 seed: the builder's default int8 engine, and the uniform one when it differs (on
// the CPU there is one int8 kernel per op, so the two are one assignment, measured once under
// the first name).
bool is_int8_seed(const WholeAssignment& w) {
  return w.name == "default int8" || w.name == "uniform int8";
}

class ChainTiming : public TimingSource {
 public:
  std::vector<double> step_times(const Engine& engine, int /*batch*/) override {
    std::vector<double> times;
    for (const Step& step : engine.impl().steps)
      times.push_back(step.is_conversion() ? 0.5 : step.precision == Precision::INT8 ? 0.6 : 1.0);
    return times;
  }
};

TEST_F(AutoPlanPipeline, AUniformSeedWinsWhereNoSingleLayerDoes) {
  ChainTiming timing;
  // First with no bound: the all-int8 seed's own error, and every single int8 layer is slower.
  const AutoPlan loose = plan("none", timing);
  for (const LayerCandidates& l : loose.layers)
    for (const Candidate& c : l.candidates)
      if (c.precision == Precision::INT8 && c.applicable)
        EXPECT_GT(c.ms, l.candidates[l.reference].ms) << l.layer;
  const auto seed = std::find_if(loose.wholes.begin(), loose.wholes.end(),
                                 [](const WholeAssignment& w) { return is_int8_seed(w); });
  ASSERT_NE(seed, loose.wholes.end()) << loose.explain();
  EXPECT_EQ(loose.wholes.front().name, "greedy");
  // The default seed is the engine `--precision int8` builds, layer for layer.
  EXPECT_EQ(seed->name, "default int8");
  BuildOptions int8_options;
  int8_options.device = Device::CPU;
  int8_options.precision = Precision::INT8;
  int8_options.calibration = calibration_;
  const auto int8_engine = Engine::build(graph_, int8_options);
  for (size_t l = 0; l < loose.layers.size(); ++l)
    for (const Step& step : int8_engine->impl().steps)
      if (step.name == loose.layers[l].layer)
        EXPECT_EQ(loose.layers[l].candidates[seed->chosen[l]].kernel, step.kernel_name);
  EXPECT_LT(seed->ms, loose.baseline_ms);
  EXPECT_LT(seed->ms, loose.wholes.front().ms);  // the greedy alone stays at all-fp32
  const double seed_error = independent_rel_l2(loose);
  ASSERT_GT(seed_error, 0);

  // A budget the all-int8 chain meets: it is the plan (or something faster), and the explain
  // output names it with its measured time and error.
  char spec[64];
  std::snprintf(spec, sizeof spec, "rel_l2=%.9g", seed_error * 1.5);
  const AutoPlan fits = plan(spec, timing);
  ASSERT_TRUE(fits.choice.met) << fits.explain();
  EXPECT_LE(fits.chosen_ms, seed->ms + 1e-9) << fits.explain();
  EXPECT_LT(fits.chosen_ms, fits.baseline_ms);
  for (const LayerCandidates& l : fits.layers)
    if (l.candidates.size() > 1) EXPECT_EQ(l.candidates[l.chosen].precision, Precision::INT8);
  EXPECT_LE(independent_rel_l2(fits), seed_error * 1.5);
  EXPECT_NE(fits.explain().find("whole default int8"), std::string::npos) << fits.explain();
  EXPECT_NE(fits.to_json().find("\"wholes\""), std::string::npos);

  // A budget below the all-int8 error: the seed is over budget and not taken.
  std::snprintf(spec, sizeof spec, "rel_l2=%.9g", seed_error * 0.5);
  const AutoPlan tight = plan(spec, timing);
  ASSERT_TRUE(tight.choice.met) << tight.explain();
  EXPECT_LE(independent_rel_l2(tight), seed_error * 0.5);
  for (const WholeAssignment& w : tight.wholes)
    if (is_int8_seed(w)) EXPECT_EQ(w.verdict, "over budget");
  bool all_int8 = true;
  for (const LayerCandidates& l : tight.layers)
    if (l.candidates.size() > 1)
      all_int8 = all_int8 && l.candidates[l.chosen].precision == Precision::INT8;
  EXPECT_FALSE(all_int8);

  // Deterministic: the same inputs, the same choice, time and error.
  const AutoPlan again = plan(spec, timing);
  EXPECT_EQ(again.choice.chosen, tight.choice.chosen);
  EXPECT_EQ(again.chosen_ms, tight.chosen_ms);
  EXPECT_EQ(again.choice.error, tight.choice.error);
}

// int8 steps 10 ms, everything else 1 ms: no int8 layer pays, and the all-int8 seed's kernels
// alone take longer than the all-fp32 engine.
class SlowInt8Timing : public TimingSource {
 public:
  std::vector<double> step_times(const Engine& engine, int /*batch*/) override {
    std::vector<double> times;
    for (const Step& step : engine.impl().steps)
      times.push_back(!step.is_conversion() && step.precision == Precision::INT8 ? 10.0 : 1.0);
    return times;
  }
};

TEST_F(AutoPlanPipeline, ASeedWhoseKernelsAloneAreSlowerIsNotBuilt) {
  SlowInt8Timing timing;
  const AutoPlan p = plan("none", timing);
  double int8_steps = 0;
  for (const LayerCandidates& l : p.layers)
    for (const Candidate& c : l.candidates)
      if (c.applicable) {
        EXPECT_GT(c.step_ms, 0) << l.layer << " " << c.kernel;
        EXPECT_LE(c.step_ms, c.ms) << l.layer << " " << c.kernel;  // conversions only add
      }
  const auto seed = std::find_if(p.wholes.begin(), p.wholes.end(),
                                 [](const WholeAssignment& w) { return is_int8_seed(w); });
  ASSERT_NE(seed, p.wholes.end()) << p.explain();
  for (size_t l = 0; l < p.layers.size(); ++l)
    int8_steps += p.layers[l].candidates[seed->chosen[l]].step_ms;
  EXPECT_TRUE(seed->bounded) << p.explain();
  // Its kernels' own times summed — not an engine's, which would add conversion steps.
  EXPECT_DOUBLE_EQ(seed->ms, int8_steps);
  EXPECT_GE(seed->ms, p.chosen_ms);
  EXPECT_NE(seed->verdict.find("not built"), std::string::npos);
  EXPECT_NE(p.explain().find(">= "), std::string::npos) << p.explain();
  // With int8 steps as fast as the rest, the same seed is built and measured.
  ChainTiming fast;
  const AutoPlan q = plan("none", fast);
  const auto built = std::find_if(q.wholes.begin(), q.wholes.end(), is_int8_seed);
  ASSERT_NE(built, q.wholes.end()) << q.explain();
  EXPECT_FALSE(built->bounded) << q.explain();
}

// One timing cache serves builds with other candidate lists (--precisions): what it keeps of a
// seed is kernel names, never indices into one build's lists (an int8-only build after an
// all-precision one read another list's indices and crashed).
TEST_F(AutoPlanPipeline, ACacheServesBuildsWithOtherPrecisionLists) {
  const std::string path = (dir_ / "shared_timing.json").string();
  StubTiming timing;
  {
    TimingCache cache(path);
    plan("rel_l2=0.05", timing, &cache);
  }
  TimingCache cache(path);
  const AutoPlan int8_only = plan("rel_l2=0.5", timing, &cache, {Precision::INT8});
  ASSERT_TRUE(int8_only.choice.met) << int8_only.explain();
  for (const LayerCandidates& l : int8_only.layers)
    for (const Candidate& c : l.candidates)
      EXPECT_EQ(c.precision, Precision::INT8) << l.layer << " " << c.kernel;
  ASSERT_GE(int8_only.wholes.size(), 1u);
  for (const WholeAssignment& w : int8_only.wholes) {
    ASSERT_EQ(w.chosen.size(), int8_only.layers.size()) << w.name;
    for (size_t l = 0; l < int8_only.layers.size(); ++l) {
      ASSERT_GE(w.chosen[l], 0) << w.name;
      ASSERT_LT(w.chosen[l], static_cast<int>(int8_only.layers[l].candidates.size())) << w.name;
    }
  }
}

TEST_F(AutoPlanPipeline, TheReferenceAndTheCalibrationComeFromTheCache) {
  const std::string path = (dir_ / "timing.json").string();
  StubTiming timing;
  {
    TimingCache cache(path);
    const AutoPlan first = plan("rel_l2=0.05", timing, &cache);
    EXPECT_EQ(first.reference_runs, 1);
  }
  // Another batch: every timing and result is another key and is measured again, but the fp32
  // reference outputs of the same model and held-out set are not.
  {
    TimingCache cache(path);
    AutoPlanSettings settings;
    settings.device = Device::CPU;
    settings.batch = 2;
    settings.budget = parse_budget("rel_l2=0.05");
    settings.calibration = calibration_;
    settings.timing = &timing;
    settings.cache = &cache;
    const AutoPlan other_batch = auto_plan(graph_, inputs(held_out_), settings);
    EXPECT_GT(other_batch.engines_timed, 0);
    EXPECT_EQ(other_batch.reference_runs, 0);
    const AutoPlan fresh = plan("rel_l2=0.05", timing);  // no cache: the same errors
    EXPECT_DOUBLE_EQ(other_batch.baseline_agreement.rel_l2, fresh.baseline_agreement.rel_l2);
  }
  // Another held-out set: the reference is run again.
  held_out_[3] += 0.25f;
  {
    TimingCache cache(path);
    const AutoPlan changed = plan("rel_l2=0.05", timing, &cache);
    EXPECT_EQ(changed.reference_runs, 1);
  }

  // The calibration: made once, then read back equal; another input set makes it again.
  CalibrationSettings settings;
  settings.method = parse_calibration_method("minmax");
  TimingCache cache(path);
  bool computed = false;
  const auto made = cached_calibration(graph_, inputs(calib_data_), settings, &cache, &computed);
  EXPECT_TRUE(computed);
  const auto again = cached_calibration(graph_, inputs(calib_data_), settings, &cache, &computed);
  EXPECT_FALSE(computed);
  EXPECT_EQ(calibration_to_json(*again), calibration_to_json(*made));
  cache.save();
  TimingCache reloaded(path);
  cached_calibration(graph_, inputs(calib_data_), settings, &reloaded, &computed);
  EXPECT_FALSE(computed);
  calib_data_[7] += 0.5f;
  const auto other =
      cached_calibration(graph_, inputs(calib_data_), settings, &reloaded, &computed);
  EXPECT_TRUE(computed);
  settings.method = parse_calibration_method("entropy");
  cached_calibration(graph_, inputs(calib_data_), settings, &reloaded, &computed);
  EXPECT_TRUE(computed);  // another method is another key
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
  file.layers["c2"] = LayerChoice{Precision::INT8, "cpu_int8_conv", "", ""};
  file.layers["c1"] = LayerChoice{Precision::FP32, "cpu_ref_conv", "", ""};
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
