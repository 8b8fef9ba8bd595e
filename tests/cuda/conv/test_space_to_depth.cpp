// Tests of the space-to-depth path for strided few-channel convs
// (kernels/cuda/conv/space_to_depth.h, registry entry conv_fp16_s2d in
// runtime/cuda/conv_entries.cpp).
//
// (a) The rearrangement kernel against a host loop on odd shapes (C = 1, 3, 4; block 2, 3, 4;
//     block grids that run past the image): a pure copy, so the result must match bit for bit,
//     including +0 in the padding channels.  The input's own padding channels hold NaN, which
//     must never be read.  The NCHW fp32 form (the graph input read directly) likewise, with
//     fp16 rounding done by the host loop, and bit-identical to the two-pass path it replaces
//     (layout conversion, then the fp16 rearrangement).
// (b) The conv_fp16_s2d entry against ref::conv2d → ref::relu → ref::maxpool2d for AlexNet conv1
//     (batch 1 and 3) and odd shapes, with and without bias / ReLU / pool, padding 0..3.
//     Tolerance: rel L2 <= 2e-3 (fp32 accumulation, fp16 pre-pool and output rounding) and, per
//     element, |y − ref| <= 4e-3·|ref| + 2e-3·max|ref| so a local bug cannot hide in the norm.
//     Outputs start as NaN bytes; padding channels must be exactly zero.  The same kernel fed
//     the NCHW fp32 input (its second accepted input type) must give the same bits.
// (c) Which nodes the entry accepts, and the rewrite's geometry for conv1 (hand-computed), on
//     the host (no device needed).
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <sstream>

#include "cuda/fp16_test_util.h"
#include "graph/ops.h"
#include "kernels/cpu/reference.h"
#include "kernels/cuda/conv/space_to_depth.h"
#include "kernels/cuda/layout.h"

namespace cnnrt {
namespace {

using test::DeviceMem;

constexpr double kRelL2Tolerance = 2e-3;

// --- (a) the rearrangement -------------------------------------------------------------------

uint16_t bits_of(__half h) {
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof(bits));
  return bits;
}

TEST(SpaceToDepth, RearrangementMatchesHostLoopBitForBit) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  struct Case {
    int c, h, w, block, pad_h, pad_w, out_h, out_w, batch;
  };
  const Case cases[] = {
      {3, 224, 224, 4, 2, 2, 57, 57, 2},  // AlexNet conv1
      {1, 37, 50, 2, 1, 0, 20, 26, 3},
      {3, 37, 50, 3, 3, 2, 15, 19, 1},  // 27 channels → 32: a part-padding chunk
      {4, 50, 37, 4, 0, 3, 14, 11, 2},  // 64 channels, blocks past the right edge
      {1, 9, 7, 4, 2, 1, 5, 4, 3},      // 16 channels, grid larger than the image
      {3, 13, 11, 2, 0, 0, 6, 5, 5},    // block grid smaller than the image
  };
  std::mt19937 rng(1234);
  for (const Case& cc : cases) {
    cuda::SpaceToDepthShape shape;
    shape.in_c = cc.c;
    shape.in_h = cc.h;
    shape.in_w = cc.w;
    shape.block = cc.block;
    shape.pad_h = cc.pad_h;
    shape.pad_w = cc.pad_w;
    shape.out_h = cc.out_h;
    shape.out_w = cc.out_w;
    const int64_t in_cs = test::pad8(cc.c), out_cs = shape.out_c_stride();
    ASSERT_EQ(out_cs, test::pad8(static_cast<int64_t>(cc.block) * cc.block * cc.c));

    // Input NHWC with NaN in its padding channels (they must not be read).
    std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
    std::vector<__half> x(static_cast<size_t>(cc.batch) * cc.h * cc.w * in_cs);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<int64_t>(i % in_cs) < cc.c ? __float2half_rn(dist(rng))
                                                    : __ushort_as_half(0x7FFF);
    std::vector<uint16_t> expected(static_cast<size_t>(cc.batch) * cc.out_h * cc.out_w * out_cs, 0);
    for (int n = 0; n < cc.batch; ++n)
      for (int by = 0; by < cc.out_h; ++by)
        for (int bx = 0; bx < cc.out_w; ++bx)
          for (int dy = 0; dy < cc.block; ++dy)
            for (int dx = 0; dx < cc.block; ++dx)
              for (int c = 0; c < cc.c; ++c) {
                const int iy = by * cc.block + dy - cc.pad_h, ix = bx * cc.block + dx - cc.pad_w;
                if (iy < 0 || iy >= cc.h || ix < 0 || ix >= cc.w) continue;
                const size_t out_index =
                    ((static_cast<size_t>(n) * cc.out_h + by) * cc.out_w + bx) * out_cs +
                    (dy * cc.block + dx) * cc.c + c;
                expected[out_index] =
                    bits_of(x[((static_cast<size_t>(n) * cc.h + iy) * cc.w + ix) * in_cs + c]);
              }

    DeviceMem input(x);
    DeviceMem output(cuda::space_to_depth_bytes(shape, cc.batch));
    ASSERT_EQ(output.bytes(), expected.size() * sizeof(__half));
    cuda::space_to_depth_fp16(input.get(), output.get(), shape, cc.batch, nullptr);
    CNNRT_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<__half> got = output.halves();
    size_t mismatches = 0, first_mismatch = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (bits_of(got[i]) != expected[i] && mismatches++ == 0) first_mismatch = i;
    EXPECT_EQ(mismatches, 0u) << "C=" << cc.c << " block=" << cc.block << " " << cc.h << "x" << cc.w
                              << " first mismatch at " << first_mismatch;
  }
}

