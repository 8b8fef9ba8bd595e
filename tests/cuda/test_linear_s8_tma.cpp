// linear_int8_tma's plan (kernels/cuda/linear_s8_tma.h): the batch tile the cost model picks and
// the split of every tile, which need no GPU (a described H100: PlanTargetScope, plan_only), and
// on a Hopper GPU every batch tile's output equal to the pick's byte for byte (the pick itself is
// checked bit for bit against the integer reference by the kernel harness's linear rows).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "cuda/conv/wgmma_test_cases.h"  // REQUIRE_HOPPER, test::DeviceMem
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/linear_s8_tma.h"

namespace cnnrt::cuda {
namespace {

// A linear as the int8 linear entries describe it (linear_s8_tma_serves); `weight` may be a
// placeholder for a described target (nothing is read there).
S8Conv s8linear(int in, int out, bool float_output, const int8_t* weight) {
  S8Conv c;
  c.in_c = in;
  c.in_h = c.in_w = c.out_h = c.out_w = 1;
  c.in_stride = padded16(in);
  c.out_c = out;
  c.out_stride = float_output ? (out + 7) / 8 * 8 : padded16(out);
  c.k_total = c.in_stride;
  c.k_pad = (c.k_total + 63) / 64 * 64;
  c.float_output = float_output;
  c.lo = 0;
  c.float_lo = 0;
  c.float_hi = 1e30f;
  c.weight = weight;
  return c;
}
const int8_t* placeholder() { return reinterpret_cast<const int8_t*>(uintptr_t{256}); }

// Every tile's plan covers the GEMM: whole out-feature and batch tiles, slices of whole k-tiles
// that cover K, at most one wave of units, and the slices' sums as workspace.
TEST(LinearS8TmaPlan, EveryBatchTileCoversTheGemm) {
  PlanTargetScope h100(target_traits("h100"));
  if (!LinearS8Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  const S8Conv fc6 = s8linear(9216, 4096, false, placeholder());
  const LinearS8Tma kernel(fc6);
  const int bn[] = {64, 128, 256};
  ASSERT_EQ(LinearS8Tma::tile_count(), 3);
  for (int batch : {1, 33, 64, 70, 128, 256, 300})
    for (int t = 0; t < LinearS8Tma::tile_count(); ++t) {
      SCOPED_TRACE("batch " + std::to_string(batch) + ", tile " + std::to_string(t));
      const LinearS8TmaPlan p = kernel.plan(batch, t);
      EXPECT_EQ(p.tile, t);
      EXPECT_EQ(p.bn, bn[t]);
      EXPECT_EQ(p.m_tiles, 32);
      EXPECT_EQ(p.n_tiles, (batch + bn[t] - 1) / bn[t]);
      EXPECT_GE(p.splits * p.k_per_split, 72);  // 9216 bytes of K: 72 k-tiles of 128
      EXPECT_LT((p.splits - 1) * p.k_per_split, 72);
      EXPECT_EQ(p.units, p.m_tiles * p.n_tiles * p.splits);
      EXPECT_LE(p.ctas, 132);
      EXPECT_GE(p.workspace_bytes, size_t(p.splits) * batch * 4096 * 4);
      EXPECT_GT(p.estimated_us, 0);
      EXPECT_NE(p.name.find("128x" + std::to_string(bn[t])), std::string::npos) << p.name;
    }
  EXPECT_THROW(kernel.plan(64, 3), Error);
  EXPECT_THROW(kernel.encode_input(nullptr, 64, 3), Error);  // refused before any device call
  EXPECT_THROW(kernel.encode_input(nullptr, 64, -1), Error);
}

// The model's pick: the cheapest tile up to the one that holds the batch.  At batch <= 64 that is
// the 64-row tile; at 256 on AlexNet's classifier (H100's 132 SMs) the tiles the model costs
// lowest: fc6 keeps 256 rows (128 units of 18 k-tiles; a smaller tile's units load more than its
// fewer slices save), fc7 128 rows in 2 slices (8 MB of sums instead of 16), fc8 64 rows (128
// units instead of 32).
TEST(LinearS8TmaPlan, CostModelPicksTheCheapestTileThatTheBatchNeeds) {
  PlanTargetScope h100(target_traits("h100"));
  if (!LinearS8Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  struct Layer {
    S8Conv linear;
    int bn256;
  };
  const Layer layers[] = {{s8linear(9216, 4096, false, placeholder()), 256},
                          {s8linear(4096, 4096, false, placeholder()), 128},
                          {s8linear(4096, 1000, true, placeholder()), 64}};
  for (const Layer& layer : layers) {
    const LinearS8Tma kernel(layer.linear);
    for (int batch : {1, 16, 33, 64}) EXPECT_EQ(kernel.plan(batch).bn, 64) << batch;
    for (int batch : {70, 128, 256, 300}) {
      const LinearS8TmaPlan pick = kernel.plan(batch);
      for (int t = 0; t < LinearS8Tma::tile_count(); ++t) {
        const LinearS8TmaPlan p = kernel.plan(batch, t);
        if (batch <= 128 && p.bn > 128) continue;  // a tile larger than the batch needs
        EXPECT_LE(pick.estimated_us, p.estimated_us) << batch << " " << p.name;
      }
      if (batch <= 128) EXPECT_LE(pick.bn, 128) << batch;
    }
    EXPECT_EQ(kernel.plan(256).bn, layer.bn256) << layer.linear.in_c << "->" << layer.linear.out_c;
  }
}

// On a GPU: every batch tile's output equals the model's pick's, byte for byte, int8 and fp32
// rows, at batches of several tiles of each size.
TEST(LinearS8TmaGpu, EveryBatchTileGivesThePicksBytes) {
  REQUIRE_HOPPER();
  if (!LinearS8Tma::device_supported()) GTEST_SKIP() << "a build without the sm_90a image";
  std::mt19937 rng(7);
  for (const bool float_output : {false, true}) {
    const int in = 300, out = 130;
    S8Conv c = s8linear(in, out, float_output, nullptr);
    std::uniform_int_distribution<int> w(-127, 127), b(-3000, 3000);
    std::uniform_real_distribution<float> m(1e-4f, 4e-3f);
    std::vector<int8_t> rows(size_t(out) * c.k_pad, 0);
    for (int o = 0; o < out; ++o)
      for (int k = 0; k < in; ++k) rows[size_t(o) * c.k_pad + k] = int8_t(w(rng));
    std::vector<int32_t> bias(out);
    std::vector<float> mult(out);
    for (int o = 0; o < out; ++o) bias[o] = b(rng), mult[o] = m(rng);
    const test::DeviceMem d_w(rows), d_b(bias), d_m(mult);
    c.weight = static_cast<const int8_t*>(d_w.get());
    c.bias = static_cast<const int32_t*>(d_b.get());
    c.multiplier = static_cast<const float*>(d_m.get());
    const LinearS8Tma kernel(c);
    for (int batch : {70, 300}) {
      SCOPED_TRACE(std::string(float_output ? "fp32" : "int8") + " out, batch " +
                   std::to_string(batch));
      std::vector<int8_t> x(size_t(batch) * c.in_stride, 0);
      std::uniform_int_distribution<int> v(-127, 127);
      for (size_t i = 0; i < x.size(); ++i) x[i] = int(i % c.in_stride) < in ? int8_t(v(rng)) : 0;
      const test::DeviceMem d_x(x);
      const size_t y_bytes = size_t(batch) * c.out_stride * (float_output ? 4 : 1);
      std::vector<uint8_t> want;
      const LinearS8TmaPlan pick = kernel.plan(batch);
      for (int t = -1; t < LinearS8Tma::tile_count(); ++t) {
        const LinearS8TmaPlan p = t < 0 ? pick : kernel.plan(batch, t);
        test::DeviceMem d_y(y_bytes), d_ws(p.workspace_bytes);
        CNNRT_CUDA_CHECK(cudaMemset(d_y.get(), 0x5a, y_bytes));
        kernel.forward(p, kernel.encode_input(d_x.get(), batch, p.tile), d_y.get(), d_ws.get(),
                       nullptr);
        std::vector<uint8_t> got(y_bytes);
        CNNRT_CUDA_CHECK(cudaMemcpy(got.data(), d_y.get(), y_bytes, cudaMemcpyDeviceToHost));
        if (t < 0)
          want = got;
        else
          EXPECT_TRUE(got == want) << p.name << " against the pick " << pick.name;
      }
      // A map encoded for another tile than the plan's is refused.
      const LinearS8TmaPlan other = kernel.plan(batch, pick.tile == 0 ? 1 : 0);
      test::DeviceMem d_y(y_bytes), d_ws(other.workspace_bytes);
      EXPECT_THROW(kernel.forward(other, kernel.encode_input(d_x.get(), batch, pick.tile),
                                  d_y.get(), d_ws.get(), nullptr),
                   Error);
    }
  }
}

}  // namespace
}  // namespace cnnrt::cuda
