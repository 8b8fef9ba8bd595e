// GPU tests of the fp16 tensor-core convolution (kernels/cuda/conv/igemm.h) against the CPU
// reference (ref::conv2d -> ref::relu -> ref::maxpool2d, fp32/double).
//
// Every case runs EVERY variant the kernel offers for that batch (each tile config -- 128x96
// and the BK = 64 128x128 included --, the packed and the row-streaming pool tilings the heuristic
// picks for them, the unfused pool and split-K workspace variants (tiled and generic finish), the
// direct fallback) plus the plans (with and without a workspace), so one GPU run covers all
// code.  Cases are
// batch 1..3, so split-K (batch <= 16, groups == 1) runs on every such case, with and without
// a pool, with odd K-tile counts (uneven last slice).  Workspaces are NaN-poisoned too: a
// partial tile the conv kernel failed to write shows up as a NaN output.
// Inputs and weights are fresh random values each run, rounded to fp16 before the reference
// sees them, so the only differences are fp32 accumulation order and the final fp16 rounding.
// Tolerances (per layer): rel L2 = ||y - ref|| / ||ref|| <= 2e-3 (fp16 output rounding alone
// gives ~3e-4), and per element |y - ref| <= 4e-3 * |ref| + 2e-3 * max|ref| (a local bug -- a
// wrong tile edge, a shifted pool window -- hides in an L2 norm but not here).  The output is
// poisoned with 0xFF bytes (fp16 NaN) before each launch: every element must be written, no NaN,
// and the padding channels must be exactly +0.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <vector>

#include "cnnrt/error.h"
#include "cuda/fp16_test_util.h"
#include "graph/ops.h"
#include "kernels/cpu/reference.h"
#include "kernels/cuda/conv/igemm.h"
#include "random_test_util.h"
#include "runtime/cuda/cuda_registry.h"

