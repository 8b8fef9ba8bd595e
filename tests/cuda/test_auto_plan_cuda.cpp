// The automatic plan's measuring side on the GPU (runtime/auto_plan_measure.cpp), with the
// real timing source:
//  * a context's first_run() reports the forward it ran at creation: one positive time per
//    step, nothing run again;
//  * the int8 candidates of a layer share one held-out measurement (every int8 kernel equals
//    the integer reference bit for bit): here each one's error is recomputed from an engine of
//    its own and must equal the shared figure exactly;
//  * the plan meets its budget and its engine builds from the choices;
//  * a family's linear kernels share their prepared weights (the int8 entries one quantised
//    upload, the fp16 ones one packing: kernel.h, prepared_once) and each still computes what an
//    engine of its own computes, bit for bit, whichever entry prepared them.
#include <gtest/gtest.h>

#include <random>

#include "graph/model_loader.h"
#include "random_test_util.h"
#include "runtime/accuracy.h"
#include "runtime/auto_plan.h"
#include "runtime/cuda/device_info.h"
#include "runtime/engine_family.h"
#include "runtime/engine_impl.h"
#include "sample_inputs.h"

namespace cnnrt {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!cuda::cuda_device_present()) GTEST_SKIP() << "no CUDA device"

const char* const kModel = R"(name: auto_gpu
input: {shape: [3, 20, 20]}
layers:
  - {name: c1, op: conv, out_channels: 64, kernel: 3, padding: 1, weight: a, bias: b}
  - {name: r1, op: relu}
  - {name: p1, op: maxpool, kernel: 2, stride: 2}
  - {name: c2, op: conv, out_channels: 64, kernel: 3, padding: 1, weight: c, bias: d}
  - {name: r2, op: relu}
  - {name: flat, op: flatten}
  - {name: fc, op: linear, out_features: 10, weight: e, bias: f}
)";
constexpr int kInputElements = 3 * 20 * 20;

class AutoPlanCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    graph_ = parse_model(kModel, "auto_gpu.yaml");
    bind_random_weights(graph_, 41);
    std::mt19937 rng(42);
    data_ = test::random_vector(size_t(24) * kInputElements, rng, -1.0f, 1.0f);
  }
  CalibrationInputs inputs(int first, int count) const {
    return test::inputs_over(data_, kInputElements, first, count);
  }
  Graph graph_;
  std::vector<float> data_;
};

TEST_F(AutoPlanCuda, FirstRunReportsTheCreationForward) {
  SKIP_WITHOUT_GPU();
  BuildOptions options;
  options.device = Device::CUDA;
  const auto engine = Engine::build(graph_, options);
  const auto context = engine->impl().backend->create_context(engine->shared_impl(), 8, {});
  const std::vector<LayerProfile> rows = context->first_run();
  ASSERT_EQ(rows.size(), engine->impl().steps.size());
  for (const LayerProfile& row : rows) EXPECT_GT(row.median_ms, 0) << row.name;
  const std::vector<LayerProfile> again = context->profile(3);
  ASSERT_EQ(again.size(), rows.size());
}