TEST(SpaceToDepth, NchwFp32RearrangementMatchesHostLoopAndTwoPassPathBitForBit) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  struct Case {
    int c, h, w, block, pad_h, pad_w, out_h, out_w, batch;
  };
  const Case cases[] = {
      {3, 224, 224, 4, 2, 2, 57, 57, 2},  // AlexNet conv1
      {1, 37, 50, 2, 0, 1, 20, 26, 3},    // C' = 4, declared 8
      {3, 37, 50, 3, 3, 2, 15, 19, 1},    // 27 channels → 32: a part-padding chunk
      {4, 50, 37, 4, 1, 3, 14, 11, 2},    // blocks past the right edge
      {1, 9, 7, 4, 2, 1, 5, 4, 3},        // grid larger than the image
      {3, 13, 11, 2, 0, 0, 6, 5, 5},      // grid smaller than the image
      {4, 17, 23, 3, 3, 0, 7, 9, 2},     {3, 31, 29, 4, 1, 3, 8, 9, 1},
  };
  std::mt19937 rng(4321);
  for (const Case& cc : cases) {
    SCOPED_TRACE("C=" + std::to_string(cc.c) + " block=" + std::to_string(cc.block) + " " +
                 std::to_string(cc.h) + "x" + std::to_string(cc.w) + " pad " +
                 std::to_string(cc.pad_h) + "," + std::to_string(cc.pad_w));
    cuda::SpaceToDepthShape shape;
    shape.in_c = cc.c;
    shape.in_h = cc.h;
    shape.in_w = cc.w;
    shape.block = cc.block;
    shape.pad_h = cc.pad_h;
    shape.pad_w = cc.pad_w;
    shape.out_h = cc.out_h;
    shape.out_w = cc.out_w;
    const int64_t out_cs = shape.out_c_stride();

    // Unrounded fp32 NCHW, plus values whose rounding matters: overflow to inf, an fp16
    // subnormal, a tie that rounds to even, and -0.
    std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
    std::vector<float> x(static_cast<size_t>(cc.batch) * cc.c * cc.h * cc.w);
    for (float& v : x) v = dist(rng);
    const float specials[] = {1.0e5f, -3.0e-6f, 1.0f + 1.0f / 2048.0f, -0.0f, 65519.0f};
    for (size_t i = 0; i < std::size(specials); ++i) x[(i * 7919) % x.size()] = specials[i];

    std::vector<uint16_t> expected(static_cast<size_t>(cc.batch) * cc.out_h * cc.out_w * out_cs, 0);
    for (int n = 0; n < cc.batch; ++n)
      for (int by = 0; by < cc.out_h; ++by)
        for (int bx = 0; bx < cc.out_w; ++bx)
          for (int dy = 0; dy < cc.block; ++dy)
            for (int dx = 0; dx < cc.block; ++dx)
              for (int c = 0; c < cc.c; ++c) {
                const int iy = by * cc.block + dy - cc.pad_h, ix = bx * cc.block + dx - cc.pad_w;
                if (iy < 0 || iy >= cc.h || ix < 0 || ix >= cc.w) continue;
                const size_t out_index =
                    ((static_cast<size_t>(n) * cc.out_h + by) * cc.out_w + bx) * out_cs +
                    (dy * cc.block + dx) * cc.c + c;
                expected[out_index] = bits_of(__float2half_rn(
                    x[((static_cast<size_t>(n) * cc.c + c) * cc.h + iy) * cc.w + ix]));
              }

    DeviceMem input(x);
    DeviceMem direct(cuda::space_to_depth_bytes(shape, cc.batch));  // NaN bytes until written
    cuda::space_to_depth_nchw_fp32(static_cast<const float*>(input.get()), direct.get(), shape,
                                   cc.batch, nullptr);
    // The two-pass path the fused one replaces.
    DeviceMem converted(static_cast<size_t>(cc.batch) * cc.h * cc.w * test::pad8(cc.c) * 2);
    DeviceMem two_pass(cuda::space_to_depth_bytes(shape, cc.batch));
    cuda::nchw_fp32_to_nhwc_fp16(static_cast<const float*>(input.get()), converted.get(), cc.batch,
                                 cc.c, cc.h, cc.w, nullptr);
    cuda::space_to_depth_fp16(converted.get(), two_pass.get(), shape, cc.batch, nullptr);
    CNNRT_CUDA_CHECK(cudaDeviceSynchronize());

    const std::vector<__half> got = direct.halves();
    const std::vector<__half> reference = two_pass.halves();
    ASSERT_EQ(got.size(), expected.size());
    size_t mismatches = 0, first_mismatch = 0, differs_from_two_pass = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (bits_of(got[i]) != expected[i] && mismatches++ == 0) first_mismatch = i;
      differs_from_two_pass += bits_of(got[i]) != bits_of(reference[i]);
    }
    EXPECT_EQ(mismatches, 0u) << "first mismatch at " << first_mismatch << ": got 0x" << std::hex
                              << bits_of(got[first_mismatch]) << ", expected 0x"
                              << expected[first_mismatch];
    EXPECT_EQ(differs_from_two_pass, 0u);
  }
}

