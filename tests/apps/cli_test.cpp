// CLI plumbing: the conventions every command shares (exit codes, --help, --version, errors),
// latency statistics and the profile formatter.  The programs run in-process through
// cnnrt_main; tests/e2e/test_cli_conventions.py runs the binaries end to end.
#include "apps/common/cli.h"

#include <gtest/gtest.h>

#include "apps/cli_test_util.h"
#include "apps/common/cmd_util.h"
#include "apps/common/commands.h"
#include "apps/common/model_setup.h"
#include "apps/common/profile_report.h"
#include "apps/common/version.h"

namespace cnnrt::apps {
namespace {

// A usage error: exit 2, one error line naming `fragment`, a pointer to the command's --help.
void expect_usage_error(const std::vector<std::string>& args, const std::string& fragment,
                        const std::string& help_of) {
  const Outcome outcome = run_cnnrt(args);
  EXPECT_EQ(outcome.code, kExitUsage) << outcome.err;
  EXPECT_EQ(count_lines_starting(outcome.err, "error: "), 1) << outcome.err;
  EXPECT_NE(outcome.err.find(fragment), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("run '" + help_of + " --help' for usage"), std::string::npos)
      << outcome.err;
  EXPECT_EQ(outcome.out, "");
}

TEST(CliConventions, EveryCommandHasHelpWithItsFlagsAndExitsZero) {
  const Outcome top = run_cnnrt({"--help"});
  EXPECT_EQ(top.code, kExitSuccess);
  for (const Command& command : commands()) {
    EXPECT_NE(top.out.find(command.name), std::string::npos) << command.name;
    const Outcome help = run_cnnrt({command.name, "--help"});
    EXPECT_EQ(help.code, kExitSuccess) << command.name;
    EXPECT_NE(help.out.find(std::string("Usage: cnnrt ") + command.name), std::string::npos)
        << help.out;
    for (const char* flag : {"--help", "--version", "--quiet", "--verbose"})
      EXPECT_NE(help.out.find(flag), std::string::npos) << command.name << " lacks " << flag;
    EXPECT_EQ(help.err, "");
  }
  const Outcome bench = run_cnnrt({"bench", "--help"});
  EXPECT_NE(bench.out.find("at least 50"), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find("(default: 100)"), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find("--random-weights[=SEED]"), std::string::npos) << bench.out;
}

TEST(CliConventions, VersionNamesTheCommitAndTheCudaSide) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--version"}, std::vector<std::string>{"plan", "--version"}}) {
    const Outcome outcome = run_cnnrt(args);
    EXPECT_EQ(outcome.code, kExitSuccess);
    EXPECT_EQ(outcome.out, version_text() + "\n");
  }
  EXPECT_NE(version_text().find("(commit "), std::string::npos);
  EXPECT_NE(version_text().find("CUDA backend: "), std::string::npos);
  EXPECT_EQ(gpu_test_status().rfind("GPU tests: ", 0), 0u);
}

TEST(CliConventions, BadCommandLinesExitTwoWithOneErrorAndAPointerToHelp) {
  expect_usage_error({}, "missing command", "cnnrt");
  expect_usage_error({"frobnicate"}, "unknown command 'frobnicate'", "cnnrt");
  expect_usage_error({"info"}, "MODEL is required", "cnnrt info");
  expect_usage_error({"info", "m.yaml", "--bogus"}, "--bogus", "cnnrt info");
  expect_usage_error({"plan", "m.yaml", "--batch", "0"}, "--batch: must be from 1 to",
                     "cnnrt plan");
  expect_usage_error({"plan", "m.yaml", "--batch", "12abc"}, "expects an integer, got '12abc'",
                     "cnnrt plan");
  expect_usage_error({"plan", "m.yaml", "--batch"}, "--batch", "cnnrt plan");
  expect_usage_error({"plan", "m.yaml", "--device", "tpu"}, "'tpu' is not one of auto, cpu, cuda",
                     "cnnrt plan");
  expect_usage_error({"bench", "m.yaml", "--batch", "1", "--iterations", "10"},
                     "--iterations: must be from 50", "cnnrt bench");
  expect_usage_error({"bench", "m.yaml", "--batch", "1,0"}, "--batch", "cnnrt bench");
  expect_usage_error(
      {"run", "m.yaml", "--weights", "w", "--random-weights", "--input", "x", "--output", "y"},
      "--weights excludes --random-weights", "cnnrt run");
  expect_usage_error({"run", "m.yaml", "--random-weights", "-5", "--input", "x", "--output", "y"},
                     "--random-weights: must be from 0", "cnnrt run");
  expect_usage_error({"info", "-"}, "cannot read standard input", "cnnrt info");
  expect_usage_error({"init-weights", "m.yaml", "-o", "-"}, "cannot write to standard output",
                     "cnnrt init-weights");
  expect_usage_error({"info", "m.yaml", "-q", "-v"}, "--quiet excludes --verbose", "cnnrt info");
  expect_usage_error({"calibrate", "m.yaml", "--method", "kl", "-o", "c.json"}, "kl",
                     "cnnrt calibrate");
}

