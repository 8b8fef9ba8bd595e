// Calibration on the GPU (runtime/calibration.h: CalibrationSettings::device = CUDA):
//  * a context made with keep_all_tensors reads back every tensor as fp32 NCHW with the padding
//    lanes of the CUDA NHWC/8 layout dropped: each equals the CPU context's tensor of the same
//    name to the fp32 tolerance (harness/tolerance.h), element by element in order (13 channels:
//    a wrong layout or kept padding would not) — except a flatten's vector, which the CUDA
//    engine keeps in (h, w, c) order (a view of its NHWC input; the linear after it permutes its
//    weight columns): compared as per-sample sorted values, as statistics see it;
//  * the calibration made on CUDA equals the CPU one: minmax amax to the fp32 tolerance, the
//    histogram methods (percentile, entropy) within one entropy bin (max |x| / 2048), as values
//    that differ by summation order can fall on either side of a bin edge.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "graph/model_loader.h"
#include "harness/tolerance.h"
#include "random_test_util.h"
#include "runtime/calibration.h"
#include "runtime/cuda/device_info.h"
#include "runtime/engine_impl.h"
#include "sample_inputs.h"

namespace cnnrt {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!cuda::cuda_device_present()) GTEST_SKIP() << "no CUDA device"

const char* const kModel = R"(name: calib_gpu
input: {shape: [3, 21, 19]}
layers:
  - {name: c1, op: conv, out_channels: 13, kernel: 3, padding: 1, weight: a, bias: b}
  - {name: r1, op: relu}
  - {name: c2, op: conv, out_channels: 13, kernel: 3, padding: 1, weight: c, bias: d}
  - {name: sum, op: add, inputs: [c2, r1]}
  - {name: p1, op: maxpool, kernel: 2, stride: 2}
  - {name: c3, op: conv, out_channels: 24, kernel: 3, stride: 2, weight: e, bias: f}
  - {name: flat, op: flatten}
  - {name: fc, op: linear, out_features: 11, weight: g, bias: h}
)";
constexpr int kInputElements = 3 * 21 * 19;
constexpr int kSamples = 10;

class CudaCalibration : public ::testing::Test {
 protected:
  void SetUp() override {
    graph_ = parse_model(kModel, "calib_gpu.yaml");
    bind_random_weights(graph_, 31);
    std::mt19937 rng(32);
    data_ = test::random_vector(size_t(kSamples) * kInputElements, rng, -1.0f, 1.0f);
    inputs_ = test::inputs_over(data_, kInputElements);
  }
  Graph graph_;
  std::vector<float> data_;
  CalibrationInputs inputs_;
};

TEST_F(CudaCalibration, KeptTensorsReadBackAsTheCpuComputesThem) {
  SKIP_WITHOUT_GPU();
  std::map<Device, std::map<std::string, std::vector<float>>> read;
  for (Device device : {Device::CPU, Device::CUDA}) {
    BuildOptions options;
    options.device = device;
    options.precision = Precision::FP32;
    options.fuse_residual = false;
    const auto engine = Engine::build(graph_, options);
    const EngineImpl& impl = engine->impl();
    const auto context =
        impl.backend->create_context(std::shared_ptr<const EngineImpl>(engine, &impl), 4, {true});
    std::vector<float> out(context->output_count());
    context->run(data_.data(), out.data());
    for (const Step& step : impl.steps)
      if (!step.is_conversion()) read[device][step.name] = context->read_tensor(step.name);
  }
  ASSERT_EQ(read[Device::CPU].size(), read[Device::CUDA].size());
  const harness::Tolerance tol = harness::tolerance_for(Precision::FP32);
  for (auto& [name, cpu] : read[Device::CPU]) {
    std::vector<float>& gpu = read[Device::CUDA].at(name);
    ASSERT_EQ(gpu.size(), cpu.size()) << name;
    if (name == "flat") {  // the same values per sample, in another order (see above)
      const size_t per_sample = cpu.size() / 4;
      for (size_t s = 0; s < 4; ++s) {
        std::sort(cpu.begin() + s * per_sample, cpu.begin() + (s + 1) * per_sample);
        std::sort(gpu.begin() + s * per_sample, gpu.begin() + (s + 1) * per_sample);
      }
    }
    double err = 0, ref = 0;
    for (float v : cpu) ref += double(v) * v;
    const double rms = std::sqrt(ref / cpu.size());
    for (size_t i = 0; i < cpu.size(); ++i) {
      err += (double(gpu[i]) - cpu[i]) * (double(gpu[i]) - cpu[i]);
      ASSERT_LE(std::fabs(gpu[i] - cpu[i]), tol.element * (std::fabs(cpu[i]) + rms))
          << name << " element " << i;
    }
    EXPECT_LE(std::sqrt(err / ref), tol.rel_l2) << name;
  }
}

TEST_F(CudaCalibration, EqualsTheCpuCalibration) {
  SKIP_WITHOUT_GPU();
  for (const char* method : {"minmax", "percentile:99.9", "entropy"}) {
    CalibrationSettings settings;
    settings.method = parse_calibration_method(method);
    settings.batch = 4;  // 4 + 4 + 2: a last, smaller batch too
    const Calibration cpu = calibrate(graph_, inputs_, settings);
    settings.device = Device::CUDA;
    const Calibration gpu = calibrate(graph_, inputs_, settings);
    ASSERT_EQ(cpu.tensors.size(), gpu.tensors.size()) << method;
    const Calibration minmax = [&] {
      CalibrationSettings s = settings;
      s.method = parse_calibration_method("minmax");
      return calibrate(graph_, inputs_, s);
    }();
    for (const auto& [name, c] : cpu.tensors) {
      const TensorCalibration& g = gpu.tensors.at(name);
      const double max_abs = minmax.tensors.at(name).amax;
      const double bound = std::string(method) == "minmax"
                               ? 1e-5 * max_abs
                               : max_abs / TensorStatistics::kEntropyBins;
      EXPECT_LE(std::fabs(double(g.amax) - c.amax), bound) << method << " " << name;
      EXPECT_GT(g.amax, 0) << method << " " << name;
    }
  }
}

}  // namespace
}  // namespace cnnrt