TEST(SpaceToDepth, RejectsMisalignedOutputAndBadShapes) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  cuda::SpaceToDepthShape shape;
  shape.in_c = 3;
  shape.in_h = shape.in_w = 8;
  shape.block = 2;
  shape.out_h = shape.out_w = 4;
  DeviceMem input(8 * 8 * 8 * 2), output(cuda::space_to_depth_bytes(shape, 1) + 16);
  EXPECT_THROW(cuda::space_to_depth_fp16(input.get(), static_cast<char*>(output.get()) + 2, shape,
                                         1, nullptr),
               Error);
  EXPECT_THROW(
      cuda::space_to_depth_nchw_fp32(static_cast<const float*>(input.get()),
                                     static_cast<char*>(output.get()) + 2, shape, 1, nullptr),
      Error);
  EXPECT_THROW(cuda::space_to_depth_nchw_fp32(nullptr, output.get(), shape, 1, nullptr), Error);
  shape.block = 0;
  EXPECT_THROW(cuda::space_to_depth_fp16(input.get(), output.get(), shape, 1, nullptr), Error);
  EXPECT_THROW(cuda::space_to_depth_nchw_fp32(static_cast<const float*>(input.get()), output.get(),
                                              shape, 1, nullptr),
               Error);
}

// --- (b) the registry entry against the CPU reference -------------------------------------------

