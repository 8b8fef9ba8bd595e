// int8 GEMV of the int8 linear layer for small batches (docs/QUANTIZATION.md is the contract).
//
// At batch <= kGemvS8MaxBatch a linear is bound by reading its weight once: int8 weights are
// half the bytes of fp16 (AlexNet's classifier: 58.6 MB instead of 117 MB).  Larger batches run
// the tensor-core GEMM (kernels/cuda/conv/igemm_s8.cu, the linear as a 1x1 conv over a 1x1 map).
// The layer is described by the conv family's S8Conv (in_c = in features, in_stride = pad16,
// out_c = out features, weight rows of k_pad bytes), so both paths share one packing and one
// epilogue (epilogue_s8.cuh).
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/conv/conv_s8.h"

namespace cnnrt::cuda {

constexpr int kGemvS8MaxBatch = 8;

// x: [batch][in_stride] int8; y: [batch][out_stride] int8 or fp32 (padding lanes zero).
// batch <= kGemvS8MaxBatch.  evict_first: the weight's loads go first out of L2
// (KernelArgs::stream_evict_first).
void gemv_s8(const S8Conv& linear, const void* x, void* y, int batch, cudaStream_t stream,
             bool evict_first = false);

}  // namespace cnnrt::cuda
