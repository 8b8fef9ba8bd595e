// fp16 local response normalisation across channels (torch.nn.LocalResponseNorm).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "graph/ir.h"

namespace cnnrt::cuda {

// For each of `rows` rows (NHWC pixels) of `channel_stride` halves:
// y_c = x_c / (k + alpha/size * sum_{c' in [c - size/2, c + (size-1)/2] ∩ [0, C)} x_c'^2)^beta,
// padding entries written as zeros.  x and y must not alias (neighbouring channels are read).
void lrn_fp16(const void* x, void* y, int64_t rows, int channels, int channel_stride,
              const LRNAttrs& attrs, cudaStream_t stream);

}  // namespace cnnrt::cuda
