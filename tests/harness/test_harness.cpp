// The kernel test harness as GoogleTest cases (harness.h): one test per (registry entry, case of
// its op's table), named "<op>/KernelHarness.MatchesCpuReference/<entry>__<case>", so
//   --gtest_filter='conv/*'           every conv kernel on every conv case
//   --gtest_filter='*/conv_fp32__*'   one kernel on every case of its op
//   --gtest_filter='*_fp32__*'        a whole family
// select by op or by kernel.  Entries of an absent device and cases an entry's supports() refuses
// are skipped (and counted: the summary at the end prints checks run / skipped).  Perf mode:
// CNNRT_HARNESS_PERF=N times each passing check, median of N runs, and prints a table at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "graph/ops.h"
#include "harness.h"

namespace cnnrt::harness {
namespace {

struct Counts {
  int checks = 0, in_place_checks = 0, unsupported = 0, no_device = 0;
};
Counts g_counts;

struct PerfRow {
  std::string op, case_name, entry, variant;
  double ms = 0, gflops = 0, gbs = 0;
};
std::vector<PerfRow> g_perf;

int perf_reps() {
  const char* text = std::getenv("CNNRT_HARNESS_PERF");
  return text != nullptr ? std::max(0, std::atoi(text)) : 0;
}

// Prints what ran, and in perf mode the timing table, after the last test.
class HarnessReport : public ::testing::Environment {
 public:
  void TearDown() override {
    std::printf(
        "[harness] %d kernel x case checks passed or failed (%d more in place); skipped: %d "
        "unsupported by the entry, %d for an absent device\n",
        g_counts.checks, g_counts.in_place_checks, g_counts.unsupported, g_counts.no_device);
    if (g_perf.empty()) return;
    std::printf("[harness] perf: median of %d runs per row\n", perf_reps());
    std::printf("%-10s %-52s %-26s %-28s %10s %10s %9s\n", "op", "case", "kernel", "variant", "ms",
                "GFLOP/s", "GB/s");
    for (const PerfRow& row : g_perf)
      std::printf("%-10s %-52s %-26s %-28s %10.4f %10.2f %9.2f\n", row.op.c_str(),
                  row.case_name.c_str(), row.entry.c_str(),
                  row.variant.empty() ? "-" : row.variant.c_str(), row.ms, row.gflops, row.gbs);
  }
};
::testing::Environment* const g_report = ::testing::AddGlobalTestEnvironment(new HarnessReport);

struct HarnessParam {
  OpKind op;
  size_t case_index;
  std::string entry;
};

// Every registry entry of `op` (every device, baselines included) × every case of its table.
std::vector<HarnessParam> params_for(OpKind op) {
  std::vector<HarnessParam> params;
  for (size_t i = 0; i < op_cases(op).size(); ++i)
    for (const KernelEntry& entry : KernelRegistry::instance().entries())
      if (entry.op == op) params.push_back({op, i, entry.name});
  return params;
}

// What gtest prints for a parameter (test lists, failures): the case's parameters in words.
void PrintTo(const HarnessParam& param, std::ostream* out) {
  const OpCase& op_case = op_cases(param.op)[param.case_index];
  const Node& node = op_case.node();
  *out << param.entry << " on " << op_name(param.op) << " " << op_case.name << ": input "
       << shape_to_string(node.input_shapes[0]) << " -> " << shape_to_string(node.output_shape)
       << ", batch " << op_case.batch;
}

std::string param_name(const ::testing::TestParamInfo<HarnessParam>& info) {
  return info.param.entry + "__" + op_cases(info.param.op)[info.param.case_index].name;
}

void record_perf(LayerKernel& kernel, const KernelEntry& entry, const CaseData& data,
                 const OpCase& op_case, const HarnessDevice& device, const std::string& variant) {
  const int reps = perf_reps();
  if (reps == 0) return;
  const Node& node = data.node();
  PerfRow row;
  row.op = op_name(node.op);
  row.case_name = op_case.name;
  row.entry = entry.name;
  row.variant = variant;
  row.ms = time_kernel(kernel, data, op_case, device, reps);
  double bytes =
      static_cast<double>(kernel.weight_bytes()) +
      static_cast<double>(tensor_bytes(node.output_shape, kernel.output_type(), op_case.batch));
  for (size_t i = 0; i < node.input_shapes.size(); ++i)
    bytes += static_cast<double>(
        tensor_bytes(node.input_shapes[i], kernel.input_types(i).at(0), op_case.batch));
  if (row.ms > 0) {
    row.gflops = node_flops(node) * op_case.batch / (row.ms * 1e6);
    row.gbs = bytes / (row.ms * 1e6);
  }
  std::printf("[harness perf] %s %s %s: %.4f ms\n", row.op.c_str(), row.case_name.c_str(),
              row.entry.c_str(), row.ms);
  g_perf.push_back(row);
}

class KernelHarness : public ::testing::TestWithParam<HarnessParam> {};

// Runs `kernel` with input 0 in every type it accepts (e.g. conv_fp16_s2d also reads fp32 NCHW),
// and in place where its plan allows, judging each output with `judge` ("" = pass).  Returns the
// variant the plan chose.
std::string check_kernel(LayerKernel& kernel, const CaseData& data, const OpCase& op_case,
                         const HarnessDevice& device,
                         const std::function<std::string(const std::vector<float>&)>& judge) {
  std::string variant;
  for (const TensorType& type : kernel.input_types(0)) {
    SCOPED_TRACE("input 0 as " + to_string(type));
    const EntryRun run = run_kernel(kernel, data, op_case, device, type, /*in_place=*/false);
    variant = run.plan.variant_name;
    SCOPED_TRACE("variant '" + variant + "'");
    ++g_counts.checks;
    EXPECT_EQ(run.nonzero_padding, 0) << "padding lanes of the output must be zeros";
    EXPECT_EQ(run.guard_bytes_written, 0) << "the kernel wrote past its output";
    // Integer kernels are exact whatever the order of their sums: a second run must repeat the
    // first byte for byte (float kernels may reduce in another order: cuBLAS split-K).
    if (type.dtype == DType::I8)
      EXPECT_FALSE(run.rerun_differs) << "a second run gave other bytes (state kept between runs?)";
    const std::string failure = judge(run.output);
    EXPECT_TRUE(failure.empty()) << failure;

    // The planner may give an in-place kernel output == inputs[0] when the bytes agree.
    const Node& node = data.node();
    if (run.plan.in_place && tensor_bytes(node.output_shape, kernel.output_type(), op_case.batch) ==
                                 tensor_bytes(node.input_shapes[0], type, op_case.batch)) {
      SCOPED_TRACE("in place");
      const EntryRun in_place = run_kernel(kernel, data, op_case, device, type, true);
      ++g_counts.in_place_checks;
      EXPECT_EQ(in_place.nonzero_padding, 0);
      const std::string in_place_failure = judge(in_place.output);
      EXPECT_TRUE(in_place_failure.empty()) << in_place_failure;
    }
  }
  return variant;
}

// int8: the kernel built with the case's calibration, its output equal to the integer
// reference bit for bit (tolerance.h), in each output form of its op.
void check_int8_entry(const KernelEntry& entry, const CaseData& data, const OpCase& op_case,
                      const HarnessDevice& device) {
  for (const bool float_output : int8_output_modes(entry.op)) {
    SCOPED_TRACE(float_output ? "fp32 output (the graph output)" : "int8 output");
    const Int8Expectation want = int8_expectation(data, op_case, float_output);
    const std::unique_ptr<LayerKernel> kernel =
        entry.create({want.graph.nodes.back(), want.graph, &want.calibration});
    // int8 at the input's scale, or fp32 NCHW that the kernel quantises at that scale itself
    // (a quantising first layer: the expected output is the same).
    for (size_t i = 0; i < want.input_scales.size(); ++i)
      for (const TensorType& type : kernel->input_types(i)) {
        if (type == fp32_nchw()) continue;
        EXPECT_EQ(type.dtype, DType::I8) << "input " << i;
        EXPECT_EQ(type.scale, want.input_scales[i]) << "input " << i << " not at its scale";
      }
    const TensorType out = kernel->output_type();
    EXPECT_EQ(out.dtype == DType::I8, !float_output);
    if (!float_output) {
      EXPECT_EQ(out.scale, want.output_scale) << "output not at its scale";
    }
    const std::string variant = check_kernel(
        *kernel, data, op_case, device,
        [&](const std::vector<float>& got) { return compare_exact(got, want.expected); });
    if (!::testing::Test::HasFailure()) record_perf(*kernel, entry, data, op_case, device, variant);
  }
}

TEST_P(KernelHarness, MatchesCpuReference) {
  const HarnessParam& param = GetParam();
  const OpCase& op_case = op_cases(param.op)[param.case_index];
  const KernelEntry* entry = KernelRegistry::instance().find(param.entry);
  ASSERT_NE(entry, nullptr) << param.entry;
  const HarnessDevice* device = harness_device(entry->device);
  if (device == nullptr || !device->available()) {
    ++g_counts.no_device;
    GTEST_SKIP() << "no " << to_string(entry->device) << " device";
  }
  // A 2:4 entry sees the case with its weight pruned 2:4 (and marked so), the others as it is.
  std::optional<CaseData> sparse;
  if (entry->sparse_2_4) sparse = sparse_case_data(op_case);
  if (!entry->supports(sparse ? sparse->node() : op_case.node())) {
    ++g_counts.unsupported;
    GTEST_SKIP() << entry->name << " does not support this case";
  }
  const CaseData& data = sparse ? *sparse : case_data(op_case);
  if (entry->precision == Precision::INT8) return check_int8_entry(*entry, data, op_case, *device);
  const std::unique_ptr<LayerKernel> kernel = entry->create({data.node(), data.graph});
  const Tolerance tolerance = tolerance_for(entry->precision);
  const std::string variant = check_kernel(
      *kernel, data, op_case, *device,
      [&](const std::vector<float>& got) { return compare(got, data.expected, tolerance); });
  if (!HasFailure()) record_perf(*kernel, *entry, data, op_case, *device, variant);
  // A linear layer that is the graph's output may write its fp32 result itself (the CUDA fp16
  // linears do: no conversion pass after the network's last layer).  The same case again with
  // the node as the graph output, in whatever output type the kernel then declares.
  if (entry->op == OpKind::Linear) {
    SCOPED_TRACE("as the graph output");
    Graph as_output = data.graph;
    as_output.output = data.node().name;
    const std::unique_ptr<LayerKernel> last = entry->create({as_output.nodes.back(), as_output});
    check_kernel(*last, data, op_case, *device, [&](const std::vector<float>& got) {
      return compare(got, data.expected, tolerance);
    });
  }
}

// One instantiation per op, named as in the YAML (filter: '<op>/*').
INSTANTIATE_TEST_SUITE_P(conv, KernelHarness, ::testing::ValuesIn(params_for(OpKind::Conv)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(linear, KernelHarness, ::testing::ValuesIn(params_for(OpKind::Linear)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(maxpool, KernelHarness, ::testing::ValuesIn(params_for(OpKind::MaxPool)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(avgpool, KernelHarness, ::testing::ValuesIn(params_for(OpKind::AvgPool)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(adaptive_avgpool, KernelHarness,
                         ::testing::ValuesIn(params_for(OpKind::AdaptiveAvgPool)), param_name);
INSTANTIATE_TEST_SUITE_P(relu, KernelHarness, ::testing::ValuesIn(params_for(OpKind::Relu)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(relu6, KernelHarness, ::testing::ValuesIn(params_for(OpKind::Relu6)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(clip, KernelHarness, ::testing::ValuesIn(params_for(OpKind::Clip)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(dropout, KernelHarness, ::testing::ValuesIn(params_for(OpKind::Dropout)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(flatten, KernelHarness, ::testing::ValuesIn(params_for(OpKind::Flatten)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(softmax, KernelHarness, ::testing::ValuesIn(params_for(OpKind::Softmax)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(batchnorm, KernelHarness,
                         ::testing::ValuesIn(params_for(OpKind::BatchNorm)), param_name);
INSTANTIATE_TEST_SUITE_P(lrn, KernelHarness, ::testing::ValuesIn(params_for(OpKind::LRN)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(add, KernelHarness, ::testing::ValuesIn(params_for(OpKind::Add)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(concat, KernelHarness, ::testing::ValuesIn(params_for(OpKind::Concat)),
                         param_name);

// A kernel of an op without a table, or one that no case reaches, would pass in silence.
TEST(HarnessCoverage, EveryRegisteredOpHasACaseTableInstantiatedHere) {
  const std::vector<OpKind>& ops = tested_ops();
  std::set<std::string> instantiated;
  for (const auto& name :
       {"conv", "linear", "maxpool", "avgpool", "adaptive_avgpool", "relu", "dropout", "flatten",
        "softmax", "batchnorm", "lrn", "add", "concat", "relu6", "clip"})
    instantiated.insert(name);
  for (const KernelEntry& entry : KernelRegistry::instance().entries()) {
    EXPECT_NE(std::find(ops.begin(), ops.end(), entry.op), ops.end())
        << entry.name << ": op " << op_name(entry.op) << " has no case table (cases.cpp)";
    EXPECT_EQ(instantiated.count(op_name(entry.op)), 1u)
        << entry.name << ": op " << op_name(entry.op) << " is not instantiated in this file";
  }
}

TEST(HarnessCoverage, EveryEntryOfAPresentDeviceSupportsSomeCase) {
  for (const KernelEntry& entry : KernelRegistry::instance().entries()) {
    const HarnessDevice* device = harness_device(entry.device);
    if (device == nullptr || !device->available()) continue;
    const std::vector<OpCase>& cases = op_cases(entry.op);
    const bool reached = std::any_of(cases.begin(), cases.end(), [&](const OpCase& c) {
      if (!entry.sparse_2_4) return entry.supports(c.node());
      Node pruned = c.node();  // a sparse entry is offered only for a 2:4 weight
      pruned.weight_2_4 = true;
      return entry.supports(pruned);
    });
    EXPECT_TRUE(reached) << entry.name << " supports none of the " << op_name(entry.op)
                         << " cases: add a case it serves to cases.cpp";
  }
}

}  // namespace
}  // namespace cnnrt::harness
