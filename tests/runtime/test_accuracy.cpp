// The int8 accuracy report (runtime/accuracy.h):
//  * the metrics against a plain independent computation (sort-based top-5, normalised
//    softmax), on random outputs and on hand-built top-5 boundary cases;
//  * every per-layer row equals what an engine built from a plan file with just that layer at
//    int8 gives, the whole-network row equals the all-int8 engine, and the report does not
//    depend on the batch size (a partial last batch included);
//  * testing fp32 against fp32 gives zero error and full agreement on every row;
//  * the listed layers are exactly those with an int8 kernel (a softmax is left out and its
//    output is read as probabilities); the errors name what is wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>

#include "graph/model_loader.h"
#include "random_test_util.h"
#include "runtime/accuracy.h"

namespace cnnrt {
namespace {

const char* kModel =
    "name: acc_ops\ninput: {shape: [3, 10, 9]}\nlayers:\n"
    "  - {name: c1, op: conv, out_channels: 8, kernel: 3, padding: 1, weight: a, bias: b}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: p1, op: maxpool, kernel: 2, stride: 2, ceil_mode: true}\n"
    "  - {name: c2, op: conv, out_channels: 8, kernel: 3, padding: 1, groups: 8, weight: c}\n"
    "  - {name: sum, op: add, inputs: [c2, p1]}\n"
    "  - {name: gap, op: adaptive_avgpool, output_size: 1}\n"
    "  - {name: flat, op: flatten}\n"
    "  - {name: fc, op: linear, out_features: 7, weight: f, bias: g}\n";
constexpr int kInputElements = 3 * 10 * 9;
constexpr int kClasses = 7;

Graph model(const std::string& text = kModel) {
  Graph graph = parse_model(text, "acc_ops.yaml");
  bind_random_weights(graph, 5);
  return graph;
}

CalibrationInputs inputs_of(const std::vector<float>& data) {
  CalibrationInputs inputs;
  inputs.samples = static_cast<int>(data.size() / kInputElements);
  inputs.load = [&data](int first, int count, float* out) {
    std::copy_n(data.begin() + int64_t(first) * kInputElements, int64_t(count) * kInputElements,
                out);
  };
  return inputs;
}

std::shared_ptr<const Calibration> calibration_for(const Graph& graph,
                                                   const std::vector<float>& data) {
  CalibrationSettings settings;
  settings.method = parse_calibration_method("minmax");
  return std::make_shared<const Calibration>(calibrate(graph, inputs_of(data), settings));
}

std::vector<float> run(const Graph& graph, const BuildOptions& options,
                       const std::vector<float>& input) {
  const int batch = static_cast<int>(input.size() / kInputElements);
  auto engine = Engine::build(graph, options);
  auto context = engine->create_context(batch);
  std::vector<float> output(size_t(batch) * shape_elements(engine->model().output_shape));
  context->run(input.data(), output.data());
  return output;
}

// The metrics written out plainly, for comparison with the accumulator.
struct Plain {
  double rel_l2, top1, top5, kl;
};
Plain plain_metrics(const std::vector<float>& r, const std::vector<float>& y, int classes,
                    bool probabilities = false) {
  const int samples = static_cast<int>(r.size() / classes);
  double err = 0, ref = 0, top1 = 0, top5 = 0, kl = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    err += (double(y[i]) - r[i]) * (double(y[i]) - r[i]);
    ref += double(r[i]) * r[i];
  }
  for (int s = 0; s < samples; ++s) {
    const float* rs = r.data() + s * classes;
    const float* ys = y.data() + s * classes;
    int label = 0, predicted = 0;
    for (int i = 1; i < classes; ++i) {
      if (rs[i] > rs[label]) label = i;
      if (ys[i] > ys[predicted]) predicted = i;
    }
    top1 += label == predicted;
    std::vector<int> order(classes);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return ys[a] > ys[b]; });
    top5 += std::find(order.begin(), order.begin() + std::min(5, classes), label) !=
            order.begin() + std::min(5, classes);
    std::vector<double> p(classes), q(classes);
    double ps = 0, qs = 0;
    for (int i = 0; i < classes; ++i) {
      p[i] = probabilities ? rs[i] : std::exp(double(rs[i]));
      q[i] = probabilities ? ys[i] : std::exp(double(ys[i]));
      ps += p[i];
      qs += q[i];
    }
    for (int i = 0; i < classes; ++i)
      if (p[i] > 0) kl += p[i] / ps * std::log((p[i] / ps) / (q[i] / qs));
  }
  return {std::sqrt(err / ref), top1 / samples, top5 / samples, kl / samples};
}

