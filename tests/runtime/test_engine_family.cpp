// EngineFamily (runtime/engine_family.h), on the CPU:
//  * an engine of the family is the engine Engine::build makes for the same choices: the same
//    steps and kernels, and bit-identical outputs on random inputs (all-fp32, one int8 layer,
//    the fp32 reference precision);
//  * kernels are shared: the first engine creates one kernel per layer, an engine that changes
//    one layer creates exactly one more, an engine already built creates none, and the layers
//    two engines choose alike run the same kernel object;
//  * a family made without a calibration refuses an int8 choice (other graph passes) with an
//    Error instead of building an engine on the wrong graph;
//  * prepared_once (kernel.h): within a family one preparation per layer and kind, shared by the
//    kernels that ask; outside a family every kernel prepares its own.
#include <gtest/gtest.h>

#include <random>

#include "graph/model_loader.h"
#include "random_test_util.h"
#include "runtime/calibration.h"
#include "runtime/engine_family.h"
#include "sample_inputs.h"

namespace cnnrt {
namespace {

const char* const kModel =
    "name: family_ops\ninput: {shape: [3, 10, 9]}\nlayers:\n"
    "  - {name: c1, op: conv, out_channels: 8, kernel: 3, padding: 1, weight: a, bias: b}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, out_channels: 8, kernel: 3, padding: 1, weight: c, bias: d}\n"
    "  - {name: sum, op: add, inputs: [c2, r1]}\n"
    "  - {name: p1, op: maxpool, kernel: 2, stride: 2}\n"
    "  - {name: flat, op: flatten}\n"
    "  - {name: fc, op: linear, out_features: 7, weight: f, bias: g}\n";
constexpr int kInputElements = 3 * 10 * 9;
constexpr int kBatch = 5;

class EngineFamilyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    graph_ = parse_model(kModel, "family_ops.yaml");
    bind_random_weights(graph_, 21);
    std::mt19937 rng(22);
    input_ = test::random_vector(size_t(kBatch) * kInputElements, rng, -1.0f, 1.0f);
    CalibrationSettings settings;
    settings.method = parse_calibration_method("minmax");
    calibration_ = std::make_shared<const Calibration>(
        calibrate(graph_, test::inputs_over(input_, kInputElements), settings));
    options_.device = Device::CPU;
    options_.calibration = calibration_;
  }

  std::vector<float> run(const Engine& engine) {
    auto context = engine.create_context(kBatch);
    std::vector<float> out(context->output_count());
    context->run(input_.data(), out.data());
    return out;
  }

  Graph graph_;
  std::vector<float> input_;
  std::shared_ptr<const Calibration> calibration_;
  BuildOptions options_;
};

TEST_F(EngineFamilyTest, EnginesEqualThoseEngineBuildMakes) {
  EngineFamily family(graph_, options_);
  const std::vector<std::map<std::string, LayerChoice>> cases = {
      {},
      {{"c2", LayerChoice{Precision::INT8, "", "test", ""}}},
      {{"c1", LayerChoice{Precision::INT8, "", "test", ""}},
       {"fc", LayerChoice{Precision::INT8, "", "test", ""}}},
  };
  for (const auto& choices : cases) {
    BuildOptions options = options_;
    options.layer_choices = choices;
    const auto alone = Engine::build(graph_, options);
    const auto member = family.build(choices);
    EXPECT_EQ(member->describe(), alone->describe());
    EXPECT_EQ(run(*member), run(*alone));  // bit for bit
  }
  BuildOptions fp32 = options_;
  fp32.precision = Precision::FP32;
  EXPECT_EQ(run(*family.build({}, Precision::FP32)), run(*Engine::build(graph_, fp32)));
}

TEST_F(EngineFamilyTest, KernelsAreCreatedOncePerLayerAndKernel) {
  EngineFamily family(graph_, options_);
  const auto base = family.build({});
  int layers = 0;
  for (const Step& step : base->impl().steps) layers += !step.is_conversion();
  EXPECT_GT(layers, 3);
  EXPECT_EQ(family.kernels_created(), layers);

  const auto changed = family.build({{"c2", LayerChoice{Precision::INT8, "", "test", ""}}});
  EXPECT_EQ(family.kernels_created(), layers + 1);
  family.build({});
  family.build({{"c2", LayerChoice{Precision::INT8, "", "test", ""}}});
  EXPECT_EQ(family.kernels_created(), layers + 1);
  EXPECT_EQ(family.engines_built(), 4);

  // Same layer, same kernel: the same object (its packed weights are not made twice).
  auto kernel_of = [](const Engine& engine, const std::string& layer) {
    for (const Step& step : engine.impl().steps)
      if (step.name == layer) return step.kernel.get();
    return static_cast<LayerKernel*>(nullptr);
  };
  for (const char* layer : {"c1", "c2", "fc"}) {
    ASSERT_NE(kernel_of(*base, layer), nullptr) << layer;
    ASSERT_NE(kernel_of(*changed, layer), nullptr) << layer;
  }
  EXPECT_EQ(kernel_of(*base, "c1"), kernel_of(*changed, "c1"));
  EXPECT_EQ(kernel_of(*base, "fc"), kernel_of(*changed, "fc"));
  EXPECT_NE(kernel_of(*base, "c2"), kernel_of(*changed, "c2"));
  // The fused graph is shared, not copied.
  EXPECT_EQ(base->impl().graph.get(), changed->impl().graph.get());
}

TEST_F(EngineFamilyTest, AFamilyWithoutCalibrationRefusesInt8Choices) {
  BuildOptions options = options_;
  options.calibration = nullptr;
  EngineFamily family(graph_, options);
  EXPECT_NO_THROW(family.build({}));
  // Refused by the family's own check (other passes), before any kernel is asked.
  try {
    family.build({{"c2", LayerChoice{Precision::INT8, "", "test", ""}}});
    FAIL() << "an int8 choice built in a family made without a calibration";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("engine family"), std::string::npos) << error.what();
  }
}

TEST(PreparedOnce, OncePerLayerAndKindWithinAFamilyEveryTimeOutside) {
  Graph graph = parse_model(kModel, "family_ops.yaml");
  int made = 0;
  const std::function<std::shared_ptr<const int>()> make = [&made] {
    return std::make_shared<const int>(++made);
  };
  const KernelBuildContext alone{graph.nodes[0], graph, nullptr};
  EXPECT_EQ(*prepared_once<int>(alone, "weights", make), 1);
  EXPECT_EQ(*prepared_once<int>(alone, "weights", make), 2);
  SharedPreparations shared;
  const KernelBuildContext first{graph.nodes[0], graph, nullptr, &shared};
  const std::shared_ptr<const int> a = prepared_once<int>(first, "weights", make);
  const std::shared_ptr<const int> b = prepared_once<int>(first, "weights", make);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(made, 3);
  EXPECT_EQ(*prepared_once<int>(first, "other", make), 4);  // another kind
  const KernelBuildContext second{graph.nodes[2], graph, nullptr, &shared};
  EXPECT_EQ(*prepared_once<int>(second, "weights", make), 5);  // another layer
  EXPECT_EQ(*prepared_once<int>(first, "weights", make), 3);   // still the first one's
}

}  // namespace
}  // namespace cnnrt
