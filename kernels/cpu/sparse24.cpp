// 2:4 format and CPU kernels (see sparse24.h for the layout).  The kernels are references, like
// reference.cpp: plain loops and double sums, but they read only the kept half of the weight
// through the metadata, so a wrong index or a wrong group order shows up as a wrong output in
// the harness rather than being hidden by a dense copy.
#include "kernels/cpu/sparse24.h"

#include <cmath>
#include <string>

#include "cnnrt/error.h"
#include "graph/ops.h"

namespace cnnrt::sparse24 {
namespace {

// Element `index` (0..3) of group `group` (0..groups_per_tap-1) at (row, tap), or 0 in the
// padding past the last channel.
float element(const float* weight, const WeightShape& s, int row, int tap, int group, int index) {
  const int channel = group * 4 + index;
  if (channel >= s.channels) return 0.0f;
  return weight[(static_cast<int64_t>(row) * s.channels + channel) * s.taps + tap];
}

bool valid_nibble(unsigned nibble) { return (nibble & 3u) != (nibble >> 2); }

void check_shape(const WeightShape& s) {
  if (s.rows < 1 || s.channels < 1 || s.taps < 1)
    throw Error("2:4 weight: invalid shape " + std::to_string(s.rows) + " x " +
                std::to_string(s.channels) + " x " + std::to_string(s.taps));
}

}  // namespace

Compressed compress(const float* weight, const WeightShape& s, const std::string& layer) {
  const std::string violation = sparsity::first_violation(weight, s);
  if (!violation.empty()) throw Error(layer + ": weight is not 2:4 sparse: " + violation);
  Compressed out;
  out.shape = s;
  out.values.reserve(static_cast<size_t>(s.rows) * s.groups_per_row() * 2);
  out.meta.assign(static_cast<size_t>(s.rows) * out.meta_words_per_row(), 0);
  for (int row = 0; row < s.rows; ++row)
    for (int tap = 0; tap < s.taps; ++tap)
      for (int group = 0; group < s.groups_per_tap(); ++group) {
        int kept[2], count = 0;
        for (int i = 0; i < 4 && count < 2; ++i)
          if (element(weight, s, row, tap, group, i) != 0.0f) kept[count++] = i;
        // Fewer than two non-zeros: keep zeros at unused indices so the two differ (valid nibble).
        for (int i = 0; count < 2; ++i)
          if (count == 0 || kept[0] != i) kept[count++] = i;
        if (kept[0] > kept[1]) std::swap(kept[0], kept[1]);
        for (int k : kept) out.values.push_back(element(weight, s, row, tap, group, k));
        const int g = tap * s.groups_per_tap() + group;
        const auto nibble = static_cast<uint16_t>(kept[0] | (kept[1] << 2));
        out.meta[static_cast<size_t>(row) * out.meta_words_per_row() + g / 4] |=
            static_cast<uint16_t>(nibble << (4 * (g % 4)));
      }
  return out;
}

std::vector<float> decompress(const Compressed& c) {
  const WeightShape& s = c.shape;
  check_shape(s);
  const size_t groups = static_cast<size_t>(s.rows) * s.groups_per_row();
  if (c.values.size() != groups * 2 ||
      c.meta.size() != static_cast<size_t>(s.rows) * c.meta_words_per_row())
    throw Error("2:4 weight: " + std::to_string(c.values.size()) + " values and " +
                std::to_string(c.meta.size()) + " metadata words do not match its shape");
  std::vector<float> dense(static_cast<size_t>(s.rows) * s.channels * s.taps, 0.0f);
  for (int row = 0; row < s.rows; ++row)
    for (int g = 0; g < s.groups_per_row(); ++g) {
      const unsigned nibble =
          (c.meta[static_cast<size_t>(row) * c.meta_words_per_row() + g / 4] >> (4 * (g % 4))) &
          0xFu;
      if (!valid_nibble(nibble))
        throw Error("2:4 weight: invalid metadata nibble " + std::to_string(nibble) +
                    " at output channel " + std::to_string(row) + ", group " + std::to_string(g));
      const int tap = g / s.groups_per_tap(), group = g % s.groups_per_tap();
      const size_t base = (static_cast<size_t>(row) * s.groups_per_row() + g) * 2;
      const int index[2] = {static_cast<int>(nibble & 3u), static_cast<int>(nibble >> 2)};
      for (int k = 0; k < 2; ++k) {
        const int channel = group * 4 + index[k];
        if (channel >= s.channels) {
          if (c.values[base + k] != 0.0f)
            throw Error("2:4 weight: a non-zero value in the channel padding at output channel " +
                        std::to_string(row));
          continue;
        }
        dense[(static_cast<size_t>(row) * s.channels + channel) * s.taps + tap] =
            c.values[base + k];
      }
    }
  return dense;
}

void conv2d(const float* x, int n, int h, int w, const Compressed& weight, const float* bias,
            const ConvAttrs& conv_attrs, float* y) {
  ConvAttrs a = conv_attrs;
  if (a.pad_same) resolve_same_padding(a, h, w);
  const WeightShape& s = weight.shape;
  if (a.groups != 1 || a.out_channels != s.rows || a.kernel_h * a.kernel_w != s.taps ||
      a.stride_h < 1 || a.stride_w < 1)
    throw Error("sparse24::conv2d: attributes do not match the compressed weight");
  const int c = s.channels;
  const int oh = static_cast<int>(
      conv_output_size(h, a.kernel_h, a.stride_h, a.pad_h, a.pad_bottom(), a.dilation_h));
  const int ow = static_cast<int>(
      conv_output_size(w, a.kernel_w, a.stride_w, a.pad_w, a.pad_right(), a.dilation_w));
  const int groups_per_tap = s.groups_per_tap();
  for (int b = 0; b < n; ++b)
    for (int o = 0; o < s.rows; ++o) {
      const float* values = weight.values.data() + static_cast<size_t>(o) * s.groups_per_row() * 2;
      const uint16_t* meta =
          weight.meta.data() + static_cast<size_t>(o) * weight.meta_words_per_row();
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          double sum = bias != nullptr ? bias[o] : 0.0;
          for (int tap = 0; tap < s.taps; ++tap) {
            const int iy = oy * a.stride_h - a.pad_h + (tap / a.kernel_w) * a.dilation_h;
            const int ix = ox * a.stride_w - a.pad_w + (tap % a.kernel_w) * a.dilation_w;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;  // zero padding
            for (int group = 0; group < groups_per_tap; ++group) {
              const int g = tap * groups_per_tap + group;
              const unsigned nibble = (meta[g / 4] >> (4 * (g % 4))) & 0xFu;
              for (int k = 0; k < 2; ++k) {
                const int channel = group * 4 + static_cast<int>((nibble >> (2 * k)) & 3u);
                if (channel >= c) continue;
                sum += static_cast<double>(values[g * 2 + k]) *
                       x[((static_cast<int64_t>(b) * c + channel) * h + iy) * w + ix];
              }
            }
          }
          y[((static_cast<int64_t>(b) * s.rows + o) * oh + oy) * ow + ox] = static_cast<float>(sum);
        }
    }
}

void linear(const float* x, int n, const Compressed& weight, const float* bias, float* y) {
  const WeightShape& s = weight.shape;
  if (s.taps != 1) throw Error("sparse24::linear: a linear weight has one tap");
  for (int b = 0; b < n; ++b)
    for (int o = 0; o < s.rows; ++o) {
      const float* values = weight.values.data() + static_cast<size_t>(o) * s.groups_per_row() * 2;
      const uint16_t* meta =
          weight.meta.data() + static_cast<size_t>(o) * weight.meta_words_per_row();
      double sum = bias != nullptr ? bias[o] : 0.0;
      for (int g = 0; g < s.groups_per_row(); ++g) {
        const unsigned nibble = (meta[g / 4] >> (4 * (g % 4))) & 0xFu;
        for (int k = 0; k < 2; ++k) {
          const int feature = g * 4 + static_cast<int>((nibble >> (2 * k)) & 3u);
          if (feature < s.channels)
            sum += static_cast<double>(values[g * 2 + k]) *
                   x[static_cast<int64_t>(b) * s.channels + feature];
        }
      }
      y[static_cast<int64_t>(b) * s.rows + o] = static_cast<float>(sum);
    }
}

}  // namespace cnnrt::sparse24