void expect_metrics(const OutputAgreement& a, const Plain& p) {
  EXPECT_NEAR(a.rel_l2, p.rel_l2, 1e-12 + 1e-9 * p.rel_l2);
  EXPECT_DOUBLE_EQ(a.top1, p.top1);
  EXPECT_DOUBLE_EQ(a.top5, p.top5);
  EXPECT_NEAR(a.kl, p.kl, 1e-12 + 1e-7 * p.kl);
}

TEST(AccuracyMetrics, MatchAPlainComputationOnRandomOutputs) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int classes : {3, 10, 37}) {
    const int samples = test::random_int(rng, 1, 9);
    const auto r = test::random_vector(size_t(samples) * classes, rng, -4.0f, 4.0f);
    auto y = r;
    for (float& v : y) v += std::uniform_real_distribution<float>(-1.5f, 1.5f)(rng);
    AgreementAccumulator accumulator(classes, false);
    const int half = samples / 2;  // in two calls, as the report adds batches
    accumulator.add(r.data(), y.data(), half);
    accumulator.add(r.data() + half * classes, y.data() + half * classes, samples - half);
    const OutputAgreement a = accumulator.result();
    EXPECT_EQ(a.samples, samples);
    EXPECT_TRUE(a.has_top1 && a.has_kl);
    EXPECT_EQ(a.has_top5, classes >= 5);
    SCOPED_TRACE(classes);
    const Plain p = plain_metrics(r, y, classes);
    EXPECT_NEAR(a.rel_l2, p.rel_l2, 1e-12);
    EXPECT_DOUBLE_EQ(a.top1, p.top1);
    if (a.has_top5) EXPECT_DOUBLE_EQ(a.top5, p.top5);
    EXPECT_NEAR(a.kl, p.kl, 1e-9 * std::max(1.0, p.kl));
    EXPECT_GT(a.kl, 0.0);

    AgreementAccumulator same(classes, false);
    same.add(r.data(), r.data(), samples);
    const OutputAgreement zero = same.result();
    EXPECT_EQ(zero.rel_l2, 0.0);
    EXPECT_EQ(zero.top1, 1.0);
    EXPECT_EQ(zero.kl, 0.0);
  }
}

TEST(AccuracyMetrics, TopFiveBoundaryAndTies) {
  // fp32 says class 6; the test output ranks it 5th (in) or 6th (out); ties go to the lower
  // index, as in a stable sort (tied_in: index 7 ties after it; tied_out: 3 and 4 tie before).
  const std::vector<float> reference = {0, 0, 0, 0, 0, 0, 9, 0};
  const std::vector<float> fifth = {5, 4, 3, 2, 0, 0, 1, 0};
  const std::vector<float> sixth = {5, 4, 3, 2, 1.5f, 0, 1, 0};
  const std::vector<float> tied_in = {5, 4, 3, 2, 0, 0, 1, 1};
  const std::vector<float> tied_out = {5, 4, 3, 1, 1, 0, 1, 0};
  for (const auto& [test_output, in] : std::vector<std::pair<std::vector<float>, bool>>{
           {fifth, true}, {sixth, false}, {tied_in, true}, {tied_out, false}}) {
    AgreementAccumulator accumulator(8, false);
    accumulator.add(reference.data(), test_output.data(), 1);
    EXPECT_EQ(accumulator.result().top5, in ? 1.0 : 0.0);
    EXPECT_EQ(accumulator.result().top1, 0.0);
    EXPECT_DOUBLE_EQ(accumulator.result().top5, plain_metrics(reference, test_output, 8).top5);
  }
}

TEST(AccuracyMetrics, ProbabilitiesAreNotSoftmaxedAgain) {
  const std::vector<float> p = {0.7f, 0.2f, 0.1f, 0.0f};
  const std::vector<float> q = {0.5f, 0.3f, 0.1f, 0.1f};
  AgreementAccumulator accumulator(4, true);
  accumulator.add(p.data(), q.data(), 1);
  EXPECT_NEAR(accumulator.result().kl, plain_metrics(p, q, 4, true).kl, 1e-12);
  EXPECT_NEAR(accumulator.result().kl,
              0.7 * std::log(0.7 / 0.5) + 0.2 * std::log(0.2 / 0.3) + 0.1 * std::log(1.0), 1e-6);
}

