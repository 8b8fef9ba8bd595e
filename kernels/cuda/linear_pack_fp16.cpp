// The fp16 linear layer's weight packed straight from the graph's fp32 arrays: the layout of
// pack_linear_weights (linear_pack.h) — [rows_pad][cols_pad], zeros in the padding, columns of
// an NHWC flatten permuted from PyTorch's (c, h, w) order to (h, w, c) — rounded to fp16 in the
// same pass, rows spread over the host's cores (host_parallel.h).
//
// Why: packing in fp32 first, then converting with a serial __float2half_rn loop, took most of
// AlexNet's engine build (fc6-fc8: 58.6 M weights; about 1 s in all, issue 7).  One parallel
// pass writes the fp16 bytes directly; they are identical to pack_linear_weights followed by
// __float2half_rn (tests/cuda/test_linear_fp16.cpp, FastPackEqualsReferencePack), and the device
// buffers are allocated exactly as before (one cudaMalloc for the matrix, then the biases).
#include <cuda_fp16.h>

#include <memory>
#include <string>

#include "cnnrt/error.h"
#include "graph/host_parallel.h"
#include "kernels/cuda/linear_fp16.h"

namespace cnnrt::cuda {

GemmWeights::GemmWeights(const LinearWeightRefs& refs)
    : rows_pad_(static_cast<int>(round_up8(refs.out_features))),
      cols_pad_(static_cast<int>(round_up8(refs.in_features))) {
  const int out = refs.out_features, in = refs.in_features;
  if (out < 1 || in < 1 || refs.weight == nullptr) throw Error("GemmWeights: empty weight");
  const Shape& source = refs.flattened_source;
  const bool permute = source.size() == 3;
  if (permute && shape_elements(source) != in)
    throw Error("GemmWeights: in_features " + std::to_string(in) +
                " does not match the flattened shape " + shape_to_string(source));
  const int64_t channels = permute ? source[0] : 0;
  const int64_t hw = permute ? source[1] * source[2] : 0;

  const size_t cols = static_cast<size_t>(cols_pad_);
  std::unique_ptr<__half[]> packed(new __half[static_cast<size_t>(rows_pad_) * cols]);
  const __half zero = __float2half_rn(0.0f);
  parallel_for(static_cast<size_t>(rows_pad_), 16, [&](size_t begin, size_t end) {
    for (size_t o = begin; o < end; ++o) {
      __half* dst = packed.get() + o * cols;
      if (o >= static_cast<size_t>(out)) {
        std::fill(dst, dst + cols, zero);
        continue;
      }
      const float* src = refs.weight + o * static_cast<size_t>(in);
      for (int64_t j = 0; j < in; ++j)
        dst[j] = __float2half_rn(src[linear_source_column(j, channels, hw)]);
      std::fill(dst + in, dst + cols, zero);
    }
  });
  weight_ = DeviceArray(static_cast<size_t>(rows_pad_) * cols * sizeof(__half));
  weight_.upload(packed.get(), weight_.bytes());

  std::vector<float> bias(rows_pad_, 0.0f);
  if (refs.bias != nullptr) std::copy(refs.bias, refs.bias + out, bias.begin());
  bias_fp32_ = upload_fp32(bias);
  bias_fp16_ = upload_as_fp16(bias);
}

}  // namespace cnnrt::cuda
