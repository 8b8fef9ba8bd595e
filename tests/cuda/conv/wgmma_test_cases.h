// Shared by the GPU tests of the two Hopper wgmma convolutions (test_wgmma.cpp,
// test_wgmma_ws.cpp): the Hopper check, the case description, its ConvShape and registry
// node, the CPU reference and the comparison with its stated tolerances.
//
// Reference: ref::conv2d -> ref::relu (double accumulation) on fresh random fp16-representable
// inputs, weights (scaled by 1/sqrt(fan-in) so outputs stay O(1) whatever K is) and biases; the
// only differences from a kernel are fp32 accumulation order and the final fp16 rounding.
// Tolerances: rel L2 ||y - ref|| / ||ref|| <= 2e-3 (fp16 output rounding alone gives ~3e-4), and
// per element |y - ref| <= 4e-3 |ref| + 2e-3 max|ref| (catches a wrong tile edge or a swizzle
// slip that an L2 norm could hide); NaN fails both, and padding channels must be zero.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/fp16_test_util.h"
#include "graph/ir.h"
#include "graph/ops.h"
#include "kernels/cpu/reference.h"
#include "kernels/cuda/conv/conv_shape.h"

namespace cnnrt::cuda::wgmma_test {

// Compute capability 9.x present: the kernel cases run; otherwise they skip.
inline bool hopper_present() {
  if (!test::cuda_device_present()) return false;
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
    return false;
  return major == 9;
}

#define REQUIRE_HOPPER()                            \
  if (!::cnnrt::cuda::wgmma_test::hopper_present()) \
  GTEST_SKIP() << "no compute capability 9.x device"

struct WCase {
  int batch, c, h, w, oc, k, stride, pad;
  bool relu, bias;
};

// The same case at another batch.
inline WCase at_batch(WCase c, int batch) {
  c.batch = batch;
  return c;
}

inline std::string describe(const WCase& t) {
  std::ostringstream s;
  s << "n" << t.batch << " c" << t.c << " " << t.h << "x" << t.w << " -> oc" << t.oc << " k" << t.k
    << " s" << t.stride << " p" << t.pad << (t.relu ? " relu" : "") << (t.bias ? " bias" : "");
  return s.str();
}

inline ConvAttrs attrs_of(const WCase& t) {
  ConvAttrs a;
  a.out_channels = t.oc;
  a.kernel_h = a.kernel_w = t.k;
  a.stride_h = a.stride_w = t.stride;
  a.pad_h = a.pad_w = t.pad;
  return a;
}

inline ConvShape shape_of(const WCase& t) {
  ConvShape s;
  s.in_c = t.c;
  s.in_h = t.h;
  s.in_w = t.w;
  s.out_c = t.oc;
  s.conv = attrs_of(t);
  s.activation = t.relu ? kReluActivation : kIdentityActivation;
  s.derive();
  return s;
}

// One case's random data and its CPU reference output (NCHW).
struct CaseData {
  std::vector<float> x, weight, bias, expected;
};

inline CaseData make_data(const WCase& t, const ConvShape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  CaseData d;
  d.x = test::random_fp16_values(size_t(t.batch) * t.c * t.h * t.w, rng);
  const float w_scale = 1.0f / std::sqrt(float(t.c * t.k * t.k));
  d.weight = test::random_fp16_values(size_t(t.oc) * t.c * t.k * t.k, rng, -w_scale, w_scale);
  d.bias = test::random_fp16_values(t.oc, rng, -0.5f, 0.5f);
  d.expected.resize(size_t(t.batch) * t.oc * shape.out_h * shape.out_w);
  ref::conv2d(d.x.data(), t.batch, t.c, t.h, t.w, d.weight.data(), t.bias ? d.bias.data() : nullptr,
              shape.conv, d.expected.data());
  if (t.relu) ref::relu(d.expected.data(), int64_t(d.expected.size()), d.expected.data());
  return d;
}

// y: the kernel's NHWC fp16 output; the tolerances of the header comment.
inline void expect_close(const std::vector<__half>& y, const std::vector<float>& expected,
                         int batch, int oc, int oh, int ow, const std::string& what) {
  int64_t bad_padding = 0;
  const std::vector<float> actual = test::from_nhwc(y, batch, oc, oh, ow, &bad_padding);
  EXPECT_EQ(bad_padding, 0) << what;
  EXPECT_LE(test::rel_l2(actual, expected), 2e-3) << what;
  float max_ref = 0.f;
  for (float v : expected) max_ref = std::max(max_ref, std::fabs(v));
  int64_t bad = 0;
  size_t first_bad = 0;
  for (size_t i = 0; i < actual.size(); ++i)
    if (!(std::fabs(actual[i] - expected[i]) <= 4e-3f * std::fabs(expected[i]) + 2e-3f * max_ref) &&
        bad++ == 0)  // NaN fails too
      first_bad = i;
  EXPECT_EQ(bad, 0) << what << ": first bad element " << first_bad << " of " << actual.size()
                    << ": got " << actual[first_bad] << ", expected " << expected[first_bad];
}

// A case with the fused epilogue forms of the TMA convs (test_tma.cpp, test_tma_sparse.cpp):
// a MaxPool 3/2 after the clamp, a residual added before it, ReLU6 instead of the case's ReLU.
struct FusedCase {
  WCase conv;
  bool pool = false, residual = false, relu6 = false;
};

inline std::string describe(const FusedCase& c) {
  return describe(c.conv) + (c.pool ? " pool3/2" : "") + (c.residual ? " residual" : "") +
         (c.relu6 ? " relu6" : "");
}

inline ConvShape shape_of_case(const FusedCase& fc) {
  ConvShape shape = shape_of(fc.conv);
  if (fc.relu6) shape.activation = ActivationBounds{0.f, 6.f};
  if (fc.pool) {
    PoolAttrs p;
    p.kernel_h = p.kernel_w = 3;
    p.stride_h = p.stride_w = 2;
    shape.pool = p;
  }
  shape.residual = fc.residual;
  shape.derive();
  return shape;
}

// The images whose reference is computed: all of a small batch, three of a large one (the CPU
// reference of a whole batch of 64 takes minutes).
inline std::vector<int> checked_images(int batch) {
  if (batch <= 4) {
    std::vector<int> all(batch);
    for (int b = 0; b < batch; ++b) all[b] = b;
    return all;
  }
  return {0, batch / 2, batch - 1};
}

// The reference of `images` (NCHW, one after the other): conv -> bias -> (+ r) -> clamp -> pool,
// the TMA convs' order.  x: NCHW [batch][c][h][w]; r: NCHW pre-pool [batch][oc][conv_h][conv_w]
// (empty without a residual).
inline std::vector<float> fused_reference(const FusedCase& fc, const ConvShape& shape,
                                          const std::vector<int>& images,
                                          const std::vector<float>& x,
                                          const std::vector<float>& weight,
                                          const std::vector<float>& bias,
                                          const std::vector<float>& r) {
  const WCase& t = fc.conv;
  const size_t conv_image = size_t(t.oc) * shape.conv_h * shape.conv_w;
  const size_t out_image = size_t(t.oc) * shape.out_h * shape.out_w;
  std::vector<float> expected;
  for (int b : images) {
    std::vector<float> conv(conv_image);
    ref::conv2d(x.data() + size_t(b) * t.c * t.h * t.w, 1, t.c, t.h, t.w, weight.data(),
                t.bias ? bias.data() : nullptr, shape.conv, conv.data());
    if (fc.residual)
      ref::add(conv.data(), r.data() + size_t(b) * conv_image, int64_t(conv_image), conv.data());
    if (shape.clamps())
      for (float& v : conv) v = std::min(std::max(v, shape.activation.lo), shape.activation.hi);
    if (fc.pool) {
      std::vector<float> pooled(out_image);
      ref::maxpool2d(conv.data(), 1, t.oc, shape.conv_h, shape.conv_w, *shape.pool, pooled.data());
      conv = pooled;
    }
    expected.insert(expected.end(), conv.begin(), conv.end());
  }
  return expected;
}

// The NHWC output images `images` of y (images of image_halves), one after the other.
inline std::vector<__half> images_of(const std::vector<__half>& y, const std::vector<int>& images,
                                     size_t image_halves) {
  std::vector<__half> out;
  for (int b : images)
    out.insert(out.end(), y.begin() + b * image_halves, y.begin() + (b + 1) * image_halves);
  return out;
}

// The graph node of a case, for the registry rules (optionally grouped, dilated or with a fused
// 3x3/2 max-pool).
inline Node make_node(const WCase& t, int groups = 1, int dilation = 1, bool pool = false) {
  Node node;
  node.name = "conv_under_test";
  node.op = OpKind::Conv;
  ConvAttrs a = attrs_of(t);
  a.groups = groups;
  a.dilation_h = a.dilation_w = dilation;
  node.attrs = a;
  node.inputs = {"input"};
  node.input_shapes = {{t.c, t.h, t.w}};
  const int64_t oh = pool_output_size(t.h, t.k, t.stride, t.pad, dilation, false);
  const int64_t ow = pool_output_size(t.w, t.k, t.stride, t.pad, dilation, false);
  node.output_shape = {t.oc, oh, ow};
  node.activation = t.relu ? Activation::Relu : Activation::None;
  if (pool) {
    PoolAttrs p;
    p.kernel_h = p.kernel_w = 3;
    p.stride_h = p.stride_w = 2;
    node.fused_maxpool = p;
    node.pre_pool_shape = node.output_shape;
    node.output_shape = {t.oc, pool_output_size(oh, 3, 2, 0, 1, false),
                         pool_output_size(ow, 3, 2, 0, 1, false)};
  }
  return node;
}

}  // namespace cnnrt::cuda::wgmma_test
