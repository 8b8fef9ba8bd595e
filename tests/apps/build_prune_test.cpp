// `cnnrt build --precision auto --allow-prune 2:4` end to end, in process (cnnrt_main), on the
// CPU.  The CLI times with the real profiler; the stub times (a sparse conv faster than the dense
// one, a sparse linear slower) reach it through its --timing-cache, filled first by the library
// with the same settings, so the build profiles nothing (checked: engines_timed 0).
//  * a loose budget: the convs are pruned, the linear is not; the weight file next to the plan
//    holds every tensor, 2:4 exactly on the pruned layers (the project's magnitude pruning) and
//    identical elsewhere; the plan names it and hashes it; `cnnrt run --plan` alone runs on it
//    with the build's measured error, and the dense weights are refused as a stale plan;
//  * a tiny budget: nothing pruned, no weight file, the same plan as without the option;
//  * `--allow-prune` other than 2:4, or without --precision auto: a usage error, nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "apps/cli_test_util.h"
#include "apps/common/npy.h"
#include "auto_plan_prune_util.h"
#include "graph/model_loader.h"
#include "graph/passes_sparsity.h"
#include "graph/safetensors.h"
#include "random_test_util.h"
#include "runtime/plan_file.h"

namespace cnnrt::apps {
namespace {

namespace fs = std::filesystem;
constexpr int kSamples = 6;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

double rel_l2(const HostVector<float>& y, const HostVector<float>& reference) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    err += (double(y[i]) - reference[i]) * (double(y[i]) - reference[i]);
    ref += double(reference[i]) * reference[i];
  }
  return std::sqrt(err / ref);
}

class BuildAllowPrune : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() / ("cnnrt_build_prune_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
    model_ = path("model.yaml");
    std::ofstream(model_) << cnnrt::test::kPruneModel;
    dense_ = load_model(model_);
    bind_random_weights(dense_, 3);
    std::map<std::string, HostTensor> tensors;
    for (const Node& node : dense_.nodes)
      for (const Param& param : node.params) tensors[param.key] = param.value;
    weights_ = path("dense.safetensors");
    write_safetensors(weights_, tensors);
    std::mt19937 rng(9);
    inputs_ = cnnrt::test::random_vector(size_t(kSamples) * cnnrt::test::kPruneModelInputElements,
                                         rng, 0.0f, 1.0f);
    write_npy(path("x.npy"), {kSamples, 8, 9, 9}, inputs_);
    fill_timing_cache();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // The library with the CLI's settings for `build_args` (CPU, batch 2, fp32 candidates, every
  // input held out, evaluation batch 2) and the stub times: every step the CLI's engines run is
  // then in the cache.
  void fill_timing_cache() {
    Graph graph = load_model(model_);
    load_weights(graph, weights_);
    cnnrt::test::SparseConvFaster timing;
    TimingCache cache(path("timing.json"));
    AutoPlanSettings settings;
    settings.device = Device::CPU;
    settings.batch = 2;
    settings.budget = parse_budget("none");
    settings.precisions = {Precision::FP32};
    settings.allow_prune_2_4 = true;
    settings.eval_batch = 2;
    settings.timing = &timing;
    settings.cache = &cache;
    CalibrationInputs inputs;
    inputs.samples = kSamples;
    inputs.load = [this](int first, int count, float* out) {
      const int64_t per = cnnrt::test::kPruneModelInputElements;
      std::copy_n(inputs_.begin() + first * per, count * per, out);
    };
    auto_plan(graph, inputs, settings);
  }

  std::vector<std::string> build_args(const std::string& budget, const std::string& output) {
    return {"build",
            model_,
            "--weights",
            weights_,
            "--device",
            "cpu",
            "--precision",
            "auto",
            "--precisions",
            "fp32",
            "--batch",
            "2",
            "--input",
            path("x.npy"),
            "--timing-cache",
            path("timing.json"),
            "--budget",
            budget,
            "-o",
            path(output)};
  }

  // `cnnrt run MODEL --device cpu --input x.npy --output OUTPUT ARGS...`.
  Outcome run(const std::string& output, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"run",     model_,        "--device", "cpu",
                                     "--input", path("x.npy"), "--output", path(output)};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cnnrt(args);
  }

  fs::path dir_;
  std::string model_, weights_;
  Graph dense_;
  std::vector<float> inputs_;
};

