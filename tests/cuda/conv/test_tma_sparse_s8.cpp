// conv_int8_sparse24_tma (kernels/cuda/conv/tma_sparse_s8.h), the int8 2:4 sparse instance of the
// TMA conv mainloop: GPU cases against the integer CPU reference BIT FOR BIT (ref::conv2d_int8 on
// the same pruned int8 weights: a 2:4 conv on pruned weights is the dense conv on them), and the
// rules that need no GPU (shape rule, registry entry, tile choice, weight bytes, the 2:4 check on
// a described H100).  The entry (runtime/cuda/sparse_conv_entries.cpp) is also run by the kernel
// harness's int8 mode on every conv case it serves (pruned weights: sparse_mode.cpp).
//
// Data as the int8 entries prepare it: random fp32 weights pruned 2:4 by magnitude along the input
// channels (graph/passes_sparsity.h), then ref::prepare_int8_layer (per-channel int8 weights, int32
// biases, multipliers) at an input scale for random int8 activations and an output scale from the
// fp32-output reference's max |y| (the harness's minmax rule), so outputs span the int8 range.
// Every case runs every tile (pinned) and the default plan; a pooled case runs the conv into the
// pre-pool tensor and maxpool_nhwc_s8 / _f32 after it, as the entry does.  The output buffer is
// filled with 0xFF first, so a byte the kernel never writes (padding lanes included) fails.
//
// UniformPattern: every group keeps channels {0, 1}, so every metadata nibble is 0x4 and every
// metadata word 0x44444444 whatever thread it belongs to: it checks the operand layouts, the
// descriptors and the epilogue independently of the per-thread metadata layout (the one part of
// the kernel inferred from the PTX ISA and not yet verified on a GPU: tma_sparse_s8_kernel.cuh).
// If it passes and the random-pattern cases fail, look at tma_sparse_s8_pack.cpp's pack_metadata.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "cuda/conv/sparse_test_util.h"
#include "cuda/conv/wgmma_test_cases.h"  // REQUIRE_HOPPER
#include "cuda/fp16_test_util.h"
#include "graph/passes_sparsity.h"
#include "kernels/cpu/int8_ref.h"
#include "kernels/cpu/reference.h"
#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/conv/conv_shape.h"
#include "kernels/cuda/conv/tma_sparse_s8.h"
#include "kernels/cuda/conv/tma_sparse_s8_pack.h"
#include "kernels/cuda/device_traits.h"
#include "runtime/cuda/int8_layer_prep.h"  // s8_conv_of
#include "runtime/kernel.h"

