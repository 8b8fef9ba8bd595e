// The automatic plan on a model with a residual add (runtime/auto_plan_wholes.cpp): a build with
// int8 candidates keeps every add separate (int8 kernels have no residual epilogue), but a plan
// without int8 layers must run what `--precision fp32|fp16` runs — the add fused into its conv —
// or it loses to the single-precision engine it is compared with (EfficientNet-Lite0 at batch 1
// on an H100, docs/PERFORMANCE.md run 29: 0.238 vs 0.230 ms).  On the CPU with stub timings:
//  * a pick without int8 layers lists the fused graph's layers (no add), and the engine built
//    from its choices without a calibration has the add fused and computes the fp32 engine's
//    outputs;
//  * a pick with int8 layers keeps the separate add; the fused native engine is measured beside
//    it and reported as the baseline;
//  * a second build over the same timing cache makes the same plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "auto_plan_stub_timing.h"
#include "graph/model_loader.h"
#include "random_test_util.h"
#include "runtime/auto_plan.h"
#include "runtime/engine_impl.h"
#include "sample_inputs.h"

namespace cnnrt {
namespace {

const char* kResidualModel =
    "name: auto_residual\ninput: {shape: [4, 9, 7]}\nlayers:\n"
    "  - {name: c1, op: conv, out_channels: 8, kernel: 3, padding: 1, weight: a, bias: b}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, out_channels: 8, kernel: 3, padding: 1, weight: c, bias: d}\n"
    "  - {name: add1, op: add, inputs: [c2, r1]}\n"
    "  - {name: flat, op: flatten}\n"
    "  - {name: fc, op: linear, out_features: 5, weight: f, bias: g}\n";
constexpr int kInputElements = 4 * 9 * 7;

class AutoPlanResidual : public ::testing::Test {
 protected:
  void SetUp() override {
    graph_ = parse_model(kResidualModel, "auto_residual.yaml");
    bind_random_weights(graph_, 5);
    std::mt19937 rng(13);
    calib_data_ = test::random_vector(size_t(32) * kInputElements, rng, -1.0f, 1.0f);
    held_out_ = test::random_vector(size_t(16) * kInputElements, rng, -1.0f, 1.0f);
    CalibrationSettings settings;
    settings.method = parse_calibration_method("minmax");
    calibration_ =
        std::make_shared<const Calibration>(calibrate(graph_, inputs(calib_data_), settings));
  }

  static CalibrationInputs inputs(const std::vector<float>& data) {
    return test::inputs_over(data, kInputElements);
  }

  AutoPlan plan(std::vector<Precision> precisions, TimingCache* cache = nullptr) {
    AutoPlanSettings settings;
    settings.device = Device::CPU;
    settings.batch = 2;
    settings.budget = parse_budget("none");
    settings.precisions = std::move(precisions);
    settings.calibration = calibration_;
    settings.timing = &timing_;
    settings.cache = cache;
    return auto_plan(graph_, inputs(held_out_), settings);
  }

  std::vector<float> run(const BuildOptions& options) {
    auto engine = Engine::build(graph_, options);
    auto context = engine->create_context(16);
    std::vector<float> out(context->output_count());
    context->run(held_out_.data(), out.data());
    return out;
  }

  static const WholeAssignment* chosen_whole(const AutoPlan& plan) {
    for (const WholeAssignment& whole : plan.wholes)
      if (whole.verdict == "chosen") return &whole;
    return nullptr;
  }

