// Elementwise conversion of a tensor between two CUDA types (graph/tensor_type.h): fp32, fp16 or
// int8 (with its scale), NCHW or NHWC with the channel stride padded to `channel_align`; vectors
// (any rank but 3) are rows of their last dimension.  The CUDA backend's conversion steps between
// the fp32 reference family and the rest (fp32 NCHW ↔ fp32 NHWC/8, fp32 NHWC/8 ↔ fp16 NHWC/8) run
// here; the host edge of the fp16 engine keeps its vectorised kernels (layout.h).
//
// Design: the GPU twin of ref::convert_tensor (kernels/cpu/convert_ref.h), which is its oracle —
// one thread per *output* element, so the output's padding lanes are written as zeros in the
// same pass, the logical (sample, channel, pixel) of that element looked up in the input.  fp32
// → fp16 rounds to nearest even (__float2half_rn, as ref::float_to_half); fp16 → fp32 is exact.
// int8 follows docs/QUANTIZATION.md literally: dequantise = one `__fmul_rn(scale, q)`, quantise
// = `__float2int_rn(__fdiv_rn(x, scale))` clamped to [-127, 127] (NaN → 0), and int8 → int8 of
// another scale goes through fp32 exactly as ref::convert_tensor does (requantise).
// These run once per precision change in a forward pass, on activations, so generality and
// obviousness beat a tiled transpose.  Only enqueues on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/ir.h"
#include "graph/tensor_type.h"

namespace cnnrt::cuda {

// True when convert_tensor_cuda handles this type (fp32, fp16, or int8 with a positive finite
// scale; channel_align >= 1).
bool cuda_convertible(const TensorType& type);

// x: `batch` samples of per-sample `shape` stored as `from`; y: the same as `to`.  x and y must
// not alias.  Throws Error for types cuda_convertible refuses or an empty shape.
void convert_tensor_cuda(const void* x, const TensorType& from, void* y, const TensorType& to,
                         const Shape& shape, int64_t batch, cudaStream_t stream);

}  // namespace cnnrt::cuda
