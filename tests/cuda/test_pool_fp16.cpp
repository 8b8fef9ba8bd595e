// maxpool_fp16's own rules, beyond the harness's numerics (tests/harness, `*maxpool_fp16__*`):
// a NaN anywhere in a window makes that output NaN (PyTorch's max), every other output is the
// exact maximum of its window (fp16 max rounds nothing), and padding channels come out as zeros
// whatever the input's padding lanes hold.  Odd shapes: 13 channels (two vectors, the second
// with 3 real lanes), a ragged window grid, padding and stride 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "fp16_test_util.h"
#include "kernels/cuda/pool_fp16.h"

namespace cnnrt {
namespace {

TEST(MaxPoolFp16, NaNWinsAndOtherOutputsAreExact) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const int n = 3, c = 13, h = 17, w = 15, cp = 16;
  PoolAttrs attrs;
  attrs.kernel_h = attrs.kernel_w = 3;
  attrs.stride_h = attrs.stride_w = 2;
  attrs.pad_h = attrs.pad_w = 1;
  const int oh = (h + 2 - 3) / 2 + 1, ow = (w + 2 - 3) / 2 + 1;
  std::mt19937 rng(7);
  std::vector<float> x = test::random_fp16_values(size_t(n) * h * w * cp, rng, -4.0f, 4.0f);
  // Padding lanes hold garbage (large values a wrong kernel would let through).
  for (size_t i = 0; i < x.size(); ++i)
    if (int(i % cp) >= c) x[i] = 1000.0f;
  // A few NaNs.
  std::uniform_int_distribution<size_t> pick(0, x.size() - 1);
  for (int k = 0; k < 12; ++k) {
    size_t i = pick(rng);
    while (int(i % cp) >= c) i = pick(rng);
    x[i] = std::nanf("");
  }
  std::vector<__half> xh(x.size());
  for (size_t i = 0; i < x.size(); ++i) xh[i] = __float2half_rn(x[i]);
  test::DeviceMem dx(xh), dy(size_t(n) * oh * ow * cp * sizeof(__half));
  cuda::maxpool_fp16(dx.get(), dy.get(), n, c, h, w, attrs, oh, ow, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<__half> y = dy.halves();
  int nan_outputs = 0;
  for (int b = 0; b < n; ++b)
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox)
        for (int ch = 0; ch < cp; ++ch) {
          const float got = __half2float(y[((size_t(b) * oh + oy) * ow + ox) * cp + ch]);
          if (ch >= c) {
            ASSERT_EQ(got, 0.0f) << "padding lane " << ch;
            continue;
          }
          float want = -INFINITY;
          bool nan = false;
          for (int iy = std::max(0, oy * 2 - 1); iy < std::min(h, oy * 2 + 2); ++iy)
            for (int ix = std::max(0, ox * 2 - 1); ix < std::min(w, ox * 2 + 2); ++ix) {
              const float v = x[((size_t(b) * h + iy) * w + ix) * cp + ch];
              nan = nan || std::isnan(v);
              want = std::max(want, v);
            }
          if (nan) {
            ++nan_outputs;
            ASSERT_TRUE(std::isnan(got)) << b << "," << oy << "," << ox << "," << ch;
          } else {
            ASSERT_EQ(got, want) << b << "," << oy << "," << ox << "," << ch;
          }
        }
  EXPECT_GT(nan_outputs, 12);  // each NaN reaches 1-4 windows
}

}  // namespace
}  // namespace cnnrt