namespace cnnrt::cuda {
namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

struct Case {
  std::string name;
  int batch, c, h, w, oc, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  bool relu;
  std::optional<PoolAttrs> pool;
  // Beyond ReLU: a clamp [lo, hi] (ReLU6, Clip) replaces it when set; asymmetric padding adds
  // pad_extra rows / columns at the bottom / right.
  std::optional<ActivationBounds> clamp = std::nullopt;
  int pad_h_extra = 0, pad_w_extra = 0;
};

PoolAttrs pool_attrs(int k, int s, int pad = 0, bool ceil_mode = false) {
  PoolAttrs p;
  p.kernel_h = p.kernel_w = k;
  p.stride_h = p.stride_w = s;
  p.pad_h = p.pad_w = pad;
  p.ceil_mode = ceil_mode;
  return p;
}

std::string describe(const Case& t) {
  std::ostringstream s;
  s << t.name << ": n" << t.batch << " c" << t.c << " " << t.h << "x" << t.w << " -> oc" << t.oc
    << " k" << t.kh << "x" << t.kw << " s" << t.sh << "," << t.sw << " p" << t.ph << "," << t.pw
    << " d" << t.dh << "," << t.dw << " g" << t.groups << (t.relu ? " relu" : "");
  if (t.pool)
    s << " pool" << t.pool->kernel_h << "/" << t.pool->stride_h << " pad" << t.pool->pad_h
      << (t.pool->ceil_mode ? " ceil" : "");
  if (t.clamp) s << " clamp[" << t.clamp->lo << ", " << t.clamp->hi << "]";
  if (t.pad_h_extra || t.pad_w_extra) s << " pad+" << t.pad_h_extra << "," << t.pad_w_extra;
  return s.str();
}

ConvShape to_shape(const Case& t) {
  ConvShape s;
  s.in_c = t.c;
  s.in_h = t.h;
  s.in_w = t.w;
  s.out_c = t.oc;
  s.conv.out_channels = t.oc;
  s.conv.kernel_h = t.kh;
  s.conv.kernel_w = t.kw;
  s.conv.stride_h = t.sh;
  s.conv.stride_w = t.sw;
  s.conv.pad_h = t.ph;
  s.conv.pad_w = t.pw;
  s.conv.dilation_h = t.dh;
  s.conv.dilation_w = t.dw;
  s.conv.groups = t.groups;
  s.conv.pad_h_extra = t.pad_h_extra;
  s.conv.pad_w_extra = t.pad_w_extra;
  s.activation = t.clamp ? *t.clamp : t.relu ? kReluActivation : kIdentityActivation;
  s.pool = t.pool;
  s.derive();
  return s;
}

// ref::conv2d pads symmetrically: asymmetric padding is the input with pad_extra zero rows /
// columns appended at the bottom / right, then the symmetric (top / left) padding.
std::vector<float> reference_conv(const Case& t, const ConvShape& shape,
                                  const std::vector<float>& x, const std::vector<float>& w,
                                  const std::vector<float>& b) {
  const int h = t.h + t.pad_h_extra, wd = t.w + t.pad_w_extra;
  std::vector<float> padded(size_t(t.batch) * t.c * h * wd, 0.f);
  for (size_t nc = 0; nc < size_t(t.batch) * t.c; ++nc)
    for (int y = 0; y < t.h; ++y)
      for (int xx = 0; xx < t.w; ++xx)
        padded[(nc * h + y) * wd + xx] = x[(nc * t.h + y) * t.w + xx];
  ConvAttrs attrs = shape.conv;
  attrs.pad_h_extra = attrs.pad_w_extra = 0;
  std::vector<float> conv(size_t(t.batch) * t.oc * shape.conv_h * shape.conv_w);
  ref::conv2d(padded.data(), t.batch, t.c, h, wd, w.data(), b.data(), attrs, conv.data());
  for (float& v : conv)
    if (shape.clamps()) v = std::min(std::max(v, shape.activation.lo), shape.activation.hi);
  return conv;
}

// Runs all variants of one case and checks each against the CPU reference.
void run_case(const Case& t, uint32_t seed) {
  SCOPED_TRACE(describe(t) + " seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const ConvShape shape = to_shape(t);
  ASSERT_TRUE(ConvFp16::supports(shape));
  const int cpg = t.c / t.groups;
  const int fan_in = cpg * t.kh * t.kw;
  const float w_scale = 1.7f / std::sqrt(float(fan_in));
  const std::vector<float> x = test::random_fp16_values(size_t(t.batch) * t.c * t.h * t.w, rng);
  const std::vector<float> w =
      test::random_fp16_values(size_t(t.oc) * fan_in, rng, -w_scale, w_scale);
  const std::vector<float> b = test::random_fp16_values(t.oc, rng, -0.5f, 0.5f);

  // Reference: NCHW fp32.
  const std::vector<float> conv = reference_conv(t, shape, x, w, b);
  std::vector<float> expected;
  if (t.pool) {
    expected.resize(size_t(t.batch) * t.oc * shape.out_h * shape.out_w);
    ref::maxpool2d(conv.data(), t.batch, t.oc, shape.conv_h, shape.conv_w, *t.pool,
                   expected.data());
  } else {
    expected = conv;
  }
  double ref_norm = 0, ref_max = 0;
  for (float v : expected) {
    ref_norm += double(v) * v;
    ref_max = std::max(ref_max, double(std::fabs(v)));
  }
  ASSERT_GT(ref_norm, 0.0) << "degenerate reference";

  // Device input: NHWC, channels padded to 8 with zeros.
  const int cs_out = padded_channels(t.oc);
  const test::DeviceMem d_x(test::to_nhwc(x, t.batch, t.c, t.h, t.w));
  const size_t out_count = size_t(t.batch) * shape.out_h * shape.out_w * cs_out;
  test::DeviceMem d_y(out_count * sizeof(__half));

  const ConvFp16 kernel(shape, w.data(), b.data());
  std::vector<ConvFp16Plan> runs = kernel.variants(t.batch);
  ASSERT_GE(runs.size(), 1u);
  // The two plans a context can make; each must be one of the listed variants.
  const ConvFp16Plan fused = kernel.plan(t.batch, /*with_workspace=*/false);
  const ConvFp16Plan planned = kernel.plan(t.batch, /*with_workspace=*/true);
  EXPECT_EQ(fused.workspace_bytes, 0u);
  for (const ConvFp16Plan* plan : {&fused, &planned}) {
    bool listed = false;
    for (const ConvFp16Plan& v : runs) listed = listed || v.variant == plan->variant;
    EXPECT_TRUE(listed) << plan->name;
    runs.push_back(*plan);  // and it runs like any variant
  }
  size_t ws_max = 256;
  for (const ConvFp16Plan& v : runs) ws_max = std::max(ws_max, v.workspace_bytes);
  test::DeviceMem d_ws(ws_max);
  std::vector<uint16_t> y(out_count);
  for (const ConvFp16Plan& run : runs) {
    SCOPED_TRACE("variant " + run.name);
    EXPECT_EQ(kernel.workspace_bytes(run.variant, t.batch), run.workspace_bytes);
    CUDA_OK(cudaMemset(d_y.get(), 0xFF, out_count * sizeof(__half)));
    CUDA_OK(cudaMemset(d_ws.get(), 0xFF, ws_max));
    kernel.forward(run, d_x.get(), d_y.get(), t.batch, nullptr,
                   run.uses_workspace() ? d_ws.get() : nullptr);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(y.data(), d_y.get(), out_count * sizeof(__half), cudaMemcpyDeviceToHost));
    double err_norm = 0;
    int bad_elements = 0, nan_count = 0, dirty_padding = 0;
    std::string first_bad;
    for (int n = 0; n < t.batch; ++n)
      for (int oy = 0; oy < shape.out_h; ++oy)
        for (int ox = 0; ox < shape.out_w; ++ox)
          for (int c = 0; c < cs_out; ++c) {
            const uint16_t bits =
                y[((size_t(n) * shape.out_h + oy) * shape.out_w + ox) * cs_out + c];
            if (c >= t.oc) {
              dirty_padding += bits != 0;
              continue;
            }
            __half_raw raw;
            raw.x = bits;
            const float got = __half2float(__half(raw));
            if (std::isnan(got)) {
              ++nan_count;
              continue;
            }
            const float want =
                expected[((size_t(n) * t.oc + c) * shape.out_h + oy) * shape.out_w + ox];
            const double diff = double(got) - want;
            err_norm += diff * diff;
            if (std::fabs(diff) > 4e-3 * std::fabs(want) + 2e-3 * ref_max) {
              if (bad_elements++ == 0) {
                std::ostringstream s;
                s << "n" << n << " y" << oy << " x" << ox << " c" << c << ": got " << got
                  << " want " << want;
                first_bad = s.str();
              }
            }
          }
    EXPECT_EQ(nan_count, 0) << "NaN / unwritten outputs";
    EXPECT_EQ(dirty_padding, 0) << "padding channels not zero";
    EXPECT_EQ(bad_elements, 0) << "first: " << first_bad;
    const double rel_l2 = std::sqrt(err_norm / ref_norm);
    EXPECT_LE(rel_l2, 2e-3);
  }
}

// name, batch, c, h, w, oc, kh, kw, sh, sw, ph, pw, dh, dw, groups, relu, pool
const std::vector<Case>& fixed_cases() {
  static const std::vector<Case> cases = {
      {"1x1", 3, 64, 13, 17, 96, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, std::nullopt},
      {"3x3 odd", 1, 7, 31, 13, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, std::nullopt},
      {"c1 7x7", 3, 1, 17, 31, 64, 7, 7, 1, 1, 3, 3, 1, 1, 1, false, std::nullopt},
      {"c3 11x11 s4", 1, 3, 31, 31, 64, 11, 11, 4, 4, 2, 2, 1, 1, 1, true, std::nullopt},
      {"c3 11x11 s4 pool", 3, 3, 67, 59, 96, 11, 11, 4, 4, 2, 2, 1, 1, 1, true, pool_attrs(3, 2)},
      {"stride2 pad0", 3, 64, 17, 13, 64, 3, 3, 2, 2, 0, 0, 1, 1, 1, true, std::nullopt},
      {"dilation2", 1, 7, 17, 31, 96, 3, 3, 1, 1, 2, 2, 2, 2, 1, false, std::nullopt},
      {"dilation2 c64 pool", 3, 64, 13, 17, 5, 3, 3, 1, 1, 2, 2, 2, 2, 1, true, pool_attrs(2, 2)},
      {"groups2 vector", 3, 64, 13, 13, 96, 3, 3, 1, 1, 1, 1, 1, 1, 2, true, pool_attrs(3, 2)},
      {"groups2 odd", 1, 6, 17, 13, 10, 3, 3, 1, 1, 1, 1, 1, 1, 2, false, std::nullopt},
      {"depthwise", 3, 7, 13, 17, 7, 3, 3, 1, 1, 1, 1, 1, 1, 7, true, pool_attrs(2, 2)},
      {"pool no relu", 3, 64, 31, 17, 64, 5, 5, 1, 1, 2, 2, 1, 1, 1, false, pool_attrs(3, 2)},
      {"pool 2/2 ceil", 1, 7, 13, 17, 96, 3, 3, 1, 1, 1, 1, 1, 1, 1, true,
       pool_attrs(2, 2, 0, true)},
      {"pool 3/2 ceil", 3, 64, 13, 13, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, false,
       pool_attrs(3, 2, 0, true)},
      {"pool 3/2 pad1", 1, 3, 31, 17, 64, 7, 7, 2, 2, 3, 3, 1, 1, 1, true, pool_attrs(3, 2, 1)},
      {"pool 3/1", 1, 64, 17, 13, 96, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, pool_attrs(3, 1)},
      {"non-square", 3, 7, 13, 31, 64, 1, 5, 1, 2, 0, 2, 1, 1, 1, true, std::nullopt},
      {"oc 200", 1, 64, 13, 13, 200, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, std::nullopt},
      // 192 = 2 x 96 (the 128x96 tile with no N waste) with a pool: packed and streamed
      // tilings, split-K with the tiled finish, all on an odd 29x23 image.
      {"oc 192 pool", 2, 24, 29, 23, 192, 5, 5, 1, 1, 2, 2, 1, 1, 1, true, pool_attrs(3, 2)},
      // Pool window of 121 pixels > the tiled split-K finish's region limit: generic finish.
      {"pool 11/4 window", 1, 16, 29, 27, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, pool_attrs(11, 4)},
      // Pool 3/1 with padding on a wide image: streamed passes of one conv row each.
      {"pool 3/1 pad1 wide", 1, 8, 9, 61, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, false,
       pool_attrs(3, 1, 1)},
      // Activations as clamps (ReLU6, Clip) in every epilogue: fused, pooled, split-K, direct.
      {"relu6", 2, 16, 13, 17, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, std::nullopt,
       ActivationBounds{0.0f, 6.0f}},
      {"clip pool", 2, 24, 17, 13, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, pool_attrs(3, 2),
       ActivationBounds{-0.3f, 0.4f}},
      {"clip gather", 1, 3, 23, 19, 16, 5, 5, 2, 2, 2, 2, 1, 1, 1, false, pool_attrs(2, 2),
       ActivationBounds{-0.5f, 0.25f}},
      {"clip depthwise", 2, 7, 11, 13, 7, 3, 3, 1, 1, 1, 1, 1, 1, 7, false, std::nullopt,
       ActivationBounds{-0.2f, 0.2f}},
      // Asymmetric padding (bottom / right extra): only the output extent changes.
      {"asym pad", 2, 8, 13,   17,           16,           3, 3, 2, 2, 0, 1,
       1,          1, 1, true, std::nullopt, std::nullopt, 1, 2},
      {"asym pad pool", 1, 64, 14, 15, 96, 3, 3, 1, 1, 1, 0, 1, 1, 1, true, pool_attrs(3, 2),
       std::nullopt,    1, 1},
      {"asym pad gather", 2, 3, 21, 22, 16, 4, 4, 2, 2, 1, 1, 1, 1, 1, true, std::nullopt,
       std::nullopt,      1, 0},
      {"asym pad depthwise", 1, 6, 9, 10, 6, 3, 3, 1, 1, 0, 0, 1, 1, 6, false, std::nullopt,
       std::nullopt,         2, 1},
  };
  return cases;
}

// The five AlexNet (torchvision) convolutions with their fused ReLU / MaxPool, at batch 2.
const std::vector<Case>& alexnet_cases() {
  static const std::vector<Case> cases = {
      {"alexnet conv1", 2, 3, 224, 224, 64, 11, 11, 4, 4, 2, 2, 1, 1, 1, true, pool_attrs(3, 2)},
      {"alexnet conv2", 2, 64, 27, 27, 192, 5, 5, 1, 1, 2, 2, 1, 1, 1, true, pool_attrs(3, 2)},
      {"alexnet conv3", 2, 192, 13, 13, 384, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, std::nullopt},
      {"alexnet conv4", 2, 384, 13, 13, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, std::nullopt},
      {"alexnet conv5", 2, 256, 13, 13, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, pool_attrs(3, 2)},
  };
  return cases;
}

TEST(ConvFp16, MatchesReferenceOnEdgeShapes) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  for (const Case& t : fixed_cases()) run_case(t, test::fresh_seed());
}

