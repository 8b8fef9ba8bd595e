// The mma.sp sparse conv's weight packing (mma_sparse_pack.h): the project's 2:4 format
// (kernels/cpu/sparse24.h) laid out in the kernel's K order — (tap, channel) over channels padded
// to 8, each k-tile of 64 dense K one 32-half slice of a row — with rows padded to whole
// 128-channel tiles, and the metadata repacked per (channel tile, k-tile) in the order the
// threads read it.
#include "kernels/cuda/conv/mma_sparse_pack.h"

#include "graph/passes_sparsity.h"
#include "kernels/cpu/sparse24.h"

namespace cnnrt::cuda::mma_sp_detail {

MmaSpWeights pack_mma_sp_weights(const ConvShape& s, const float* weight,
                                 const std::string& layer) {
  const int taps = s.conv.kernel_h * s.conv.kernel_w;
  // Throws naming the layer, output channel, tap and channels when the weight is not 2:4.
  const sparse24::Compressed c =
      sparse24::compress(weight, sparsity::WeightShape{s.out_c, s.in_c, taps}, layer);
  const int k_tiles = k_tiles_of(s), channel_tiles = channel_tiles_of(s);
  const int real_per_tap = c.shape.groups_per_tap();       // ceil(in_c / 4)
  const int groups_per_tap = padded_channels(s.in_c) / 4;  // the kernel's K: channels to 8
  const int groups = k_tiles * (kKTile / 4), w_row = k_tiles * (kKTile / 2);
  const int rows = channel_tiles * kBC;
  MmaSpWeights out;
  out.values.assign(size_t(rows) * w_row, 0.f);
  // Unused groups (channel padding, the K tail, the rows past out_c): zero values and the valid
  // nibble {0, 1} (two equal indices are undefined on the hardware).
  std::vector<uint8_t> nibble(size_t(rows) * groups, uint8_t(0 | 1 << 2));
  const int real_groups = c.shape.groups_per_row();
  for (int o = 0; o < s.out_c; ++o)
    for (int g = 0; g < real_groups; ++g) {
      const int tap = g / real_per_tap, k_group = tap * groups_per_tap + g % real_per_tap;
      for (int j = 0; j < 2; ++j)
        out.values[size_t(o) * w_row + 2 * k_group + j] =
            c.values[(size_t(o) * real_groups + g) * 2 + j];
      nibble[size_t(o) * groups + k_group] =
          uint8_t(c.meta[size_t(o) * c.meta_words_per_row() + g / 4] >> (4 * (g % 4)) & 0xF);
    }
  // Per thread (design note of mma_sparse_kernel.cuh): bits 0-15 the 4 nibbles of row r,
  // bits 16-31 those of row r + 8.
  auto nibbles16 = [&](int row, int group0) {
    uint32_t v = 0;
    for (int j = 0; j < 4; ++j) v |= uint32_t(nibble[size_t(row) * groups + group0 + j]) << (4 * j);
    return v;
  };
  out.meta.resize(size_t(channel_tiles) * k_tiles * kMetaStage);
  size_t at = 0;
  for (int ct = 0; ct < channel_tiles; ++ct)
    for (int kt = 0; kt < k_tiles; ++kt)
      for (int mtile = 0; mtile < kBC / 16; ++mtile)
        for (int g = 0; g < 8; ++g)             // lane / 4
          for (int half = 0; half < 2; ++half)  // lane % 2: groups 0-3 or 4-7 of the step
            for (int kk = 0; kk < 2; ++kk) {    // the k-tile's two steps of K 32
              const int row = ct * kBC + mtile * 16 + g;
              const int group0 = kt * (kKTile / 4) + 8 * kk + 4 * half;
              out.meta[at++] = nibbles16(row, group0) | nibbles16(row + 8, group0) << 16;
            }
  return out;
}

}  // namespace cnnrt::cuda::mma_sp_detail
