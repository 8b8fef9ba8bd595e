// Device-side packing of a linear layer's weight into the fp16 GEMM layout: the layout of
// pack_linear_weights (linear_pack.h) — [rows_pad][cols_pad], zeros in the padding, columns of
// an NHWC flatten permuted from PyTorch's (c, h, w) order to (h, w, c) — built on the GPU from
// the PyTorch-layout fp32 weight.
//
// Why on the GPU: on the host, padding/permuting 58.6 M fp32 values (AlexNet's fc6-fc8) and
// converting them with __float2half_rn took most of the engine's build time (issue 7: about
// 1 s in all).  Here the host does one pageable copy of the raw weight per chunk of rows; the
// permutation and the correctly rounded conversion (the same __float2half_rn) run on the device,
// so the packed bytes are identical to pack_linear_weights + upload_as_fp16 (tested:
// tests/cuda/test_linear_fp16.cpp, DevicePackEqualsHostPack).
#include <cuda_fp16.h>

#include <algorithm>

#include "cnnrt/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/linear_fp16.h"

namespace cnnrt::cuda {
namespace {

constexpr size_t kStagingValues = size_t{16} << 20;  // 64 MB of fp32 rows per copy

// Rows [0, rows) of the staged source (source rows r0 + r) → packed rows r0 + r, all cols_pad
// columns (the column padding is written as zeros here; the row padding by a memset).
// channels == 0: no permutation.
__global__ void pack_rows_kernel(const float* src, __half* dst, int r0, int rows, int in,
                                 int cols_pad, int channels, int hw) {
  const int64_t total = int64_t(rows) * cols_pad;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int r = int(i / cols_pad), j = int(i % cols_pad);
    float v = 0.0f;
    if (j < in) {
      // Packed column j = (h * W + w) * C + c reads source column (c * H + h) * W + w.
      const int s = channels > 0 ? (j % channels) * hw + j / channels : j;
      v = src[int64_t(r) * in + s];
    }
    dst[(int64_t(r0) + r) * cols_pad + j] = __float2half_rn(v);
  }
}

}  // namespace

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
  const int channels = permute ? static_cast<int>(source[0]) : 0;
  const int hw = permute ? static_cast<int>(source[1] * source[2]) : 0;

  weight_ = DeviceArray(size_t(rows_pad_) * cols_pad_ * sizeof(__half));
  __half* dst = static_cast<__half*>(weight_.get());
  CNNRT_CUDA_CHECK(cudaMemset(dst, 0, weight_.bytes()));  // the padding rows
  const int chunk_rows = static_cast<int>(std::max<size_t>(1, kStagingValues / size_t(in)));
  StagingBuffer staging(size_t(std::min(chunk_rows, out)) * in * sizeof(float));
  for (int r0 = 0; r0 < out; r0 += chunk_rows) {
    const int rows = std::min(chunk_rows, out - r0);
    staging.upload(refs.weight + size_t(r0) * in, size_t(rows) * in * sizeof(float));
    const int64_t work = int64_t(rows) * cols_pad_;
    const int blocks = static_cast<int>(std::min<int64_t>((work + 255) / 256, 132 * 32));
    pack_rows_kernel<<<blocks, 256>>>(static_cast<const float*>(staging.get()), dst, r0, rows, in,
                                      cols_pad_, channels, hw);
    CNNRT_CUDA_CHECK(cudaGetLastError());
  }
  CNNRT_CUDA_CHECK(cudaStreamSynchronize(nullptr));  // report a failed kernel here

  std::vector<float> bias(rows_pad_, 0.0f);
  if (refs.bias != nullptr) std::copy(refs.bias, refs.bias + out, bias.begin());
  bias_fp32_ = upload_fp32(bias);
  bias_fp16_ = upload_as_fp16(bias);
}

}  // namespace cnnrt::cuda