TEST(ConvFp16, MatchesReferenceOnAlexNetLayers) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  for (const Case& t : alexnet_cases()) run_case(t, test::fresh_seed());
}

TEST(ConvFp16, MatchesReferenceOnRandomShapes) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const uint32_t seed = test::fresh_seed();
  std::mt19937 rng(seed);
  auto pick = [&](std::initializer_list<int> values) {
    std::vector<int> v(values);
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
  };
  for (int i = 0; i < 24; ++i) {
    Case t;
    t.name = "random #" + std::to_string(i) + " (shape seed " + std::to_string(seed) + ")";
    t.batch = pick({1, 2, 3});
    t.groups = pick({1, 1, 1, 2, 4});
    t.c = t.groups * pick({1, 3, 5, 8, 16, 24});
    t.oc = t.groups * pick({3, 8, 16, 40});
    t.kh = pick({1, 3, 5});
    t.kw = pick({1, 3, 5});
    t.sh = pick({1, 2});
    t.sw = pick({1, 2});
    t.dh = pick({1, 2});
    t.dw = 1;
    t.ph = pick({0, 1, 2});
    t.pw = pick({0, 1});
    t.h = pick({9, 13, 17, 23});
    t.w = pick({11, 13, 19});
    t.relu = pick({0, 1}) == 1;
    if (pick({0, 1}) == 1) t.pool = pool_attrs(pick({2, 3}), 2, 0, pick({0, 1}) == 1);
    if (!ConvFp16::supports(to_shape(t))) continue;  // e.g. window larger than the input
    run_case(t, test::fresh_seed());
  }
}

