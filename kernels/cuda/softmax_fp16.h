// fp16 softmax over the channel / feature axis on the CUDA backend layout.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cnnrt::cuda {

// For each of `rows` rows of `channel_stride` halves (a sample's padded vector, or one NHWC
// pixel), y = softmax over the first `channels` entries; padding entries are written as zeros.
// Numerically stable (row max subtracted), fp32 math.  x == y allowed.
void softmax_fp16(const void* x, void* y, int64_t rows, int channels, int channel_stride,
                  cudaStream_t stream);

}  // namespace cnnrt::cuda
