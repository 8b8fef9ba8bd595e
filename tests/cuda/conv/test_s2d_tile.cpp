// Tests of the tiled space-to-depth from the NCHW fp32 graph input (kernels/cuda/conv/s2d_tile.h,
// used by space_to_depth_nchw_fp32 and space_to_depth_s8).
//
// (a) The plan, on the host (no device needed): AlexNet conv1 at batch 1 and 256, and the shapes
//     it must hand to the generic kernel.
// (b) Both forms against a straightforward host loop on odd shapes (C = 1..4, block 2..5, pads
//     0..block, odd and even sizes, block grids past or short of the image, batch 1 and 3, an
//     input misaligned for 8-byte loads), bit for bit, with the output's bytes NaN/0xFF until
//     written — and the generic kernel (S2dKernel::Generic) giving the same bits.  fp16: the
//     host's __float2half_rn.  int8: ref::quantize_int8 (RNE of the fp32 quotient, NaN → 0,
//     ±127), and the two-pass path it replaces (convert_tensor_cuda to int8 NHWC/16, then the
//     int8-source rearrangement).  The inputs include values that make rounding matter: exact
//     half-integers of the scale and their neighbours, NaN, ±inf, fp32 subnormals, huge values.
//     The cases must cover every kernel variant (pairs or not, block 4 or not, 1/2/4 warps).
// (c) CNNRT_PERF=1: AlexNet conv1's rearrangement at batch 1 and 256, tiled vs generic, fp16 and
//     int8: median of 50 launches with L2 flushed before each, and GB/s of input + output.
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bench/event_timing.h"
#include "cuda/fp16_test_util.h"
#include "graph/tensor_type.h"
#include "kernels/cpu/convert_ref.h"
#include "kernels/cuda/conv/conv_s8.h"
#include "kernels/cuda/conv/s2d_tile.h"
#include "kernels/cuda/conv/space_to_depth.h"
#include "kernels/cuda/convert.h"