TEST(ConvFp16, FewChannelLayerTakesTheGatherPath) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const Case t = alexnet_cases()[0];
  const ConvShape shape = to_shape(t);
  std::vector<float> w(size_t(t.oc) * t.c * t.kh * t.kw, 0.25f);
  ConvFp16 kernel(shape, w.data(), nullptr);
  EXPECT_EQ(kernel.path(), "igemm_gather");
  ConvShape deep = to_shape(alexnet_cases()[1]);
  std::vector<float> w2(size_t(192) * 64 * 25, 0.25f);
  EXPECT_EQ(ConvFp16(deep, w2.data(), nullptr).path(), "igemm");
}

TEST(ConvFp16, CudaGraphReplayMatchesDirectLaunch) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const Case t = alexnet_cases()[1];
  const ConvShape shape = to_shape(t);
  std::mt19937 rng(test::fresh_seed());
  const int fan_in = t.c * t.kh * t.kw;
  const std::vector<float> w = test::random_fp16_values(size_t(t.oc) * fan_in, rng, -0.05f, 0.05f);
  const std::vector<float> b = test::random_fp16_values(t.oc, rng, -0.5f, 0.5f);
  ConvFp16 kernel(shape, w.data(), b.data());
  const size_t in_count = size_t(t.batch) * t.h * t.w * padded_channels(t.c);
  const size_t out_count = size_t(t.batch) * shape.out_h * shape.out_w * padded_channels(t.oc);
  std::vector<__half> x(in_count);
  for (size_t i = 0; i < in_count; ++i)
    x[i] = __float2half(int(i % 64) < t.c ? test::random_fp16_values(1, rng)[0] : 0.f);
  test::DeviceMem d_x(in_count * 2), d_y1(out_count * 2), d_y2(out_count * 2);
  CUDA_OK(cudaMemcpy(d_x.get(), x.data(), in_count * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(d_y2.get(), 0xFF, out_count * 2));

  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  const ConvFp16Plan plan = kernel.plan(t.batch, /*with_workspace=*/false);
  kernel.forward(plan, d_x.get(), d_y1.get(), t.batch, stream);
  CUDA_OK(cudaStreamSynchronize(stream));

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  kernel.forward(plan, d_x.get(), d_y2.get(), t.batch, stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  std::vector<uint16_t> y1(out_count), y2(out_count);
  CUDA_OK(cudaMemcpy(y1.data(), d_y1.get(), out_count * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(y2.data(), d_y2.get(), out_count * 2, cudaMemcpyDeviceToHost));
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), out_count * 2), 0);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(ConvFp16, BadArgumentsThrow) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const ConvShape shape = to_shape(fixed_cases()[0]);
  std::vector<float> w(size_t(96) * 64, 0.5f);
  const ConvFp16 kernel(shape, w.data(), nullptr);
  test::DeviceMem d(1 << 20);
  const ConvFp16Plan plan = kernel.plan(1, /*with_workspace=*/false);
  EXPECT_THROW(kernel.forward(plan, d.get(), d.get(), 0, nullptr), Error);
  EXPECT_THROW(kernel.forward(plan, static_cast<char*>(d.get()) + 2, d.get(), 1, nullptr), Error);
  EXPECT_THROW(kernel.forward(99999, d.get(), d.get(), 1, nullptr, nullptr), Error);
  EXPECT_THROW(kernel.forward(-1, d.get(), d.get(), 1, nullptr, nullptr), Error);
  EXPECT_THROW(kernel.forward(plan, d.get(), d.get(), 1, nullptr, static_cast<char*>(d.get()) + 8),
               Error);
  // A workspace variant launched without a workspace must throw, not write through nullptr.
  for (const ConvFp16Plan& v : kernel.variants(1))
    if (v.uses_workspace())
      EXPECT_THROW(kernel.forward(v, d.get(), d.get(), 1, nullptr), Error) << v.name;
}