namespace cnnrt::cuda {
namespace {

enum class Act { None, Relu, Relu6 };

struct S8Case {
  int batch, c, h, w, oc, k, stride, pad;
  Act act = Act::Relu;
  bool pool = false;       // fused MaxPool 3/2 after the activation (run as the entry runs it)
  bool float_out = false;  // the graph output: dequantised fp32 NHWC/8
};

std::string describe(const S8Case& t) {
  std::ostringstream s;
  s << "n" << t.batch << " c" << t.c << " " << t.h << "x" << t.w << " -> oc" << t.oc << " k" << t.k
    << " s" << t.stride << " p" << t.pad
    << (t.act == Act::Relu    ? " relu"
        : t.act == Act::Relu6 ? " relu6"
                              : "")
    << (t.pool ? " +maxpool3/2" : "") << (t.float_out ? " fp32-out" : " int8-out");
  return s.str();
}

ActivationBounds bounds_of(Act act) {
  if (act == Act::Relu) return kReluActivation;
  if (act == Act::Relu6) return {0.0f, 6.0f};
  return kIdentityActivation;
}

ConvShape shape_of(const S8Case& t) {
  ConvShape s = sparse_test::square_conv_shape(t.c, t.h, t.w, t.oc, t.k, t.stride, t.pad);
  s.activation = bounds_of(t.act);
  if (t.pool) {
    PoolAttrs pool;
    pool.kernel_h = pool.kernel_w = 3;
    pool.stride_h = pool.stride_w = 2;
    s.pool = pool;
  }
  s.derive();
  return s;
}

// The S8Conv the entry builds (runtime/cuda/int8_layer_prep.h: s8_conv_of), with the layer's
// output form and bounds.
S8Conv s8conv_of(const S8Case& t, const ConvShape& s, const ref::Int8Layer& layer) {
  S8Conv c = s8_conv_of(s, t.float_out);
  c.float_output = layer.float_output;
  c.lo = layer.int_bounds.lo;
  c.hi = layer.int_bounds.hi;
  c.float_lo = layer.float_bounds.lo;
  c.float_hi = layer.float_bounds.hi;
  return c;
}

// Images whose reference is computed (the GPU computes all): all of a small batch, else the
// first, middle and last (ref::conv2d_int8 of a whole batch of 64 takes minutes).
std::vector<int> checked_images(int batch) {
  if (batch <= 8) {
    std::vector<int> all(batch);
    for (int i = 0; i < batch; ++i) all[i] = i;
    return all;
  }
  return {0, batch / 2, batch - 1};
}

// The reference output of the checked images as float values (int8 ones converted exactly),
// NCHW, after the fused pool.
std::vector<float> reference(const S8Case& t, const ConvShape& s, const std::vector<int>& images,
                             const std::vector<int8_t>& x, const ref::Int8Layer& layer) {
  const size_t in_image = size_t(t.c) * t.h * t.w, conv_image = size_t(t.oc) * s.conv_h * s.conv_w;
  std::vector<float> out;
  for (int n : images) {
    const int8_t* xi = x.data() + n * in_image;
    std::vector<float> conv(conv_image);
    if (layer.float_output) {
      ref::conv2d_int8(xi, 1, t.c, t.h, t.w, s.conv, layer, conv.data());
    } else {
      std::vector<int8_t> q(conv_image);
      ref::conv2d_int8(xi, 1, t.c, t.h, t.w, s.conv, layer, q.data());
      if (s.pool) {
        std::vector<int8_t> pooled(size_t(t.oc) * s.out_h * s.out_w);
        ref::maxpool2d_int8(q.data(), 1, t.oc, s.conv_h, s.conv_w, *s.pool, 1.0f, pooled.data());
        q = pooled;
      }
      out.insert(out.end(), q.begin(), q.end());
      continue;
    }
    if (s.pool) {
      std::vector<float> pooled(size_t(t.oc) * s.out_h * s.out_w);
      ref::maxpool2d(conv.data(), 1, t.oc, s.conv_h, s.conv_w, *s.pool, pooled.data());
      conv = pooled;
    }
    out.insert(out.end(), conv.begin(), conv.end());
  }
  return out;
}

// The kernel's NHWC output of the checked images as NCHW floats; counts padding lanes that are
// not zero (bytes of the 0xFF fill the kernel never wrote included).
std::vector<float> nchw_of(const std::vector<uint8_t>& y, const S8Case& t, const ConvShape& s,
                           int stride, const std::vector<int>& images, int64_t* bad_padding) {
  const size_t pixels = size_t(s.out_h) * s.out_w;
  std::vector<float> out;
  for (int n : images)
    for (int o = 0; o < stride; ++o)
      for (size_t px = 0; px < pixels; ++px) {
        const size_t at = (size_t(n) * pixels + px) * stride + o;
        float v = 0;
        if (t.float_out)
          std::memcpy(&v, y.data() + at * sizeof(float), sizeof(float));
        else
          v = float(int8_t(y[at]));
        if (o >= t.oc) {
          if (!(v == 0.0f && (t.float_out || y[at] == 0))) ++*bad_padding;
          continue;
        }
        out.push_back(v);  // pushed in (image, channel, pixel) order: NCHW
      }
  return out;
}

int64_t mismatches(const std::vector<float>& got, const std::vector<float>& want, size_t* first) {
  if (got.size() != want.size()) return -1;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && bad++ == 0) *first = i;
  return bad;
}

// Runs every tile and the default plan on one case; returns the default plan's name.
// uniform: every group keeps channels {0, 1} (header comment).
std::string check_case(const S8Case& t, uint32_t seed, bool uniform = false) {
  SCOPED_TRACE(describe(t) + (uniform ? " uniform-pattern" : ""));
  EXPECT_TRUE(ConvS8Sparse24Tma::device_supported())
      << "compute capability 9.0 device but no sm_90a image: is 90 in CMAKE_CUDA_ARCHITECTURES?";
  if (!ConvS8Sparse24Tma::device_supported()) return "";
  const ConvShape s = shape_of(t);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> q(-127, 127);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f), mag(0.5f, 1.0f);

