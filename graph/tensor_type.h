// Typed activation tensors: what one tensor between two steps holds in memory.
//
// Every tensor an engine materialises has a per-sample Shape (graph/ir.h) and a TensorType: an
// element type (fp32, fp16, int8 with a scale) and a layout (NCHW or NHWC with the channel
// stride rounded up to `channel_align`, the padding lanes holding zeros).  The kernel that
// writes a tensor decides its type; a kernel that reads it declares which types it accepts;
// where the two differ the builder inserts a conversion step (runtime/builder.cpp).  The memory
// planner sizes every tensor from its own type (tensor_bytes).  Device-agnostic and free of
// CUDA, so graph/, runtime/ and the tests share one vocabulary.
//
// Rank conventions: [C, H, W] feature maps follow `layout`; any other rank ([F] vectors after
// flatten/linear) is rows of its last dimension, which is padded to `channel_align` — NCHW and
// NHWC coincide there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "graph/ir.h"

namespace cnnrt {

enum class DType : uint8_t { F32, F16, I8 };
enum class Layout : uint8_t { NCHW, NHWC };

const char* to_string(DType dtype);    // "fp32", "fp16", "int8"
const char* to_string(Layout layout);  // "NCHW", "NHWC"
size_t dtype_bytes(DType dtype);

struct TensorType {
  DType dtype = DType::F32;
  Layout layout = Layout::NCHW;
  int channel_align = 1;  // channel (vector: feature) stride = round_up(C, channel_align)
  float scale = 0;        // int8 only: real value = scale * stored value; 0 = not yet known

  // Same bytes in memory: dtype, layout, alignment and (for int8) scale.
  bool operator==(const TensorType& other) const;
  bool operator!=(const TensorType& other) const { return !(*this == other); }
};

// The host's tensors: dense NCHW fp32 (the CPU engine's only type, the graph input as run()
// receives it and the output run() returns).
inline TensorType fp32_nchw() { return {DType::F32, Layout::NCHW, 1, 0}; }
// The CUDA tensor-core kernels' activations: NHWC fp16, channels padded to 8 (16-byte vectors).
inline TensorType fp16_nhwc8() { return {DType::F16, Layout::NHWC, 8, 0}; }
// The CUDA fp32 reference kernels' activations: the fp16 layout element for element in fp32
// (NHWC, channels padded to 8, vectors as rows padded to 8), so a tensor changes precision
// between the two families without moving any element.
inline TensorType fp32_nhwc8() { return {DType::F32, Layout::NHWC, 8, 0}; }
// The CUDA int8 kernels' activations: NHWC int8 at `scale`, channels padded to 16 (16-byte
// vectors, and a k32 MMA step is two of them), vectors as rows padded to 16.
inline TensorType int8_nhwc16(float scale) { return {DType::I8, Layout::NHWC, 16, scale}; }

// "fp32 NCHW", "fp16 NHWC/8", "int8 NHWC/16 scale 0.0123".
std::string to_string(const TensorType& type);

// Bytes of `batch` samples of per-sample `shape` stored as `type` (exact, no rounding).
size_t tensor_bytes(const Shape& shape, const TensorType& type, int batch);

}  // namespace cnnrt
