// The backends' conversion steps (Backend::make_conversion, inserted by the builder between a
// producer and a consumer of different types) against ref::convert_tensor, bit for bit: one
// table of (from, to) pairs each backend must make, run on maps and vectors of odd sizes.
// fp32 → fp16 rounds to nearest even on both sides, so even values off the fp16 grid must agree
// exactly; the output starts as NaN bytes, so padding lanes must have been written as zeros.
// CUDA rows skip without a device.
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "harness.h"
#include "kernels/cpu/convert_ref.h"
#include "runtime/backends.h"

namespace cnnrt::harness {
namespace {

struct ConversionParam {
  Device device;
  TensorType from, to;
  Shape shape;
  int batch;
};

std::string type_tag(const TensorType& type) {
  std::string tag =
      std::string(to_string(type.dtype)) + "_" + (type.layout == Layout::NCHW ? "nchw" : "nhwc");
  if (type.channel_align > 1) tag += std::to_string(type.channel_align);
  return tag;
}

std::vector<ConversionParam> conversion_params() {
  const TensorType fp16_nchw{DType::F16, Layout::NCHW, 1, 0};
  // The CUDA backend's table (cuda_backend.cpp): the host edge of the fp16 engine and the ways
  // into and out of the fp32 reference family.
  const std::vector<std::pair<TensorType, TensorType>> cuda_pairs = {
      {fp32_nchw(), fp16_nhwc8()},
      {fp16_nhwc8(), fp32_nchw()},
      {fp32_nchw(), fp32_nhwc8()},
      {fp32_nhwc8(), fp32_nchw()},
      {fp32_nhwc8(), fp16_nhwc8()},
      {fp16_nhwc8(), fp32_nhwc8()},
      // int8 (quantise, dequantise, requantise): scales that put the values (|x| <= 3) across
      // the whole int8 range, saturation (2/127 clips at 2) included.
      {fp32_nchw(), int8_nhwc16(3.0f / 127)},
      {int8_nhwc16(3.0f / 127), fp32_nchw()},
      {fp16_nhwc8(), int8_nhwc16(2.0f / 127)},
      {int8_nhwc16(3.0f / 127), fp16_nhwc8()},
      {fp32_nhwc8(), int8_nhwc16(0.0213f)},
      {int8_nhwc16(0.0213f), fp32_nhwc8()},
      {int8_nhwc16(3.0f / 127), int8_nhwc16(0.0311f)}};
  // The CPU backend converts anything through the reference; these are the types its test
  // kernels and a CPU int8 family would meet.
  const std::vector<std::pair<TensorType, TensorType>> cpu_pairs = {{fp32_nchw(), fp16_nchw},
                                                                    {fp16_nchw, fp32_nchw()},
                                                                    {fp32_nchw(), fp32_nhwc8()},
                                                                    {fp32_nhwc8(), fp32_nchw()},
                                                                    {fp16_nhwc8(), fp32_nchw()}};
  const std::vector<std::pair<Shape, int>> shapes = {
      {{3, 5, 7}, 3}, {{13, 3, 5}, 1}, {{1, 1, 1}, 33}, {{130, 7, 11}, 1}, {{37}, 3}, {{8}, 33}};
  std::vector<ConversionParam> params;
  for (const auto& [device, pairs] :
       {std::make_pair(Device::CPU, cpu_pairs), std::make_pair(Device::CUDA, cuda_pairs)})
    for (const auto& [from, to] : pairs)
      for (const auto& [shape, batch] : shapes) params.push_back({device, from, to, shape, batch});
  return params;
}

void PrintTo(const ConversionParam& param, std::ostream* out) {
  *out << to_string(param.device) << " conversion " << to_string(param.from) << " -> "
       << to_string(param.to) << " of " << shape_to_string(param.shape) << ", batch "
       << param.batch;
}

std::string conversion_name(const ::testing::TestParamInfo<ConversionParam>& info) {
  std::string dims;
  for (int64_t d : info.param.shape) dims += (dims.empty() ? "" : "x") + std::to_string(d);
  return std::string(to_string(info.param.device)) + "__" + type_tag(info.param.from) + "_to_" +
         type_tag(info.param.to) + "__" + dims + "_b" + std::to_string(info.param.batch);
}

class BackendConversion : public ::testing::TestWithParam<ConversionParam> {};

TEST_P(BackendConversion, MatchesReferenceBitForBit) {
  const ConversionParam& p = GetParam();
  const BackendInfo* backend_info = find_backend(p.device);
  const HarnessDevice* device = harness_device(p.device);
  if (backend_info == nullptr || device == nullptr || !device->available())
    GTEST_SKIP() << "no " << to_string(p.device) << " device";
  const std::unique_ptr<Backend> backend = backend_info->make();
  std::unique_ptr<LayerKernel> conversion = backend->make_conversion(p.shape, p.from, p.to);
  EXPECT_EQ(conversion->output_type(), p.to);

  // Values off the fp16 grid on purpose: rounding must agree too.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> values(static_cast<size_t>(p.batch * shape_elements(p.shape)));
  for (float& v : values) v = dist(rng);
  const size_t in_bytes = tensor_bytes(p.shape, p.from, p.batch);
  const size_t out_bytes = tensor_bytes(p.shape, p.to, p.batch);
  std::vector<uint8_t> input(in_bytes), expected(out_bytes), got(out_bytes);
  ref::convert_tensor(values.data(), fp32_nchw(), input.data(), p.from, p.shape, p.batch);
  ref::convert_tensor(input.data(), p.from, expected.data(), p.to, p.shape, p.batch);

  Buffer x = device->alloc_poisoned(in_bytes), y = device->alloc_poisoned(out_bytes);
  device->upload(x.get(), input.data(), in_bytes);
  KernelArgs args;
  args.inputs = {x.get()};
  args.output = y.get();
  args.batch = p.batch;
  args.stream = device->stream();
  conversion->run(args);
  device->synchronize();
  device->download(got.data(), y.get(), out_bytes);
  size_t first_difference = out_bytes;
  for (size_t i = 0; i < out_bytes && first_difference == out_bytes; ++i)
    if (got[i] != expected[i]) first_difference = i;
  EXPECT_EQ(first_difference, out_bytes) << "first differing byte (of " << out_bytes << ")";
}

INSTANTIATE_TEST_SUITE_P(Table, BackendConversion, ::testing::ValuesIn(conversion_params()),
                         conversion_name);

TEST(BackendConversion, CudaRefusesPairsOutsideItsTable) {
  const BackendInfo* backend_info = find_backend(Device::CUDA);
  const HarnessDevice* device = harness_device(Device::CUDA);
  if (backend_info == nullptr || device == nullptr || !device->available())
    GTEST_SKIP() << "no CUDA device";
  const std::unique_ptr<Backend> backend = backend_info->make();
  const TensorType int8{DType::I8, Layout::NCHW, 1, 0.5f};
  const TensorType fp16_nchw{DType::F16, Layout::NCHW, 1, 0};
  EXPECT_THROW(backend->make_conversion({3, 5, 7}, fp32_nchw(), int8), Error);
  EXPECT_THROW(backend->make_conversion({3, 5, 7}, fp32_nchw(), fp16_nchw), Error);
}

}  // namespace
}  // namespace cnnrt::harness