  std::vector<int8_t> x(size_t(t.batch) * t.c * t.h * t.w);
  for (int8_t& v : x) v = int8_t(q(rng));
  const int taps = t.k * t.k;
  std::vector<float> w(size_t(t.oc) * t.c * taps), bias(t.oc);
  for (size_t i = 0; i < w.size(); ++i) {
    const int channel = int(i / taps) % t.c;
    // Uniform: channels 0, 1 of each group kept with magnitudes that cannot quantise to 0.
    w[i] = uniform ? (channel % 4 < 2 ? (u(rng) < 0 ? -mag(rng) : mag(rng)) : 0.0f) : u(rng);
  }
  for (float& b : bias) b = u(rng);
  const sparsity::WeightShape ws{t.oc, t.c, taps};
  if (!uniform) sparsity::prune_magnitude(w.data(), ws);
  EXPECT_EQ(sparsity::first_violation(w.data(), ws), "");
  const float input_scale = 0.02f;
  const int64_t k = int64_t(t.c) * taps;
  // The output scale from the fp32 output's max |y| (the harness's minmax rule).
  const ref::Int8Layer probe =
      ref::prepare_int8_layer(w.data(), bias.data(), t.oc, k, input_scale, 0.0f, bounds_of(t.act));
  std::vector<float> y_probe(size_t(t.oc) * s.conv_h * s.conv_w);
  ref::conv2d_int8(x.data(), 1, t.c, t.h, t.w, s.conv, probe, y_probe.data());
  float amax = 0;
  for (float v : y_probe) amax = std::max(amax, std::fabs(v));
  const ref::Int8Layer layer =
      t.float_out ? probe
                  : ref::prepare_int8_layer(w.data(), bias.data(), t.oc, k, input_scale,
                                            ref::scale_from_amax(amax), bounds_of(t.act));
  const std::vector<int> images = checked_images(t.batch);
  const std::vector<float> expected = reference(t, s, images, x, layer);

