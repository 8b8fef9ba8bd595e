// The 2:4 format (kernels/cpu/sparse24.h) and its grouping rule (graph/passes_sparsity.h):
// magnitude pruning makes every group 2:4 and keeps the two largest; compress → decompress gives
// the pruned weight back exactly on odd channel counts (padded last group); a weight that is not
// 2:4 is refused naming the layer and the group; every invalid metadata nibble is refused; the
// sparse conv and linear computed from the compressed form equal the dense reference on the
// same pruned weights.
#include <gtest/gtest.h>

#include <cmath>

#include "cnnrt/error.h"
#include "graph/passes_sparsity.h"
#include "kernels/cpu/reference.h"
#include "kernels/cpu/sparse24.h"
#include "random_test_util.h"

namespace cnnrt {
namespace {

using sparsity::WeightShape;
using test::random_int;
using test::random_vector;

std::vector<float> pruned(const WeightShape& shape, std::mt19937& rng) {
  std::vector<float> weight =
      random_vector(static_cast<size_t>(shape.rows) * shape.channels * shape.taps, rng);
  sparsity::prune_magnitude(weight.data(), shape);
  return weight;
}

TEST(Sparse24, MagnitudePruningKeepsTheTwoLargestOfEveryGroup) {
  // One row, one tap, 6 channels: groups {0..3} and {4, 5 + padding}.
  std::vector<float> weight = {0.5f, -2.0f, 1.0f, -0.25f, 3.0f, -4.0f};
  sparsity::prune_magnitude(weight.data(), {1, 6, 1});
  EXPECT_EQ(weight, (std::vector<float>{0, -2.0f, 1.0f, 0, 3.0f, -4.0f}));
  // Ties keep the lower index; [O][C][taps] order: channel stride is `taps`.
  std::vector<float> tied = {1, 9, 1, 9, 1, 9, 1, 9};  // 4 channels x 2 taps
  sparsity::prune_magnitude(tied.data(), {1, 4, 2});
  EXPECT_EQ(tied, (std::vector<float>{1, 9, 1, 9, 0, 0, 0, 0}));
}

TEST(Sparse24, RoundTripIsExactOnOddShapes) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int iteration = 0; iteration < 30; ++iteration) {
    const WeightShape shape{random_int(rng, 1, 9), random_int(rng, 1, 23), random_int(rng, 1, 9)};
    std::vector<float> weight = pruned(shape, rng);
    // Some groups with fewer than two non-zeros: their nibbles must still be valid.
    for (size_t i = 0; i < weight.size(); i += 5) weight[i] = 0.0f;
    EXPECT_EQ(sparsity::first_violation(weight.data(), shape), "");
    const sparse24::Compressed compressed = sparse24::compress(weight.data(), shape, "conv9");
    EXPECT_EQ(compressed.values.size(),
              static_cast<size_t>(shape.rows) * shape.groups_per_row() * 2);
    EXPECT_EQ(sparse24::decompress(compressed), weight);
  }
}

TEST(Sparse24, DenseWeightIsRefusedNamingLayerAndGroup) {
  std::vector<float> weight(2 * 8 * 1, 1.0f);  // every group holds 4 non-zeros
  weight[1] = weight[2] = 0.0f;                // row 0, channels 0..3 now 2:4
  EXPECT_NE(sparsity::first_violation(weight.data(), {2, 8, 1})
                .find("output channel 0, tap 0, "
                      "input channels 4..7"),
            std::string::npos);
  try {
    (void)sparse24::compress(weight.data(), {2, 8, 1}, "fc7");
    FAIL() << "a dense weight was compressed";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("fc7"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("4 non-zeros"), std::string::npos) << error.what();
  }
}

TEST(Sparse24, EveryInvalidNibbleIsRefused) {
  std::mt19937 rng(7);
  const WeightShape shape{3, 16, 2};
  const std::vector<float> weight = pruned(shape, rng);
  const sparse24::Compressed good = sparse24::compress(weight.data(), shape, "conv");
  for (unsigned index = 0; index < 4; ++index) {
    sparse24::Compressed bad = good;
    // Group 5 of row 1: word 1, nibble 1; both indices equal (0b0000, 0b0101, 0b1010, 0b1111).
    uint16_t& word = bad.meta[static_cast<size_t>(1) * bad.meta_words_per_row() + 1];
    word = static_cast<uint16_t>((word & ~0x00F0u) | ((index | (index << 2)) << 4));
    EXPECT_THROW((void)sparse24::decompress(bad), Error) << "nibble index " << index;
  }
  sparse24::Compressed short_meta = good;
  short_meta.meta.pop_back();
  EXPECT_THROW((void)sparse24::decompress(short_meta), Error);
}

TEST(Sparse24, ConvFromCompressedEqualsDenseReferenceOnPrunedWeights) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int iteration = 0; iteration < 12; ++iteration) {
    ConvAttrs a;
    a.out_channels = random_int(rng, 1, 11);
    a.kernel_h = random_int(rng, 1, 3);
    a.kernel_w = random_int(rng, 1, 3);
    a.stride_h = random_int(rng, 1, 2);
    a.stride_w = random_int(rng, 1, 2);
    a.pad_h = random_int(rng, 0, 1);
    a.pad_w = random_int(rng, 0, 1);
    a.dilation_w = random_int(rng, 1, 2);
    const int n = random_int(rng, 1, 3), c = random_int(rng, 1, 13), h = random_int(rng, 5, 9),
              w = random_int(rng, 5, 9);
    const WeightShape shape{a.out_channels, c, a.kernel_h * a.kernel_w};
    const std::vector<float> weight = pruned(shape, rng);
    const std::vector<float> bias = random_vector(a.out_channels, rng);
    const std::vector<float> x = random_vector(static_cast<size_t>(n) * c * h * w, rng);
    const int oh = (h + 2 * a.pad_h - a.kernel_h) / a.stride_h + 1;
    const int ow = (w + 2 * a.pad_w - a.dilation_w * (a.kernel_w - 1) - 1) / a.stride_w + 1;
    std::vector<float> dense(static_cast<size_t>(n) * a.out_channels * oh * ow),
        sparse(dense.size());
    ref::conv2d(x.data(), n, c, h, w, weight.data(), bias.data(), a, dense.data());
    sparse24::conv2d(x.data(), n, h, w, sparse24::compress(weight.data(), shape, "conv"),
                     bias.data(), a, sparse.data());
    test::expect_all_near(sparse, dense, 1e-6f, 1e-6f);
  }
}

TEST(Sparse24, LinearFromCompressedEqualsDenseReferenceOnPrunedWeights) {
  const uint32_t seed = test::fresh_seed();
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937 rng(seed);
  for (int iteration = 0; iteration < 12; ++iteration) {
    const int n = random_int(rng, 1, 4), in = random_int(rng, 1, 45), out = random_int(rng, 1, 17);
    const WeightShape shape{out, in, 1};
    const std::vector<float> weight = pruned(shape, rng);
    const std::vector<float> x = random_vector(static_cast<size_t>(n) * in, rng);
    std::vector<float> dense(static_cast<size_t>(n) * out), sparse(dense.size());
    ref::linear(x.data(), n, in, weight.data(), nullptr, out, dense.data());
    sparse24::linear(x.data(), n, sparse24::compress(weight.data(), shape, "fc"), nullptr,
                     sparse.data());
    test::expect_all_near(sparse, dense, 1e-6f, 1e-6f);
  }
}

}  // namespace
}  // namespace cnnrt