namespace cnnrt {
namespace {

using test::DeviceMem;

// --- (a) the plan ----------------------------------------------------------------------------

cuda::S2dTileShape conv1_shape(int out_bytes) {
  cuda::S2dTileShape s;
  s.c = 3;
  s.h = s.w = 224;
  s.block = 4;
  s.pad_h = s.pad_w = 2;
  s.out_h = s.out_w = 57;
  s.out_stride = 48;
  s.out_bytes = out_bytes;
  return s;
}

TEST(S2dTilePlan, AlexNetConv1FillsTheGpuAtBatch1AndUsesPairsAtBatch256) {
  for (const int bytes : {2, 1}) {
    SCOPED_TRACE(bytes == 2 ? "fp16" : "int8");
    // Batch 1: single-column lanes (8 blocks per warp, 57 blocks → 8 tiles per row of 8, 8, ...,
    // 1 → balanced to 8), 456 tiles, one warp per CTA: 456 CTAs >= kS2dMinCtas.
    const cuda::S2dTilePlan one = cuda::s2d_tile_plan(conv1_shape(bytes), 1, 256);
    ASSERT_TRUE(one.tiled);
    EXPECT_FALSE(one.pairs);
    EXPECT_EQ(one.tile_blocks, 8);
    EXPECT_EQ(one.tiles_per_row, 8);
    EXPECT_EQ(one.tiles, 57 * 8);
    EXPECT_EQ(one.warps_per_cta, 1);
    EXPECT_EQ(one.ctas, 456);
    EXPECT_EQ(one.tile_chunks, 8 * 48 * bytes / 16);
    // Batch 256: two-column lanes, tiles of 15/15/15/12 blocks (4 per row), 4 warps per CTA.
    const cuda::S2dTilePlan big = cuda::s2d_tile_plan(conv1_shape(bytes), 256, 256);
    ASSERT_TRUE(big.tiled);
    EXPECT_TRUE(big.pairs);
    EXPECT_EQ(big.tile_blocks, 15);
    EXPECT_EQ(big.tiles_per_row, 4);
    EXPECT_EQ(big.tiles, 256 * 57 * 4);
    EXPECT_EQ(big.warps_per_cta, 4);
    EXPECT_EQ(big.ctas, 256 * 57);
    EXPECT_EQ(big.tile_chunks, 16 * 48 * bytes / 16);  // a slot for every lane: 64 / 4 blocks
    EXPECT_EQ(big.smem_bytes, size_t(4) * 16 * 48 * bytes);
    // An input not 8-byte aligned: no pairs, same coverage.
    const cuda::S2dTilePlan odd = cuda::s2d_tile_plan(conv1_shape(bytes), 256, 260);
    ASSERT_TRUE(odd.tiled);
    EXPECT_FALSE(odd.pairs);
  }
}

TEST(S2dTilePlan, HandsTheShapesItCannotServeToTheGenericKernel) {
  cuda::S2dTileShape s = conv1_shape(2);
  s.block = 33;  // a block wider than a warp's columns
  s.out_stride = 33 * 33 * 3 + 5;
  EXPECT_FALSE(cuda::s2d_tile_plan(s, 1, 256).tiled);
  s = conv1_shape(2);
  s.c = 64;  // 1024 channels: an 8-block tile is 16 KB
  s.out_stride = 1024;
  EXPECT_FALSE(cuda::s2d_tile_plan(s, 1, 256).tiled);
  s = conv1_shape(2);
  s.out_stride = 52;  // 104 bytes: not 16-byte rows
  EXPECT_FALSE(cuda::s2d_tile_plan(s, 1, 256).tiled);
  s = conv1_shape(2);
  s.w = 225;  // odd rows: served, without pairs
  const cuda::S2dTilePlan plan = cuda::s2d_tile_plan(s, 256, 256);
  EXPECT_TRUE(plan.tiled);
  EXPECT_FALSE(plan.pairs);
  EXPECT_FALSE(cuda::s2d_tile_plan(conv1_shape(2), 0, 256).tiled);
}

// --- (b) both forms against the host loop ------------------------------------------------------

struct Case {
  int c, h, w, block, pad_h, pad_w, out_h, out_w, batch;
  bool misaligned = false;  // input one float into its buffer: no 8-byte loads
};

// The shared geometry: output element (n, by, bx, channel) ← input (n, c, iy, ix), or nothing.
template <typename Visit>
void for_each_source(const Case& k, int out_stride, Visit visit) {
  for (int n = 0; n < k.batch; ++n)
    for (int by = 0; by < k.out_h; ++by)
      for (int bx = 0; bx < k.out_w; ++bx)
        for (int dy = 0; dy < k.block; ++dy)
          for (int dx = 0; dx < k.block; ++dx)
            for (int c = 0; c < k.c; ++c) {
              const int iy = by * k.block + dy - k.pad_h, ix = bx * k.block + dx - k.pad_w;
              if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
              visit(((static_cast<size_t>(n) * k.out_h + by) * k.out_w + bx) * out_stride +
                        (dy * k.block + dx) * k.c + c,
                    ((static_cast<size_t>(n) * k.c + c) * k.h + iy) * k.w + ix);
            }
}

std::vector<Case> odd_cases() {
  std::vector<Case> cases = {
      {3, 224, 224, 4, 2, 2, 57, 57, 1},  // AlexNet conv1: single-column lanes, 1 warp per CTA
      {3, 224, 224, 4, 2, 2, 57, 57, 3},  // pairs, 2 warps per CTA
      {3, 224, 224, 4, 2, 2, 57, 57, 5},  // pairs, 4 warps per CTA
      {3, 224, 224, 4, 2, 2, 57, 57, 3, true},
      {1, 150, 96, 2, 0, 2, 76, 49, 3},  // pairs with block 2 (run-time block), C' = 4 → 8/16
      {4, 200, 96, 4, 2, 0, 51, 24, 3},  // pairs, C = 4: a second row batch
      {3, 37, 50, 3, 3, 2, 15, 19, 1},   // 27 channels → 32: part-padding chunks
      {4, 50, 37, 4, 1, 3, 14, 11, 3},   // blocks past the right edge, odd width
      {1, 9, 7, 4, 2, 1, 5, 4, 3},       // grid larger than the image
      {3, 13, 11, 2, 0, 0, 6, 5, 1},     // grid smaller than the image
      {2, 31, 29, 5, 5, 4, 7, 7, 3},     // block 5, pads up to the block
      {3, 41, 43, 3, 0, 3, 14, 16, 3},
  };
  // And random odd shapes.
  std::mt19937 rng(20240531);
  for (int i = 0; i < 12; ++i) {
    Case k;
    k.c = 1 + static_cast<int>(rng() % 4);
    k.block = 2 + static_cast<int>(rng() % 3);
    k.pad_h = static_cast<int>(rng() % (k.block + 1));
    k.pad_w = static_cast<int>(rng() % (k.block + 1));
    k.h = 5 + 2 * static_cast<int>(rng() % 20);  // odd
    k.w = 6 + static_cast<int>(rng() % 41);
    k.out_h = (k.h + k.pad_h + k.block - 1) / k.block + static_cast<int>(rng() % 3) - 1;
    k.out_w = (k.w + k.pad_w + k.block - 1) / k.block + static_cast<int>(rng() % 3) - 1;
    k.batch = i % 2 == 0 ? 1 : 3;
    k.misaligned = i % 4 == 3;
    cases.push_back(k);
  }
  return cases;
}

std::string describe(const Case& k) {
  return "C=" + std::to_string(k.c) + " " + std::to_string(k.h) + "x" + std::to_string(k.w) +
         " block=" + std::to_string(k.block) + " pad=" + std::to_string(k.pad_h) + "," +
         std::to_string(k.pad_w) + " grid=" + std::to_string(k.out_h) + "x" +
         std::to_string(k.out_w) + " batch=" + std::to_string(k.batch) +
         (k.misaligned ? " (input not 8-byte aligned)" : "");
}

// Random values in ±(4·scale·127) plus the values whose rounding matters.
std::vector<float> make_input(const Case& k, float scale, std::mt19937& rng) {
  std::vector<float> x(static_cast<size_t>(k.batch) * k.c * k.h * k.w);
  std::uniform_real_distribution<float> dist(-600.0f * scale, 600.0f * scale);
  for (float& v : x) v = dist(rng);
  std::vector<float> specials = {std::numeric_limits<float>::quiet_NaN(),
                                 std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity(),
                                 1.0e-40f,
                                 -0.0f,
                                 3.0e38f,
                                 1.0e5f,
                                 -3.0e-6f,
                                 1.0f + 1.0f / 2048.0f,
                                 65519.0f};
  for (int q = -130; q <= 130; q += 7) {  // half-integers of the scale and their neighbours
    const float half = (static_cast<float>(q) + 0.5f) * scale;
    specials.push_back(half);
    specials.push_back(std::nextafter(half, 1.0e30f));
    specials.push_back(std::nextafter(half, -1.0e30f));
  }
  for (size_t i = 0; i < specials.size() && i < x.size(); ++i)
    x[(i * 7919 + 13) % x.size()] = specials[i];
  return x;
}

// An fp32 input on the device starting `offset_floats` into its buffer (1: not 8-byte aligned).
struct DeviceInput {
  DeviceMem memory;
  const float* data;
  DeviceInput(const std::vector<float>& x, int offset_floats)
      : memory((x.size() + 2) * sizeof(float)),
        data(static_cast<const float*>(memory.get()) + offset_floats) {
    CNNRT_CUDA_CHECK(cudaMemcpy(const_cast<float*>(data), x.data(), x.size() * sizeof(float),
                                cudaMemcpyHostToDevice));
  }
};

template <typename T>
std::vector<T> download(const DeviceMem& memory) {
  std::vector<T> host(memory.bytes() / sizeof(T));
  CNNRT_CUDA_CHECK(
      cudaMemcpy(host.data(), memory.get(), host.size() * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

template <typename T>
size_t count_mismatches(const std::vector<T>& got, const std::vector<T>& expected, size_t* first) {
  size_t mismatches = 0;
  for (size_t i = 0; i < got.size() && i < expected.size(); ++i)
    if (got[i] != expected[i] && mismatches++ == 0) *first = i;
  return mismatches + (got.size() != expected.size() ? 1 : 0);
}

// Which kernel variants the cases reached (pairs, block 4, warps per CTA).
struct Coverage {
  std::set<std::string> seen;
  void add(const Case& k, int out_stride, int out_bytes, uintptr_t x_address) {
    cuda::S2dTileShape s{k.c,     k.h,     k.w,     k.block,    k.pad_h,
                         k.pad_w, k.out_h, k.out_w, out_stride, out_bytes};
    const cuda::S2dTilePlan plan = cuda::s2d_tile_plan(s, k.batch, x_address);
    if (!plan.tiled) {
      seen.insert("generic");
      return;
    }
    seen.insert(plan.pairs ? "pairs" : "single");
    seen.insert(k.block == 4 ? "block4" : "runtime-block");
    seen.insert("warps" + std::to_string(plan.warps_per_cta));
  }
  void expect_all_tiled_variants() const {
    for (const char* v :
         {"pairs", "single", "block4", "runtime-block", "warps1", "warps2", "warps4"})
      EXPECT_EQ(seen.count(v), 1u) << "no case reached the tiled kernel's " << v << " variant";
  }
};

uint16_t bits_of(__half h) {
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof(bits));
  return bits;
}

TEST(S2dTile, Fp16FromNchwFp32MatchesHostLoopAndGenericKernelBitForBit) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(77);
  Coverage coverage;
  for (const Case& k : odd_cases()) {
    SCOPED_TRACE(describe(k));
    cuda::SpaceToDepthShape shape;
    shape.in_c = k.c;
    shape.in_h = k.h;
    shape.in_w = k.w;
    shape.block = k.block;
    shape.pad_h = k.pad_h;
    shape.pad_w = k.pad_w;
    shape.out_h = k.out_h;
    shape.out_w = k.out_w;
    const int out_stride = shape.out_c_stride();
    const std::vector<float> x = make_input(k, 0.01f, rng);
    std::vector<uint16_t> expected(static_cast<size_t>(k.batch) * k.out_h * k.out_w * out_stride,
                                   0);
    for_each_source(k, out_stride, [&](size_t out, size_t in) {
      expected[out] = bits_of(__float2half_rn(x[in]));
    });

    const DeviceInput input(x, k.misaligned ? 1 : 0);
    coverage.add(k, out_stride, 2, reinterpret_cast<uintptr_t>(input.data));
    DeviceMem tiled(cuda::space_to_depth_bytes(shape, k.batch));  // 0xFF until written
    DeviceMem generic(cuda::space_to_depth_bytes(shape, k.batch));
    cuda::space_to_depth_nchw_fp32(input.data, tiled.get(), shape, k.batch, nullptr);
    cuda::space_to_depth_nchw_fp32(input.data, generic.get(), shape, k.batch, nullptr,
                                   cuda::S2dKernel::Generic);
    CNNRT_CUDA_CHECK(cudaDeviceSynchronize());
    size_t first = 0;
    const std::vector<uint16_t> got = download<uint16_t>(tiled);
    EXPECT_EQ(count_mismatches(got, expected, &first), 0u)
        << "first at " << first << ": 0x" << std::hex << got[first] << " vs 0x" << expected[first];
    EXPECT_EQ(count_mismatches(download<uint16_t>(generic), expected, &first), 0u)
        << "generic kernel, first at " << first;
  }
  coverage.expect_all_tiled_variants();
}

void check_int8(float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  Coverage coverage;
  for (const Case& k : odd_cases()) {
    SCOPED_TRACE(describe(k));
    cuda::S8SpaceToDepth s2d;
    s2d.c = k.c;
    s2d.h = k.h;
    s2d.w = k.w;
    s2d.s = k.block;
    s2d.pad_h = k.pad_h;
    s2d.pad_w = k.pad_w;
    s2d.blocks_h = k.out_h;
    s2d.blocks_w = k.out_w;
    s2d.out_stride = cuda::padded16(k.block * k.block * k.c);
    s2d.input_scale = scale;
    const std::vector<float> x = make_input(k, scale, rng);
    std::vector<int8_t> expected(static_cast<size_t>(k.batch) * k.out_h * k.out_w * s2d.out_stride,
                                 0);
    for_each_source(k, s2d.out_stride, [&](size_t out, size_t in) {
      expected[out] = ref::quantize_int8(x[in], scale);
    });

    const DeviceInput input(x, k.misaligned ? 1 : 0);
    coverage.add(k, s2d.out_stride, 1, reinterpret_cast<uintptr_t>(input.data));
    const size_t bytes = expected.size();
    DeviceMem tiled(bytes), generic(bytes), two_pass(bytes);
    cuda::space_to_depth_s8(s2d, input.data, true, tiled.get(), k.batch, nullptr);
    cuda::space_to_depth_s8(s2d, input.data, true, generic.get(), k.batch, nullptr,
                            cuda::S2dKernel::Generic);
    // The two-pass path: the conversion step to int8 NHWC/16, then the int8-source kernel.
    DeviceMem converted(static_cast<size_t>(k.batch) * k.h * k.w * cuda::padded16(k.c));
    cuda::convert_tensor_cuda(input.data, fp32_nchw(), converted.get(), int8_nhwc16(scale),
                              Shape{k.c, k.h, k.w}, k.batch, nullptr);
    cuda::space_to_depth_s8(s2d, converted.get(), false, two_pass.get(), k.batch, nullptr);
    CNNRT_CUDA_CHECK(cudaDeviceSynchronize());
    size_t first = 0;
    const std::vector<int8_t> got = download<int8_t>(tiled);
    EXPECT_EQ(count_mismatches(got, expected, &first), 0u)
        << "first at " << first << ": " << int(got[first]) << " vs " << int(expected[first]);
    EXPECT_EQ(count_mismatches(download<int8_t>(generic), expected, &first), 0u)
        << "generic kernel, first at " << first;
    EXPECT_EQ(count_mismatches(download<int8_t>(two_pass), expected, &first), 0u)
        << "conversion + int8-source kernel, first at " << first;
  }
  coverage.expect_all_tiled_variants();
}

TEST(S2dTile, Int8FromNchwFp32MatchesQuantiseReferenceAndTwoPassPathBitForBit) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  check_int8(0.0213f, 5);  // a realistic input scale
}

// The reciprocal filter's edges: the smallest scale the calibration produces (2^-23), an
// exactly representable one, and scales whose reciprocal is not a normal float (the kernel then
// divides every value).
TEST(S2dTile, Int8IsExactAtExtremeScales) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  for (const float scale : {1.1920928955078125e-7f, 0.5f, 1.0e-39f, 3.0e38f}) {
    SCOPED_TRACE("scale " + std::to_string(scale));
    check_int8(scale, 11);
  }
}

// --- (c) timing ------------------------------------------------------------------------------

bool perf_enabled() {
  const char* flag = std::getenv("CNNRT_PERF");
  return flag != nullptr && std::string(flag) == "1";
}

TEST(S2dTilePerf, AlexNetConv1Bandwidth) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  if (!perf_enabled()) GTEST_SKIP() << "set CNNRT_PERF=1 to time the rearrangements";
  cudaDeviceProp prop{};
  CNNRT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("[s2d perf] %s; AlexNet conv1 (3x224x224 fp32 NCHW -> 57x57 blocks of 4x4x3)\n",
              prop.name);
  cudaStream_t stream = nullptr;
  CNNRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  DeviceMem flush(size_t(256) << 20);  // > L2: every timed launch starts cold, as ncu's do
  auto flush_l2 = [&] { CNNRT_CUDA_CHECK(cudaMemsetAsync(flush.get(), 0, flush.bytes(), stream)); };
  for (const int batch : {1, 256}) {
    const size_t in_bytes = size_t(batch) * 3 * 224 * 224 * sizeof(float);
    DeviceMem x(in_bytes);
    CNNRT_CUDA_CHECK(cudaMemset(x.get(), 0x3c, in_bytes));  // finite values (~0.0115)
    cuda::SpaceToDepthShape shape;
    shape.in_c = 3;
    shape.in_h = shape.in_w = 224;
    shape.block = 4;
    shape.pad_h = shape.pad_w = 2;
    shape.out_h = shape.out_w = 57;
    cuda::S8SpaceToDepth s8{3, 224, 224, 4, 2, 2, 57, 57, 48, 0.0213f};
    const size_t fp16_bytes = cuda::space_to_depth_bytes(shape, batch);
    const size_t int8_bytes = size_t(batch) * 57 * 57 * 48;
    DeviceMem y(fp16_bytes);
    const float* input = static_cast<const float*>(x.get());
    for (const cuda::S2dKernel kernel : {cuda::S2dKernel::Auto, cuda::S2dKernel::Generic}) {
      const char* name = kernel == cuda::S2dKernel::Auto ? "tiled  " : "generic";
      const double fp16_ms = bench::median_event_ms(
          [&](int) {
            cuda::space_to_depth_nchw_fp32(input, y.get(), shape, batch, stream, kernel);
          },
          50, stream, flush_l2);
      const double int8_ms = bench::median_event_ms(
          [&](int) { cuda::space_to_depth_s8(s8, input, true, y.get(), batch, stream, kernel); },
          50, stream, flush_l2);
      std::printf(
          "[s2d perf] batch %3d %s  fp16: %8.2f us %7.0f GB/s   int8: %8.2f us %7.0f GB/s\n", batch,
          name, fp16_ms * 1e3, (in_bytes + fp16_bytes) / (fp16_ms * 1e6), int8_ms * 1e3,
          (in_bytes + int8_bytes) / (int8_ms * 1e6));
    }
    const cuda::S2dTilePlan plan =
        cuda::s2d_tile_plan(cuda::S2dTileShape{3, 224, 224, 4, 2, 2, 57, 57, 48, 2}, batch,
                            reinterpret_cast<uintptr_t>(input));
    std::printf(
        "[s2d perf] batch %3d plan: %s, %d blocks per tile, %d tiles, %d CTAs of %d warps\n", batch,
        plan.pairs ? "2 columns per lane" : "1 column per lane", plan.tile_blocks, plan.tiles,
        plan.ctas, plan.warps_per_cta);
  }
  CNNRT_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace cnnrt