TEST_F(BuildAllowPrune, ALooseBudgetWritesThePrunedWeightsThePlanRunsOn) {
  std::vector<std::string> args = build_args("rel_l2=10", "plan.yaml");
  args.insert(args.end(), {"--allow-prune", "2:4", "--json", path("report.json"), "--explain"});
  const Outcome build = run_cnnrt(args);
  ASSERT_EQ(build.code, kExitSuccess) << build.err;
  EXPECT_NE(build.out.find("cpu_sparse24_conv (pruned 2:4)"), std::string::npos) << build.out;
  EXPECT_NE(build.out.find("pruned 2:4 (magnitude): c1, c2"), std::string::npos) << build.out;

  const nlohmann::json report = nlohmann::json::parse(read_text(path("report.json")));
  EXPECT_EQ(report["totals"]["engines_timed"], 0) << "the stub times did not come from the cache";
  EXPECT_EQ(report["pruned_layers"], nlohmann::json({"c1", "c2"}));
  EXPECT_EQ(report["weights_file"], "plan.yaml.weights.safetensors");
  int pruned_rows = 0;
  for (const auto& layer : report["layers"])
    for (const auto& c : layer["candidates"])
      if (c["pruned"] == "2:4") {
        ++pruned_rows;
        EXPECT_EQ(c["label"], c["kernel"].get<std::string>() + " (pruned 2:4)");
        EXPECT_EQ(c["verdict"], layer["layer"] == "fc" ? "slower" : "chosen") << layer["layer"];
        EXPECT_GT(c["rel_l2"].get<double>(), 0);
      }
  EXPECT_EQ(pruned_rows, 3);

  const PlanFile plan = read_plan_file(path("plan.yaml"));
  EXPECT_EQ(plan.weights, "plan.yaml.weights.safetensors");
  EXPECT_EQ(plan.layers.at("c1").kernel, "cpu_sparse24_conv");
  EXPECT_EQ(plan.layers.at("c1").sparsity, "2:4");
  EXPECT_EQ(plan.layers.at("c2").sparsity, "2:4");
  EXPECT_EQ(plan.layers.at("fc").sparsity, "");

  // Every tensor, 2:4 exactly where pruned, identical elsewhere, and hashing to model_hash.
  const auto written = read_safetensors(plan.weights_path);
  size_t tensors = 0;
  for (const Node& node : dense_.nodes)
    for (const Param& param : node.params) {
      ++tensors;
      ASSERT_EQ(written.count(param.key), 1u) << param.key;
      const HostVector<float>& now = written.at(param.key).data;
      if ((node.name == "c1" || node.name == "c2") && param.role == "weight") {
        HostVector<float> expected = param.value.data;
        sparsity::prune_magnitude(expected.data(), sparsity::weight_shape_of(node));
        EXPECT_EQ(now, expected) << node.name;
        EXPECT_NE(now, param.value.data) << node.name;
      } else {
        EXPECT_EQ(now, param.value.data) << node.name << "." << param.role;
      }
    }
  EXPECT_EQ(written.size(), tensors);
  Graph reloaded = load_model(model_);
  load_weights(reloaded, plan.weights_path);
  EXPECT_EQ(plan.model_hash, model_fingerprint(reloaded));

  // `cnnrt run --plan` alone loads them, and computes the build's measured error.
  const Outcome dense = run("dense.npy", {"--weights", weights_});
  ASSERT_EQ(dense.code, kExitSuccess) << dense.err;
  const Outcome planned = run("planned.npy", {"--plan", path("plan.yaml")});
  ASSERT_EQ(planned.code, kExitSuccess) << planned.err;
  EXPECT_NE(planned.err.find("named by the plan"), std::string::npos) << planned.err;
  const double error = rel_l2(read_npy(path("planned.npy")).data, read_npy(path("dense.npy")).data);
  EXPECT_GT(error, 0);
  EXPECT_NEAR(error, report["totals"]["rel_l2"].get<double>(), 1e-5);
  // The dense weights with that plan: a stale plan, naming the weights it runs on.
  const Outcome stale = run("stale.npy", {"--plan", path("plan.yaml"), "--weights", weights_});
  EXPECT_EQ(stale.code, kExitFailure);
  EXPECT_EQ(count_lines_starting(stale.err, "error: "), 1) << stale.err;
  EXPECT_NE(stale.err.find("stale plan"), std::string::npos) << stale.err;
  EXPECT_NE(stale.err.find("plan.yaml.weights.safetensors"), std::string::npos) << stale.err;
  EXPECT_FALSE(fs::exists(path("stale.npy")));
}