struct ConvCase {
  int c, h, w, oc, kh, kw, stride, pad, batch;
  bool bias, relu;
  int pool_k, pool_s, pool_pad;  // pool_k == 0: no fused pool
  bool ceil_mode;
};

std::string describe(const ConvCase& cc) {
  std::ostringstream s;
  s << "C=" << cc.c << " " << cc.h << "x" << cc.w << " OC=" << cc.oc << " k=" << cc.kh << "x"
    << cc.kw << " s=" << cc.stride << " p=" << cc.pad << " batch=" << cc.batch
    << " bias=" << cc.bias << " relu=" << cc.relu << " pool=" << cc.pool_k << "/" << cc.pool_s
    << "/" << cc.pool_pad << (cc.ceil_mode ? " ceil" : "");
  return s.str();
}

Node make_conv_node(const ConvCase& cc, const std::vector<float>& weight,
                    const std::vector<float>& bias) {
  Node node;
  node.name = "conv_under_test";
  node.op = OpKind::Conv;
  ConvAttrs a;
  a.out_channels = cc.oc;
  a.kernel_h = cc.kh;
  a.kernel_w = cc.kw;
  a.stride_h = a.stride_w = cc.stride;
  a.pad_h = a.pad_w = cc.pad;
  node.attrs = a;
  node.inputs = {"input"};
  node.input_shapes = {{cc.c, cc.h, cc.w}};
  const int64_t oh = pool_output_size(cc.h, cc.kh, cc.stride, cc.pad, 1, false);
  const int64_t ow = pool_output_size(cc.w, cc.kw, cc.stride, cc.pad, 1, false);
  node.output_shape = {cc.oc, oh, ow};
  node.activation = cc.relu ? Activation::Relu : Activation::None;
  if (cc.pool_k > 0) {
    PoolAttrs p;
    p.kernel_h = p.kernel_w = cc.pool_k;
    p.stride_h = p.stride_w = cc.pool_s;
    p.pad_h = p.pad_w = cc.pool_pad;
    p.ceil_mode = cc.ceil_mode;
    node.fused_maxpool = p;
    node.pre_pool_shape = node.output_shape;
    node.output_shape = {cc.oc,
                         pool_output_size(oh, cc.pool_k, cc.pool_s, cc.pool_pad, 1, cc.ceil_mode),
                         pool_output_size(ow, cc.pool_k, cc.pool_s, cc.pool_pad, 1, cc.ceil_mode)};
  }
  node.params.push_back(test::make_param("weight", {cc.oc, cc.c, cc.kh, cc.kw}, weight));
  if (cc.bias) node.params.push_back(test::make_param("bias", {cc.oc}, bias));
  return node;
}

