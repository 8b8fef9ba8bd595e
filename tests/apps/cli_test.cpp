// CLI plumbing: the argument parser's error cases, latency statistics and the profile formatter.
#include "apps/common/cli.h"

#include <gtest/gtest.h>

#include "apps/common/cmd_util.h"
#include "apps/common/profile_report.h"

namespace cnnrt::apps {
namespace {

Args make_args(const std::vector<std::string>& argv, size_t min_pos = 0, size_t max_pos = 2) {
  Args args("usage: test", {{"--batch", FlagKind::Value},
                            {"--profile", FlagKind::Switch},
                            {"--random-weights", FlagKind::OptionalValue}});
  args.parse(argv, min_pos, max_pos);
  return args;
}

std::string usage_error(const std::vector<std::string>& argv, size_t min_pos = 0,
                        size_t max_pos = 2) {
  try {
    make_args(argv, min_pos, max_pos);
  } catch (const UsageError& error) {
    EXPECT_EQ(error.usage(), "usage: test");
    return error.what();
  }
  return "";
}

TEST(CliArgs, ParsesValuesSwitchesAndPositionals) {
  const Args args = make_args({"model.yaml", "--batch", "16", "--profile", "x.png"});
  EXPECT_EQ(args.positional(), (std::vector<std::string>{"model.yaml", "x.png"}));
  EXPECT_EQ(args.get_int("--batch", 1, 1, 100), 16);
  EXPECT_TRUE(args.has("--profile"));
  EXPECT_EQ(make_args({"--batch=7"}).get_int("--batch", 1, 1, 100), 7);
}

TEST(CliArgs, OptionalValueTakesOnlyIntegers) {
  const Args with_seed = make_args({"--random-weights", "42", "img.png"});
  EXPECT_EQ(with_seed.get_int("--random-weights", 0, 0, 1000), 42);
  EXPECT_EQ(with_seed.positional().size(), 1u);
  const Args without = make_args({"--random-weights", "img.png"});
  EXPECT_TRUE(without.has("--random-weights"));
  EXPECT_EQ(without.get_int("--random-weights", 0, 0, 1000), 0);
  EXPECT_EQ(without.positional(), (std::vector<std::string>{"img.png"}));
}

TEST(CliArgs, BadCommandLinesNameTheProblem) {
  EXPECT_NE(usage_error({"--bogus"}).find("unknown flag --bogus"), std::string::npos);
  EXPECT_NE(usage_error({"--batch"}).find("--batch needs a value"), std::string::npos);
  EXPECT_NE(usage_error({"--profile", "--profile"}).find("twice"), std::string::npos);
  EXPECT_NE(usage_error({"--profile=1"}).find("takes no value"), std::string::npos);
  EXPECT_NE(usage_error({"a", "b", "c"}).find("unexpected argument 'c'"), std::string::npos);
  EXPECT_NE(usage_error({}, 1, 1).find("missing"), std::string::npos);
  const Args zero = make_args({"--batch", "0"});
  EXPECT_THROW(zero.get_int("--batch", 1, 1, 100), UsageError);
  const Args negative = make_args({"--batch", "-3"});
  EXPECT_THROW(negative.get_int("--batch", 1, 1, 100), UsageError);
  const Args text = make_args({"--batch", "12abc"});
  EXPECT_THROW(text.get_int("--batch", 1, 1, 100), UsageError);
  const Args list = make_args({"--batch", "1,16,,64"});
  EXPECT_THROW(list.get_int_list("--batch", "", 1, 100), UsageError);
  EXPECT_EQ(make_args({"--batch", "1,16,64"}).get_int_list("--batch", "", 1, 100),
            (std::vector<int64_t>{1, 16, 64}));
}

TEST(CliRunMain, TurnsEveryExceptionIntoExitCodeOne) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_main([]() -> int { throw Error("bad model"); }), 1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "error: bad model\n");
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_main([]() -> int { throw UsageError("unknown flag --x", "usage: y"); }), 1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "error: unknown flag --x\nusage: y\n");
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_main([]() -> int { throw 42; }), 1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "error: unknown exception\n");
  EXPECT_EQ(run_main([] { return 0; }), 0);
}

