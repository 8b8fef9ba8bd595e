#include "kernels/cuda/linear_pack.h"

#include <algorithm>
#include <string>

#include "cnnrt/error.h"
#include "graph/host_parallel.h"

namespace cnnrt::cuda {

HostGemmWeights pack_linear_weights(const float* weight, const float* bias, int out_features,
                                    int in_features, const Shape& flattened_source) {
  if (out_features < 1 || in_features < 1 || weight == nullptr)
    throw Error("pack_linear_weights: empty weight");
  auto round_up8 = [](int64_t value) { return static_cast<int>((value + 7) / 8 * 8); };
  HostGemmWeights packed;
  packed.rows_pad = round_up8(out_features);
  packed.cols_pad = round_up8(in_features);
  // Not zeroed here: the parallel loop writes every element (padding included), so the pages are
  // first touched on all cores (host_parallel.h, HostVector).
  packed.weight.resize(static_cast<size_t>(packed.rows_pad) * packed.cols_pad);
  packed.bias.assign(packed.rows_pad, 0.0f);
  if (bias != nullptr) std::copy(bias, bias + out_features, packed.bias.begin());

  const bool permute = flattened_source.size() == 3;
  if (permute && shape_elements(flattened_source) != in_features)
    throw Error("pack_linear_weights: in_features " + std::to_string(in_features) +
                " does not match the flattened shape " + shape_to_string(flattened_source));
  const int64_t channels = permute ? flattened_source[0] : 0;
  const int64_t hw = permute ? flattened_source[1] * flattened_source[2] : 0;
  // Rows on the host's cores: fc6's 38 M gathered values took ~0.2 s on one (the fp32 and int8
  // linears pack here at every engine build).
  const size_t cols = static_cast<size_t>(packed.cols_pad);
  parallel_for(static_cast<size_t>(packed.rows_pad), 16, [&](size_t begin, size_t end) {
    for (size_t o = begin; o < end; ++o) {
      float* dst = packed.weight.data() + o * cols;
      if (o >= static_cast<size_t>(out_features)) {
        std::fill(dst, dst + cols, 0.0f);
        continue;
      }
      const float* src = weight + o * in_features;
      if (!permute)
        std::copy(src, src + in_features, dst);
      else
        for (int64_t j = 0; j < in_features; ++j)
          dst[j] = src[linear_source_column(j, channels, hw)];
      std::fill(dst + in_features, dst + cols, 0.0f);
    }
  });
  return packed;
}

}  // namespace cnnrt::cuda