TEST_F(BuildAllowPrune, ATinyBudgetPrunesNothingAndWritesTheSamePlanAsWithoutTheOption) {
  std::vector<std::string> with = build_args("rel_l2=1e-9", "tight.yaml");
  with.insert(with.end(), {"--allow-prune", "2:4"});
  const Outcome build = run_cnnrt(with);
  ASSERT_EQ(build.code, kExitSuccess) << build.err;
  EXPECT_FALSE(fs::exists(path("tight.yaml.weights.safetensors")));
  const PlanFile plan = read_plan_file(path("tight.yaml"));
  EXPECT_EQ(plan.weights, "");
  for (const auto& [layer, choice] : plan.layers) EXPECT_EQ(choice.sparsity, "") << layer;
  EXPECT_EQ(plan.model_hash, model_fingerprint(dense_));

  const Outcome today = run_cnnrt(build_args("rel_l2=1e-9", "today.yaml"));
  ASSERT_EQ(today.code, kExitSuccess) << today.err;
  EXPECT_EQ(read_text(path("tight.yaml")), read_text(path("today.yaml")));
}

TEST_F(BuildAllowPrune, AnythingBut24OrWithoutPrecisionAutoIsAUsageErrorAndWritesNothing) {
  const auto before = [&] {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_))
      names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> files = before();
  auto expect_usage = [&](std::vector<std::string> args, const std::string& fragment) {
    args.insert(args.end(), {"--json", path("bad.json")});
    const Outcome outcome = run_cnnrt(args);
    EXPECT_EQ(outcome.code, kExitUsage) << outcome.err;
    EXPECT_EQ(count_lines_starting(outcome.err, "error: "), 1) << outcome.err;
    EXPECT_NE(outcome.err.find(fragment), std::string::npos) << outcome.err;
    EXPECT_EQ(before(), files) << "something was written";
  };
  for (const std::string value : {"1:4", "channels", "", "2:4,1:4", "4:8"}) {
    std::vector<std::string> args = build_args("rel_l2=10", "bad.yaml");
    args.insert(args.end(), {"--allow-prune", value});
    expect_usage(args, "--allow-prune");
  }
  std::vector<std::string> args = build_args("rel_l2=10", "bad.yaml");
  args.push_back("--allow-prune");  // no value at all
  expect_usage(args, "--allow-prune");
  for (const std::string precision : {"fp16", ""}) {
    std::vector<std::string> no_auto = build_args("rel_l2=10", "bad.yaml");
    const auto at = std::find(no_auto.begin(), no_auto.end(), "--precision");
    if (precision.empty())
      no_auto.erase(at, at + 2);
    else
      at[1] = precision;
    no_auto.insert(no_auto.end(), {"--allow-prune", "2:4"});
    expect_usage(no_auto, "--precision");
  }
}

}  // namespace
}  // namespace cnnrt::apps