  Graph graph_;
  std::vector<float> calib_data_, held_out_;
  std::shared_ptr<const Calibration> calibration_;
  test::Int8StepsFaster timing_;  // every step saved counts
};

TEST_F(AutoPlanResidual, PickWithoutInt8RunsTheAddFusedIntoItsConv) {
  const AutoPlan p = plan({Precision::FP32});
  // The family kept the add separate (the build has a calibration) ...
  EXPECT_TRUE(std::any_of(p.layers.begin(), p.layers.end(),
                          [](const LayerCandidates& l) { return l.layer == "add1"; }));
  // ... and the pick is its fused twin, one 3 ms step shorter.
  const WholeAssignment* chosen = chosen_whole(p);
  ASSERT_NE(chosen, nullptr);
  EXPECT_TRUE(chosen->residuals_fused) << chosen->name;
  ASSERT_FALSE(p.fused_layers.empty());
  std::vector<std::string> names;
  for (const AutoPlan::FusedLayer& layer : p.fused_layers) {
    names.push_back(layer.layer);
    EXPECT_FALSE(layer.choice.kernel.empty()) << layer.layer;
    EXPECT_EQ(layer.choice.precision, Precision::FP32) << layer.layer;
  }
  EXPECT_EQ(std::count(names.begin(), names.end(), "add1"), 0);
  EXPECT_EQ(std::count(names.begin(), names.end(), "c2"), 1);
  EXPECT_EQ(p.choices().count("add1"), 0u);
  EXPECT_DOUBLE_EQ(p.chosen_ms, chosen->ms);

  // Built from its choices without a calibration (what `--plan` does with a plan naming none),
  // the engine has the add inside c2 and computes the fp32 engine's outputs.
  BuildOptions options;
  options.device = Device::CPU;
  options.layer_choices = p.choices();
  const auto engine = Engine::build(graph_, options);
  int fused_convs = 0;
  for (const Step& step : engine->impl().steps) {
    EXPECT_NE(step.name, "add1");
    fused_convs += step.node != nullptr && step.node->fused_residual ? 1 : 0;
  }
  EXPECT_EQ(fused_convs, 1);
  BuildOptions reference;
  reference.device = Device::CPU;
  EXPECT_EQ(run(options), run(reference));
}

TEST_F(AutoPlanResidual, PickWithInt8KeepsTheAddAndReportsTheFusedBaseline) {
  const AutoPlan p = plan({});  // fp32 and int8: at budget none every int8 layer wins
  EXPECT_TRUE(p.fused_layers.empty());
  EXPECT_EQ(p.choices().count("add1"), 1u);
  const WholeAssignment* chosen = chosen_whole(p);
  ASSERT_NE(chosen, nullptr);
  EXPECT_FALSE(chosen->residuals_fused);
  // The native engine as `--precision fp32` builds it was measured, fused, and is the baseline.
  const auto fused_native =
      std::find_if(p.wholes.begin(), p.wholes.end(), [](const WholeAssignment& w) {
        return w.residuals_fused && w.name == "all-fp32 (--precision fp32)";
      });
  ASSERT_NE(fused_native, p.wholes.end());
  EXPECT_DOUBLE_EQ(p.baseline_ms, fused_native->ms);
  EXPECT_LT(p.chosen_ms, p.baseline_ms);
}

TEST_F(AutoPlanResidual, SecondBuildOverTheSameCacheMakesTheSamePlan) {
  TimingCache cache;
  const AutoPlan first = plan({Precision::FP32}, &cache);
  const AutoPlan second = plan({Precision::FP32}, &cache);
  ASSERT_EQ(first.fused_layers.size(), second.fused_layers.size());
  for (size_t i = 0; i < first.fused_layers.size(); ++i) {
    EXPECT_EQ(first.fused_layers[i].layer, second.fused_layers[i].layer);
    EXPECT_EQ(first.fused_layers[i].choice.kernel, second.fused_layers[i].choice.kernel);
    EXPECT_EQ(first.fused_layers[i].choice.precision, second.fused_layers[i].choice.precision);
    EXPECT_EQ(first.fused_layers[i].variant, second.fused_layers[i].variant);
  }
  EXPECT_EQ(second.engines_timed, 0);
  // Neither family is made: the fused graph's layers and choices come from the cache too.
  EXPECT_EQ(second.engines_built, 0);
  ASSERT_EQ(first.wholes.size(), second.wholes.size());
  for (size_t w = 0; w < first.wholes.size(); ++w) {
    EXPECT_EQ(first.wholes[w].name, second.wholes[w].name);
    EXPECT_EQ(first.wholes[w].chosen, second.wholes[w].chosen);
    EXPECT_EQ(first.wholes[w].residuals_fused, second.wholes[w].residuals_fused);
    ASSERT_EQ(first.wholes[w].fused_choices.size(), second.wholes[w].fused_choices.size());
    for (const auto& [layer, choice] : first.wholes[w].fused_choices) {
      const LayerChoice& again = second.wholes[w].fused_choices.at(layer);
      EXPECT_EQ(choice.kernel, again.kernel) << layer;
      EXPECT_EQ(choice.precision, again.precision) << layer;
      EXPECT_EQ(choice.sparsity, again.sparsity) << layer;
    }
  }
  EXPECT_DOUBLE_EQ(first.chosen_ms, second.chosen_ms);
}

}  // namespace
}  // namespace cnnrt