bool has_variant(const std::vector<ConvFp16Plan>& plans, const std::string& part) {
  for (const ConvFp16Plan& p : plans)
    if (p.name.find(part) != std::string::npos) return true;
  return false;
}

// The workspace variants exist where they should (so the reference runs above cover them) and
// not where they must not: split-K only at small batches and groups == 1, unfused only with a
// pool; a plan without a workspace never picks one, a plan never picks the unfused one.
TEST(ConvFp16, WorkspaceVariantsAreOfferedWhereTheyApply) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(test::fresh_seed());
  auto make = [&](const Case& t) {
    const std::vector<float> w =
        test::random_fp16_values(size_t(t.oc) * (t.c / t.groups) * t.kh * t.kw, rng, -0.1f, 0.1f);
    return std::make_unique<ConvFp16>(to_shape(t), w.data(), nullptr);
  };
  const Case conv2 = alexnet_cases()[1], conv3 = alexnet_cases()[2];
  const auto pooled = make(conv2), plain = make(conv3);
  for (int batch = 1; batch <= 3; ++batch) {
    EXPECT_TRUE(has_variant(pooled->variants(batch), "split-K")) << batch;
    EXPECT_TRUE(has_variant(pooled->variants(batch), "unfused")) << batch;
    EXPECT_TRUE(has_variant(plain->variants(batch), "split-K")) << batch;
    EXPECT_FALSE(has_variant(plain->variants(batch), "unfused")) << batch;
  }
  EXPECT_FALSE(has_variant(plain->variants(64), "split-K"));
  // Round 3: the 128x96 tile, the BK = 64 tile and the row-streaming pool tilings are offered
  // (so the runs above cover them) for conv2 / conv3 at every batch.
  for (int batch : {1, 2, 64}) {
    EXPECT_TRUE(has_variant(pooled->variants(batch), "128x96")) << batch;
    EXPECT_TRUE(has_variant(pooled->variants(batch), "streamed")) << batch;
    EXPECT_TRUE(has_variant(plain->variants(batch), "128x96")) << batch;
    EXPECT_TRUE(has_variant(plain->variants(batch), "bk64")) << batch;
    EXPECT_TRUE(has_variant(pooled->variants(batch), "bk64")) << batch;
  }
  const auto grouped = make(fixed_cases()[8]);  // groups 2, vector path
  EXPECT_FALSE(has_variant(grouped->variants(1), "split-K"));
  for (int batch : {1, 2, 7, 64}) {
    for (const auto* k : {pooled.get(), plain.get()}) {
      EXPECT_EQ(k->plan(batch, false).workspace_bytes, 0u) << batch;
      const ConvFp16Plan p = k->plan(batch, true);
      EXPECT_EQ(k->workspace_bytes(p.variant, batch), p.workspace_bytes) << batch;
      EXPECT_EQ(p.name.find("unfused"), std::string::npos) << p.name;  // lab only
    }
  }
  // Launch ids are stable: a plan made at one batch names the same launch at another.
  const ConvFp16Plan at64 = plain->plan(64);
  EXPECT_EQ(plain->workspace_bytes(at64.variant, 2), 0u);
  // AlexNet conv3 at batch 1 has 6-18 CTAs on >= 100 SMs: the model must prefer split-K.
  int sms = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (sms >= 100) EXPECT_NE(plain->plan(1).name.find("split-K"), std::string::npos);
}

