// fp16 pooling on the CUDA backend layout: max, average (PyTorch semantics: padding, ceil_mode,
// count_include_pad) and adaptive average.  x: [batch, h, w, pad8(c)] fp16 → y: [batch, oh, ow,
// pad8(c)] fp16 with zeros in the padding channels.  Only enqueues on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/ir.h"

namespace cnnrt::cuda {

// oh/ow are the pooled extents (graph shape inference computes them with the same PyTorch rule).
void maxpool_fp16(const void* x, void* y, int64_t batch, int c, int h, int w,
                  const PoolAttrs& attrs, int oh, int ow, cudaStream_t stream);
void avgpool_fp16(const void* x, void* y, int64_t batch, int c, int h, int w,
                  const PoolAttrs& attrs, int oh, int ow, cudaStream_t stream);
// Window [floor(i*h/oh), ceil((i+1)*h/oh)) per axis.
void adaptive_avgpool_fp16(const void* x, void* y, int64_t batch, int c, int h, int w, int oh,
                           int ow, cudaStream_t stream);

}  // namespace cnnrt::cuda
