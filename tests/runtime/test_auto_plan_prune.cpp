// `--allow-prune 2:4` in the automatic plan (runtime/auto_plan_prune.h), on the CPU with stub
// timings in which the sparse conv kernel is faster than the dense one and the sparse linear
// slower:
//  * every conv / linear whose weight is not 2:4 gets its sparse kernels as pruned candidates
//    (none without the option, none for a weight that is 2:4 already), marked in explain / JSON;
//  * a loose budget prunes the convs (faster) and not the linear (slower); the plan's error,
//    recomputed here from an engine on planned_model()'s weights, is the measured one, and
//    planned_model() differs from the model exactly in the pruned layers, which are 2:4 and
//    equal to the project's magnitude pruning of the original weights;
//  * a tiny budget prunes nothing: the plan, its hash and its weights are the model's;
//  * a second build through the timing cache times nothing and chooses the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "auto_plan_prune_util.h"
#include "graph/atomic_write.h"
#include "graph/model_loader.h"
#include "graph/passes_prune.h"
#include "graph/passes_sparsity.h"
#include "random_test_util.h"
#include "runtime/auto_plan.h"
#include "runtime/engine_impl.h"
#include "runtime/plan_file.h"

namespace cnnrt {
namespace {

const char* const kModel = test::kPruneModel;
constexpr int kInputElements = test::kPruneModelInputElements;
using test::SparseConvFaster;

class AutoPlanPrune : public ::testing::Test {
 protected:
  void SetUp() override {
    graph_ = parse_model(kModel, "prune_ops.yaml");
    bind_random_weights(graph_, 3);
    std::mt19937 rng(5);
    held_out_ = test::random_vector(size_t(12) * kInputElements, rng, 0.0f, 1.0f);
    dir_ = std::filesystem::temp_directory_path() /
           ("cnnrt_auto_plan_prune_" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  CalibrationInputs inputs() const {
    CalibrationInputs in;
    in.samples = static_cast<int>(held_out_.size() / kInputElements);
    in.load = [this](int first, int count, float* out) {
      std::copy_n(held_out_.begin() + int64_t(first) * kInputElements,
                  int64_t(count) * kInputElements, out);
    };
    return in;
  }

  AutoPlan plan(const std::string& budget, bool allow_prune, TimingSource& timing,
                TimingCache* cache = nullptr, const Graph* graph = nullptr) {
    AutoPlanSettings settings;
    settings.device = Device::CPU;
    settings.batch = 4;
    settings.budget = parse_budget(budget);
    settings.precisions = {Precision::FP32};
    settings.allow_prune_2_4 = allow_prune;
    settings.timing = &timing;
    settings.cache = cache;
    return auto_plan(graph != nullptr ? *graph : graph_, inputs(), settings);
  }

  std::vector<float> run(const Graph& graph, const BuildOptions& options) {
    auto engine = Engine::build(graph, options);
    auto context = engine->create_context(static_cast<int>(held_out_.size() / kInputElements));
    std::vector<float> out(context->output_count());
    context->run(held_out_.data(), out.data());
    return out;
  }

  // rel L2 of the plan's engine (on planned_model's weights) against the dense model in fp32,
  // computed here, not by the chooser.
  double independent_rel_l2(const AutoPlan& p) {
    BuildOptions reference;
    reference.device = Device::CPU;
    BuildOptions chosen = reference;
    chosen.layer_choices = p.choices();
    chosen.choices_fingerprint = p.fingerprint;  // the planned weights must be what it hashes
    const std::vector<float> r = run(graph_, reference), y = run(planned_model(graph_, p), chosen);
    double err = 0, ref = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      err += (double(y[i]) - r[i]) * (double(y[i]) - r[i]);
      ref += double(r[i]) * r[i];
    }
    return std::sqrt(err / ref);
  }

  static const HostVector<float>& weight_of(const Graph& graph, const std::string& layer) {
    return graph.find(layer)->find_param("weight")->value.data;
  }

  Graph graph_;
  std::vector<float> held_out_;
  std::filesystem::path dir_;
};

const Candidate* find_pruned(const LayerCandidates& layer) {
  for (const Candidate& c : layer.candidates)
    if (c.pruned) return &c;
  return nullptr;
}

TEST_F(AutoPlanPrune, EveryConvAndLinearGetsPrunedSparseCandidatesOnlyWhenAllowed) {
  SparseConvFaster timing;
  const AutoPlan without = plan("none", false, timing);
  for (const LayerCandidates& l : without.layers) {
    EXPECT_EQ(find_pruned(l), nullptr) << l.layer;
    for (const Candidate& c : l.candidates)  // dense weights: no sparse kernel at all
      EXPECT_EQ(c.kernel.find("sparse"), std::string::npos) << l.layer << " " << c.kernel;
  }
  EXPECT_TRUE(without.pruned_layers().empty());

  const AutoPlan with = plan("none", true, timing);
  std::vector<std::string> offered;
  for (const LayerCandidates& l : with.layers)
    if (const Candidate* c = find_pruned(l)) {
      offered.push_back(l.layer);
      EXPECT_TRUE(c->applicable) << c->why_not;
      EXPECT_TRUE(c->has_error);
      EXPECT_GT(c->error, 0) << l.layer << ": pruning random weights changes the output";
      EXPECT_EQ(c->label(), c->kernel + " (pruned 2:4)");
      EXPECT_EQ(c->choice().sparsity, "2:4");
    }
  EXPECT_EQ(offered, (std::vector<std::string>{"c1", "c2", "fc"}));
  const std::string explain = with.explain();
  EXPECT_NE(explain.find("cpu_sparse24_conv (pruned 2:4)"), std::string::npos) << explain;
  EXPECT_NE(explain.find("cpu_sparse24_linear (pruned 2:4)"), std::string::npos) << explain;
  const std::string json = with.to_json();
  EXPECT_NE(json.find("\"pruned\": \"2:4\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"pruned_layers\""), std::string::npos) << json;

  // A weight that is 2:4 already: its sparse kernels are ordinary candidates, nothing to prune.
  Graph sparse = graph_;
  prune_2_4(sparse, {"c2"});
  const AutoPlan on_sparse = plan("none", true, timing, nullptr, &sparse);
  for (const LayerCandidates& l : on_sparse.layers) {
    if (l.layer != "c2") continue;
    EXPECT_EQ(find_pruned(l), nullptr);
    EXPECT_TRUE(std::any_of(l.candidates.begin(), l.candidates.end(),
                            [](const Candidate& c) { return c.kernel == "cpu_sparse24_conv"; }));
  }
}

TEST_F(AutoPlanPrune, ALooseBudgetPrunesTheFasterLayersAndTheirWeightsAreThePlans) {
  SparseConvFaster timing;
  const AutoPlan loose = plan("rel_l2=10", true, timing);
  ASSERT_TRUE(loose.choice.met) << loose.explain();
  EXPECT_EQ(loose.pruned_layers(), (std::vector<std::string>{"c1", "c2"})) << loose.explain();
  for (const LayerCandidates& l : loose.layers) {
    const Candidate& chosen = l.candidates[l.chosen];
    if (l.layer == "fc") {
      EXPECT_FALSE(chosen.pruned);
      EXPECT_EQ(find_pruned(l)->verdict, "slower");
    } else if (l.layer == "c1" || l.layer == "c2") {
      EXPECT_TRUE(chosen.pruned);
      EXPECT_EQ(chosen.kernel, "cpu_sparse24_conv");
      EXPECT_EQ(chosen.verdict, "chosen");
    }
  }
  EXPECT_LT(loose.chosen_ms, loose.baseline_ms);
  EXPECT_EQ(loose.choices().at("c1").sparsity, "2:4");
  EXPECT_EQ(loose.choices().at("fc").sparsity, "");
  EXPECT_NE(loose.explain().find("pruned 2:4 (magnitude): c1, c2"), std::string::npos);

  // The weights the plan runs on: 2:4 exactly on c1 and c2 (the project's magnitude pruning of
  // the original weights), everything else as it was; the plan's hash is theirs.
  const Graph planned = planned_model(graph_, loose);
  EXPECT_EQ(loose.fingerprint, model_fingerprint(planned));
  EXPECT_NE(loose.fingerprint, model_fingerprint(graph_));
  for (const Node& node : graph_.nodes)
    for (const Param& param : node.params) {
      const HostVector<float>& now = planned.find(node.name)->find_param(param.role)->value.data;
      if ((node.name == "c1" || node.name == "c2") && param.role == "weight") {
        HostVector<float> expected = param.value.data;
        sparsity::prune_magnitude(expected.data(), sparsity::weight_shape_of(node));
        EXPECT_EQ(now, expected) << node.name;
        EXPECT_NE(now, param.value.data) << node.name << ": pruning changed nothing";
        EXPECT_EQ(sparsity::first_violation(now.data(), sparsity::weight_shape_of(node)), "");
      } else {
        EXPECT_EQ(now, param.value.data) << node.name << "." << param.role;
      }
    }
  EXPECT_FALSE(sparsity::first_violation(weight_of(planned, "fc").data(),
                                         sparsity::weight_shape_of(*planned.find("fc")))
                   .empty());
  // The measured error is what the plan's engine on those weights computes; it includes the
  // pruning (the dense fp32 kernels alone would be exact).
  const double error = independent_rel_l2(loose);
  EXPECT_GT(error, 0);
  EXPECT_NEAR(error, loose.choice.error, 1e-6);

  // The plan refuses the dense weights it was not made for (the model_hash check).
  BuildOptions stale;
  stale.device = Device::CPU;
  stale.layer_choices = loose.choices();
  stale.choices_fingerprint = loose.fingerprint;
  EXPECT_THROW(Engine::build(graph_, stale), Error);
}

TEST_F(AutoPlanPrune, ATinyBudgetPrunesNothingAndThePlanIsTheModels) {
  SparseConvFaster timing;
  const AutoPlan tight = plan("rel_l2=1e-9", true, timing);
  ASSERT_TRUE(tight.choice.met) << tight.explain();
  EXPECT_TRUE(tight.pruned_layers().empty()) << tight.explain();
  EXPECT_EQ(tight.fingerprint, model_fingerprint(graph_));
  for (const LayerCandidates& l : tight.layers) {
    EXPECT_FALSE(l.candidates[l.chosen].pruned) << l.layer;
    if (const Candidate* c = find_pruned(l)) EXPECT_EQ(c->verdict, "over budget alone") << l.layer;
  }
  for (const auto& [layer, choice] : tight.choices()) EXPECT_EQ(choice.sparsity, "") << layer;
  EXPECT_EQ(model_fingerprint(planned_model(graph_, tight)), model_fingerprint(graph_));
  EXPECT_EQ(tight.explain().find("pruned 2:4 (magnitude)"), std::string::npos);
}

TEST_F(AutoPlanPrune, ASecondBuildThroughTheTimingCacheTimesNothingAndChoosesTheSame) {
  const std::string path = (dir_ / "timing.json").string();
  SparseConvFaster first_timing;
  TimingCache first_cache(path);
  const AutoPlan first = plan("rel_l2=10", true, first_timing, &first_cache);
  EXPECT_GT(first_timing.calls, 0);
  SparseConvFaster second_timing;
  TimingCache second_cache(path);
  const AutoPlan second = plan("rel_l2=10", true, second_timing, &second_cache);
  EXPECT_EQ(second_timing.calls, 0);
  EXPECT_EQ(second.reference_runs, 0);
  EXPECT_EQ(second.choice.chosen, first.choice.chosen);
  EXPECT_EQ(second.pruned_layers(), first.pruned_layers());
  EXPECT_EQ(second.choice.error, first.choice.error);
  EXPECT_EQ(second.fingerprint, first.fingerprint);
  // Every candidate's error comes back from the cache (the pruned ones under their own keys).
  for (size_t l = 0; l < first.layers.size(); ++l)
    for (size_t i = 0; i < first.layers[l].candidates.size(); ++i)
      EXPECT_EQ(second.layers[l].candidates[i].agreement.rel_l2,
                first.layers[l].candidates[i].agreement.rel_l2);
  // Without the option the same cache serves a plan with no pruning at all.
  const AutoPlan plain = plan("rel_l2=10", false, second_timing, &second_cache);
  EXPECT_TRUE(plain.pruned_layers().empty());
  EXPECT_EQ(plain.fingerprint, model_fingerprint(graph_));
}

TEST_F(AutoPlanPrune, PlanFilesCarryTheirWeightFile) {
  PlanFile file;
  file.model = graph_.name;
  file.layers["c1"] = LayerChoice{Precision::FP32, "cpu_sparse24_conv", "", "2:4"};
  file.weights = "plan.yaml.weights.safetensors";
  const std::string path = (dir_ / "plan.yaml").string();
  write_text_file(path, plan_file_text(file));
  const PlanFile back = read_plan_file(path);
  EXPECT_EQ(back.weights, file.weights);
  EXPECT_EQ(back.weights_path, (dir_ / file.weights).string());
  EXPECT_EQ(back.layers.at("c1").sparsity, "2:4");
  BuildOptions options;
  apply_plan_file(path, options);
  EXPECT_EQ(options.choices_weights, back.weights_path);
  write_text_file(path, "weights: \"\"\nlayers:\n  c1: {precision: fp32}\n");
  EXPECT_THROW(read_plan_file(path), Error);
}

}  // namespace
}  // namespace cnnrt
