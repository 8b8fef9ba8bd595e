// Calibration (runtime/calibration.h): the four methods on known distributions (uniform,
// gaussian, gaussian with outliers — percentile, entropy and mse clip them, minmax does not — and
// a few-valued distribution the plain KL search collapses), mse against a brute-force sweep of the
// actual int8 quantisation error, all-zero tensors (the documented scale floor), the method names,
// the JSON file (round trip, every error names the file and tensor), and the collector on small
// graphs: one entry per tensor of the fused graph, equal to what the fp32 engine computes,
// independent of the batch size, NaN named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "cnnrt/cnnrt.h"
#include "graph/model_loader.h"
#include "kernels/cpu/int8_ref.h"
#include "random_test_util.h"
#include "runtime/calibration.h"

namespace cnnrt {
namespace {

TensorStatistics statistics_of(const std::vector<float>& values) {
  TensorStatistics stats;
  // Two chunks, as batches would arrive.
  const size_t half = values.size() / 2;
  EXPECT_TRUE(stats.observe_range(values.data(), half));
  EXPECT_TRUE(stats.observe_range(values.data() + half, values.size() - half));
  stats.observe_histogram(values.data(), half);
  stats.observe_histogram(values.data() + half, values.size() - half);
  return stats;
}

CalibrationMethod method(const std::string& text) { return parse_calibration_method(text); }

TEST(CalibrationMethods, Uniform) {
  std::mt19937 rng(11);
  const auto values = test::random_vector(1000000, rng, -1.0f, 1.0f);
  const TensorStatistics stats = statistics_of(values);
  EXPECT_GT(stats.amax(method("minmax")), 0.9999f);
  EXPECT_LE(stats.amax(method("minmax")), 1.0f);
  EXPECT_NEAR(stats.amax(method("percentile:99.99")), 0.9999, 2e-4);
  EXPECT_NEAR(stats.amax(method("percentile:90")), 0.9, 2e-3);
  // Nothing to gain from clipping a uniform distribution.
  EXPECT_GT(stats.amax(method("entropy")), 0.97f);
  EXPECT_GT(stats.amax(method("mse")), 0.99f);
}

TEST(CalibrationMethods, GaussianAndGaussianWithOutliers) {
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(1000000);
  for (float& v : values) v = normal(rng);
  const TensorStatistics plain = statistics_of(values);
  const float minmax = plain.amax(method("minmax"));
  EXPECT_GT(minmax, 4.5f);
  EXPECT_NEAR(plain.amax(method("percentile")), 3.89, 0.1);  // 99.99 % of |x|: 3.8906σ
  EXPECT_NEAR(plain.amax(method("percentile:99")), 2.576, 0.02);
  const float entropy = plain.amax(method("entropy"));
  EXPECT_GT(entropy, 3.0f);
  EXPECT_LE(entropy, minmax);

  // Ten outliers at ±1000: minmax follows them, percentile and entropy clip them.
  for (int i = 0; i < 10; ++i) values[i * 1000] = i % 2 ? 1000.0f : -1000.0f;
  const TensorStatistics outliers = statistics_of(values);
  EXPECT_EQ(outliers.amax(method("minmax")), 1000.0f);
  EXPECT_LT(outliers.amax(method("percentile")), 5.0f);
  // The search cannot go below bin 128 of 2048 (1000 / 16 = 62.5): it goes there.
  EXPECT_LE(outliers.amax(method("entropy")), 62.5f + 1e-3f);
  // mse weighs the error, not the count: clipped to ~5, the ten outliers would cost 10 x 995²,
  // ten times what rounding the million gaussian values to zero costs (~10^6 x E[x²]).
  EXPECT_GT(outliers.amax(method("mse")), 500.0f);
}

// The mean squared error of quantising `values` symmetrically to int8 at `amax` (the kernels'
// arithmetic: RNE(x / step), clamped to ±127, times step).
double quantisation_mse(const std::vector<float>& values, double amax) {
  const double step = amax / 127.0;
  double sum = 0;
  for (float v : values) {
    const double q = std::clamp(std::nearbyint(v / step), -127.0, 127.0) * step;
    sum += (v - q) * (v - q);
  }
  return sum / static_cast<double>(values.size());
}

TEST(CalibrationMethods, MseIsTheAmaxOfTheLeastQuantisationErrorOnKnownDistributions) {
  // For each distribution the amax mse picks must quantise the values with an error within 1 %
  // of the best amax of a dense sweep (the histogram's bin-centre model against the real
  // rounding), and no worse than any other method's.
  std::mt19937 rng(14);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::exponential_distribution<float> exponential(1.0f);
  std::vector<std::pair<const char*, std::vector<float>>> cases;
  std::vector<float> gaussian(200000), laplace(200000), relu6(200000), outliers(200000);
  for (float& v : gaussian) v = normal(rng);
  // Outliers whose clipping and whose keeping cost about the same: the optimum lies between.
  for (size_t i = 0; i < outliers.size(); ++i)
    outliers[i] = i % 20000 == 0 ? (i % 40000 ? 30.0f : -30.0f) : gaussian[i];
  for (float& v : laplace) v = exponential(rng) * (rng() % 2 ? 1.0f : -1.0f);
  // A ReLU6 output: half zeros, a mass saturated at 6 (clipping it would cost the most).
  for (float& v : relu6) v = std::clamp(2.5f * normal(rng) + 1.0f, 0.0f, 6.0f);
  cases = {{"gaussian", gaussian}, {"laplace", laplace}, {"relu6", relu6}, {"outliers", outliers}};
  for (const auto& [name, values] : cases) {
    const TensorStatistics stats = statistics_of(values);
    const double picked = stats.amax(method("mse"));
    double best = std::numeric_limits<double>::infinity(), best_amax = 0;
    for (int i = 1; i <= 800; ++i) {
      const double amax = stats.max_abs() * i / 800.0;
      const double error = quantisation_mse(values, amax);
      if (error < best) {
        best = error;
        best_amax = amax;
      }
    }
    const double error = quantisation_mse(values, picked);
    EXPECT_LE(error, best * 1.01) << name << ": mse picked " << picked << ", best " << best_amax;
    for (const char* other : {"minmax", "percentile:99.99", "entropy"})
      EXPECT_LE(error, quantisation_mse(values, stats.amax(method(other))) * 1.001)
          << name << " against " << other;
  }
  // The ReLU6 mass at 6 is kept whole.
  EXPECT_GE(statistics_of(relu6).amax(method("mse")), 5.99f);
  // The threshold itself: values in one bin (centre 4.995) are kept to within the bin; an empty
  // histogram gives 0.
  std::vector<uint64_t> one(1000, 0);
  one[499] = 5;
  EXPECT_NEAR(mse_threshold(one, 0.01), 4.995, 0.0051);
  EXPECT_EQ(mse_threshold(std::vector<uint64_t>(1000, 0), 0.01), 0.0f);
}

TEST(CalibrationMethods, EntropyDoesNotCollapseAFewValuedDistribution) {
  // The digits input: pixel / 16, 17 values; 1/16 lands in bin 128 exactly, where the plain
  // TensorRT search would fold everything (docs/QUANTIZATION.md).
  std::mt19937 rng(13);
  std::vector<float> values(100000);
  for (float& v : values) v = static_cast<float>(test::random_int(rng, 0, 16)) / 16.0f;
  const TensorStatistics stats = statistics_of(values);
  EXPECT_EQ(stats.amax(method("entropy")), 1.0f);
  EXPECT_EQ(stats.amax(method("minmax")), 1.0f);
}

TEST(CalibrationMethods, AllZeroTensorGetsTheScaleFloor) {
  const std::vector<float> zeros(1000, 0.0f);
  const TensorStatistics stats = statistics_of(zeros);
  for (const char* name : {"minmax", "percentile", "entropy", "mse"}) {
    EXPECT_EQ(stats.amax(method(name)), 0.0f) << name;
    EXPECT_EQ(ref::scale_from_amax(stats.amax(method(name))), ref::kMinScale) << name;
  }
  EXPECT_EQ(entropy_threshold(std::vector<uint64_t>(2048, 0), 0.5), 0.0f);
  EXPECT_THROW(entropy_threshold(std::vector<uint64_t>(100, 1), 0.5), Error);
}

TEST(CalibrationMethods, NonFiniteValuesAreRefused) {
  TensorStatistics stats;
  const float values[] = {1.0f, std::nanf("")};
  EXPECT_FALSE(stats.observe_range(values, 2));
  const float inf[] = {INFINITY};
  EXPECT_FALSE(stats.observe_range(inf, 1));
  EXPECT_EQ(stats.max_abs(), 0.0f);
}

TEST(CalibrationMethods, NamesParseAndPrint) {
  EXPECT_EQ(method("minmax").name(), "minmax");
  EXPECT_EQ(method("entropy").name(), "entropy");
  EXPECT_EQ(method("mse").name(), "mse");
  EXPECT_EQ(method("percentile").name(), "percentile:99.99");
  EXPECT_EQ(method("percentile:99.9").percentile, 99.9);
  EXPECT_EQ(method("percentile:100").percentile, 100.0);
  for (const char* bad :
       {"", "max", "percentile:", "percentile:0", "percentile:101", "percentile:abc",
        "percentile:99x", "percentile99", "Entropy", "MSE", "mse:1"})
    EXPECT_THROW(method(bad), Error) << bad;
}

// --- the file ------------------------------------------------------------------------------

TEST(CalibrationFile, RoundTripsExactly) {
  Calibration calibration;
  calibration.model = "m";
  calibration.method = "entropy";
  calibration.samples = 42;
  calibration.tensors["input"] = {1.0f, ref::scale_from_amax(1.0f), "entropy"};
  calibration.tensors["conv1"] = {3.1234567f, ref::scale_from_amax(3.1234567f), "entropy"};
  calibration.tensors["dead"] = {0.0f, ref::kMinScale, "entropy"};
  const Calibration back = calibration_from_json(calibration_to_json(calibration), "c.json");
  EXPECT_EQ(back.model, "m");
  EXPECT_EQ(back.method, "entropy");
  EXPECT_EQ(back.samples, 42);
  EXPECT_EQ(back.source, "c.json");
  ASSERT_EQ(back.tensors.size(), 3u);
  for (const auto& [name, entry] : calibration.tensors) {
    const TensorCalibration* read = back.find(name);
    ASSERT_NE(read, nullptr) << name;
    EXPECT_EQ(read->amax, entry.amax) << name;  // bit for bit
    EXPECT_EQ(read->scale, entry.scale) << name;
    EXPECT_EQ(read->method, "entropy");
  }
  EXPECT_EQ(back.find("nope"), nullptr);
}

void expect_error(const std::string& text, const std::string& wanted) {
  try {
    calibration_from_json(text, "bad.json");
    ADD_FAILURE() << "no error for " << text;
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_EQ(message.rfind("bad.json: ", 0), 0u) << message;
    EXPECT_NE(message.find(wanted), std::string::npos) << message << " (wanted: " << wanted << ")";
  }
}

TEST(CalibrationFile, ErrorsNameTheFileAndTheTensor) {
  const std::string head = R"({"format": "cnnrt-calibration", "version": 1, "model": "m", )";
  expect_error("{", "invalid JSON");
  expect_error("[1, 2]", "expected a JSON object");
  expect_error(R"({"format": "other", "version": 1})", "format");
  expect_error(R"({"format": 7, "version": 1})", "format");
  expect_error(R"({"format": "cnnrt-calibration", "version": "1"})", "version");
  expect_error(R"({"format": "cnnrt-calibration", "version": 2, "model": "m", "tensors": {}})",
               "version");
  expect_error(R"({"format": "cnnrt-calibration", "version": 1, "tensors": {}})", "model");
  expect_error(head + R"("tensors": {}, "extra": 1})", "unknown key 'extra'");
  expect_error(head + R"("tensors": []})", "tensors");
  expect_error(head + R"("tensors": {"c1": {"amax": 1.0}}})", "tensor 'c1': \"scale\"");
  expect_error(head + R"("tensors": {"c1": {"amax": 1.0, "scale": 0}}})",
               "tensor 'c1': scale must be finite and > 0");
  expect_error(head + R"("tensors": {"c1": {"amax": 1.0, "scale": -0.1}}})", "tensor 'c1'");
  expect_error(head + R"("tensors": {"c1": {"amax": 1.0, "scale": "NaN"}}})", "tensor 'c1'");
  expect_error(head + R"("tensors": {"c1": {"amax": 1.0, "scale": 1e-50}}})", "tensor 'c1'");
  expect_error(head + R"("tensors": {"c1": {"amax": 1.0, "scale": 1e300}}})", "tensor 'c1'");
  expect_error(head + R"("tensors": {"c1": {"amax": -1.0, "scale": 0.1}}})", "tensor 'c1': amax");
  expect_error(head + R"("tensors": {"c1": {"amax": 1.0, "scale": 0.1, "zero_point": 3}}})",
               "unknown key 'zero_point'");
  EXPECT_THROW(load_calibration("/nonexistent/calib.json"), Error);
  // Nesting is bounded before the JSON parser sees the text (its memory and stack grow with it).
  expect_error(head + R"("tensors": {"c1": )" + std::string(100000, '[') + "}}",
               "nests deeper than 16 levels (at byte");
  expect_error(std::string(5000000, ',') + "{}", "has more than 4194304 JSON values");
}

// --- the collector ----------------------------------------------------------------------------

const char* kSmallModel =
    "name: small\ninput: {shape: [2, 7, 6]}\nlayers:\n"
    "  - {name: c1, op: conv, out_channels: 4, kernel: 3, padding: 1, weight: a, bias: b}\n"
    "  - {name: r1, op: relu}\n  - {name: p1, op: maxpool, kernel: 2}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: fc, op: linear, out_features: 3, weight: d, bias: e, precision: int8}\n";

CalibrationInputs inputs_from(const std::vector<float>& data, int64_t sample_elements) {
  CalibrationInputs inputs;
  inputs.samples = static_cast<int>(data.size() / sample_elements);
  inputs.load = [&data, sample_elements](int first, int count, float* out) {
    std::copy_n(data.begin() + first * sample_elements, count * sample_elements, out);
  };
  return inputs;
}

TEST(CalibrationCollector, OneEntryPerFusedTensorEqualToTheFp32Engine) {
  Graph graph = parse_model(kSmallModel, "small.yaml");
  bind_random_weights(graph, 5);
  std::mt19937 rng(test::fresh_seed());
  const int samples = 10;
  const auto data = test::random_vector(samples * 2 * 7 * 6, rng);
  CalibrationSettings settings;
  settings.batch = 3;  // 3 + 3 + 3 + 1
  int last_done = 0, last_total = 0;
  settings.progress = [&](int done, int total) {
    EXPECT_EQ(done, last_done + 1);
    last_done = done;
    last_total = total;
  };
  // `precision: int8` and no calibration: the collector runs fp32 regardless.
  const Calibration calibration = calibrate(graph, inputs_from(data, 2 * 7 * 6), settings);
  EXPECT_EQ(last_done, 4);
  EXPECT_EQ(last_total, 4);
  EXPECT_EQ(calibration.model, "small");
  EXPECT_EQ(calibration.method, "minmax");
  EXPECT_EQ(calibration.samples, samples);
  std::vector<std::string> names;
  for (const auto& [name, entry] : calibration.tensors) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"c1", "f", "fc", "input"}));  // c1 = c1+r1+p1

  float input_amax = 0;
  for (float v : data) input_amax = std::max(input_amax, std::fabs(v));
  EXPECT_EQ(calibration.find("input")->amax, input_amax);
  // The output's amax is what the fp32 engine computes.
  BuildOptions options;
  options.device = Device::CPU;
  options.layer_choices["fc"].precision = Precision::FP32;
  auto engine = Engine::build(graph, options);
  auto context = engine->create_context(samples);
  std::vector<float> output(samples * 3);
  context->run(data.data(), output.data());
  float output_amax = 0;
  for (float v : output) output_amax = std::max(output_amax, std::fabs(v));
  EXPECT_EQ(calibration.find("fc")->amax, output_amax);
  EXPECT_EQ(calibration.find("f")->amax, calibration.find("c1")->amax);  // a view
  for (const auto& [name, entry] : calibration.tensors)
    EXPECT_EQ(entry.scale, ref::scale_from_amax(entry.amax)) << name;

  // The batch size does not change the result (the histogram pass neither).
  for (const char* name : {"minmax", "percentile:99", "entropy"}) {
    CalibrationSettings one_batch, small_batches;
    one_batch.method = small_batches.method = parse_calibration_method(name);
    one_batch.batch = samples;
    small_batches.batch = 4;
    const Calibration a = calibrate(graph, inputs_from(data, 2 * 7 * 6), one_batch);
    const Calibration b = calibrate(graph, inputs_from(data, 2 * 7 * 6), small_batches);
    for (const auto& [tensor, entry] : a.tensors)
      EXPECT_EQ(entry.amax, b.find(tensor)->amax) << name << " " << tensor;
  }
  // --batches: only the first N batches.
  CalibrationSettings limited;
  limited.batch = 4;
  limited.max_batches = 2;
  EXPECT_EQ(calibrate(graph, inputs_from(data, 2 * 7 * 6), limited).samples, 8);
}

