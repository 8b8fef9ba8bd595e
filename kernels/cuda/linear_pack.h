// Host-side packing of a linear layer's weight for the CUDA backend layout, shared by every CUDA
// linear family (fp16 GEMV / cuBLASLt, fp32 reference) and the im2col conv baseline.
//
// Why one function: the CUDA layout stores a flattened [C, H, W] map in (h, w, c) order
// (runtime/cuda/cuda_registry.h), so a linear that reads it must permute its weight columns from
// PyTorch's (c, h, w) order once at build.  Every family that reads such a vector must permute
// identically, or a mixed-precision engine (an fp16 flatten feeding an fp32 linear) would compute
// with scrambled features; one packing routine makes that impossible to get out of step.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/host_parallel.h"
#include "graph/ir.h"

namespace cnnrt::cuda {

// Packed weights, still fp32 on the host: [rows_pad][cols_pad] (rows = outputs, cols = inputs,
// each rounded up to 8, zeros in the padding) and bias [rows_pad] (zeros when the layer has none
// and in the padding).  Each family converts them to its own device type.
struct HostGemmWeights {
  int rows_pad = 0, cols_pad = 0;
  HostVector<float> weight;  // filled on the host's cores, padding included
  std::vector<float> bias;
};

// A linear layer's weights as the graph holds them (not copied): weight [out, in] (PyTorch
// layout), bias [out] or nullptr, and the [C, H, W] shape of an NHWC flatten it reads ({} when
// it reads a plain vector).  The fp16 family packs from this directly (GemmWeights).
struct LinearWeightRefs {
  const float* weight = nullptr;
  const float* bias = nullptr;
  int out_features = 0, in_features = 0;
  Shape flattened_source;
};

// The layout's one permutation rule: packed column j of a linear that reads an NHWC flatten of
// [C, H, W] (j = (h * W + w) * C + c) holds PyTorch's column (c * H + h) * W + w; channels = 0
// (a plain vector) keeps j.  hw = H * W.
inline int64_t linear_source_column(int64_t j, int64_t channels, int64_t hw) {
  return channels > 0 ? (j % channels) * hw + j / channels : j;
}

// weight: [out, in] (PyTorch layout); bias: [out] or nullptr.  When `flattened_source` is a
// [C, H, W] shape (the linear reads an NHWC flatten), columns are permuted from PyTorch's
// (c, h, w) order to the flatten's (h, w, c) order; in must equal C*H*W.  Throws Error on
// mismatched sizes.
HostGemmWeights pack_linear_weights(const float* weight, const float* bias, int out_features,
                                    int in_features, const Shape& flattened_source);

}  // namespace cnnrt::cuda