// Host-only: shape validation and derived extents (runs without a GPU).
TEST(ConvFp16Shape, DerivesPyTorchExtentsAndRejectsBadShapes) {
  ConvShape s = to_shape(alexnet_cases()[0]);
  EXPECT_EQ(s.conv_h, 55);
  EXPECT_EQ(s.out_h, 27);
  EXPECT_TRUE(ConvFp16::supports(s));
  Case ceil = fixed_cases()[12];  // 13x17, pool 2/2 ceil -> 7x9
  s = to_shape(ceil);
  EXPECT_EQ(s.out_h, 7);
  EXPECT_EQ(s.out_w, 9);
  Case too_big = fixed_cases()[1];
  too_big.kh = 40;
  EXPECT_FALSE(ConvFp16::supports(to_shape(too_big)));
  Case bad_groups = fixed_cases()[0];
  bad_groups.groups = 3;
  EXPECT_FALSE(ConvFp16::supports(to_shape(bad_groups)));
  EXPECT_THROW(ConvFp16(to_shape(bad_groups), nullptr, nullptr), Error);
}

// Host-only: asymmetric padding shapes only the output extent (graph/ops.h's conv rule).
TEST(ConvFp16Shape, AsymmetricPaddingShapesOnlyTheExtent) {
  Case t = fixed_cases()[0];
  t.kh = t.kw = 3;
  t.sh = t.sw = 2;
  t.ph = 0;
  t.pw = 1;
  t.pad_h_extra = 1;
  t.pad_w_extra = 2;
  const ConvShape s = to_shape(t);
  EXPECT_EQ(s.conv_h, conv_output_size(t.h, 3, 2, 0, 1, 1));
  EXPECT_EQ(s.conv_w, conv_output_size(t.w, 3, 2, 1, 3, 1));
  EXPECT_TRUE(ConvFp16::supports(s));
  t.pad_h_extra = -1;  // bottom padding below zero
  EXPECT_FALSE(ConvFp16::supports(to_shape(t)));
}

