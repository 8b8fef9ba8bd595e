// CPU reference kernels, part 3: softmax, batch norm and local response norm.
//
// Softmax subtracts the row max and sums exponentials in double; batch norm evaluates
// (x - mean) / sqrt(var + eps) * gamma + beta in double; LRN follows torch.nn.LocalResponseNorm
// exactly: the squared-sum window over channels is centred, zero-padded size/2 channels before
// and (size-1)/2 after, and the sum is divided by `size` (not by the clipped count).
#include <algorithm>
#include <cmath>

#include "cnnrt/error.h"
#include "kernels/cpu/reference.h"

namespace cnnrt::ref {

void softmax(const float* x, int64_t outer, int64_t features, int64_t inner, float* y) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float* in = x + o * features * inner + i;
      float* out = y + o * features * inner + i;
      float row_max = in[0];
      for (int64_t f = 1; f < features; ++f) row_max = std::max(row_max, in[f * inner]);
      double denominator = 0.0;
      for (int64_t f = 0; f < features; ++f)
        denominator += std::exp(static_cast<double>(in[f * inner]) - row_max);
      for (int64_t f = 0; f < features; ++f)
        out[f * inner] = static_cast<float>(std::exp(static_cast<double>(in[f * inner]) - row_max) /
                                            denominator);
    }
}

void batchnorm(const float* x, int n, int c, int64_t spatial, const float* gamma, const float* beta,
               const float* mean, const float* var, float eps, float* y) {
  for (int b = 0; b < n; ++b)
    for (int ch = 0; ch < c; ++ch) {
      const double scale =
          static_cast<double>(gamma[ch]) / std::sqrt(static_cast<double>(var[ch]) + eps);
      const int64_t base = (static_cast<int64_t>(b) * c + ch) * spatial;
      for (int64_t s = 0; s < spatial; ++s)
        y[base + s] =
            static_cast<float>((x[base + s] - static_cast<double>(mean[ch])) * scale + beta[ch]);
    }
}

void lrn(const float* x, int n, int c, int64_t spatial, const LRNAttrs& attrs, float* y) {
  if (attrs.size < 1) throw Error("ref::lrn: size must be positive");
  const int before = attrs.size / 2, after = (attrs.size - 1) / 2;
  for (int b = 0; b < n; ++b)
    for (int ch = 0; ch < c; ++ch)
      for (int64_t s = 0; s < spatial; ++s) {
        double square_sum = 0.0;
        for (int cc = std::max(0, ch - before); cc <= std::min(c - 1, ch + after); ++cc) {
          const double v = x[(static_cast<int64_t>(b) * c + cc) * spatial + s];
          square_sum += v * v;
        }
        const int64_t index = (static_cast<int64_t>(b) * c + ch) * spatial + s;
        const double divisor = std::pow(attrs.k + attrs.alpha / attrs.size * square_sum,
                                        static_cast<double>(attrs.beta));
        y[index] = static_cast<float>(x[index] / divisor);
      }
}

}  // namespace cnnrt::ref