struct ReportFixture : ::testing::Test {
  void SetUp() override {
    seed = test::fresh_seed();
    std::mt19937 rng(seed);
    graph = model();
    calibration_set = test::random_vector(24 * kInputElements, rng, 0.0f, 1.0f);
    held_out = test::random_vector(7 * kInputElements, rng, 0.0f, 1.0f);
    calibration = calibration_for(graph, calibration_set);
  }
  uint32_t seed = 0;
  Graph graph;
  std::vector<float> calibration_set, held_out;
  std::shared_ptr<const Calibration> calibration;
};

TEST_F(ReportFixture, EachRowIsThatLayerAloneInAPlanFileAndTheWholeRowIsAllInt8) {
  SCOPED_TRACE(test::seed_trace(seed));
  AccuracySettings settings;
  settings.batch = 3;  // 7 samples: two full batches and a partial one
  const AccuracyReport report = accuracy_report(graph, calibration, inputs_of(held_out), settings);
  EXPECT_EQ(report.samples, 7);
  BuildOptions fp32_options;
  fp32_options.device = Device::CPU;
  const std::vector<float> fp32 = run(graph, fp32_options, held_out);

  // Every fused layer has an int8 kernel here: c1 (+r1+p1), c2, sum, gap, flat, fc.
  std::vector<std::string> names;
  for (const AccuracyRow& row : report.layers) names.push_back(row.layer);
  EXPECT_EQ(names, (std::vector<std::string>{"c1", "c2", "sum", "gap", "flat", "fc"}));
  EXPECT_EQ(report.whole_layers, 6);
  EXPECT_EQ(report.layers[0].sources, (std::vector<std::string>{"c1", "r1", "p1"}));

  const std::string plan_path = ::testing::TempDir() + "acc_one_layer_plan.yaml";
  for (const AccuracyRow& row : report.layers) {
    SCOPED_TRACE(row.layer);
    {
      std::ofstream plan(plan_path);
      plan << "model: acc_ops\nlayers:\n  " << row.layer << ": {precision: int8}\n";
    }
    BuildOptions options = fp32_options;
    options.layer_choices = load_plan_file(plan_path, &options.choices_model);
    options.calibration = calibration;
    const std::vector<float> alone = run(graph, options, held_out);
    expect_metrics(row.agreement, plain_metrics(fp32, alone, kClasses));
    EXPECT_GT(row.agreement.rel_l2, 0.0);  // int8 changes something on every layer
  }
  std::remove(plan_path.c_str());

  BuildOptions int8_options = fp32_options;
  int8_options.precision = Precision::INT8;
  int8_options.calibration = calibration;
  expect_metrics(report.whole.agreement,
                 plain_metrics(fp32, run(graph, int8_options, held_out), kClasses));

  // Ranks: a permutation of 1..6, rank 1 on the largest rel L2.
  std::vector<int> ranks;
  for (const AccuracyRow& row : report.layers) ranks.push_back(row.rank);
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<int>{1, 2, 3, 4, 5, 6}));
  const auto worst = std::max_element(report.layers.begin(), report.layers.end(),
                                      [](const AccuracyRow& a, const AccuracyRow& b) {
                                        return a.agreement.rel_l2 < b.agreement.rel_l2;
                                      });
  EXPECT_EQ(worst->rank, 1);
}

// run_over_inputs: full batches in chunks through run_many, the short last batch alone — the
// same values as one run() per sample, whatever the chunking.
TEST_F(ReportFixture, RunOverInputsMatchesOneRunPerSampleInAnyChunking) {
  SCOPED_TRACE(test::seed_trace(seed));
  BuildOptions options;
  options.device = Device::CPU;
  const std::shared_ptr<Engine> engine = Engine::build(graph, options);
  const int samples = 7;
  std::vector<float> expected(samples * kClasses, std::nanf(""));
  auto one = engine->create_context(1);
  for (int s = 0; s < samples; ++s)
    one->run(held_out.data() + s * kInputElements, expected.data() + s * kClasses);
  const std::vector<float> whole = run_over_inputs(*engine, inputs_of(held_out), samples, 2);
  ASSERT_EQ(whole.size(), expected.size());
  for (size_t i = 0; i < whole.size(); ++i)  // batch 2 against batch 1: fp32 reassociation only
    ASSERT_NEAR(whole[i], expected[i], 1e-5f * (1 + std::fabs(expected[i]))) << "value " << i;
  const int64_t batch_bytes = 2 * kInputElements * int64_t{sizeof(float)};
  for (int64_t chunk : {int64_t{1}, batch_bytes, 2 * batch_bytes + 1})
    EXPECT_EQ(run_over_inputs(*engine, inputs_of(held_out), samples, 2, chunk), whole)
        << "chunk " << chunk;
  EXPECT_THROW(run_over_inputs(*engine, inputs_of(held_out), samples, 0), Error);
}

