// conv_int8_sparse24_tma's host packing (tma_sparse_s8_pack.h).
#include "kernels/cuda/conv/tma_sparse_s8_pack.h"

namespace cnnrt::cuda::tma_sparse_s8_detail {

KernelOrder kernel_order(const sparse24::Compressed& c, int out_c, int taps, int in_stride) {
  const int stored_groups = c.shape.groups_per_tap(), groups = in_stride / 4;
  const int words = c.meta_words_per_row();
  KernelOrder k;
  k.values.assign(size_t(out_c) * taps * groups * 2, 0);
  k.nibbles.assign(size_t(out_c) * taps * groups, uint8_t(kZeroGroupNibble));
  for (int o = 0; o < out_c; ++o)
    for (int tap = 0; tap < taps; ++tap)
      for (int grp = 0; grp < stored_groups; ++grp) {
        const size_t from = (size_t(o) * taps + tap) * stored_groups + grp;  // (tap, group)
        const size_t to = (size_t(o) * taps + tap) * groups + grp;
        const int flat = tap * stored_groups + grp;
        k.values[2 * to] = int8_t(c.values[2 * from]);
        k.values[2 * to + 1] = int8_t(c.values[2 * from + 1]);
        k.nibbles[to] = uint8_t((c.meta[size_t(o) * words + flat / 4] >> (4 * (flat % 4))) & 0xF);
      }
  return k;
}

std::vector<uint32_t> pack_metadata(const KernelOrder& k, int out_c, int groups_per_row, int kb,
                                    int k_tiles, int blocks) {
  const int tile_groups = kb / 4, mmas = kb / 64;
  // Eight consecutive groups of one row, group j at bits 4j.
  auto nibbles32 = [&](int row, int group0) {
    uint32_t v = 0;
    for (int j = 0; j < 8; ++j) {
      const uint32_t n =
          row < out_c ? k.nibbles[size_t(row) * groups_per_row + group0 + j] : kZeroGroupNibble;
      v |= n << (4 * j);
    }
    return v;
  };
  std::vector<uint32_t> out(size_t(k_tiles) * blocks * 128 * mmas);
  size_t at = 0;
  for (int kt = 0; kt < k_tiles; ++kt)
    for (int b = 0; b < blocks; ++b)
      for (int thread = 0; thread < 128; ++thread)
        for (int kk = 0; kk < mmas; ++kk) {
          // Lane 4g + t: row g (t even) or g + 8 (t odd), the instruction's groups 0-7 (t < 2)
          // or 8-15 (t >= 2) — kernel design note, run 38d.
          const int warp = thread / 32, g = (thread % 32) / 4, t = thread % 4;
          const int row = b * 64 + 16 * warp + g + 8 * (t & 1);
          const int group0 = kt * tile_groups + 16 * kk + 8 * (t >> 1);
          out[at++] = nibbles32(row, group0);
        }
  return out;
}

}  // namespace cnnrt::cuda::tma_sparse_s8_detail