TEST(CliStats, MedianMinAndNearestRankP90) {
  const LatencyStats odd = latency_stats({5, 1, 4, 2, 3});
  EXPECT_DOUBLE_EQ(odd.median_ms, 3);
  EXPECT_DOUBLE_EQ(odd.min_ms, 1);
  EXPECT_DOUBLE_EQ(odd.p90_ms, 5);  // ceil(4.5) = 5th of 5
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);
  const LatencyStats stats = latency_stats(hundred);
  EXPECT_DOUBLE_EQ(stats.median_ms, 50.5);
  EXPECT_DOUBLE_EQ(stats.p90_ms, 90);
  EXPECT_THROW(latency_stats({}), Error);
}

TEST(ProfileReport, RatesSharesAndTotals) {
  LayerProfile conv;
  conv.name = "conv1";
  conv.sources = {"conv1", "relu1", "pool1"};
  conv.kernel = "k_fast";
  conv.precision = "fp16";
  conv.median_ms = 0.5;
  conv.flops = 100e9;  // 200 TFLOP/s
  conv.bytes = 1e9;    // 2000 GB/s
  LayerProfile fc = conv;
  fc.name = "fc8";
  fc.sources = {};
  fc.median_ms = 1.5;
  DeviceInfo device;
  device.name = "test";
  device.peak_fp16_tflops = 400;
  device.peak_bandwidth_gbs = 4000;
  EXPECT_EQ(join_sources(conv), "conv1+relu1+pool1");
  EXPECT_EQ(join_sources(fc), "fc8");
  const std::string table = format_profile_table({conv, fc}, device);
  EXPECT_NE(table.find("conv1+relu1+pool1"), std::string::npos) << table;
  EXPECT_NE(table.find("200"), std::string::npos) << table;   // TFLOP/s
  EXPECT_NE(table.find("50.0"), std::string::npos) << table;  // % of peak fp16 and bandwidth
  EXPECT_NE(table.find("total"), std::string::npos) << table;
  const nlohmann::json row = layer_json(conv, total_ms({conv, fc}));
  EXPECT_DOUBLE_EQ(row["share"].get<double>(), 0.25);
  EXPECT_NEAR(row["tflops"].get<double>(), 200, 1e-9);
  EXPECT_NEAR(row["gbs"].get<double>(), 2000, 1e-9);
  const nlohmann::json trace = trace_json({conv, fc});
  ASSERT_EQ(trace["traceEvents"].size(), 2u);
  EXPECT_DOUBLE_EQ(trace["traceEvents"][1]["ts"].get<double>(), 500.0);  // back to back, µs
  EXPECT_DOUBLE_EQ(trace["traceEvents"][1]["dur"].get<double>(), 1500.0);
  EXPECT_EQ(trace["traceEvents"][0]["ph"], "X");
  EXPECT_DOUBLE_EQ(peak_tflops(device, "int8"), 800);
}

TEST(ProfileReport, CompareTableIsRelativeToTheChosenKernel) {
  LayerProfile chosen;
  chosen.name = "conv1";
  chosen.kernel = "mine";
  chosen.precision = "fp16";
  chosen.median_ms = 1.0;
  LayerProfile slower = chosen;
  slower.kernel = "cudnn";
  slower.median_ms = 2.0;
  LayerProfile other = chosen;
  other.name = "conv2";
  other.kernel = "mine2";
  other.median_ms = 3.0;
  const std::string table = format_compare_table({chosen, slower, other}, DeviceInfo{});
  EXPECT_NE(table.find("* mine"), std::string::npos) << table;
  EXPECT_NE(table.find("0.50x"), std::string::npos) << table;
  EXPECT_NE(table.find("* mine2"), std::string::npos) << table;
}

}  // namespace
}  // namespace cnnrt::apps