TEST_F(ReportFixture, DoesNotDependOnTheBatchOrTheLayerSelection) {
  SCOPED_TRACE(test::seed_trace(seed));
  AccuracySettings one_batch;
  one_batch.batch = 7;
  const AccuracyReport whole = accuracy_report(graph, calibration, inputs_of(held_out), one_batch);
  AccuracySettings split;
  split.batch = 2;
  split.layers = {"sum", "r1"};  // a source layer names its fused layer (c1)
  const AccuracyReport part = accuracy_report(graph, calibration, inputs_of(held_out), split);
  ASSERT_EQ(part.layers.size(), 2u);
  EXPECT_EQ(part.layers[0].layer, "c1");  // network order
  EXPECT_EQ(part.layers[1].layer, "sum");
  EXPECT_EQ(part.layers[0].agreement.rel_l2, whole.layers[0].agreement.rel_l2);
  EXPECT_EQ(part.layers[1].agreement.rel_l2, whole.layers[2].agreement.rel_l2);
  EXPECT_EQ(part.whole.agreement.kl, whole.whole.agreement.kl);

  AccuracySettings first_three;
  first_three.max_samples = 3;
  first_three.per_layer = false;
  const AccuracyReport some = accuracy_report(graph, calibration, inputs_of(held_out), first_three);
  EXPECT_EQ(some.samples, 3);
  EXPECT_TRUE(some.layers.empty());
}

TEST_F(ReportFixture, Fp32AgainstFp32IsZeroOnEveryRow) {
  SCOPED_TRACE(test::seed_trace(seed));
  AccuracySettings settings;
  settings.precision = Precision::FP32;
  const AccuracyReport report = accuracy_report(graph, nullptr, inputs_of(held_out), settings);
  EXPECT_EQ(report.layers.size(), 6u);
  for (const AccuracyRow& row : report.layers) {
    EXPECT_EQ(row.agreement.rel_l2, 0.0) << row.layer;
    EXPECT_EQ(row.agreement.top1, 1.0) << row.layer;
    EXPECT_EQ(row.agreement.top5, 1.0) << row.layer;
    EXPECT_EQ(row.agreement.kl, 0.0) << row.layer;
  }
  EXPECT_EQ(report.whole.agreement.rel_l2, 0.0);
}

TEST_F(ReportFixture, SoftmaxIsLeftOutAndItsOutputReadAsProbabilities) {
  SCOPED_TRACE(test::seed_trace(seed));
  const Graph with_softmax = model(std::string(kModel) + "  - {name: prob, op: softmax}\n");
  const auto softmax_calibration = calibration_for(with_softmax, calibration_set);
  const AccuracyReport report =
      accuracy_report(with_softmax, softmax_calibration, inputs_of(held_out), {});
  EXPECT_EQ(report.layers.size(), 6u);  // no row for prob
  for (const AccuracyRow& row : report.layers) EXPECT_NE(row.layer, "prob");
  BuildOptions fp32_options, int8_options;
  fp32_options.device = int8_options.device = Device::CPU;
  int8_options.precision = Precision::INT8;
  int8_options.calibration = softmax_calibration;
  expect_metrics(report.whole.agreement,
                 plain_metrics(run(with_softmax, fp32_options, held_out),
                               run(with_softmax, int8_options, held_out), kClasses, true));
}

TEST_F(ReportFixture, ErrorsNameTheProblem) {
  auto message = [&](auto&& body) {
    try {
      body();
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("(no error)");
  };
  AccuracySettings settings;
  settings.layers = {"nope"};
  EXPECT_NE(message([&] {
              accuracy_report(graph, calibration, inputs_of(held_out), settings);
            }).find("layer 'nope' is not in model acc_ops"),
            std::string::npos);
  const Graph with_softmax = model(std::string(kModel) + "  - {name: prob, op: softmax}\n");
  settings.layers = {"prob"};
  EXPECT_NE(message([&] {
              accuracy_report(with_softmax, calibration_for(with_softmax, calibration_set),
                              inputs_of(held_out), settings);
            }).find("layer 'prob' does not run at int8"),
            std::string::npos);
  EXPECT_NE(message([&] {
              accuracy_report(graph, nullptr, inputs_of(held_out), {});
            }).find("calibration"),
            std::string::npos);
  const std::vector<float> none;
  EXPECT_NE(message([&] {
              accuracy_report(graph, calibration, inputs_of(none), {});
            }).find("the input set is empty"),
            std::string::npos);
}

}  // namespace
}  // namespace cnnrt
