// The int8 linear layer at batches above the GEMV's (9..256): a streaming tensor-core GEMM with the
// weights as the MMA's M (docs/QUANTIZATION.md is the contract; the design note is atop
// linear_s8_stream.cu).
//
// Why: cuBLASLt's int8 GEMM ran AlexNet's classifier no faster than its fp16 one (25-43 µs for
// fc6 at batch 64 / 256, a ~20 µs floor on fc7 / fc8; docs/PERFORMANCE.md run 40c), though int8
// weights are half the bytes: at these batches a linear is bound by streaming its weight once.
// The layer is described by the conv family's S8Conv, as for gemv_s8 and the cuBLASLt path.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/conv/conv_s8.h"

namespace cnnrt::cuda {

// K slices for `batch` on `sms` multiprocessors (>= 1): at most one wave of two CTAs per SM,
// each slice at least 8 k-tiles of 64 bytes.
int linear_s8_stream_splits(const S8Conv& linear, int batch, int sms);
// The weight in the layout the kernel streams (linear_s8_stream.cu's design note), made once from
// linear.weight's [out_c][k_pad] rows into `packed` (linear_s8_stream_packed_bytes of device
// memory) on `stream`.
size_t linear_s8_stream_packed_bytes(const S8Conv& linear);
void linear_s8_stream_pack(const S8Conv& linear, void* packed, cudaStream_t stream);
// The int32 sums' workspace: [batch][out_stride] int32, 256-byte aligned.
size_t linear_s8_stream_workspace_bytes(const S8Conv& linear, int batch);
// packed: linear_s8_stream_pack's copy of the weight; x: [batch][in_stride] int8; y:
// [batch][out_stride] int8 or fp32 (padding lanes zero).
// `workspace`: linear_s8_stream_workspace_bytes(linear, batch) bytes of device memory.  Three
// launches: the sums zeroed, the GEMM adding each K slice's exact int32 sums into them, the
// epilogue (finish_s8).  Bit for bit the integer reference.  Throws cnnrt::Error on a bad shape.
void linear_s8_stream(const S8Conv& linear, const void* packed, const void* x, void* y, int batch,
                      int splits, void* workspace, cudaStream_t stream);

}  // namespace cnnrt::cuda
