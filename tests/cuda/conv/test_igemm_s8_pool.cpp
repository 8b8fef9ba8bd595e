// conv_s8_igemm's split-K finish that takes the conv's max-pool (kernels/cuda/conv/igemm_s8.cu:
// split_k_finish_pool_kernel) against the integer CPU reference — ref::conv2d_int8, then a max
// over each window of its int8 outputs — bit for bit, padding lanes included (they must be zeros
// although the output starts as 0xFF bytes), and against the staged form on the GPU (the plain
// finish, then maxpool_nhwc_s8).  Odd shapes: channel strides that are not a multiple of the
// finish's 32 channels, overlapping and padded windows, more tiles than one, slice counts on
// both sides of the finish's four loads in flight, batches of 1-3.
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/fp16_test_util.h"
#include "kernels/cpu/int8_ref.h"
#include "kernels/cuda/conv/conv_s8.h"

namespace cnnrt {
namespace {

using test::DeviceMem;

struct PoolCase {
  int c, h, w, oc, k, pad;  // the conv: stride 1
  int pk, ps, pp;           // the pool: window, stride, padding
  int batch, splits;
  int lo, hi;  // int8 output bounds
};

struct Layer {
  ref::Int8Layer layer;
  ConvAttrs attrs;
  cuda::S8Conv conv;
  cuda::NhwcPool pool;
  std::vector<int8_t> packed;  // [oc][k_pad], k = (r·kw + s)·in_stride + c
};

Layer make_layer(const PoolCase& t, std::mt19937& rng) {
  Layer l;
  l.attrs.out_channels = t.oc;
  l.attrs.kernel_h = l.attrs.kernel_w = t.k;
  l.attrs.pad_h = l.attrs.pad_w = t.pad;
  const int64_t per_channel = int64_t(t.c) * t.k * t.k;
  l.layer.out_channels = t.oc;
  l.layer.per_channel = per_channel;
  std::uniform_int_distribution<int> weight(-127, 127), bias(-40000, 40000);
  std::uniform_real_distribution<float> multiplier(2e-5f, 4e-4f);
  l.layer.weight.resize(size_t(t.oc * per_channel));
  for (auto& w : l.layer.weight) w = static_cast<int8_t>(weight(rng));
  for (int o = 0; o < t.oc; ++o) {
    l.layer.bias.push_back(bias(rng));
    l.layer.multiplier.push_back(multiplier(rng));
    l.layer.weight_scale.push_back(1.0f);
  }
  l.layer.int_bounds = {t.lo, t.hi};
  l.layer.input_scale = 1.0f;
  l.layer.output_scale = 1.0f;

  cuda::S8Conv& conv = l.conv;
  conv.in_c = t.c;
  conv.in_h = t.h;
  conv.in_w = t.w;
  conv.in_stride = cuda::padded16(t.c);
  conv.out_c = t.oc;
  conv.out_h = ref::conv_output_extent(t.h, t.k, 1, t.pad, t.pad, 1);
  conv.out_w = ref::conv_output_extent(t.w, t.k, 1, t.pad, t.pad, 1);
  conv.out_stride = cuda::padded16(t.oc);
  conv.kh = conv.kw = t.k;
  conv.pad_h = conv.pad_w = t.pad;
  conv.k_total = t.k * t.k * conv.in_stride;
  conv.k_pad = (conv.k_total + 63) / 64 * 64;
  conv.lo = t.lo;
  conv.hi = t.hi;
  l.packed.assign(size_t(t.oc) * conv.k_pad, 0);
  for (int o = 0; o < t.oc; ++o)
    for (int c = 0; c < t.c; ++c)
      for (int r = 0; r < t.k; ++r)
        for (int s = 0; s < t.k; ++s)
          l.packed[size_t(o) * conv.k_pad + (r * t.k + s) * conv.in_stride + c] =
              l.layer.weight[((size_t(o) * t.c + c) * t.k + r) * t.k + s];

  cuda::NhwcPool& pool = l.pool;
  pool.c = t.oc;
  pool.h = conv.out_h;
  pool.w = conv.out_w;
  pool.kh = pool.kw = t.pk;
  pool.stride_h = pool.stride_w = t.ps;
  pool.pad_h = pool.pad_w = t.pp;
  pool.out_h = (conv.out_h + 2 * t.pp - t.pk) / t.ps + 1;
  pool.out_w = (conv.out_w + 2 * t.pp - t.pk) / t.ps + 1;
  return l;
}

// The CPU reference: conv2d_int8 (NCHW), then each window's max (padding never wins), as the
// pooled int8 NHWC/16 bytes the kernel writes (padding lanes zero).
std::vector<int8_t> reference(const PoolCase& t, const Layer& l, const std::vector<int8_t>& x) {
  const int oh = l.conv.out_h, ow = l.conv.out_w;
  std::vector<int8_t> y(size_t(t.batch) * t.oc * oh * ow);
  ref::conv2d_int8(x.data(), t.batch, t.c, t.h, t.w, l.attrs, l.layer, y.data());
  const cuda::NhwcPool& p = l.pool;
  std::vector<int8_t> pooled(size_t(t.batch) * p.out_h * p.out_w * l.conv.out_stride, 0);
  for (int n = 0; n < t.batch; ++n)
    for (int c = 0; c < t.oc; ++c)
      for (int py = 0; py < p.out_h; ++py)
        for (int px = 0; px < p.out_w; ++px) {
          int best = -128;
          for (int i = 0; i < p.kh; ++i)
            for (int j = 0; j < p.kw; ++j) {
              const int cy = py * p.stride_h - p.pad_h + i, cx = px * p.stride_w - p.pad_w + j;
              if (cy < 0 || cy >= oh || cx < 0 || cx >= ow) continue;
              best = std::max<int>(best, y[((size_t(n) * t.oc + c) * oh + cy) * ow + cx]);
            }
          pooled[((size_t(n) * p.out_h + py) * p.out_w + px) * l.conv.out_stride + c] =
              static_cast<int8_t>(best);
        }
  return pooled;
}

std::vector<int8_t> download(const DeviceMem& m) {
  std::vector<int8_t> host(m.bytes());
  CNNRT_CUDA_CHECK(cudaMemcpy(host.data(), m.get(), host.size(), cudaMemcpyDeviceToHost));
  return host;
}

TEST(ConvS8IgemmPoolingFinish, MatchesTheIntegerReferenceAndTheStagedPoolBitForBit) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const PoolCase cases[] = {
      // AlexNet conv2 at batch 1 (64 -> 192, 5x5, pool 3/2), its split-K of 6
      {64, 27, 27, 192, 5, 2, 3, 2, 0, 1, 6, 0, 127},
      // 40 -> 72 (a stride of 80: 20 words, not a multiple of the finish's 8), a padded window
      {40, 13, 11, 72, 3, 1, 3, 2, 1, 2, 3, -127, 127},
      // 24 -> 16, pool 2/2 over an odd map (the last row and column dropped), 5 slices
      {24, 9, 15, 16, 3, 1, 2, 2, 0, 3, 5, -20, 90},
      // overlapping windows at stride 1 with padding, 2 slices; 9 slices (4 + 4 + 1)
      {32, 10, 12, 48, 3, 1, 3, 1, 1, 1, 2, -127, 127},
      {128, 13, 13, 256, 3, 1, 3, 2, 0, 2, 9, 0, 127},
  };
  std::mt19937 rng(4321);
  for (const PoolCase& t : cases) {
    Layer l = make_layer(t, rng);
    ASSERT_TRUE(cuda::igemm_s8_finish_pools(l.conv, l.pool, t.splits)) << "case c" << t.c;
    ASSERT_FALSE(cuda::igemm_s8_finish_pools(l.conv, l.pool, 1)) << "no split, no finish";
    std::vector<int8_t> x(size_t(t.batch) * t.c * t.h * t.w);
    std::uniform_int_distribution<int> value(-128, 127);
    for (auto& v : x) v = static_cast<int8_t>(value(rng));
    std::vector<int8_t> nhwc(size_t(t.batch) * t.h * t.w * l.conv.in_stride, 0);
    for (int n = 0; n < t.batch; ++n)
      for (int c = 0; c < t.c; ++c)
        for (int i = 0; i < t.h * t.w; ++i)
          nhwc[(size_t(n) * t.h * t.w + i) * l.conv.in_stride + c] =
              x[(size_t(n) * t.c + c) * t.h * t.w + i];

    DeviceMem x_dev(nhwc), w_dev(l.packed), b_dev(l.layer.bias), m_dev(l.layer.multiplier);
    cuda::S8Conv conv = l.conv;
    conv.weight = static_cast<const int8_t*>(w_dev.get());
    conv.bias = static_cast<const int32_t*>(b_dev.get());
    conv.multiplier = static_cast<const float*>(m_dev.get());
    const size_t conv_bytes = size_t(t.batch) * conv.out_h * conv.out_w * conv.out_stride;
    const size_t pooled_bytes = size_t(t.batch) * l.pool.out_h * l.pool.out_w * conv.out_stride;
    DeviceMem partial(cuda::igemm_s8_split_bytes(conv, t.batch, t.splits));
    DeviceMem pre_pool(conv_bytes), staged(pooled_bytes), fused(pooled_bytes);
    const cuda::S8SplitK split{t.splits, static_cast<int*>(partial.get())};
    cuda::conv_s8_igemm(conv, x_dev.get(), pre_pool.get(), t.batch, nullptr, &split);
    cuda::maxpool_nhwc_s8(l.pool, pre_pool.get(), staged.get(), t.batch, nullptr);
    cuda::conv_s8_igemm(conv, x_dev.get(), fused.get(), t.batch, nullptr, &split, &l.pool);
    CNNRT_CUDA_CHECK(cudaDeviceSynchronize());

    const std::vector<int8_t> expected = reference(t, l, x);
    const std::vector<int8_t> got = download(fused), got_staged = download(staged);
    size_t mismatches = 0, staged_mismatches = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      mismatches += got[i] != expected[i];
      staged_mismatches += got_staged[i] != expected[i];
    }
    EXPECT_EQ(mismatches, 0u) << "c" << t.c << " oc" << t.oc << " pool " << t.pk << "/" << t.ps
                              << " batch " << t.batch << " splits " << t.splits;
    EXPECT_EQ(staged_mismatches, 0u) << "the staged form, c" << t.c;
  }
}

TEST(ConvS8IgemmPoolingFinish, RefusesWhatItCannotPool) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(5);
  const PoolCase t{16, 8, 8, 16, 3, 1, 3, 2, 0, 1, 2, -127, 127};
  Layer l = make_layer(t, rng);
  cuda::S8Conv fp32 = l.conv;
  fp32.float_output = true;
  EXPECT_FALSE(cuda::igemm_s8_finish_pools(fp32, l.pool, 2)) << "fp32 output";
  cuda::NhwcPool huge = l.pool;
  huge.kh = huge.kw = 9;  // a 9x9 window: 81 cells, more than a tile's region holds
  EXPECT_FALSE(cuda::igemm_s8_finish_pools(l.conv, huge, 2));
  cuda::NhwcPool other = l.pool;
  other.h += 1;  // not this conv's map
  EXPECT_FALSE(cuda::igemm_s8_finish_pools(l.conv, other, 2));
}

}  // namespace
}  // namespace cnnrt
