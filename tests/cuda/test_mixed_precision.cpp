// Per-layer precision on the GPU: fp16 tensor-core layers and fp32 reference layers
// (runtime/cuda/fp32_entries.cpp) next to each other in one engine, chosen by the model's
// `precision:` keys or by layer choices (what a plan file gives), with the fp16 ↔ fp32
// conversion steps the builder inserts visible in describe() and plan(), every tensor planned
// from its own type, and the output held against the CPU engine; and `--precision fp32` on
// CUDA, every layer in the fp32 family, held against the CPU to 1e-5.
//
// Tolerances: a mixed engine carries fp16 activations through most layers, so rel L2 <= 1e-2
// against the CPU, as the all-fp16 engine tests (test_cuda_engine.cpp); an all-fp32 GPU engine
// accumulates in double like the CPU reference and may only differ by summation order and the
// host ↔ device layout moves, which are exact: rel L2 <= 1e-5 (harness/tolerance.h, fp32).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/model_loader.h"
#include "harness/tolerance.h"
#include "runtime/calibration.h"
#include "runtime/cuda/device_info.h"
#include "runtime/engine_impl.h"
#include "sample_inputs.h"

namespace cnnrt {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!cuda::cuda_device_present()) GTEST_SKIP() << "no CUDA device"

// conv2 (fused with relu2) and fc1 (fused with relu4) ask for fp32; everything else takes the
// engine default, fp16.  fc1 reads a flatten of a [24, H, W] fp16 map: the fp32 linear must
// permute its weight columns to the (h, w, c) order exactly like the fp16 one.
const char* const kMixedModel = R"(name: mixed_gpu
input: {shape: [3, 29, 23]}
layers:
  - {name: conv1, op: conv, out_channels: 16, kernel: 3, padding: 1, weight: c1.w, bias: c1.b}
  - {name: relu1, op: relu}
  - {name: pool1, op: maxpool, kernel: 2, stride: 2}
  - {name: conv2, op: conv, out_channels: 13, kernel: 3, padding: 1, weight: c2.w, bias: c2.b, precision: fp32}
  - {name: relu2, op: relu}
  - {name: conv3, op: conv, out_channels: 24, kernel: 3, stride: 2, weight: c3.w, bias: c3.b}
  - {name: relu3, op: relu}
  - {name: flatten, op: flatten}
  - {name: fc1, op: linear, out_features: 37, weight: f1.w, bias: f1.b, precision: fp32}
  - {name: relu4, op: relu}
  - {name: fc2, op: linear, out_features: 10, weight: f2.w, bias: f2.b}
)";

// Conv stem read straight from the graph input by an fp32 layer, a concat of an fp32 and an fp16
// branch, an LRN, a softmax at the end: the other conversion directions.
const char* const kBranchyModel = R"(name: mixed_branches
input: {shape: [3, 17, 13]}
layers:
  - {name: stem, op: conv, out_channels: 8, kernel: 3, padding: 1, weight: s.w, bias: s.b, precision: fp32}
  - {name: stem_relu, op: relu}
  - {name: left, op: conv, input: stem_relu, out_channels: 5, kernel: 1, weight: l.w, bias: l.b, precision: fp32}
  - {name: right, op: conv, input: stem_relu, out_channels: 11, kernel: 3, padding: 1, weight: r.w, bias: r.b}
  - {name: cat, op: concat, inputs: [left, right]}
  - {name: norm, op: lrn, size: 3, alpha: 0.01, beta: 0.75, k: 2.0, precision: fp32}
  - {name: pool, op: avgpool, kernel: 3, stride: 2, padding: 1}
  - {name: flatten, op: flatten}
  - {name: fc, op: linear, out_features: 9, weight: f.w, bias: f.b}
  - {name: prob, op: softmax, precision: fp32}
)";

Graph make_graph(const char* yaml, const char* file) {
  Graph graph = parse_model(yaml, file);
  bind_random_weights(graph, 23);
  return graph;
}