void check_case(const ConvCase& cc, uint32_t seed) {
  SCOPED_TRACE(describe(cc));
  std::mt19937 rng(seed);
  const float scale = 1.0f / std::sqrt(static_cast<float>(cc.c * cc.kh * cc.kw));
  const auto weight = test::random_fp16_values(static_cast<size_t>(cc.oc) * cc.c * cc.kh * cc.kw,
                                               rng, -scale, scale);
  const auto bias = test::random_fp16_values(cc.oc, rng, -0.5f, 0.5f);
  const Node node = make_conv_node(cc, weight, bias);
  const auto x = test::random_fp16_values(static_cast<size_t>(cc.batch) * cc.c * cc.h * cc.w, rng);

  const Shape& conv_shape = cc.pool_k > 0 ? node.pre_pool_shape : node.output_shape;
  std::vector<float> conv_out(static_cast<size_t>(cc.batch) * shape_elements(conv_shape));
  ref::conv2d(x.data(), cc.batch, cc.c, cc.h, cc.w, weight.data(), cc.bias ? bias.data() : nullptr,
              node.get<ConvAttrs>(), conv_out.data());
  if (cc.relu) ref::relu(conv_out.data(), static_cast<int64_t>(conv_out.size()), conv_out.data());
  std::vector<float> expected = conv_out;
  if (cc.pool_k > 0) {
    expected.assign(static_cast<size_t>(cc.batch) * shape_elements(node.output_shape), 0.0f);
    ref::maxpool2d(conv_out.data(), cc.batch, cc.oc, static_cast<int>(conv_shape[1]),
                   static_cast<int>(conv_shape[2]), *node.fused_maxpool, expected.data());
  }

  Graph graph;
  test::EntryRunner runner(KernelRegistry::instance(), "conv_fp16_s2d", node, graph);
  // The vector path, not the gather one (on Hopper the window conv where it serves the rewrite,
  // else, once the batch fills the GPU, the wgmma one).
  const KernelPlan plan = runner.prepare(cc.batch);
  EXPECT_EQ(plan.variant_name.rfind("s2d", 0), 0u) << plan.variant_name;
  EXPECT_EQ(plan.variant_name.find("gather"), std::string::npos) << plan.variant_name;
  EXPECT_GT(plan.workspace_bytes, 0u);
  EXPECT_EQ(plan.workspace_bytes % 256, 0u);
  DeviceMem input(test::to_nhwc(x, cc.batch, cc.c, cc.h, cc.w));
  const int oh = static_cast<int>(node.output_shape[1]),
            ow = static_cast<int>(node.output_shape[2]);
  DeviceMem output(static_cast<size_t>(cc.batch) * oh * ow * test::pad8(cc.oc) * 2);
  runner.run({input.get()}, output.get(), cc.batch);
  int64_t bad_padding = 0;
  const auto got = test::from_nhwc(output.halves(), cc.batch, cc.oc, oh, ow, &bad_padding);
  EXPECT_LE(test::rel_l2(got, expected), kRelL2Tolerance);
  EXPECT_EQ(bad_padding, 0);

  // The same kernel fed the NCHW fp32 input directly (bound so when it is the first layer):
  // x holds fp16-representable values, so x' and the output are the same bits.
  const std::vector<TensorType> accepted = runner.kernel().input_types(0);
  ASSERT_NE(std::find(accepted.begin(), accepted.end(), fp32_nchw()), accepted.end());
  {
    DeviceMem input_fp32(x);
    DeviceMem output_fp32(output.bytes());
    runner.run({input_fp32.get()}, output_fp32.get(), cc.batch, nullptr, {fp32_nchw()});
    const std::vector<__half> from_fp16 = output.halves(), from_fp32 = output_fp32.halves();
    size_t differ = 0;
    for (size_t i = 0; i < from_fp16.size(); ++i)
      differ += bits_of(from_fp16[i]) != bits_of(from_fp32[i]);
    EXPECT_EQ(differ, 0u) << "fp32-input run differs from the fp16-input run";
  }
  float max_ref = 0.0f;
  for (float v : expected) max_ref = std::max(max_ref, std::fabs(v));
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - expected[i]) <= 4e-3f * std::fabs(expected[i]) + 2e-3f * max_ref) &&
        bad++ == 0)
      first_bad = i;
  EXPECT_EQ(bad, 0u) << "first bad element " << first_bad << ": got " << got[first_bad]
                     << ", expected " << expected[first_bad];
}

TEST(ConvFp16S2d, MatchesReferenceOnAlexNetConv1) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  //          c    h    w  oc kh  kw  s  p  b  bias  relu  pool
  check_case({3, 224, 224, 64, 11, 11, 4, 2, 1, true, true, 3, 2, 0, false}, 11);
  check_case({3, 224, 224, 64, 11, 11, 4, 2, 3, true, true, 3, 2, 0, false}, 12);
  check_case({3, 224, 224, 64, 11, 11, 4, 2, 3, true, false, 0, 0, 0, false}, 13);  // conv alone
}