// Host-only: the registry's node adapter takes the activation as a clamp and the graph's extents;
// entries refuse what they cannot compute exactly.
TEST(ConvEntries, ClampAndAsymmetricPaddingRules) {
  Node node;
  node.name = "conv_under_test";
  node.op = OpKind::Conv;
  ConvAttrs a;
  a.out_channels = 32;
  a.kernel_h = a.kernel_w = 3;
  a.pad_h = a.pad_w = 1;
  node.attrs = a;
  node.inputs = {"input"};
  node.input_shapes = {{16, 13, 13}};
  node.output_shape = {32, 13, 13};
  node.activation = Activation::Clip;
  node.clip_min = -1.0f;
  node.clip_max = 2.0f;
  const std::optional<ConvShape> shape = conv_shape_of(node);
  ASSERT_TRUE(shape.has_value());
  EXPECT_EQ(shape->activation.lo, -1.0f);
  EXPECT_EQ(shape->activation.hi, 2.0f);
  const KernelRegistry& registry = KernelRegistry::instance();
  EXPECT_TRUE(registry.find("conv_fp16_igemm")->supports(node));
  EXPECT_FALSE(registry.find("im2col_cublas_conv")->supports(node));  // cuBLASLt: ReLU only
  node.activation = Activation::Relu;
  EXPECT_TRUE(registry.find("im2col_cublas_conv")->supports(node));
  // One extra row at the bottom: 14 rows of conv output, which the node must say.
  node.get<ConvAttrs>().pad_h_extra = 1;
  EXPECT_FALSE(conv_shape_of(node).has_value());  // the recorded 13x13 disagrees
  node.output_shape = {32, 14, 13};
  ASSERT_TRUE(conv_shape_of(node).has_value());
  EXPECT_TRUE(registry.find("conv_fp16_igemm")->supports(node));
  EXPECT_TRUE(registry.find("im2col_cublas_conv")->supports(node));
  if (const KernelEntry* cudnn = registry.find("cudnn_conv"))
    EXPECT_FALSE(cudnn->supports(node));  // one padding per axis in cuDNN's descriptor
}

}  // namespace
}  // namespace cnnrt::cuda
