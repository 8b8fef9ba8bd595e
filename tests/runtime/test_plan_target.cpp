// BuildOptions::plan_target (issue 13): a CUDA engine built for a described device — no GPU
// touched, so these run on any machine with a CUDA build — plans like the device would, with
// its weights sized, and refuses to run.  The CLI side (zoo models, split-K by SM count, int8,
// usage errors) is tests/e2e/test_plan_target.py; the comparison with a GPU's own plan is
// scripts/plan_target_check.sh.
#include <gtest/gtest.h>

#include <string>

#include "cnnrt/cnnrt.h"
#include "graph/model_loader.h"
#include "graph/passes_sparsity.h"

namespace cnnrt {
namespace {

std::shared_ptr<Engine> alexnet_for(const std::string& target) {
  Graph graph = load_model(std::string(CNNRT_SOURCE_DIR) + "/models/alexnet.yaml");
  bind_random_weights(graph, 7);
  BuildOptions options;
  options.device = Device::CUDA;
  options.plan_target = target;
  return Engine::build(std::move(graph), options);
}

std::string kernels_of(const ExecutionPlan& plan) {
  std::string kernels;
  for (const PlannedStep& step : plan.steps) kernels += step.kernel + " " + step.variant + "\n";
  return kernels;
}

TEST(PlanTarget, CpuDeviceRefusesATarget) {
  Graph graph = load_model(std::string(CNNRT_SOURCE_DIR) + "/models/alexnet.yaml");
  bind_random_weights(graph, 7);
  BuildOptions options;
  options.device = Device::CPU;
  options.plan_target = "h100";
  EXPECT_THROW(Engine::build(std::move(graph), options), Error);
}

#ifdef CNNRT_WITH_CUDA

TEST(PlanTarget, H100PlansWgmmaAndSizesTheWeights) {
  const auto engine = alexnet_for("h100");
  EXPECT_EQ(engine->device(), Device::CUDA);
  // AlexNet's 61 M parameters in fp16 at least, though nothing was uploaded.
  EXPECT_GT(engine->weight_bytes(), size_t{61'000'000} * 2);
  const ExecutionPlan plan = engine->plan(64);
  // conv1-5, flatten, fc6-8: fc8 writes the fp32 output itself (no conversion step after it).
  ASSERT_EQ(plan.steps.size(), 9u);
  // conv2 (fused pool) and conv3 on the TMA conv (conv_fp16_tma: above wgmma).
  EXPECT_EQ(plan.steps[1].kernel, "conv_fp16_tma") << kernels_of(plan);
  EXPECT_EQ(plan.steps[2].kernel, "conv_fp16_tma") << kernels_of(plan);
  EXPECT_GT(plan.arena_bytes, 0u);
  EXPECT_THROW(engine->create_context(1), Error);
}

TEST(PlanTarget, A100PlansNoWgmmaAndTheSameWeightBytes) {
  const auto a100 = alexnet_for("a100");
  const std::string kernels = kernels_of(a100->plan(64));
  EXPECT_EQ(kernels.find("wgmma"), std::string::npos) << kernels;
  EXPECT_NE(kernels.find("conv_fp16_igemm"), std::string::npos) << kernels;
  // The conv families pack differently, so only the fully connected weights (58.6 M of the
  // 61 M parameters, one packing on every target) bound the difference.
  EXPECT_GT(a100->weight_bytes(), size_t{58'600'000} * 2);
}

TEST(PlanTarget, SplitKFollowsTheSmCount) {
  // Batch 1 leaves most SMs idle, so conv3 splits K to fill them: the split depends on the SM
  // count and nothing else (h100 and sm90:132 describe the same device).
  const std::string h100 = alexnet_for("h100")->plan(1).steps[2].variant;
  const std::string same = alexnet_for("sm90:132")->plan(1).steps[2].variant;
  const std::string fewer = alexnet_for("sm90:100")->plan(1).steps[2].variant;
  EXPECT_NE(h100.find("split-K"), std::string::npos) << h100;
  EXPECT_EQ(h100, same);
  EXPECT_NE(h100, fewer);
}

// AlexNet with conv2-conv5 pruned 2:4 and asked to run sparse: on an A100 and an L4 (no wgmma)
// the mma.sp sparse conv serves them (a 4-deep ring where a block gets 163 KB, 3 where it gets
// 99 KB; conv2 and conv5 with their pool staged), on an H100 the Hopper sparse entries stay the
// default.  Compresses the weights as a GPU build would, without a GPU.
std::shared_ptr<Engine> sparse_alexnet_for(const std::string& target) {
  Graph graph = load_model(std::string(CNNRT_SOURCE_DIR) + "/models/alexnet.yaml");
  bind_random_weights(graph, 7);
  BuildOptions options;
  options.device = Device::CUDA;
  options.plan_target = target;
  for (const char* layer : {"conv2", "conv3", "conv4", "conv5"}) {
    Node* node = graph.find(layer);
    if (node == nullptr) throw Error(std::string("no layer ") + layer);
    sparsity::prune_magnitude(node->find_param("weight")->value.data.data(),
                              sparsity::weight_shape_of(*node));
    options.layer_choices[layer].sparsity = "2:4";
  }
  return Engine::build(std::move(graph), options);
}

TEST(PlanTarget, SparseConvsOnMmaSpWithoutWgmma) {
  for (const char* target : {"a100", "l4"}) {
    const ExecutionPlan plan = sparse_alexnet_for(target)->plan(256);
    const std::string kernels = kernels_of(plan);
    const std::string ring = std::string(target) == "a100" ? "_s4" : "_s3";
    ASSERT_EQ(plan.steps.size(), 9u) << kernels;
    for (int step = 1; step <= 4; ++step) {  // conv2 .. conv5
      EXPECT_EQ(plan.steps[step].kernel, "conv_fp16_sparse24_mma") << target << "\n" << kernels;
      EXPECT_NE(plan.steps[step].variant.find("mma_sp_128x128x64" + ring), std::string::npos)
          << target << "\n"
          << kernels;
    }
    EXPECT_NE(plan.steps[1].variant.find("+maxpool"), std::string::npos) << kernels;  // conv2
    EXPECT_EQ(plan.steps[2].variant.find("+maxpool"), std::string::npos) << kernels;  // conv3
  }
  const std::string h100 = kernels_of(sparse_alexnet_for("h100")->plan(256));
  EXPECT_EQ(h100.find("conv_fp16_sparse24_mma"), std::string::npos) << h100;
  EXPECT_NE(h100.find("conv_fp16_sparse24_tma"), std::string::npos) << h100;
}

TEST(PlanTarget, BadTargetsAreErrors) {
  for (const char* target : {"h900", "sm90:0", "sm99:10", "sm90:", "90:132", "H100 "})
    EXPECT_THROW(alexnet_for(target), Error) << target;
}

#endif  // CNNRT_WITH_CUDA

}  // namespace
}  // namespace cnnrt
