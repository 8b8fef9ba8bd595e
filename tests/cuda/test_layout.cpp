// Layout conversion kernels (kernels/cuda/layout.h) against host index arithmetic.
//
// fp32 → fp16 → fp32 is exact up to the fp16 rounding of each value, so the expected values are
// computed with the same round-to-nearest-even conversion on the host and compared bit for bit;
// padding channels must be exact zeros although the buffer was pre-filled with NaN bytes.
// Odd channel counts (1, 3, 7, 13) cover a partial last 8-channel group; odd H, W and batch 3
// catch stride mix-ups.  Device tests skip without a GPU; argument checks run everywhere.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cnnrt/error.h"
#include "kernels/cuda/layout.h"
#include "runtime/cuda/device_info.h"

namespace cnnrt::cuda {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!cuda_device_present()) GTEST_SKIP() << "no CUDA device"

#define CHECK_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

uint16_t half_bits(float value) {
  const __half_raw raw = __half(__float2half_rn(value));
  return raw.x;
}

float half_bits_to_float(uint16_t bits) {
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

std::vector<float> random_values(size_t count, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> distribution(-3.0f, 3.0f);
  std::vector<float> values(count);
  for (float& value : values) value = distribution(generator);
  return values;
}

struct DeviceMemory {
  void* pointer = nullptr;
  explicit DeviceMemory(size_t bytes) {
    if (cudaMalloc(&pointer, bytes) != cudaSuccess) pointer = nullptr;
  }
  ~DeviceMemory() { cudaFree(pointer); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(pointer);
  }
};

struct ImageShape {
  int n, c, h, w;
};

// What gtest prints as GetParam() (instead of the struct's raw bytes).
void PrintTo(const ImageShape& s, std::ostream* out) {
  *out << "[N " << s.n << ", C " << s.c << ", H " << s.h << ", W " << s.w << "]";
}

class LayoutRoundTrip : public ::testing::TestWithParam<ImageShape> {};

TEST_P(LayoutRoundTrip, NchwToPaddedNhwcAndBackIsExactUpToFp16Rounding) {
  SKIP_WITHOUT_GPU();
  const ImageShape s = GetParam();
  const int padded = (s.c + 7) / 8 * 8;
  const size_t elements = static_cast<size_t>(s.n) * s.c * s.h * s.w;
  const size_t nhwc_elements = static_cast<size_t>(s.n) * s.h * s.w * padded;
  const std::vector<float> x = random_values(elements, 1000u + s.c);

  DeviceMemory x_device(elements * sizeof(float));
  DeviceMemory nhwc_device(nhwc_elements * sizeof(uint16_t));
  DeviceMemory back_device(elements * sizeof(float));
  ASSERT_TRUE(x_device.pointer && nhwc_device.pointer && back_device.pointer);
  CHECK_CUDA(
      cudaMemcpy(x_device.pointer, x.data(), elements * sizeof(float), cudaMemcpyHostToDevice));
  // NaN bytes everywhere: padding that is not written reads as NaN, not as a lucky zero.
  CHECK_CUDA(cudaMemset(nhwc_device.pointer, 0xFF, nhwc_elements * sizeof(uint16_t)));
  CHECK_CUDA(cudaMemset(back_device.pointer, 0xFF, elements * sizeof(float)));

  nchw_fp32_to_nhwc_fp16(x_device.as<float>(), nhwc_device.pointer, s.n, s.c, s.h, s.w, nullptr);
  nhwc_fp16_to_nchw_fp32(nhwc_device.pointer, back_device.as<float>(), s.n, s.c, s.h, s.w, nullptr);
  CHECK_CUDA(cudaDeviceSynchronize());

  std::vector<uint16_t> nhwc(nhwc_elements);
  std::vector<float> back(elements);
  CHECK_CUDA(cudaMemcpy(nhwc.data(), nhwc_device.pointer, nhwc_elements * sizeof(uint16_t),
                        cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(back.data(), back_device.pointer, elements * sizeof(float),
                        cudaMemcpyDeviceToHost));

  int mismatches = 0;
  for (int n = 0; n < s.n; ++n)
    for (int h = 0; h < s.h; ++h)
      for (int w = 0; w < s.w; ++w)
        for (int c = 0; c < padded; ++c) {
          const size_t at = ((static_cast<size_t>(n) * s.h + h) * s.w + w) * padded + c;
          const uint16_t expected =
              c < s.c ? half_bits(x[((static_cast<size_t>(n) * s.c + c) * s.h + h) * s.w + w])
                      : uint16_t{0};
          if (nhwc[at] != expected && ++mismatches <= 5)
            ADD_FAILURE() << "nhwc n=" << n << " h=" << h << " w=" << w << " c=" << c << ": got 0x"
                          << std::hex << nhwc[at] << " expected 0x" << expected;
        }
  for (size_t i = 0; i < elements; ++i) {
    const float expected = half_bits_to_float(half_bits(x[i]));
    if (back[i] != expected && ++mismatches <= 10)
      ADD_FAILURE() << "nchw element " << i << ": got " << back[i] << " expected " << expected;
  }
  EXPECT_EQ(mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(OddShapes, LayoutRoundTrip,
                         ::testing::Values(ImageShape{3, 1, 5, 7}, ImageShape{3, 3, 11, 9},
                                           ImageShape{3, 7, 3, 13}, ImageShape{3, 13, 9, 5},
                                           ImageShape{1, 16, 1, 1}, ImageShape{2, 3, 33, 31}),
                         [](const ::testing::TestParamInfo<ImageShape>& info) {
                           const ImageShape& s = info.param;
                           return "n" + std::to_string(s.n) + "_c" + std::to_string(s.c) + "_h" +
                                  std::to_string(s.h) + "_w" + std::to_string(s.w);
                         });

TEST(PaddedRows, DropsPaddingAndConvertsEveryRow) {
  SKIP_WITHOUT_GPU();
  for (int features : {1, 7, 13, 1000}) {
    const int rows = 5;
    const int padded = (features + 7) / 8 * 8;
    const std::vector<float> values = random_values(static_cast<size_t>(rows) * features, 7u);
    std::vector<uint16_t> source(static_cast<size_t>(rows) * padded, uint16_t{0x7E00});  // NaN
    for (int r = 0; r < rows; ++r)
      for (int f = 0; f < features; ++f)
        source[static_cast<size_t>(r) * padded + f] = half_bits(values[r * features + f]);

    DeviceMemory source_device(source.size() * sizeof(uint16_t));
    DeviceMemory target_device(values.size() * sizeof(float));
    ASSERT_TRUE(source_device.pointer && target_device.pointer);
    CHECK_CUDA(cudaMemcpy(source_device.pointer, source.data(), source.size() * sizeof(uint16_t),
                          cudaMemcpyHostToDevice));
    padded_rows_fp16_to_fp32(source_device.pointer, target_device.as<float>(), rows, features,
                             nullptr);
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<float> target(values.size());
    CHECK_CUDA(cudaMemcpy(target.data(), target_device.pointer, target.size() * sizeof(float),
                          cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < values.size(); ++i)
      ASSERT_EQ(target[i], half_bits_to_float(half_bits(values[i])))
          << "features=" << features << " element " << i;
  }
}

TEST(FillUniform, DeterministicInRangeAndNotConstant) {
  SKIP_WITHOUT_GPU();
  // More elements than one grid covers (65536 blocks × 256 threads) so the grid-stride loop runs.
  const int64_t count = 20'000'003;
  DeviceMemory a(count * sizeof(float)), b(count * sizeof(float));
  ASSERT_TRUE(a.pointer && b.pointer);
  fill_uniform_fp32(a.as<float>(), count, 42u, nullptr);
  fill_uniform_fp32(b.as<float>(), count, 42u, nullptr);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> first(count), second(count);
  CHECK_CUDA(cudaMemcpy(first.data(), a.pointer, count * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(second.data(), b.pointer, count * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(std::memcmp(first.data(), second.data(), count * sizeof(float)), 0);
  double sum = 0;
  float low = 2, high = -2;
  for (float value : first) {
    sum += value;
    low = std::min(low, value);
    high = std::max(high, value);
  }
  EXPECT_GE(low, -1.0f);
  EXPECT_LT(high, 1.0f);
  EXPECT_LT(low, -0.99f);  // spans the range: not constant, not stuck in one half
  EXPECT_GT(high, 0.99f);
  EXPECT_NEAR(sum / count, 0.0, 0.01);  // uniform mean 0, stddev of the mean ≈ 1.3e-4

  fill_uniform_fp32(b.as<float>(), count, 43u, nullptr);
  CHECK_CUDA(cudaMemcpy(second.data(), b.pointer, count * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_NE(std::memcmp(first.data(), second.data(), count * sizeof(float)), 0);
}

// Argument checks happen before any launch, so they need no device.
TEST(LayoutArguments, MisalignedOrEmptyShapesAreErrors) {
  const auto* fake_input = reinterpret_cast<const float*>(uintptr_t{0x1000});
  void* misaligned = reinterpret_cast<void*>(uintptr_t{0x1002});
  EXPECT_THROW(nchw_fp32_to_nhwc_fp16(fake_input, misaligned, 1, 3, 4, 4, nullptr), Error);
  EXPECT_THROW(nhwc_fp16_to_nchw_fp32(misaligned, nullptr, 1, 3, 4, 4, nullptr), Error);
  void* aligned = reinterpret_cast<void*>(uintptr_t{0x1000});
  EXPECT_THROW(nchw_fp32_to_nhwc_fp16(fake_input, aligned, 1, 0, 4, 4, nullptr), Error);
  EXPECT_THROW(padded_rows_fp16_to_fp32(aligned, nullptr, 2, 0, nullptr), Error);
  EXPECT_THROW(fill_uniform_fp32(nullptr, -1, 1u, nullptr), Error);
}

}  // namespace
}  // namespace cnnrt::cuda