std::shared_ptr<Engine> build(const Graph& graph, Device device,
                              Precision precision = Precision::Auto,
                              std::map<std::string, LayerChoice> choices = {}) {
  BuildOptions options;
  options.device = device;
  options.precision = precision;
  options.layer_choices = std::move(choices);
  return Engine::build(graph, options);
}

std::vector<float> run(const Engine& engine, int batch, uint32_t seed = 9) {
  int64_t in_count = batch, out_count = batch;
  for (int64_t d : engine.model().input_shape) in_count *= d;
  for (int64_t d : engine.model().output_shape) out_count *= d;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> input(static_cast<size_t>(in_count));
  for (float& v : input) v = dist(rng);
  std::vector<float> output(static_cast<size_t>(out_count), std::nanf(""));
  engine.create_context(batch)->run(input.data(), output.data());
  return output;
}

double rel_l2(const std::vector<float>& value, const std::vector<float>& reference) {
  double error = 0, norm = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    if (!std::isfinite(value[i])) return INFINITY;
    const double d = static_cast<double>(value[i]) - reference[i];
    error += d * d;
    norm += static_cast<double>(reference[i]) * reference[i];
  }
  return norm > 0 ? std::sqrt(error / norm) : INFINITY;
}

const Step& step_named(const Engine& engine, const std::string& name) {
  for (const Step& step : engine.impl().steps)
    if (step.name == name) return step;
  throw Error("no step " + name + " in\n" + engine.describe());
}

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

// The layers of the mixed model and the conversions around the two fp32 ones.
void expect_mixed_steps(const Engine& engine) {
  const Step& conv2 = step_named(engine, "conv2");
  EXPECT_EQ(conv2.kernel_name, "conv_fp32");
  EXPECT_EQ(conv2.precision, Precision::FP32);
  EXPECT_EQ(conv2.input_types, std::vector<TensorType>{fp32_nhwc8()});
  EXPECT_EQ(conv2.inputs, std::vector<std::string>{"conv1.fp32_nhwc8"});
  EXPECT_EQ(step_named(engine, "conv1.fp32_nhwc8").kernel_name, "convert_fp16_nhwc8_to_fp32_nhwc8");
  EXPECT_EQ(step_named(engine, "conv3").inputs, std::vector<std::string>{"conv2.fp16_nhwc8"});
  EXPECT_EQ(step_named(engine, "conv2.fp16_nhwc8").kernel_name, "convert_fp32_nhwc8_to_fp16_nhwc8");
  const Step& fc1 = step_named(engine, "fc1");
  EXPECT_EQ(fc1.kernel_name, "linear_fp32");
  EXPECT_EQ(fc1.inputs, std::vector<std::string>{"flatten.fp32_nhwc8"});
  EXPECT_EQ(step_named(engine, "fc2").inputs, std::vector<std::string>{"fc1.fp16_nhwc8"});
  for (const char* fp16_layer : {"conv1", "conv3", "flatten", "fc2"})
    EXPECT_EQ(step_named(engine, fp16_layer).precision, Precision::FP16) << fp16_layer;
}

TEST(MixedPrecisionGpu, Fp32LayersAmongFp16LayersFromTheModel) {
  SKIP_WITHOUT_GPU();
  const Graph graph = make_graph(kMixedModel, "mixed_gpu.yaml");
  const auto engine = build(graph, Device::CUDA);
  expect_mixed_steps(*engine);
  const std::string described = engine->describe();
  for (const char* text :
       {"conv1.fp32_nhwc8  [conversion]  convert_fp16_nhwc8_to_fp32_nhwc8  fp32  fp16 NHWC/8 -> "
        "fp32 NHWC/8",
        "conv_fp32  fp32  fp32 NHWC/8 -> fp32 NHWC/8",
        "conv2.fp16_nhwc8  [conversion]  convert_fp32_nhwc8_to_fp16_nhwc8  fp16  fp32 NHWC/8 -> "
        "fp16 NHWC/8",
        "linear_fp32  fp32  fp32 NHWC/8 -> fp32 NHWC/8"})
    EXPECT_NE(described.find(text), std::string::npos) << text << " missing in\n" << described;

  for (int batch : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const ExecutionPlan plan = engine->plan(batch);
    int conversions = 0;
    for (const PlannedStep& step : plan.steps)
      if (step.sources.empty()) {
        ++conversions;
        ASSERT_EQ(step.input_types.size(), 1u);
        EXPECT_NE(step.input_types[0], step.output_type) << step.name;
      }
    // input → fp16, conv1 → fp32, conv2 → fp16, flatten → fp32, fc1 → fp16; fc2, the graph
    // output, writes fp32 NCHW itself (linear_fp16 as the last layer).
    EXPECT_EQ(conversions, 5) << plan.to_table();
    expect_tensors_sized_from_their_types(*engine, batch);
    const std::vector<float> cpu = run(*build(graph, Device::CPU), batch);
    EXPECT_LE(rel_l2(run(*engine, batch), cpu), 1e-2) << described;
  }
}

