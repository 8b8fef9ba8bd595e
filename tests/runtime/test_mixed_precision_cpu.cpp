// Per-layer precision on the CPU: the mechanism — kernels of another tensor type chosen per layer,
// conversion steps inserted by the builder, every tensor planned from its own type — exercised
// with two test-only registry entries registered from here: a relu reading and writing fp16
// NCHW, and one reading and writing fp32 NHWC/8.  They are marked `baseline` so they are only
// ever chosen by name (`impl:` in the model, or a layer choice / plan file), never by default,
// and other tests in this binary see no change.  Plus plan files: a round trip through
// load_plan_file, and bad plan files that must fail with one error naming the file, the line,
// the layer and the valid choices, building nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/model_loader.h"
#include "harness/tolerance.h"
#include "kernels/cpu/convert_ref.h"
#include "random_test_util.h"
#include "runtime/calibration.h"
#include "runtime/engine_impl.h"
#include "runtime/plan_file.h"

namespace cnnrt {
namespace {

const TensorType kFp16Nchw{DType::F16, Layout::NCHW, 1, 0};

// relu over fp16 NCHW values (NaN kept, as torch.relu); in place allowed.
class ReluFp16Nchw final : public LayerKernel {
 public:
  explicit ReluFp16Nchw(const Node& node) : elements_(shape_elements(node.output_shape)) {}
  std::vector<TensorType> input_types(size_t) const override { return {kFp16Nchw}; }
  TensorType output_type() const override { return kFp16Nchw; }
  KernelPlan prepare(const PrepareInfo&) const override {
    KernelPlan plan;
    plan.in_place = true;
    return plan;
  }
  void run(const KernelArgs& args) override {
    const auto* x = static_cast<const uint16_t*>(args.inputs.at(0));
    auto* y = static_cast<uint16_t*>(args.output);
    for (int64_t i = 0; i < elements_ * args.batch; ++i)
      y[i] = ref::half_to_float(x[i]) < 0.0f ? ref::float_to_half(0.0f) : x[i];
  }

 private:
  int64_t elements_;
};

// relu over fp32 NHWC/8: the padding lanes are zeros in, zeros out.
class ReluFp32Nhwc8 final : public LayerKernel {
 public:
  explicit ReluFp32Nhwc8(const Node& node) : shape_(node.output_shape) {}
  std::vector<TensorType> input_types(size_t) const override { return {fp32_nhwc8()}; }
  TensorType output_type() const override { return fp32_nhwc8(); }
  KernelPlan prepare(const PrepareInfo&) const override {
    KernelPlan plan;
    plan.in_place = true;
    return plan;
  }
  void run(const KernelArgs& args) override {
    const auto* x = static_cast<const float*>(args.inputs.at(0));
    auto* y = static_cast<float*>(args.output);
    const size_t count = tensor_bytes(shape_, fp32_nhwc8(), args.batch) / sizeof(float);
    for (size_t i = 0; i < count; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
  }

 private:
  Shape shape_;
};

template <typename Kernel>
void add_test_entry(const char* name, Precision precision) {
  KernelEntry entry;
  entry.name = name;
  entry.op = OpKind::Relu;
  entry.device = Device::CPU;
  entry.precision = precision;
  entry.baseline = true;  // chosen by name only
  entry.supports = [](const Node& node) {
    return !node.input_shapes.empty() && node.activation == Activation::None;
  };
  entry.create = [](const KernelBuildContext& context) -> std::unique_ptr<LayerKernel> {
    return std::make_unique<Kernel>(context.node);
  };
  KernelRegistry::instance().add(std::move(entry));
}

void register_test_kernels() {
  static const bool registered = [] {
    add_test_entry<ReluFp16Nchw>("test_relu_fp16_nchw", Precision::FP16);
    add_test_entry<ReluFp32Nhwc8>("test_relu_fp32_nhwc8", Precision::FP32);
    return true;
  }();
  (void)registered;
}

// conv1 → pool1 → act1 → conv2 → pool2 → act2 → flatten → fc.  The relus follow pools, so no
// pass fuses them into a conv; act1 asks for the fp16 NCHW test kernel by name.
const char* const kModel = R"(name: mixed_cpu
input: {shape: [3, 13, 11]}
layers:
  - {name: conv1, op: conv, out_channels: 5, kernel: 3, padding: 1, weight: c1.w, bias: c1.b}
  - {name: pool1, op: maxpool, kernel: 2, stride: 2}
  - {name: act1, op: relu, impl: test_relu_fp16_nchw}
  - {name: conv2, op: conv, out_channels: 7, kernel: 3, padding: 1, weight: c2.w, bias: c2.b}
  - {name: pool2, op: avgpool, kernel: 2, stride: 1}
  - {name: act2, op: relu}
  - {name: flatten, op: flatten}
  - {name: fc, op: linear, out_features: 6, weight: f.w, bias: f.b}
)";
constexpr int kBatch = 3;

class MixedPrecisionCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    register_test_kernels();
    graph_ = parse_model(kModel, "mixed_cpu.yaml");
    bind_random_weights(graph_, 11);
    plain_ = graph_;
    for (Node& node : plain_.nodes) node.kernel_request.clear();
    std::mt19937 rng(3);
    input_ = test::random_vector(kBatch * 3 * 13 * 11, rng);
  }
  std::shared_ptr<Engine> build(const Graph& graph,
                                std::map<std::string, LayerChoice> choices = {}) {
    BuildOptions options;
    options.device = Device::CPU;
    options.layer_choices = std::move(choices);
    return Engine::build(graph, options);
  }
  std::vector<float> run(const Engine& engine) {
    std::vector<float> output(kBatch * 6, std::nanf(""));
    engine.create_context(kBatch)->run(input_.data(), output.data());
    return output;
  }
  // The path of a fresh file holding `text`.
  std::string write_plan(const std::string& name, const std::string& text) {
    const std::string path =
        ::testing::TempDir() + "cnnrt_" + std::to_string(getpid()) + "_" + name + ".yaml";
    std::ofstream(path) << text;
    return path;
  }