TEST_F(AutoPlanCuda, Int8CandidatesShareOneHeldOutRunAndAgreeExactly) {
  SKIP_WITHOUT_GPU();
  CalibrationSettings calibrate_settings;
  calibrate_settings.method = parse_calibration_method("minmax");
  calibrate_settings.device = Device::CUDA;
  const auto calibration =
      std::make_shared<const Calibration>(calibrate(graph_, inputs(0, 12), calibrate_settings));
  const auto timing = profile_timing(3);
  AutoPlanSettings settings;
  settings.device = Device::CUDA;
  settings.batch = 16;
  settings.budget = parse_budget("rel_l2=0.5");
  settings.calibration = calibration;
  settings.timing = timing.get();
  settings.eval_batch = 12;
  const CalibrationInputs held_out = inputs(12, 12);
  const AutoPlan plan = auto_plan(graph_, held_out, settings);
  ASSERT_TRUE(plan.choice.met) << plan.explain();

  // The fp32 reference and one engine per assignment, computed here without the chooser.
  BuildOptions reference_options;
  reference_options.device = Device::CUDA;
  reference_options.precision = Precision::FP32;
  reference_options.calibration = calibration;
  const std::vector<float> reference =
      run_over_inputs(*Engine::build(graph_, reference_options), held_out, 12, 12);
  auto rel_l2_of = [&](const std::map<std::string, LayerChoice>& choices) {
    BuildOptions options;
    options.device = Device::CUDA;
    options.calibration = calibration;
    options.layer_choices = choices;
    const std::vector<float> out =
        run_over_inputs(*Engine::build(graph_, options), held_out, 12, 12);
    AgreementAccumulator accumulator(static_cast<int64_t>(out.size() / 12), false);
    accumulator.add(reference.data(), out.data(), 12);
    return accumulator.result().rel_l2;
  };

  int int8_beyond_first = 0;
  for (const LayerCandidates& layer : plan.layers) {
    const Candidate* first_int8 = nullptr;
    for (const Candidate& c : layer.candidates) {
      if (!c.applicable) continue;
      if (c.precision != Precision::INT8) continue;
      if (first_int8 == nullptr) {
        first_int8 = &c;
        EXPECT_FALSE(c.error_shared) << layer.layer << " " << c.kernel;
        continue;
      }
      ++int8_beyond_first;
      EXPECT_TRUE(c.error_shared) << layer.layer << " " << c.kernel;  // no held-out run of its own
      // Its own engine gives exactly the shared figure.
      EXPECT_EQ(rel_l2_of({{layer.layer, c.choice()}}), c.agreement.rel_l2)
          << layer.layer << " " << c.kernel;
    }
  }
  ASSERT_GT(int8_beyond_first, 0) << plan.explain();  // the model has several int8 kernels a layer
  EXPECT_NEAR(rel_l2_of(plan.choices()), plan.choice.agreement.rel_l2, 1e-12);
}

TEST_F(AutoPlanCuda, FamilyLinearKernelsSharePreparedWeightsAndEqualTheirOwnEngines) {
  SKIP_WITHOUT_GPU();
  CalibrationSettings calibrate_settings;
  calibrate_settings.method = parse_calibration_method("minmax");
  calibrate_settings.device = Device::CUDA;
  BuildOptions options;
  options.device = Device::CUDA;
  options.calibration =
      std::make_shared<const Calibration>(calibrate(graph_, inputs(0, 12), calibrate_settings));
  EngineFamily family(graph_, options);
  const CalibrationInputs batch = inputs(12, 8);
  // The GEMV entries first, then the others: each later one reuses what the first prepared.
  for (const char* kernel :
       {"linear_int8_gemv", "linear_int8", "linear_int8_gemm", "linear_int8_cublaslt",
        "linear_fp16_gemv", "linear_fp16", "linear_fp16_cublaslt"}) {
    const Precision precision =
        std::string(kernel).find("int8") != std::string::npos ? Precision::INT8 : Precision::FP16;
    std::map<std::string, LayerChoice> choices;
    choices["fc"] = LayerChoice{precision, kernel, "", ""};
    BuildOptions own = options;
    own.layer_choices = choices;
    const std::shared_ptr<Engine> in_family = family.build(choices);
    const std::vector<float> shared = run_over_inputs(*in_family, batch, 8, 8);
    const std::vector<float> alone = run_over_inputs(*Engine::build(graph_, own), batch, 8, 8);
    EXPECT_EQ(shared, alone) << kernel;
    for (const Step& step : in_family->impl().steps)
      if (step.name == "fc") EXPECT_EQ(step.kernel_name, kernel);
  }
}

}  // namespace
}  // namespace cnnrt