TEST(MixedPrecisionGpu, LayerChoicesGiveTheSameEngineAsModelKeys) {
  SKIP_WITHOUT_GPU();
  const Graph keyed = make_graph(kMixedModel, "mixed_gpu.yaml");
  Graph plain = keyed;
  for (Node& node : plain.nodes) node.precision_request.clear();
  std::map<std::string, LayerChoice> choices;
  choices["conv2"].precision = Precision::FP32;  // by precision
  choices["fc1"].kernel = "linear_fp32";         // by kernel name
  const auto from_choices = build(plain, Device::CUDA, Precision::Auto, choices);
  expect_mixed_steps(*from_choices);
  const auto from_model = build(keyed, Device::CUDA);
  ASSERT_EQ(from_choices->impl().steps.size(), from_model->impl().steps.size());
  for (size_t i = 0; i < from_model->impl().steps.size(); ++i)
    EXPECT_EQ(from_choices->impl().steps[i].kernel_name, from_model->impl().steps[i].kernel_name);
  // The same kernels on the same weights: the same bits.
  EXPECT_EQ(run(*from_choices, 3), run(*from_model, 3));
  // A source layer's name reaches the fused node: relu2 is part of conv2.
  std::map<std::string, LayerChoice> by_source;
  by_source["relu2"].precision = Precision::FP32;
  EXPECT_EQ(
      step_named(*build(plain, Device::CUDA, Precision::Auto, by_source), "conv2").kernel_name,
      "conv_fp32");
}

TEST(MixedPrecisionGpu, BranchesJoinAcrossPrecisions) {
  SKIP_WITHOUT_GPU();
  const Graph graph = make_graph(kBranchyModel, "mixed_branches.yaml");
  const auto engine = build(graph, Device::CUDA);
  EXPECT_EQ(step_named(*engine, "stem").inputs, std::vector<std::string>{"input.fp32_nhwc8"});
  EXPECT_EQ(step_named(*engine, "input.fp32_nhwc8").kernel_name, "convert_fp32_nchw_to_fp32_nhwc8");
  EXPECT_EQ(step_named(*engine, "prob").kernel_name, "softmax_fp32");
  EXPECT_EQ(engine->impl().output_tensor, "prob.fp32_nchw");
  EXPECT_EQ(step_named(*engine, "prob.fp32_nchw").kernel_name, "convert_fp32_nhwc8_to_fp32_nchw");
  for (int batch : {1, 3}) {
    expect_tensors_sized_from_their_types(*engine, batch);
    EXPECT_LE(rel_l2(run(*engine, batch), run(*build(graph, Device::CPU), batch)), 1e-2)
        << engine->describe();
  }
}