TEST(CalibrationCollector, DeadTensorsGetTheFloorNanAndEmptySetsAreErrors) {
  Graph graph = parse_model(
      "name: dead\ninput: {shape: [1, 4, 4]}\nlayers:\n"
      "  - {name: c, op: conv, out_channels: 2, kernel: 1, weight: w, bias: b}\n"
      "  - {name: r, op: relu}\n",
      "dead.yaml");
  bind_random_weights(graph, 1);
  for (Param& param : graph.nodes[0].params)
    for (float& v : param.value.data) v = -std::fabs(v) - 0.1f;  // relu(negative) = 0
  std::vector<float> data(3 * 16, 0.0f);  // zero input: every conv output is its bias < 0
  CalibrationSettings settings;
  settings.method = parse_calibration_method("entropy");
  const Calibration calibration = calibrate(graph, inputs_from(data, 16), settings);
  EXPECT_EQ(calibration.find("c")->amax, 0.0f);
  EXPECT_EQ(calibration.find("c")->scale, ref::kMinScale);
  EXPECT_EQ(calibration.find("input")->scale, ref::kMinScale);

  data[20] = std::nanf("");
  try {
    calibrate(graph, inputs_from(data, 16), settings);
    ADD_FAILURE() << "no error for a NaN input";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("tensor 'input'"), std::string::npos) << error.what();
  }
  EXPECT_THROW(calibrate(graph, CalibrationInputs{}, settings), Error);
}

}  // namespace
}  // namespace cnnrt