  const S8Conv conv = s8conv_of(t, s, layer);
  EXPECT_TRUE(ConvS8Sparse24Tma::supports(conv));
  const ConvS8Sparse24Tma kernel(conv, layer.weight.data(), layer.bias.data(),
                                 layer.multiplier.data(), "conv");
  // x as int8 NHWC/16 (padding lanes zero).
  std::vector<int8_t> x_nhwc(size_t(t.batch) * t.h * t.w * conv.in_stride, 0);
  for (int n = 0; n < t.batch; ++n)
    for (int c = 0; c < t.c; ++c)
      for (int p = 0; p < t.h * t.w; ++p)
        x_nhwc[(size_t(n) * t.h * t.w + p) * conv.in_stride + c] =
            x[(size_t(n) * t.c + c) * t.h * t.w + p];
  test::DeviceMem d_x(x_nhwc);
  const size_t elem = t.float_out ? sizeof(float) : 1;
  const size_t conv_bytes = size_t(t.batch) * s.conv_h * s.conv_w * conv.out_stride * elem;
  const size_t y_bytes = size_t(t.batch) * s.out_h * s.out_w * conv.out_stride * elem;
  test::DeviceMem d_conv(conv_bytes), d_y(y_bytes);
  const NhwcPool pool{t.oc, s.conv_h, s.conv_w, s.out_h, s.out_w, 3, 3, 2, 2, 0, 0};
  const ConvS8Sparse24TmaPlan pick = kernel.plan(t.batch);
  const ConvS8TmaInput input = kernel.encode_input(d_x.get(), t.batch);
  for (int tile = 0; tile < int(ConvS8Sparse24Tma::tile_names().size()); ++tile) {
    const ConvS8Sparse24TmaPlan plan = kernel.plan(t.batch, tile);
    const std::string what =
        "tile " + plan.name + (plan.variant == pick.variant ? " (the plan's pick)" : "");
    EXPECT_EQ(cudaMemset(d_y.get(), 0xFF, y_bytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(d_conv.get(), 0xFF, conv_bytes), cudaSuccess);
    kernel.forward(plan.variant, input, t.pool ? d_conv.get() : d_y.get(), nullptr);
    if (t.pool && t.float_out)
      maxpool_nhwc_f32(pool, static_cast<const float*>(d_conv.get()),
                       static_cast<float*>(d_y.get()), t.batch, nullptr);
    else if (t.pool)
      maxpool_nhwc_s8(pool, d_conv.get(), d_y.get(), t.batch, nullptr);
    const cudaError_t status = cudaDeviceSynchronize();
    EXPECT_EQ(status, cudaSuccess) << what;
    if (status != cudaSuccess) return pick.name;  // the context is gone: no further launch
    std::vector<uint8_t> y(y_bytes);
    EXPECT_EQ(cudaMemcpy(y.data(), d_y.get(), y_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    int64_t bad_padding = 0;
    const std::vector<float> got = nchw_of(y, t, s, conv.out_stride, images, &bad_padding);
    EXPECT_EQ(bad_padding, 0) << what << ": padding lanes must be written as zeros";
    size_t first = 0;
    const int64_t bad = mismatches(got, expected, &first);
    EXPECT_EQ(bad, 0) << what << ": values differ from the integer reference (bit for bit); first "
                      << "at NCHW index " << first << " of the checked images: got "
                      << (bad > 0 ? got[first] : 0.f) << ", expected "
                      << (bad > 0 ? expected[first] : 0.f);
  }
  return pick.name;
}

// AlexNet (torchvision) conv2-conv5 shapes.
const S8Case kConv2{1, 64, 27, 27, 192, 5, 1, 2, Act::Relu, true};
const S8Case kConv3{1, 192, 13, 13, 384, 3, 1, 1};
const S8Case kConv4{1, 384, 13, 13, 256, 3, 1, 1};
const S8Case kConv5{1, 256, 13, 13, 256, 3, 1, 1, Act::Relu, true};

S8Case at_batch(S8Case c, int batch) {
  c.batch = batch;
  return c;
}

// Operand layouts, descriptors and epilogue with every metadata word 0x44444444 (header comment):
// KB 64 and 128, both tiles, int8 and fp32 out.
TEST(ConvSparse24TmaS8, UniformPatternMatchesReference) {
  REQUIRE_HOPPER();
  check_case({2, 64, 9, 9, 128, 3, 1, 1}, 1, true);                          // KB 64
  check_case({2, 128, 9, 9, 256, 3, 1, 1}, 2, true);                         // KB 128
  check_case({2, 128, 9, 9, 72, 1, 1, 0, Act::None, false, true}, 3, true);  // fp32 out
}

TEST(ConvSparse24TmaS8, AlexNetShapesMatchReference) {
  REQUIRE_HOPPER();
  uint32_t seed = 10;
  for (int batch : {1, 3, 64}) {
    check_case(at_batch(kConv2, batch), seed++);  // KB 64, out_c 192, pool after
    check_case(at_batch(kConv3, batch), seed++);  // KB 64, 27 k-tiles: an odd count
    check_case(at_batch(kConv4, batch), seed++);  // KB 128, 27 k-tiles
    check_case(at_batch(kConv5, batch), seed++);  // KB 128, pool after
  }
}

TEST(ConvSparse24TmaS8, OddShapesMatchReference) {
  REQUIRE_HOPPER();
  const S8Case cases[] = {
      {2, 64, 7, 9, 8, 3, 1, 1},                      // out_c 8: lanes 8-15 zero, rows past it
      {3, 128, 11, 13, 72, 5, 2, 2, Act::None},       // stride 2, no clamp, out_c 72
      {1, 64, 13, 13, 320, 1, 2, 0},                  // 1x1 stride 2: one k-tile, 2.5 tiles
      {3, 192, 9, 11, 136, 3, 1, 1, Act::Relu6},      // ReLU6, KB 64 x 3 blocks, out_c 136
      {2, 50, 15, 17, 64, 3, 1, 1, Act::Relu, true},  // in_c 50: a half group, 3 zero groups
      {5, 64, 9, 11, 128, 3, 1, 1, Act::None},        // boxes cross images
      {1, 64, 12, 12, 64, 7, 1, 3},                   // 7x7: 49 k-tiles, pad 3
      {2, 256, 9, 9, 200, 5, 1, 2, Act::Relu, false, true},   // fp32 out, out_c 200 (pad8)
      {3, 128, 13, 13, 96, 3, 1, 1, Act::Relu6, true, true},  // fp32 out + pool
      {4, 128, 6, 5, 24, 1, 1, 0, Act::None, false, false},   // 120 pixels: one partial box
  };
  uint32_t seed = 100;
  for (const S8Case& c : cases) check_case(c, seed++);
}

// The host packing (no GPU): the kept values and the metadata words, decoded as the kernel's design
// note says the hardware reads them (thread warp * 32 + 4g + t, instruction kk: row 16 warp + g
// + 8 (t & 1), k-tile groups 16 kk + 8 (t >> 1) .. +7), give back the dense int8 weight in the
// kernel's K order (tap, channel over the NHWC/16 stride; zeros in the padding channels), and
// padding rows carry the valid nibble.  KB 64 and 128, in_c with a partial group, out_c past a 256
// block.
TEST(ConvSparse24TmaS8, MetadataPackingDecodesToTheDenseWeight) {
  struct Shape {
    int oc, c, taps, kb;
  };
  const Shape shapes[] = {{8, 64, 9, 64},   {72, 128, 25, 128}, {72, 128, 25, 64},
                          {320, 50, 9, 64}, {136, 192, 9, 64},  {200, 256, 1, 128}};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const Shape& sh : shapes) {
    SCOPED_TRACE("oc " + std::to_string(sh.oc) + " c " + std::to_string(sh.c) + " taps " +
                 std::to_string(sh.taps) + " kb " + std::to_string(sh.kb));
    const int in_stride = padded16(sh.c), k = sh.taps * in_stride;
    std::vector<float> w(size_t(sh.oc) * sh.c * sh.taps);
    for (float& v : w) v = u(rng);
    sparsity::prune_magnitude(w.data(), {sh.oc, sh.c, sh.taps});
    std::vector<float> q(w.size());  // an int8 weight's exact float image
    for (size_t i = 0; i < w.size(); ++i) q[i] = std::round(w[i] * 100);
    const sparse24::Compressed c = sparse24::compress(q.data(), {sh.oc, sh.c, sh.taps}, "conv");
    using namespace tma_sparse_s8_detail;
    const KernelOrder order = kernel_order(c, sh.oc, sh.taps, in_stride);
    const int k_tiles = k / sh.kb, blocks = (sh.oc + 255) / 256 * 4, mmas = sh.kb / 64;
    const std::vector<uint32_t> words = pack_metadata(order, sh.oc, k / 4, sh.kb, k_tiles, blocks);
    ASSERT_EQ(words.size(), size_t(k_tiles) * blocks * 128 * mmas);
    std::vector<int> dense(size_t(sh.oc) * k, 0);
    int bad_nibbles = 0;
    size_t at = 0;
    for (int kt = 0; kt < k_tiles; ++kt)
      for (int b = 0; b < blocks; ++b)
        for (int thread = 0; thread < 128; ++thread)
          for (int kk = 0; kk < mmas; ++kk) {
            const uint32_t word = words[at++];
            const int warp = thread / 32, g = (thread % 32) / 4, t = thread % 4;
            for (int j = 0; j < 8; ++j) {
              const int row = b * 64 + 16 * warp + g + 8 * (t & 1);
              const int group = 16 * kk + 8 * (t >> 1) + j;
              const uint32_t nibble = (word >> (4 * j)) & 0xF;
              const int first = int(nibble & 3), second = int(nibble >> 2);
              if (row >= sh.oc) {
                bad_nibbles += nibble != kZeroGroupNibble;
                continue;
              }
              bad_nibbles += first >= second;  // the hardware's rule: two distinct indices
              // The group's two kept int8 in A: k-tile kt's KB / 2 bytes of the row.
              const size_t kept = size_t(row) * (k / 2) + size_t(kt) * (sh.kb / 2) + 2 * group;
              const size_t dense_k = size_t(row) * k + size_t(kt) * sh.kb + 4 * group;
              dense[dense_k + first] += order.values[kept];
              dense[dense_k + second] += order.values[kept + 1];
            }
          }
    EXPECT_EQ(bad_nibbles, 0);
    int mismatches = 0;
    for (int o = 0; o < sh.oc; ++o)
      for (int tap = 0; tap < sh.taps; ++tap)
        for (int ch = 0; ch < in_stride; ++ch) {
          const int want = ch < sh.c ? int(q[(size_t(o) * sh.c + ch) * sh.taps + tap]) : 0;
          mismatches += dense[size_t(o) * k + size_t(tap) * in_stride + ch] != want;
        }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST(ConvSparse24TmaS8, RejectsWeightThatIsNot24) {
  // Runs on a described H100 too: the check comes before any device work.
  PlanTargetScope h100(target_traits("h100"));
  if (!ConvS8Sparse24Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  const S8Case t{1, 64, 9, 9, 64, 3, 1, 1};
  ref::Int8Layer layer;
  layer.weight.assign(size_t(t.oc) * t.c * 9, int8_t(3));  // dense
  layer.bias.assign(t.oc, 0);
  layer.multiplier.assign(t.oc, 0.01f);
  sparse_test::expect_rejects_dense_weight([&] {
    const ConvS8Sparse24Tma kernel(s8conv_of(t, shape_of(t), layer), layer.weight.data(),
                                   layer.bias.data(), layer.multiplier.data(), "conv7");
  });
}

TEST(ConvSparse24TmaS8, ShapeRule) {
  const ref::Int8Layer none;
  auto serves = [&](const S8Case& t) {
    return ConvS8Sparse24Tma::supports(s8conv_of(t, shape_of(t), none));
  };
  EXPECT_TRUE(serves(kConv2));
  EXPECT_TRUE(serves(kConv3));
  EXPECT_TRUE(serves(kConv4));
  EXPECT_TRUE(serves({1, 50, 13, 13, 8, 3, 1, 1}));    // channel stride 64
  EXPECT_FALSE(serves({1, 48, 13, 13, 64, 3, 1, 1}));  // channel stride 48: not % 64
  EXPECT_FALSE(serves({1, 64, 27, 27, 64, 3, 9, 1}));  // traversal stride <= 8
}

TEST(ConvSparse24TmaS8, RegistryEntryIsInt8AndSparse) {
  const KernelRegistry& registry = KernelRegistry::instance();
  const KernelEntry* entry = registry.find("conv_int8_sparse24_tma");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->precision, Precision::INT8);
  EXPECT_EQ(entry->device, Device::CUDA);
  EXPECT_TRUE(entry->sparse_2_4);
  EXPECT_FALSE(entry->residual);
  EXPECT_FALSE(entry->baseline);
  // The only int8 sparse conv: what `precision: int8` + `sparsity: 2:4` takes.
  for (const KernelEntry& e : registry.entries()) {
    if (&e != entry && e.op == OpKind::Conv && e.precision == Precision::INT8) {
      EXPECT_FALSE(e.sparse_2_4) << e.name;
    }
  }
}

// On a described H100 (no GPU needed): the weight bytes the kernel reads, the k-tile width and
// the tile the wave model picks for AlexNet conv2-conv5 at batch 256.
TEST(ConvSparse24TmaS8, PlanOnADescribedH100) {
  PlanTargetScope h100(target_traits("h100"));
  if (!ConvS8Sparse24Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  struct Layer {
    S8Case c;
    int kb;
  };
  const Layer layers[] = {{kConv2, 64}, {kConv3, 64}, {kConv4, 128}, {kConv5, 128}};
  for (const Layer& l : layers) {
    const S8Case& t = l.c;
    SCOPED_TRACE(describe(t));
    ref::Int8Layer layer;
    layer.weight.assign(size_t(t.oc) * t.c * t.k * t.k, int8_t(0));
    for (size_t i = 0; i < layer.weight.size(); i += 2 * size_t(t.k) * t.k)
      layer.weight[i] = 5;  // 2:4: every other input channel at tap 0
    layer.bias.assign(t.oc, 0);
    layer.multiplier.assign(t.oc, 0.01f);
    const ConvS8Sparse24Tma kernel(s8conv_of(t, shape_of(t), layer), layer.weight.data(),
                                   layer.bias.data(), layer.multiplier.data(), "conv");
    EXPECT_EQ(kernel.k_tile_channels(), l.kb);
    const size_t k = size_t(t.k) * t.k * padded16(t.c), k_tiles = k / l.kb,
                 blocks = (t.oc + 255) / 256 * 4;
    EXPECT_EQ(kernel.weight_bytes(),
              t.oc * k / 2 + k_tiles * blocks * 64 * (l.kb / 8) + 8 * size_t(t.oc));
    const ConvS8Sparse24TmaPlan plan = kernel.plan(256);
    EXPECT_NE(plan.name.find("tma_sp_s8_"), std::string::npos) << plan.name;
    EXPECT_EQ(plan.ctas, 132);
  }
}

}  // namespace
}  // namespace cnnrt::cuda