TEST(CliConventions, RuntimeErrorsExitOneWithoutAPointerToHelp) {
  const Outcome outcome = run_cnnrt({"info", "no_such_model.yaml"});
  EXPECT_EQ(outcome.code, kExitFailure);
  EXPECT_EQ(count_lines_starting(outcome.err, "error: "), 1) << outcome.err;
  EXPECT_NE(outcome.err.find("no_such_model.yaml"), std::string::npos) << outcome.err;
  EXPECT_EQ(outcome.err.find("--help"), std::string::npos) << outcome.err;
}

TEST(CliConventions, TwoStreamsCannotShareStdout) {
  const Outcome outcome = run_cnnrt(
      {"run", "m.yaml", "--random-weights", "--input", "x.npy", "--output", "-", "--json", "-"});
  EXPECT_EQ(outcome.code, kExitUsage) << outcome.err;
  EXPECT_NE(outcome.err.find("--output and --json both write to standard output"),
            std::string::npos)
      << outcome.err;
}

// --random-weights takes an optional seed without swallowing the positional after it.
TEST(CliConventions, RandomWeightsSeedIsOptionalAndNeverTakesThePositional) {
  struct Case {
    std::vector<std::string> args;
    std::string seed, image;
  };
  const std::vector<Case> cases = {{{"img.png", "--random-weights"}, "0", "img.png"},
                                   {{"--random-weights", "img.png"}, "0", "img.png"},
                                   {{"--random-weights", "42", "img.png"}, "42", "img.png"},
                                   {{"img.png", "--random-weights=7"}, "7", "img.png"},
                                   {{"img.png"}, "", "img.png"}};
  for (const Case& c : cases) {
    const std::unique_ptr<CLI::App> program = make_program("prog", "test");
    WeightArgs weights;
    std::string image;
    program->add_option("IMAGE", image)->required();
    add_weight_options(*program, weights);
    std::vector<std::string> args = c.args;
    args.insert(args.begin(), "prog");
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    const int code =
        run_program(*program, static_cast<int>(argv.size()), argv.data(), [] { return 0; });
    EXPECT_EQ(code, kExitSuccess) << c.args[0];
    EXPECT_EQ(weights.random_seed, c.seed) << c.args[0];
    EXPECT_EQ(image, c.image);
  }
}

TEST(CliRunMain, TurnsEveryExceptionIntoOneErrorLineAndItsExitCode) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_main([]() -> int { throw Error("bad model"); }), kExitFailure);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "error: bad model\n");
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_main([]() -> int { throw UsageError("flags clash"); }, "see --help\n"), kExitUsage);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "error: flags clash\nsee --help\n");
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_main([]() -> int { throw 42; }), kExitFailure);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "error: unknown exception\n");
  EXPECT_EQ(run_main([] { return 0; }), kExitSuccess);
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

TEST(ProfileReport, UnknownPeaksAreLeftOutAndSlowRatesReadInGflops) {
  LayerProfile conv;
  conv.name = "conv1";
  conv.kernel = "cpu_ref_conv";
  conv.precision = "fp32";
  conv.median_ms = 2.0;
  conv.flops = 4e6;  // 2 GFLOP/s
  conv.bytes = 2e6;  // 1 GB/s
  DeviceInfo cpu;
  cpu.name = "cpu";  // no peaks known
  const std::string table = format_profile_table({conv}, cpu);
  EXPECT_NE(table.find("GFLOP/s"), std::string::npos) << table;
  EXPECT_EQ(table.find("TFLOP/s"), std::string::npos) << table;
  EXPECT_NE(table.find("2.00"), std::string::npos) << table;  // GFLOP/s, not 0.00200 TFLOP/s
  EXPECT_EQ(table.find("% peak"), std::string::npos) << table;
  EXPECT_EQ(table.find("% bw"), std::string::npos) << table;
  const std::string compare = format_compare_table({conv}, cpu);
  EXPECT_EQ(compare.find("% peak"), std::string::npos) << compare;
  EXPECT_NE(compare.find("GFLOP/s"), std::string::npos) << compare;
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
