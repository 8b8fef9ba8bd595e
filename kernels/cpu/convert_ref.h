// Reference conversion between tensor types (graph/tensor_type.h): any dtype and layout to any
// other, element by element through float.  The CPU backend's conversion step, and the oracle
// of the GPU conversion kernels.
//
// Rounding: fp32 → fp16 rounds to nearest even (IEEE, as __float2half_rn); → int8 is
// round-to-nearest-even of x / scale, saturated to [-127, 127] (symmetric: -128 is never
// produced; NaN → 0, as the GPU's cvt); fp16 / int8 → fp32 is exact.  Padding lanes of the output
// are written as zeros.
#pragma once

#include <cstdint>

#include "graph/ir.h"
#include "graph/tensor_type.h"

namespace cnnrt::ref {

uint16_t float_to_half(float value);  // round to nearest even, overflow to inf, NaN kept
float half_to_float(uint16_t bits);
int8_t quantize_int8(float value, float scale);  // RNE(value / scale), saturated to ±127, NaN → 0

// x: `batch` samples of per-sample `shape` stored as `from`; y: the same as `to`.
void convert_tensor(const void* x, const TensorType& from, void* y, const TensorType& to,
                    const Shape& shape, int batch);

}  // namespace cnnrt::ref
