// CPU tests of the mma.sp sparse conv's weight packing (kernels/cuda/conv/mma_sparse_pack.h): no
// GPU needed.  An emulation of one CTA of conv_mma_sp_kernel (mma_sparse_kernel.cuh) built from
// the packed arrays — the shared-memory stages its loaders fill, the ldmatrix.x4 addresses its
// warps use, the metadata word each lane reads — and the PTX ISA's rules for mma.sp m16n8k32 f16
// ("Matrix fragments for sparse mma.m16n8k32 with .f16": A registers 0-3 = row g / g + 8,
// compressed columns 2t, 2t + 1 / 8 + 2t, +1; B register i = K rows 8i + 2t, +1 at column g;
// metadata from lanes t = 0, 1 of each quad (selector 0), bits 0-15 row g, 16-31 row g + 8, lane
// t % 2 = groups 4(t % 2)..+3) must reproduce the dense conv on the same pruned weights.  A GPU
// failure with this test passing points at those PTX rules, not at the packing or indexing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "graph/passes_sparsity.h"
#include "kernels/cpu/reference.h"
#include "kernels/cuda/conv/mma_sparse_pack.h"

namespace cnnrt::cuda::mma_sp_detail {
namespace {

constexpr int kWRow = kKTile / 2 + 8, kXRow = kKTile + 8;  // the kernel's smem rows (halves)

// ldmatrix.x4: lane i gives the row address of matrix i / 8, row i % 8; lane j receives in
// register q matrix q's row j / 4, halves 2 (j % 4) and 2 (j % 4) + 1.
struct Frag {
  float v[4][2];
};
template <class RowAddress>
void ldmatrix_x4(Frag (&out)[32], const std::vector<float>& smem, RowAddress address) {
  for (int j = 0; j < 32; ++j)
    for (int q = 0; q < 4; ++q) {
      const int row = address(q * 8 + j / 4);
      out[j].v[q][0] = smem[row + 2 * (j % 4)];
      out[j].v[q][1] = smem[row + 2 * (j % 4) + 1];
    }
}

// Conv output [channel][pixel] of one CTA (channel tile cy, pixels m0..m0 + 127) as the kernel
// computes it, before bias.
std::vector<double> emulate_cta(const ConvShape& s, const MmaSpWeights& w,
                                const std::vector<float>& x_nhwc, int batch, int cy, long long m0) {
  const int in_cs = padded_channels(s.in_c), chunks = in_cs / 8, k = s.conv.kernel_w;
  const int k_real = s.conv.kernel_h * k * chunks, k_tiles = k_tiles_of(s);
  const long long m_total = (long long)batch * s.conv_h * s.conv_w;
  std::vector<double> acc(kBC * kBN, 0.0);
  for (int kt = 0; kt < k_tiles; ++kt) {
    std::vector<float> s_w(kBC * kWRow, NAN), s_x(kBN * kXRow, NAN);
    std::vector<uint32_t> s_meta(kMetaStage);
    for (int r = 0; r < kBC; ++r)  // sp_load_w
      for (int c = 0; c < kKTile / 2; ++c)
        s_w[r * kWRow + c] = w.values[size_t(cy * kBC + r) * k_tiles * (kKTile / 2) + kt * 32 + c];
    for (int i = 0; i < kMetaStage; ++i)
      s_meta[i] = w.meta[(size_t(cy) * k_tiles + kt) * kMetaStage + i];
    for (int r = 0; r < kBN; ++r)  // igemm's vector loader: (tap, 8-channel chunk)
      for (int c = 0; c < 8; ++c) {
        const int kc = kt * 8 + c;
        const long long m = m0 + r;
        for (int e = 0; e < 8; ++e) s_x[r * kXRow + c * 8 + e] = 0.f;
        if (kc >= k_real || m >= m_total) continue;
        const int tap = kc / chunks, c8 = kc % chunks;
        const int cx = int(m % s.conv_w), q = int(m / s.conv_w);
        const int cyy = q % s.conv_h, n = q / s.conv_h;
        const int ih = cyy * s.conv.stride_h - s.conv.pad_h + (tap / k) * s.conv.dilation_h;
        const int iw = cx * s.conv.stride_w - s.conv.pad_w + (tap % k) * s.conv.dilation_w;
        if (ih < 0 || ih >= s.in_h || iw < 0 || iw >= s.in_w) continue;
        for (int e = 0; e < 8; ++e)
          s_x[r * kXRow + c * 8 + e] =
              x_nhwc[((size_t(n) * s.in_h + ih) * s.in_w + iw) * in_cs + c8 * 8 + e];
      }
    for (int warp = 0; warp < 8; ++warp) {
      const int warp_m = warp / 4, warp_n = warp % 4;
      for (int kk = 0; kk < 2; ++kk)
        for (int mt = 0; mt < 4; ++mt) {
          Frag af[32];
          ldmatrix_x4(af, s_w, [&](int lane) {
            return (warp_m * 64 + mt * 16 + (lane & 15)) * kWRow + kk * 16 + (lane >> 4) * 8;
          });
          float a_c[16][16];  // the compressed tile, from the fragments
          uint32_t e[32];
          for (int lane = 0; lane < 32; ++lane) {
            const int g = lane >> 2, t = lane & 3;
            for (int j = 0; j < 2; ++j) {
              a_c[g][2 * t + j] = af[lane].v[0][j];
              a_c[g + 8][2 * t + j] = af[lane].v[1][j];
              a_c[g][8 + 2 * t + j] = af[lane].v[2][j];
              a_c[g + 8][8 + 2 * t + j] = af[lane].v[3][j];
            }
            const int meta_lane = (lane >> 2) * 2 + (lane & 1);  // as sp_mma_ktile
            e[lane] = s_meta[((warp_m * 4 + mt) * 16 + meta_lane) * 2 + kk];
          }
          float a[16][32] = {};  // decompressed through the metadata of lanes 4g, 4g + 1
          for (int row = 0; row < 16; ++row)
            for (int grp = 0; grp < 8; ++grp) {
              const uint32_t word = e[4 * (row % 8) + grp / 4];
              const uint32_t nib = ((row < 8 ? word : word >> 16) >> (4 * (grp % 4))) & 0xF;
              const int i0 = nib & 3, i1 = nib >> 2;
              EXPECT_LT(i0, i1) << "nibble " << nib << " is not ordered";
              a[row][4 * grp + i0] += a_c[row][2 * grp];
              a[row][4 * grp + i1] += a_c[row][2 * grp + 1];
            }
          for (int nt = 0; nt < 4; ++nt) {
            Frag bf[32];
            ldmatrix_x4(bf, s_x, [&](int lane) {
              return (warp_n * 32 + nt * 8 + (lane & 7)) * kXRow + kk * 32 + (lane >> 3) * 8;
            });
            float b[32][8];
            for (int lane = 0; lane < 32; ++lane)
              for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 2; ++j)
                  b[8 * i + 2 * (lane & 3) + j][lane >> 2] = bf[lane].v[i][j];
            for (int r = 0; r < 16; ++r)
              for (int c = 0; c < 8; ++c) {
                double sum = 0;
                for (int q = 0; q < 32; ++q) sum += double(a[r][q]) * b[q][c];
                acc[(warp_m * 64 + mt * 16 + r) * kBN + warp_n * 32 + nt * 8 + c] += sum;
              }
          }
        }
    }
  }
  return acc;
}

TEST(MmaSparsePack, EmulatedKernelMatchesDenseConv) {
  std::mt19937 rng(31);
  auto pick = [&](std::vector<int> v) {
    return v[std::uniform_int_distribution<int>(0, int(v.size()) - 1)(rng)];
  };
  for (int it = 0; it < 12; ++it) {
    ConvShape s;
    const int batch = pick({1, 2});
    s.in_c = pick({3, 5, 8, 12, 20, 36});
    s.out_c = pick({7, 24, 33, 129, 140});
    const int k = pick({1, 3, 5});
    s.conv.out_channels = s.out_c;
    s.conv.kernel_h = s.conv.kernel_w = k;
    s.conv.stride_h = s.conv.stride_w = pick({1, 2});
    s.conv.pad_h = s.conv.pad_w = std::uniform_int_distribution<int>(0, k / 2)(rng);
    s.conv.dilation_h = s.conv.dilation_w = pick({1, 2});
    const int span = (k - 1) * s.conv.dilation_h + 1;
    s.in_h = span + pick({0, 3, 7});
    s.in_w = span + pick({1, 5});
    s.derive();
    SCOPED_TRACE("c" + std::to_string(s.in_c) + " oc" + std::to_string(s.out_c) + " k" +
                 std::to_string(k) + " " + std::to_string(s.in_h) + "x" + std::to_string(s.in_w));
    const int taps = k * k;
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<float> x(size_t(batch) * s.in_c * s.in_h * s.in_w);
    std::vector<float> w(size_t(s.out_c) * s.in_c * taps);
    for (float& v : x) v = dist(rng);
    for (float& v : w) v = dist(rng);
    sparsity::prune_magnitude(w.data(), sparsity::WeightShape{s.out_c, s.in_c, taps});
    std::vector<float> ref(size_t(batch) * s.out_c * s.conv_h * s.conv_w);
    ref::conv2d(x.data(), batch, s.in_c, s.in_h, s.in_w, w.data(), nullptr, s.conv, ref.data());

    const MmaSpWeights packed = pack_mma_sp_weights(s, w.data(), "conv");
    const int in_cs = padded_channels(s.in_c);
    std::vector<float> x_nhwc(size_t(batch) * s.in_h * s.in_w * in_cs, 0.f);
    for (int n = 0; n < batch; ++n)
      for (int c = 0; c < s.in_c; ++c)
        for (int y = 0; y < s.in_h; ++y)
          for (int xx = 0; xx < s.in_w; ++xx)
            x_nhwc[((size_t(n) * s.in_h + y) * s.in_w + xx) * in_cs + c] =
                x[((size_t(n) * s.in_c + c) * s.in_h + y) * s.in_w + xx];
    const long long m_total = (long long)batch * s.conv_h * s.conv_w;
    int bad = 0;
    for (int cy = 0; cy < channel_tiles_of(s); ++cy)
      for (long long m0 = 0; m0 < m_total; m0 += kBN) {
        const std::vector<double> acc = emulate_cta(s, packed, x_nhwc, batch, cy, m0);
        for (int ch = 0; ch < kBC; ++ch)
          for (int r = 0; r < kBN; ++r) {
            const int oc = cy * kBC + ch;
            const long long m = m0 + r;
            if (oc >= s.out_c || m >= m_total) continue;
            const long long n = m / (s.conv_h * s.conv_w), pixel = m % (s.conv_h * s.conv_w);
            const double want = ref[(size_t(n) * s.out_c + oc) * s.conv_h * s.conv_w + pixel];
            if (!(std::fabs(acc[ch * kBN + r] - want) <= 1e-4 * (1 + std::fabs(want))) &&
                bad++ == 0)
              ADD_FAILURE() << "channel " << oc << " pixel " << m << ": " << acc[ch * kBN + r]
                            << " vs " << want;
          }
      }
    EXPECT_EQ(bad, 0);
  }
}

TEST(MmaSparsePack, LayoutSizesAndPadding) {
  ConvShape s;
  s.in_c = 13;  // padded to 16 channels: 13-15 of each tap are zero
  s.in_h = s.in_w = 9;
  s.out_c = 130;  // 2 channel tiles, the second with 2 real rows
  s.conv.out_channels = s.out_c;
  s.conv.kernel_h = s.conv.kernel_w = 3;
  s.derive();
  std::vector<float> w(size_t(s.out_c) * s.in_c * 9, 0.f);
  const MmaSpWeights packed = pack_mma_sp_weights(s, w.data(), "conv");
  const int k_tiles = (9 * 16 + 63) / 64;  // 3
  EXPECT_EQ(k_tiles_of(s), k_tiles);
  EXPECT_EQ(packed.values.size(), size_t(256) * k_tiles * 32);
  EXPECT_EQ(packed.meta.size(), size_t(2) * k_tiles * kMetaStage);
  // An all-zero weight and the padding: every nibble the valid {0, 1} = 0b0100.
  for (uint32_t word : packed.meta) EXPECT_EQ(word, 0x44444444u);
}

}  // namespace
}  // namespace cnnrt::cuda::mma_sp_detail