TEST(ConvFp16S2d, MatchesReferenceOnOddShapes) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const ConvCase cases[] = {
      // c  h   w  oc kh kw  s  p  b  bias   relu   pool        ceil
      {1, 37, 50, 16, 3, 3, 3, 1, 3, true, false, 0, 0, 0, false},
      {1, 50, 37, 7, 4, 4, 4, 0, 2, false, true, 0, 0, 0, false},  // kernel == stride
      {1, 37, 37, 24, 5, 5, 2, 2, 1, true, true, 3, 2, 0, false},  // C' = 4, declared 8
      {3, 50, 37, 24, 5, 5, 2, 2, 2, true, true, 3, 2, 1, false},
      {3, 37, 50, 40, 7, 7, 3, 3, 3, false, false, 2, 2, 0, true},
      {3, 37, 50, 64, 11, 11, 4, 0, 2, true, true, 3, 2, 0, false},
      {4, 37, 37, 13, 7, 7, 3, 3, 3, true, true, 0, 0, 0, false},
      {4, 50, 37, 33, 11, 11, 4, 1, 1, true, false, 3, 3, 1, true},
      {4, 41, 29, 9, 3, 3, 2, 0, 5, false, true, 2, 2, 0, false},
      {2, 37, 50, 17, 5, 7, 3, 2, 2, true, true, 3, 2, 0, false},  // rectangular kernel
      {3, 9, 11, 8, 11, 11, 4, 3, 2, true, true, 0, 0, 0, false},  // image smaller than kernel
  };
  uint32_t seed = 100;
  for (const ConvCase& cc : cases) check_case(cc, ++seed);
}

TEST(ConvFp16S2d, RunWithoutWorkspaceThrows) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const ConvCase cc{3, 37, 37, 16, 11, 11, 4, 2, 1, true, true, 0, 0, 0, false};
  std::mt19937 rng(5);
  const Node node = make_conv_node(cc, test::random_fp16_values(16 * 3 * 121, rng),
                                   test::random_fp16_values(16, rng));
  Graph graph;
  std::unique_ptr<LayerKernel> kernel =
      KernelRegistry::instance().find("conv_fp16_s2d")->create({node, graph});
  DeviceMem input(37 * 37 * 8 * 2), output(8 * 8 * 16 * 2);
  KernelArgs args;
  args.inputs = {input.get()};
  args.output = output.get();
  args.batch = 1;
  EXPECT_THROW(kernel->run(args), Error);
}

// --- (c) which nodes it serves, and the conv1 geometry (host only) ------------------------------

TEST(ConvFp16S2d, AcceptsOnlyStridedFewChannelConvs) {
  const KernelEntry* s2d = KernelRegistry::instance().find("conv_fp16_s2d");
  const KernelEntry* igemm = KernelRegistry::instance().find("conv_fp16_igemm");
  ASSERT_NE(s2d, nullptr);
  ASSERT_NE(igemm, nullptr);
  EXPECT_GT(s2d->priority, igemm->priority);
  EXPECT_FALSE(s2d->baseline);
  std::mt19937 rng(9);
  auto node_for = [&](ConvCase cc) {
    return make_conv_node(cc, test::random_fp16_values(size_t(cc.oc) * cc.c * cc.kh * cc.kw, rng),
                          test::random_fp16_values(cc.oc, rng));
  };
  const ConvCase conv1{3, 224, 224, 64, 11, 11, 4, 2, 1, true, true, 3, 2, 0, false};
  EXPECT_TRUE(s2d->supports(node_for(conv1)));
  EXPECT_TRUE(igemm->supports(node_for(conv1)));

  ConvCase stride1 = conv1;
  stride1.stride = 1;
  EXPECT_FALSE(s2d->supports(node_for(stride1)));
  ConvCase many_channels = conv1;
  many_channels.c = 5;
  EXPECT_FALSE(s2d->supports(node_for(many_channels)));
  ConvCase small_kernel = conv1;
  small_kernel.kh = small_kernel.kw = 3;  // kernel < stride 4
  EXPECT_FALSE(s2d->supports(node_for(small_kernel)));

  Node dilated = node_for(conv1);
  dilated.get<ConvAttrs>().dilation_h = dilated.get<ConvAttrs>().dilation_w = 2;
  EXPECT_FALSE(s2d->supports(dilated));
  Node uneven = node_for(conv1);
  uneven.get<ConvAttrs>().stride_w = 2;
  EXPECT_FALSE(s2d->supports(uneven));
  Node wrong_output = node_for(conv1);
  wrong_output.output_shape[1] += 1;  // disagrees with the graph's shape rule: refused
  EXPECT_FALSE(s2d->supports(wrong_output));
}

