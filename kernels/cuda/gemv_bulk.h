// Batch-1/2 fp16 GEMV on Hopper that streams the weight with bulk copies into shared memory
// (kernels/cuda/gemv_bulk.cu has the design note).  Same product, layouts and output forms as
// gemv_fp16 / gemv_fp16_to_fp32 (linear_fp16.h); the linear entry takes it where it is served.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/linear_fp16.h"

namespace cnnrt::cuda {

constexpr int kBulkMaxBatch = 2;         // x for every sample stays in shared memory
constexpr int kGemvBulkMaxCols = 16384;  // x of 2 samples: 64 KB next to the 64 KB ring

// Whether the kernel serves a [rows_pad][cols_pad] weight at `batch` on the current device (or
// described target): batch 1..kBulkMaxBatch, cols_pad a multiple of 8 up to kGemvBulkMaxCols,
// a compute capability 9.0 device running the sm_90a image.  No CUDA call beyond the cached probe.
bool gemv_bulk_supported(int rows_pad, int cols_pad, int64_t batch);

// y = x · Wᵀ + b (ReLU when `relu`), y fp16 [batch][rows_pad].  Throws Error where not served.
void gemv_bulk_fp16(const GemmWeights& weights, bool relu, const void* x, void* y, int64_t batch,
                    cudaStream_t stream);
// The same written as the graph output: y fp32 [batch][out_features].
void gemv_bulk_fp16_to_fp32(const GemmWeights& weights, bool relu, const void* x, float* y,
                            int64_t batch, int out_features, cudaStream_t stream);

}  // namespace cnnrt::cuda