  Graph graph_, plain_;  // plain_: the same model without its impl: key
  std::vector<float> input_;
};

const Step& step_named(const Engine& engine, const std::string& name) {
  for (const Step& step : engine.impl().steps)
    if (step.name == name) return step;
  throw Error("no step " + name);
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// Every planned tensor that has a type occupies its own type's bytes (rounded to the planner's
// 256-byte alignment): the plan sizes tensors from their types, not from fp32.
void expect_tensors_sized_from_their_types(const Engine& engine, int batch) {
  const ExecutionPlan plan = engine.plan(batch);
  int typed = 0;
  for (const ExecutionPlan::Tensor& tensor : plan.tensors) {
    auto found = engine.impl().tensors.find(tensor.name);
    if (found == engine.impl().tensors.end()) continue;  // a workspace
    const size_t bytes = tensor_bytes(found->second.shape, found->second.type, batch);
    EXPECT_EQ(tensor.bytes, (bytes + 255) / 256 * 256) << tensor.name << " " << tensor.type;
    EXPECT_EQ(tensor.type, to_string(found->second.type)) << tensor.name;
    ++typed;
  }
  EXPECT_GT(typed, 0);
}

TEST_F(MixedPrecisionCpu, ImplKeyRunsAnFp16KernelBetweenInsertedConversions) {
  const auto engine = build(graph_);
  const Step& act1 = step_named(*engine, "act1");
  EXPECT_EQ(act1.kernel_name, "test_relu_fp16_nchw");
  EXPECT_EQ(act1.precision, Precision::FP16);
  ASSERT_EQ(act1.inputs, std::vector<std::string>{"pool1.fp16_nchw"});
  const Step& to_fp16 = step_named(*engine, "pool1.fp16_nchw");
  EXPECT_TRUE(to_fp16.is_conversion());
  EXPECT_EQ(to_fp16.kernel_name, "convert_fp32_nchw_to_fp16_nchw");
  EXPECT_EQ(step_named(*engine, "conv2").inputs, std::vector<std::string>{"act1.fp32_nchw"});
  EXPECT_EQ(step_named(*engine, "act1.fp32_nchw").kernel_name, "convert_fp16_nchw_to_fp32_nchw");

  const std::string described = engine->describe();
  EXPECT_NE(described.find("pool1.fp16_nchw  [conversion]  convert_fp32_nchw_to_fp16_nchw"),
            std::string::npos)
      << described;
  EXPECT_NE(described.find("test_relu_fp16_nchw  fp16  fp16 NCHW -> fp16 NCHW"), std::string::npos)
      << described;

  const ExecutionPlan plan = engine->plan(kBatch);
  const auto planned = std::find_if(plan.steps.begin(), plan.steps.end(),
                                    [](const PlannedStep& s) { return s.name == "act1"; });
  ASSERT_NE(planned, plan.steps.end());
  EXPECT_EQ(planned->input_types, std::vector<std::string>{"fp16 NCHW"});
  EXPECT_EQ(planned->output_type, "fp16 NCHW");
  expect_tensors_sized_from_their_types(*engine, kBatch);
  expect_tensors_sized_from_their_types(*engine, 1);

  // One fp16 rounding of pool1's output: within the fp16 tolerance of the fp32 engine, and not
  // identical to it (the fp16 kernel really ran).
  const std::vector<float> mixed = run(*engine), fp32 = run(*build(plain_));
  EXPECT_LE(rel_l2(mixed, fp32), harness::tolerance_for(Precision::FP16).rel_l2);
  EXPECT_NE(mixed, fp32);
}

TEST_F(MixedPrecisionCpu, LayerChoiceRunsAnNhwcKernelAndMatchesExactly) {
  std::map<std::string, LayerChoice> choices;
  choices["act2"].kernel = "test_relu_fp32_nhwc8";
  const auto engine = build(plain_, choices);
  const Step& act2 = step_named(*engine, "act2");
  EXPECT_EQ(act2.kernel_name, "test_relu_fp32_nhwc8");
  ASSERT_EQ(act2.inputs, std::vector<std::string>{"pool2.fp32_nhwc8"});
  EXPECT_EQ(step_named(*engine, "pool2.fp32_nhwc8").kernel_name, "convert_fp32_nchw_to_fp32_nhwc8");
  EXPECT_EQ(step_named(*engine, "flatten").inputs, std::vector<std::string>{"act2.fp32_nchw"});
  EXPECT_EQ(engine->impl().tensors.at("act2").type, fp32_nhwc8());
  // pool2.fp32_nhwc8 dies at act2, so the in-place kernel may write over it.
  const ExecutionPlan plan = engine->plan(kBatch);
  for (const PlannedStep& step : plan.steps)
    if (step.name == "act2") EXPECT_TRUE(step.in_place);
  expect_tensors_sized_from_their_types(*engine, kBatch);
  // Layout conversions and relu are exact: the same bits as the all-NCHW engine.
  EXPECT_EQ(run(*engine), run(*build(plain_)));
}

TEST_F(MixedPrecisionCpu, PlanFileRoundTripsAndOverridesTheModel) {
  const std::string path = write_plan("round_trip",
                                      "model: mixed_cpu\n"
                                      "layers:\n"
                                      "  act1: {precision: fp16, kernel: test_relu_fp16_nchw}\n"
                                      "  act2: {kernel: test_relu_fp32_nhwc8}\n"
                                      "  fc: {precision: fp32}\n");
  const std::map<std::string, LayerChoice> choices = load_plan_file(path);
  ASSERT_EQ(choices.size(), 3u);
  EXPECT_EQ(choices.at("act1").precision, Precision::FP16);
  EXPECT_EQ(choices.at("act1").kernel, "test_relu_fp16_nchw");
  EXPECT_EQ(choices.at("act1").origin, path + ":3:3");
  EXPECT_EQ(choices.at("act2").precision, Precision::Auto);
  EXPECT_EQ(choices.at("act2").kernel, "test_relu_fp32_nhwc8");
  EXPECT_EQ(choices.at("fc").precision, Precision::FP32);
  EXPECT_TRUE(choices.at("fc").kernel.empty());

  const auto from_plan = build(plain_, choices);
  EXPECT_EQ(step_named(*from_plan, "act1").kernel_name, "test_relu_fp16_nchw");
  EXPECT_EQ(step_named(*from_plan, "act2").kernel_name, "test_relu_fp32_nhwc8");
  EXPECT_EQ(step_named(*from_plan, "fc").kernel_name, "cpu_ref_linear");
  // The same choices written in the model and as layer choices: the same engine.
  std::map<std::string, LayerChoice> act2_only;
  act2_only["act2"].kernel = "test_relu_fp32_nhwc8";
  const auto from_model = build(graph_, act2_only);
  ASSERT_EQ(from_plan->impl().steps.size(), from_model->impl().steps.size());
  for (size_t i = 0; i < from_plan->impl().steps.size(); ++i)
    EXPECT_EQ(from_plan->impl().steps[i].kernel_name, from_model->impl().steps[i].kernel_name);
  EXPECT_EQ(run(*from_plan), run(*from_model));

  // A plan file's choice wins over the model's own `impl:`.
  const auto overridden = build(
      graph_, load_plan_file(write_plan("override", "layers:\n  act1: {kernel: cpu_ref_relu}\n")));
  EXPECT_EQ(step_named(*overridden, "act1").kernel_name, "cpu_ref_relu");
  for (const Step& step : overridden->impl().steps) EXPECT_FALSE(step.is_conversion()) << step.name;
}

// The message of the Error `action` throws ("" when it throws none).
template <typename Action>
std::string error_of(Action action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

void expect_mentions(const std::string& message, const std::vector<std::string>& parts) {
  EXPECT_FALSE(message.empty()) << "expected an error";
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
  for (const std::string& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' missing in: " << message;
}

// apply_plan_file (the CLIs' --plan and the Python module's plan=): choices, model name and
// fingerprint, device, and the calibration the plan names.
TEST_F(MixedPrecisionCpu, ApplyPlanFileSettlesEverythingThePlanRecords) {
  std::ofstream(::testing::TempDir() + "cnnrt_apply_calib.json")
      << R"({"format": "cnnrt-calibration", "version": 1, "model": "mixed_cpu", "tensors": )"
      << R"({"input": {"amax": 1.0, "scale": 0.0078740157}}})";
  const std::string path = write_plan("apply",
                                      "model: mixed_cpu\n"
                                      "model_hash: 0123456789abcdef\n"
                                      "device: cpu\n"
                                      "calibration: cnnrt_apply_calib.json\n"
                                      "layers:\n"
                                      "  fc: {precision: fp32}\n");
  BuildOptions options;
  apply_plan_file(path, options);
  EXPECT_EQ(options.device, Device::CPU);  // Auto becomes the plan's device
  EXPECT_EQ(options.choices_model, "mixed_cpu");
  EXPECT_EQ(options.choices_fingerprint, "0123456789abcdef");
  ASSERT_EQ(options.layer_choices.size(), 1u);
  ASSERT_NE(options.calibration, nullptr);  // read from beside the plan file
  EXPECT_NE(options.calibration->find("input"), nullptr);
  // The fingerprint is checked at build: these weights hash differently, a stale plan.
  options.device = Device::CPU;
  expect_mentions(error_of([&] { Engine::build(plain_, options); }),
                  {"stale plan", "0123456789abcdef"});
  // A plan for another device is refused.
  BuildOptions cuda;
  cuda.device = Device::CUDA;
  expect_mentions(error_of([&] { apply_plan_file(path, cuda); }),
                  {path, "made for device cpu, not cuda"});
}

TEST_F(MixedPrecisionCpu, BadPlanFilesNameFileLineLayerAndTheValidChoices) {
  auto build_from = [&](const std::string& path) { build(plain_, load_plan_file(path)); };

  std::string path = write_plan("unknown_layer", "layers:\n  nope: {kernel: cpu_ref_relu}\n");
  expect_mentions(error_of([&] { build_from(path); }),
                  {path + ":2:3", "'nope'", "conv1", "act2", "fc"});

  path = write_plan("unknown_kernel", "layers:\n  act2: {kernel: no_such_kernel}\n");
  expect_mentions(error_of([&] { build_from(path); }),
                  {path + ":2:3", "layer 'act2'", "no_such_kernel", "cpu_ref_relu (fp32)",
                   "test_relu_fp16_nchw (fp16)"});

  path = write_plan("wrong_op_kernel", "layers:\n  fc: {kernel: cpu_ref_conv}\n");
  expect_mentions(error_of([&] { build_from(path); }),
                  {path + ":2:3", "layer 'fc'", "cpu_ref_conv", "cpu_ref_linear (fp32)"});

  path = write_plan("unsupported_precision", "layers:\n  fc: {precision: fp16}\n");
  expect_mentions(error_of([&] { build_from(path); }),
                  {path + ":2:3", "layer 'fc'", "fp16", "cpu_ref_linear (fp32)"});

  path = write_plan("bad_precision_value", "layers:\n  fc: {precision: fp8}\n");
  expect_mentions(error_of([&] { load_plan_file(path); }),
                  {path + ":2:", "layer 'fc'", "fp8", "fp32, fp16, int8"});

  path = write_plan("bad_key", "layers:\n  fc: {precison: fp32}\n");
  expect_mentions(error_of([&] { load_plan_file(path); }),
                  {path + ":2:", "layer 'fc'", "precison", "precision, kernel"});

  path = write_plan("malformed", "layers:\n  act2: {kernel: [oops\n");
  expect_mentions(error_of([&] { load_plan_file(path); }), {path + ":", "not valid YAML"});

  path = write_plan("not_a_map", "- act2\n- fc\n");
  expect_mentions(error_of([&] { load_plan_file(path); }), {path + ":1:", "layers"});

  expect_mentions(error_of([&] { load_plan_file(path + ".missing"); }), {path + ".missing"});

  // Found by fuzz_plan_file: bytes that are not UTF-8 were accepted and then written back as
  // U+FFFD by the plan writer, so `build` wrote a plan that read back differently.
  path = write_plan("not_utf8", "model: alex\xff\x0e\nlayers:\n  fc: {precision: fp32}\n");
  expect_mentions(error_of([&] { load_plan_file(path); }),
                  {path + ":1:", "'model' is not valid UTF-8 (byte 4)"});
  path = write_plan("not_utf8_layer",
                    "layers:\n  f\xc0\xaf"
                    "c: {precision: fp32}\n");
  expect_mentions(error_of([&] { load_plan_file(path); }), {path + ":2:", "not valid UTF-8"});
  // Valid multi-byte names are kept.
  path = write_plan("utf8_layer", "model: \xc3\xa9t\xc3\xa9\nlayers:\n  fc: {precision: fp32}\n");
  std::string model;
  EXPECT_EQ(load_plan_file(path, &model).size(), 1u);
  EXPECT_EQ(model, "\xc3\xa9t\xc3\xa9");
}

// A tensor past the fingerprint's block size (2^20 floats) is hashed block by block on the
// host's cores: a change in any block, or in the short last one, still changes the fingerprint,
// and the same weights hash the same every time.
TEST_F(MixedPrecisionCpu, FingerprintOfBigTensorsSeesEveryValue) {
  Graph big = graph_;
  Param& weight = big.nodes.back().params.front();
  weight.value.shape = {static_cast<int64_t>(weight.value.data.size())};
  std::mt19937 rng(5);
  const std::vector<float> values = test::random_vector((3 << 20) + 5, rng);
  weight.value.data.assign(values.begin(), values.end());
  const std::string base = model_fingerprint(big);
  EXPECT_EQ(model_fingerprint(big), base);
  for (size_t at : {size_t{0}, size_t{(1 << 20) + 17}, weight.value.data.size() - 1}) {
    Graph changed = big;
    float& value = changed.nodes.back().params.front().value.data[at];
    value = std::nextafter(value, 10.0f);
    EXPECT_NE(model_fingerprint(changed), base) << "value " << at;
  }
}

// Found by fuzz_plan_file (CI): a layer named `a[[[...` (quoted in the plan it read) was written
// back as a plain key, and the reader's text-level nesting guard counted its brackets, so a plan
// plan_file_text wrote was refused.  Names and kernels are written quoted.
TEST_F(MixedPrecisionCpu, PlanNamesWithBracketsAndQuotesRoundTrip) {
  PlanFile plan;
  const std::string layer = "a" + std::string(70, '[') + "\"'#";
  const std::string kernel = "k" + std::string(70, '{') + "]";
  // And a long one with control characters, each escaped to 4 (fuzz_plan_file again: past
  // 1,024 characters an implicit key is not YAML).
  const std::string long_layer = "b" + std::string(300, '\0') + std::string(10, '\a') + "[";
  plan.layers[layer] = LayerChoice{Precision::FP16, kernel, "", ""};
  plan.layers[long_layer] = LayerChoice{Precision::INT8, "k", "", ""};
  plan.order = {layer, long_layer};
  const std::string path = write_plan("brackets", plan_file_text(plan));
  const PlanFile back = read_plan_file(path);
  ASSERT_EQ(back.order, plan.order);
  EXPECT_EQ(back.layers.at(layer).kernel, kernel);
  EXPECT_EQ(back.layers.at(layer).precision, Precision::FP16);
  EXPECT_EQ(back.layers.at(long_layer).precision, Precision::INT8);
}

}  // namespace
}  // namespace cnnrt