TEST(ConvFp16S2d, Conv1RewriteGeometry) {
  cuda::ConvShape shape;
  shape.in_c = 3;
  shape.in_h = shape.in_w = 224;
  shape.out_c = 64;
  shape.conv.out_channels = 64;
  shape.conv.kernel_h = shape.conv.kernel_w = 11;
  shape.conv.stride_h = shape.conv.stride_w = 4;
  shape.conv.pad_h = shape.conv.pad_w = 2;
  shape.activation = cuda::kReluActivation;
  PoolAttrs pool;
  pool.kernel_h = pool.kernel_w = 3;
  pool.stride_h = pool.stride_w = 2;
  shape.pool = pool;
  const std::optional<cuda::SpaceToDepthConv> conv = cuda::space_to_depth_conv(shape);
  ASSERT_TRUE(conv.has_value());
  // (224 + 4 − 11) / 4 + 1 = 55 outputs; 55 + 3 − 1 = 57 blocks of 4×4×3 = 48 channels.
  EXPECT_EQ(conv->rearrange.out_h, 57);
  EXPECT_EQ(conv->rearrange.out_w, 57);
  EXPECT_EQ(conv->rearrange.out_c(), 48);
  EXPECT_EQ(conv->transformed.in_c, 48);
  EXPECT_EQ(conv->transformed.conv.kernel_h, 3);
  EXPECT_EQ(conv->transformed.conv.stride_h, 1);
  EXPECT_EQ(conv->transformed.conv.pad_h, 0);
  EXPECT_EQ(conv->transformed.conv_h, 55);
  EXPECT_EQ(conv->transformed.out_h, 27);
  EXPECT_EQ(cuda::space_to_depth_bytes(conv->rearrange, 64), size_t(64) * 57 * 57 * 48 * 2);

  // Weights: each original tap lands once; tap (c=2, ky=9, kx=6) → channel (1·4 + 2)·3 + 2 = 20
  // at (KY, KX) = (2, 1); taps KY·4 + dy >= 11 are zero.
  std::vector<float> weight(64 * 3 * 11 * 11);
  for (size_t i = 0; i < weight.size(); ++i) weight[i] = float(i % 1009) + 1.0f;
  const std::vector<float> packed = cuda::space_to_depth_weights(*conv, weight.data());
  ASSERT_EQ(packed.size(), size_t(64) * 48 * 3 * 3);
  auto at = [&](int o, int c, int y, int x) {
    return packed[((size_t(o) * 48 + c) * 3 + y) * 3 + x];
  };
  EXPECT_EQ(at(5, 20, 2, 1), weight[((5 * 3 + 2) * 11 + 9) * 11 + 6]);
  EXPECT_EQ(at(5, (3 * 4 + 0) * 3 + 1, 2, 0), 0.0f);  // ky = 2·4 + 3 = 11: outside the kernel
  size_t nonzero = 0;
  for (float v : packed) nonzero += v != 0.0f;
  EXPECT_EQ(nonzero, weight.size());
}

