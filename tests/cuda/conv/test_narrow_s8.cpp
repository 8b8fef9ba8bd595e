// conv_s8_narrow (kernels/cuda/conv/igemm_s8_narrow.cu) called directly, against the integer
// CPU reference ref::conv2d_int8, bit for bit.  The kernel harness runs the registry entry
// (conv_int8_narrow) on its case table with realistic biases, which always take the epilogue
// without conversion instructions (s8::requantize_small); here both epilogues run on the same
// layer, and a layer with a bias of 2^29 (a pruned channel's: QUANTIZATION.md, "Scale floor")
// must take the exact one — narrow_s8_small_sums refuses it — and still match.  Padding lanes
// of the output (which starts as 0xFF bytes) must be zeros; a clamp with a positive lower bound
// makes that non-trivial.
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/fp16_test_util.h"
#include "kernels/cpu/int8_ref.h"
#include "kernels/cuda/conv/conv_s8.h"

namespace cnnrt {
namespace {

using test::DeviceMem;

struct NarrowCase {
  int c, h, w, oc, k, stride, pad, pad_extra, dilation, batch;
  bool float_output;
  int lo, hi;      // int8 output bounds
  bool huge_bias;  // channel 1 gets bias_q = 2^29
};

struct Prepared {
  ref::Int8Layer layer;
  ConvAttrs attrs;
  cuda::S8Conv conv;
  std::vector<int8_t> packed;
};

Prepared prepare(const NarrowCase& t, std::mt19937& rng) {
  Prepared p;
  ConvAttrs& a = p.attrs;
  a.out_channels = t.oc;
  a.kernel_h = a.kernel_w = t.k;
  a.stride_h = a.stride_w = t.stride;
  a.pad_h = a.pad_w = t.pad;
  a.pad_h_extra = a.pad_w_extra = t.pad_extra;
  a.dilation_h = a.dilation_w = t.dilation;
  const int64_t per_channel = static_cast<int64_t>(t.c) * t.k * t.k;
  ref::Int8Layer& layer = p.layer;
  layer.out_channels = t.oc;
  layer.per_channel = per_channel;
  std::uniform_int_distribution<int> weight(-127, 127), bias(-40000, 40000);
  std::uniform_real_distribution<float> multiplier(1e-4f, 4e-3f);
  layer.weight.resize(static_cast<size_t>(t.oc * per_channel));
  for (auto& w : layer.weight) w = static_cast<int8_t>(weight(rng));
  for (int o = 0; o < t.oc; ++o) {
    layer.bias.push_back(t.huge_bias && o == 1 ? (1 << 29) : bias(rng));
    layer.multiplier.push_back(t.float_output ? multiplier(rng) * 0.01f : multiplier(rng));
    layer.weight_scale.push_back(1.0f);
  }
  layer.float_output = t.float_output;
  layer.int_bounds = {t.lo, t.hi};
  layer.float_bounds = {static_cast<float>(t.lo) * 0.01f, static_cast<float>(t.hi) * 0.01f};
  layer.input_scale = 1.0f;
  layer.output_scale = t.float_output ? 0.0f : 1.0f;

  cuda::S8Conv& conv = p.conv;
  conv.in_c = t.c;
  conv.in_h = t.h;
  conv.in_w = t.w;
  conv.in_stride = cuda::padded16(t.c);
  conv.out_c = t.oc;
  conv.out_h = ref::conv_output_extent(t.h, t.k, t.stride, t.pad, t.pad + t.pad_extra, t.dilation);
  conv.out_w = ref::conv_output_extent(t.w, t.k, t.stride, t.pad, t.pad + t.pad_extra, t.dilation);
  conv.out_stride = t.float_output ? static_cast<int>(test::pad8(t.oc)) : cuda::padded16(t.oc);
  conv.kh = conv.kw = t.k;
  conv.stride_h = conv.stride_w = t.stride;
  conv.pad_h = conv.pad_w = t.pad;
  conv.dil_h = conv.dil_w = t.dilation;
  conv.k_total = t.k * t.k * conv.in_stride;
  conv.k_pad = (conv.k_total + 63) / 64 * 64;
  conv.float_output = t.float_output;
  conv.lo = t.lo;
  conv.hi = t.hi;
  conv.float_lo = layer.float_bounds.lo;
  conv.float_hi = layer.float_bounds.hi;
  // [oc][k_pad], k = (r·kw + s)·in_stride + c (conv_int8_igemm's packing).
  p.packed.assign(static_cast<size_t>(t.oc) * conv.k_pad, 0);
  for (int o = 0; o < t.oc; ++o)
    for (int c = 0; c < t.c; ++c)
      for (int r = 0; r < t.k; ++r)
        for (int s = 0; s < t.k; ++s)
          p.packed[static_cast<size_t>(o) * conv.k_pad + (r * t.k + s) * conv.in_stride + c] =
              layer.weight[((static_cast<size_t>(o) * t.c + c) * t.k + r) * t.k + s];
  return p;
}

// Runs the kernel with the given epilogue choice; the output as NCHW values (int8 or fp32 as
// float) and whether every padding lane is zero.
std::vector<float> run_narrow(const NarrowCase& t, const Prepared& p, const std::vector<int8_t>& x,
                              bool small_sums, bool& padding_zero) {
  const cuda::S8Conv& conv0 = p.conv;
  std::vector<int8_t> nhwc(static_cast<size_t>(t.batch) * t.h * t.w * conv0.in_stride, 0);
  for (int n = 0; n < t.batch; ++n)
    for (int c = 0; c < t.c; ++c)
      for (int i = 0; i < t.h * t.w; ++i)
        nhwc[(static_cast<size_t>(n) * t.h * t.w + i) * conv0.in_stride + c] =
            x[(static_cast<size_t>(n) * t.c + c) * t.h * t.w + i];
  DeviceMem x_dev(nhwc), w_dev(p.packed), b_dev(p.layer.bias), m_dev(p.layer.multiplier);
  cuda::S8Conv conv = conv0;
  conv.weight = static_cast<const int8_t*>(w_dev.get());
  conv.bias = static_cast<const int32_t*>(b_dev.get());
  conv.multiplier = static_cast<const float*>(m_dev.get());
  const size_t pixels = static_cast<size_t>(t.batch) * conv.out_h * conv.out_w;
  const size_t elem = t.float_output ? sizeof(float) : 1;
  DeviceMem y_dev(pixels * conv.out_stride * elem);
  int device = 0, sms = 0;
  CNNRT_CUDA_CHECK(cudaGetDevice(&device));
  CNNRT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  cuda::conv_s8_narrow(conv, x_dev.get(), y_dev.get(), t.batch, sms, small_sums, nullptr);
  CNNRT_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<char> y(y_dev.bytes());
  CNNRT_CUDA_CHECK(cudaMemcpy(y.data(), y_dev.get(), y.size(), cudaMemcpyDeviceToHost));
  std::vector<float> out(static_cast<size_t>(t.batch) * t.oc * conv.out_h * conv.out_w);
  padding_zero = true;
  const size_t hw = static_cast<size_t>(conv.out_h) * conv.out_w;
  for (size_t m = 0; m < pixels; ++m)
    for (int c = 0; c < conv.out_stride; ++c) {
      float v;
      if (t.float_output) {
        std::memcpy(&v, y.data() + (m * conv.out_stride + c) * sizeof(float), sizeof(float));
      } else {
        v = static_cast<float>(static_cast<int8_t>(y[m * conv.out_stride + c]));
      }
      if (c >= t.oc) {
        uint32_t bits = 0;
        std::memcpy(&bits, &v, sizeof(bits));
        padding_zero = padding_zero && bits == 0;
        continue;
      }
      out[(m / hw * t.oc + c) * hw + m % hw] = v;
    }
  return out;
}

std::vector<float> reference(const NarrowCase& t, const Prepared& p, const std::vector<int8_t>& x) {
  const size_t count = static_cast<size_t>(t.batch) * t.oc * p.conv.out_h * p.conv.out_w;
  std::vector<float> out(count);
  if (t.float_output) {
    ref::conv2d_int8(x.data(), t.batch, t.c, t.h, t.w, p.attrs, p.layer, out.data());
  } else {
    std::vector<int8_t> y(count);
    ref::conv2d_int8(x.data(), t.batch, t.c, t.h, t.w, p.attrs, p.layer, y.data());
    std::transform(y.begin(), y.end(), out.begin(), [](int8_t v) { return static_cast<float>(v); });
  }
  return out;
}

TEST(ConvS8Narrow, BothEpiloguesMatchTheIntegerReferenceBitForBit) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const NarrowCase cases[] = {
      // 1x1 16 -> 20 (padding lanes under a positive lower bound), contiguous rows
      {16, 37, 29, 20, 1, 1, 0, 0, 1, 3, false, 5, 100, false},
      // the TF-SAME stem: 3 -> 32, 3x3 stride 2, bottom/right padding 1 (K = 144)
      {3, 30, 34, 32, 3, 2, 0, 1, 1, 2, false, 0, 90, false},
      // 24 -> 144 (K = 32), full range; 96 -> 24 (K = 96) as an fp32 output (stride 24)
      {24, 23, 19, 144, 1, 1, 0, 0, 1, 3, false, -127, 127, false},
      {96, 13, 11, 24, 1, 1, 0, 0, 1, 2, true, -127, 127, false},
      // Grids where every persistent CTA walks several tiles, so the A ring wraps (H100: 132
      // SMs): dilation 2 over 9 channels (K = 144: 2 stages, 2 CTAs per SM, 600 tiles), and a
      // 1x1 16 -> 16 (4 stages, 3 CTAs per SM, 1960 tiles).
      {9, 61, 67, 40, 3, 1, 1, 0, 2, 40, false, -127, 127, false},
      {16, 112, 112, 16, 1, 1, 0, 0, 1, 40, false, 0, 127, false},
  };
  std::mt19937 rng(1234);
  for (const NarrowCase& t : cases) {
    const Prepared p = prepare(t, rng);
    ASSERT_TRUE(cuda::narrow_s8_serves(p.conv));
    std::vector<int8_t> x(static_cast<size_t>(t.batch) * t.c * t.h * t.w);
    std::uniform_int_distribution<int> value(-128, 127);
    for (auto& v : x) v = static_cast<int8_t>(value(rng));
    const std::vector<float> expected = reference(t, p, x);
    const bool small = cuda::narrow_s8_small_sums(p.layer.weight.data(), p.layer.bias.data(), t.oc,
                                                  p.layer.per_channel);
    EXPECT_TRUE(small) << "realistic biases at K <= 160 stay below 2^22";
    for (bool use_small : {false, true}) {
      if (use_small && !small) continue;
      bool padding_zero = false;
      const std::vector<float> got = run_narrow(t, p, x, use_small, padding_zero);
      EXPECT_TRUE(padding_zero) << "c" << t.c << " oc" << t.oc << " k" << t.k;
      size_t mismatches = 0;
      for (size_t i = 0; i < got.size(); ++i)
        mismatches += std::memcmp(&got[i], &expected[i], sizeof(float)) != 0;
      EXPECT_EQ(mismatches, 0u) << "c" << t.c << " oc" << t.oc << " k" << t.k << " small_sums "
                                << use_small;
    }
  }
}

TEST(ConvS8Narrow, AHugeBiasTakesTheExactEpilogue) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const NarrowCase t{16, 21, 23, 32, 1, 1, 0, 0, 1, 2, false, -127, 127, true};
  std::mt19937 rng(99);
  const Prepared p = prepare(t, rng);
  EXPECT_FALSE(cuda::narrow_s8_small_sums(p.layer.weight.data(), p.layer.bias.data(), t.oc,
                                          p.layer.per_channel));
  std::vector<int8_t> x(static_cast<size_t>(t.batch) * t.c * t.h * t.w);
  std::uniform_int_distribution<int> value(-128, 127);
  for (auto& v : x) v = static_cast<int8_t>(value(rng));
  bool padding_zero = false;
  const std::vector<float> got = run_narrow(t, p, x, false, padding_zero);
  const std::vector<float> expected = reference(t, p, x);
  EXPECT_TRUE(padding_zero);
  size_t mismatches = 0;
  for (size_t i = 0; i < got.size(); ++i) mismatches += got[i] != expected[i];
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace cnnrt
