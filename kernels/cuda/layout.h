// Layout conversion at the edges of a CUDA forward pass, plus the staging-buffer filler.
//
// The host talks NCHW fp32 (PyTorch's layout); every CUDA kernel inside the engine talks the
// backend layout of runtime/cuda/cuda_registry.h: NHWC fp16 with channels padded to a multiple
// of 8 (zeros in the padding), vectors as [N][pad8(F)].  These launches sit first and last in
// the captured CUDA graph, so run() is one host→device copy, one graph launch and one
// device→host copy.  Each call only enqueues on `stream`; nothing synchronises.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cnnrt::cuda {

// x: [n, c, h, w] fp32 → y: [n, h, w, pad8(c)] fp16, padding channels written as zeros.
// y must be 16-byte aligned (arena offsets are 256-aligned); throws Error otherwise.
void nchw_fp32_to_nhwc_fp16(const float* x, void* y, int64_t n, int c, int h, int w,
                            cudaStream_t stream);

// x: [n, h, w, pad8(c)] fp16 → y: [n, c, h, w] fp32, padding dropped.  x 16-byte aligned.
void nhwc_fp16_to_nchw_fp32(const void* x, float* y, int64_t n, int c, int h, int w,
                            cudaStream_t stream);

// x: [rows, pad8(features)] fp16 → y: [rows, features] fp32 (vectors, and any tensor whose
// last dimension is the padded one).  Same kernel as above with h = w = 1.
void padded_rows_fp16_to_fp32(const void* x, float* y, int64_t rows, int features,
                              cudaStream_t stream);

// y[i] = deterministic pseudo-random value in [-1, 1) from (seed, i): a stand-in input for
// profiling and benchmarking that needs no host data and is never all zeros.
void fill_uniform_fp32(float* y, int64_t count, uint32_t seed, cudaStream_t stream);

}  // namespace cnnrt::cuda