// The rewrite's math on the host, independent of any GPU code: a host space-to-depth of x
// followed by ref::conv2d with the rewritten weights and attributes must equal ref::conv2d of
// the original conv (both accumulate in double; tolerance rel L2 <= 1e-6, float output rounding).
TEST(ConvFp16S2d, RewriteEqualsOriginalConvOnTheHost) {
  struct Case {
    int c, h, w, oc, kh, kw, stride, pad, batch;
  };
  const Case cases[] = {{3, 45, 43, 5, 11, 11, 4, 2, 2}, {1, 37, 50, 4, 3, 3, 3, 1, 1},
                        {4, 29, 31, 3, 7, 5, 3, 3, 2},   {3, 21, 19, 6, 5, 5, 2, 0, 1},
                        {1, 9, 11, 2, 4, 4, 4, 0, 3},    {2, 9, 11, 3, 11, 11, 4, 3, 1}};
  std::mt19937 rng(77);
  for (const Case& cc : cases) {
    cuda::ConvShape shape;
    shape.in_c = cc.c;
    shape.in_h = cc.h;
    shape.in_w = cc.w;
    shape.out_c = cc.oc;
    shape.conv.out_channels = cc.oc;
    shape.conv.kernel_h = cc.kh;
    shape.conv.kernel_w = cc.kw;
    shape.conv.stride_h = shape.conv.stride_w = cc.stride;
    shape.conv.pad_h = shape.conv.pad_w = cc.pad;
    const std::optional<cuda::SpaceToDepthConv> conv = cuda::space_to_depth_conv(shape);
    ASSERT_TRUE(conv.has_value());
    const cuda::SpaceToDepthShape& r = conv->rearrange;
    const cuda::ConvShape& t = conv->transformed;
    const auto x = test::random_fp16_values(size_t(cc.batch) * cc.c * cc.h * cc.w, rng);
    const auto w = test::random_fp16_values(size_t(cc.oc) * cc.c * cc.kh * cc.kw, rng);
    const auto b = test::random_fp16_values(cc.oc, rng);
    std::vector<float> xs(size_t(cc.batch) * t.in_c * r.out_h * r.out_w, 0.0f);  // NCHW x'
    for (int n = 0; n < cc.batch; ++n)
      for (int by = 0; by < r.out_h; ++by)
        for (int bx = 0; bx < r.out_w; ++bx)
          for (int dy = 0; dy < r.block; ++dy)
            for (int dx = 0; dx < r.block; ++dx)
              for (int c = 0; c < cc.c; ++c) {
                const int iy = by * r.block + dy - r.pad_h, ix = bx * r.block + dx - r.pad_w;
                if (iy < 0 || iy >= cc.h || ix < 0 || ix >= cc.w) continue;
                const int channel = (dy * r.block + dx) * cc.c + c;
                xs[((size_t(n) * t.in_c + channel) * r.out_h + by) * r.out_w + bx] =
                    x[((size_t(n) * cc.c + c) * cc.h + iy) * cc.w + ix];
              }
    std::vector<float> expected(size_t(cc.batch) * cc.oc * t.conv_h * t.conv_w);
    std::vector<float> got(expected.size());
    ref::conv2d(x.data(), cc.batch, cc.c, cc.h, cc.w, w.data(), b.data(), shape.conv,
                expected.data());
    const std::vector<float> ws = cuda::space_to_depth_weights(*conv, w.data());
    ref::conv2d(xs.data(), cc.batch, t.in_c, r.out_h, r.out_w, ws.data(), b.data(), t.conv,
                got.data());
    EXPECT_LE(test::rel_l2(got, expected), 1e-6)
        << "C=" << cc.c << " k=" << cc.kh << "x" << cc.kw << " s=" << cc.stride;
  }
}

TEST(ConvFp16S2d, RewriteRefusesWhatItCannotExpress) {
  cuda::ConvShape shape;
  shape.in_c = 3;
  shape.in_h = shape.in_w = 31;
  shape.out_c = 8;
  shape.conv.out_channels = 8;
  shape.conv.kernel_h = shape.conv.kernel_w = 5;
  shape.conv.stride_h = shape.conv.stride_w = 2;
  EXPECT_TRUE(cuda::space_to_depth_conv(shape).has_value());
  cuda::ConvShape grouped = shape;
  grouped.in_c = grouped.out_c = grouped.conv.out_channels = grouped.conv.groups = 4;
  EXPECT_FALSE(cuda::space_to_depth_conv(grouped).has_value());
  cuda::ConvShape too_small = shape;
  too_small.in_h = 3;  // kernel larger than the (unpadded) image
  EXPECT_FALSE(cuda::space_to_depth_conv(too_small).has_value());
}

}  // namespace
}  // namespace cnnrt