// The network's last layer, an fp16 linear, writes the fp32 output itself: no conversion step
// after it, at a GEMV batch and at a cuBLASLt one, and the same result as the CPU engine.
TEST(MixedPrecisionGpu, LastLinearWritesTheFp32OutputItself) {
  SKIP_WITHOUT_GPU();
  Graph graph = load_model(std::string(CNNRT_SOURCE_DIR) + "/models/alexnet.yaml");
  bind_random_weights(graph, 11);
  const auto engine = build(graph, Device::CUDA);
  EXPECT_EQ(engine->impl().output_tensor, "fc8");
  EXPECT_EQ(engine->impl().steps.back().name, "fc8");
  EXPECT_EQ(engine->impl().steps.back().kernel_name, "linear_fp16");
  const auto cpu = build(graph, Device::CPU);
  for (int batch : {1, 9}) {  // the GEMV, then cuBLASLt (batch > kGemvMaxBatch)
    expect_tensors_sized_from_their_types(*engine, batch);
    EXPECT_LE(rel_l2(run(*engine, batch), run(*cpu, batch)), 1e-2) << "batch " << batch;
  }
}

// The same for an int8 network: fc8 (1000 features, a multiple of 8) dequantises into fp32 rows
// that are the NCHW output byte for byte, so no conversion step follows it, at the GEMV batch and
// at a cuBLASLt one; the result is the int8 CPU engine's (the integer reference) on the same
// calibration.
TEST(MixedPrecisionGpu, LastInt8LinearWritesTheFp32OutputItself) {
  SKIP_WITHOUT_GPU();
  Graph graph = load_model(std::string(CNNRT_SOURCE_DIR) + "/models/alexnet.yaml");
  bind_random_weights(graph, 11);
  int64_t elements = 1;
  for (int64_t d : {3, 224, 224}) elements *= d;  // AlexNet's input
  std::vector<float> data(static_cast<size_t>(4 * elements));
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : data) v = normal(rng);
  CalibrationSettings settings;
  settings.method = parse_calibration_method("minmax");
  settings.device = Device::CUDA;
  const auto calibration = std::make_shared<const Calibration>(
      calibrate(graph, test::inputs_over(data, elements, 0, 4), settings));
  BuildOptions options;
  options.device = Device::CUDA;
  options.precision = Precision::INT8;
  options.calibration = calibration;
  const auto engine = Engine::build(graph, options);
  EXPECT_EQ(engine->impl().output_tensor, "fc8");
  EXPECT_EQ(engine->impl().steps.back().name, "fc8");
  EXPECT_EQ(engine->impl().steps.back().kernel_name, "linear_int8");
  options.device = Device::CPU;
  const auto cpu = Engine::build(graph, options);
  for (int batch : {1, 9}) {  // the GEMV, then cuBLASLt (batch > kGemvS8MaxBatch)
    expect_tensors_sized_from_their_types(*engine, batch);
    EXPECT_LE(rel_l2(run(*engine, batch), run(*cpu, batch)), 1e-5) << "batch " << batch;
  }
}

// `--precision fp32` on CUDA: every layer in the fp32 family, the GPU's own fp32 reference.
void expect_all_fp32_matches_cpu(const Graph& graph, int batch) {
  const auto engine = build(graph, Device::CUDA, Precision::FP32);
  for (const Step& step : engine->impl().steps) {
    EXPECT_EQ(step.precision, Precision::FP32) << step.name;
    if (!step.is_conversion())
      EXPECT_EQ(step.kernel_name.substr(step.kernel_name.size() - 5), "_fp32") << step.name;
  }
  expect_tensors_sized_from_their_types(*engine, batch);
  EXPECT_LE(rel_l2(run(*engine, batch), run(*build(graph, Device::CPU), batch)),
            harness::tolerance_for(Precision::FP32).rel_l2)
      << engine->describe();
}

TEST(AllFp32Gpu, SmallModelsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  expect_all_fp32_matches_cpu(make_graph(kMixedModel, "mixed_gpu.yaml"), 3);
  expect_all_fp32_matches_cpu(make_graph(kBranchyModel, "mixed_branches.yaml"), 3);
}

TEST(AllFp32Gpu, AlexNetMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  Graph graph = load_model(std::string(CNNRT_SOURCE_DIR) + "/models/alexnet.yaml");
  bind_random_weights(graph, 7);
  expect_all_fp32_matches_cpu(graph, 2);
}

}  // namespace
}  // namespace cnnrt
