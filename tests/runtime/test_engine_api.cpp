// The application-facing API on the CPU backend: runs with checked sizes, run_async on host
// memory, Engine::load taking the YAML's own weight file, Engine::plan without a context, and
// per-layer choices reported in the plan.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "cnnrt/cnnrt.h"
#include "graph/model_loader.h"
#include "graph/safetensors.h"
#include "random_test_util.h"

namespace cnnrt {
namespace {

const char* kTinyYaml =
    "name: tiny\ninput: {shape: [3, 9, 9]}\nweights: tiny.safetensors\nlayers:\n"
    "  - {name: c1, op: conv, out_channels: 4, kernel: 3, padding: 1, weight: c1.w, bias: c1.b}\n"
    "  - {name: r1, op: relu}\n  - {name: p1, op: maxpool, kernel: 2}\n"
    "  - {name: flat, op: flatten}\n"
    "  - {name: fc, op: linear, out_features: 5, weight: fc.w, bias: fc.b}\n";

std::shared_ptr<Engine> tiny_engine() {
  Graph graph = parse_model(kTinyYaml, "tiny.yaml");
  bind_random_weights(graph, 4);
  BuildOptions options;
  options.device = Device::CPU;
  return Engine::build(graph, options);
}

TEST(EngineApi, RunWithSizesChecksThemAgainstTheModel) {
  auto engine = tiny_engine();
  auto context = engine->create_context(2);
  EXPECT_EQ(context->input_count(), 2u * 3 * 9 * 9);
  EXPECT_EQ(context->output_count(), 2u * 5);
  std::mt19937 rng(1);
  const auto input = test::random_vector(context->input_count(), rng);
  std::vector<float> plain(context->output_count()), sized(context->output_count());
  context->run(input.data(), plain.data());
  context->run(input.data(), input.size(), sized.data(), sized.size());
  EXPECT_EQ(plain, sized);
  try {
    context->run(input.data(), input.size() - 1, sized.data(), sized.size());
    FAIL() << "a short input buffer was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("486"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("485"), std::string::npos) << error.what();
  }
  EXPECT_THROW(context->run(input.data(), input.size(), sized.data(), 11), Error);
}

// warm_up_device never throws, runs once, and an engine built after it (on the device the
// warm-up chose: CUDA where there is one) computes what one built without it does.
TEST(EngineApi, WarmUpThenBuildGivesTheSameEngine) {
  Graph graph = parse_model(kTinyYaml, "tiny.yaml");
  bind_random_weights(graph, 4);
  BuildOptions options;  // Device::Auto
  std::mt19937 rng(3);
  const auto input = test::random_vector(2 * 3 * 9 * 9, rng);
  std::vector<float> before(2 * 5), after(2 * 5);
  Engine::build(graph, options)->create_context(2)->run(input.data(), before.data());
  for (Device device : {Device::CPU, Device::Auto, Device::CUDA}) {
    EXPECT_NO_THROW(warm_up_device(device));
    EXPECT_NO_THROW(warm_up_device(device));  // once started, a no-op
  }
  Engine::build(graph, options)->create_context(2)->run(input.data(), after.data());
  EXPECT_EQ(before, after);
}

TEST(EngineApi, RunAsyncOnTheCpuIsTheSynchronousRun) {
  auto engine = tiny_engine();
  auto context = engine->create_context(3);
  std::mt19937 rng(2);
  const auto input = test::random_vector(context->input_count(), rng);
  std::vector<float> sync(context->output_count()), async(context->output_count());
  context->run(input.data(), sync.data());
  context->run_async(input.data(), async.data(), nullptr);
  EXPECT_EQ(sync, async);
  EXPECT_THROW(context->run_async(nullptr, async.data(), nullptr), Error);
}

TEST(EngineApi, ContextOutlivesItsEngine) {
  auto engine = tiny_engine();
  auto context = engine->create_context(1);
  std::mt19937 rng(3);
  const auto input = test::random_vector(context->input_count(), rng);
  std::vector<float> before(context->output_count()), after(context->output_count());
  context->run(input.data(), before.data());
  engine.reset();  // the context shares ownership of what it runs
  context->run(input.data(), after.data());
  EXPECT_EQ(before, after);
}

TEST(EngineApi, LoadUsesTheWeightFileTheModelNames) {
  const auto folder = std::filesystem::temp_directory_path() / "cnnrt_engine_api_load";
  std::filesystem::create_directories(folder);
  const std::string yaml = (folder / "tiny.yaml").string();
  std::ofstream(yaml) << kTinyYaml;
  Graph graph = load_model(yaml);
  write_safetensors((folder / "tiny.safetensors").string(), init_weights(graph, 9));
  BuildOptions options;
  options.device = Device::CPU;
  auto engine = Engine::load(yaml, "", options);
  EXPECT_EQ(engine->model().name, "tiny");
  // A model that names no weight file needs one given.
  std::string no_weights = kTinyYaml;
  no_weights.erase(no_weights.find("weights: tiny.safetensors\n"), 26);
  std::ofstream((folder / "bare.yaml").string()) << no_weights;
  EXPECT_THROW(Engine::load((folder / "bare.yaml").string(), "", options), Error);
  std::filesystem::remove_all(folder);
}

TEST(EngineApi, PlanNamesEveryStepAndTensorWithTypes) {
  auto engine = tiny_engine();
  const ExecutionPlan plan = engine->plan(4);
  EXPECT_EQ(plan.batch, 4);
  ASSERT_EQ(plan.steps.size(), 3u);  // c1+r1+p1, flat, fc
  EXPECT_EQ(plan.steps[0].kernel, "cpu_ref_conv");
  EXPECT_EQ(plan.steps[0].sources, (std::vector<std::string>{"c1", "r1", "p1"}));
  EXPECT_EQ(plan.steps[0].output_type, "fp32 NCHW");
  EXPECT_GT(plan.steps[0].workspace_bytes, 0u);  // the pre-pool tensor
  EXPECT_TRUE(plan.steps[1].in_place);           // the flatten is a view
  EXPECT_GE(plan.arena_bytes, plan.lower_bound_bytes);
  for (const auto& tensor : plan.tensors)
    EXPECT_LE(tensor.offset + tensor.bytes, plan.arena_bytes) << tensor.name;
  EXPECT_NE(plan.to_table().find("cpu_ref_linear"), std::string::npos);
  EXPECT_NE(plan.to_json().find("\"in_place\": true"), std::string::npos);
  EXPECT_THROW(engine->plan(0), Error);
}

TEST(EngineApi, PlanFileChoicesReachTheEngine) {
  const auto path = std::filesystem::temp_directory_path() / "cnnrt_engine_api_plan.yaml";
  std::ofstream(path.string()) << "model: tiny\nlayers:\n  r1: {precision: fp32}\n"
                                  "  fc: {kernel: cpu_ref_linear}\n";
  const auto choices = load_plan_file(path.string());
  ASSERT_EQ(choices.size(), 2u);
  EXPECT_EQ(choices.at("r1").precision, Precision::FP32);
  EXPECT_EQ(choices.at("fc").kernel, "cpu_ref_linear");
  EXPECT_NE(choices.at("fc").origin.find(":4:3"), std::string::npos) << choices.at("fc").origin;
  Graph graph = parse_model(kTinyYaml, "tiny.yaml");
  bind_random_weights(graph, 4);
  BuildOptions options;
  options.device = Device::CPU;
  options.layer_choices = choices;
  EXPECT_EQ(Engine::build(graph, options)->plan(1).steps.back().kernel, "cpu_ref_linear");
  options.layer_choices["fc"].kernel = "cpu_ref_conv";  // another op's kernel
  try {
    Engine::build(graph, options);
    FAIL() << "a conv kernel was accepted for a linear layer";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("layer 'fc'"), std::string::npos) << message;
    EXPECT_NE(message.find("cpu_ref_linear (fp32)"), std::string::npos) << message;
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace cnnrt
