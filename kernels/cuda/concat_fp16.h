// fp16 concatenation along channels on the CUDA backend layout.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace cnnrt::cuda {

// inputs[i]: [rows, pad8(channels[i])] fp16 (rows = batch × pixels; 1 pixel for vectors).
// y: [rows, pad8(sum channels)]: per row, input i's real channels at offset sum_{j<i} channels[j],
// zeros in the padding.  One launch per input; y must not alias an input.
void concat_channels_fp16(const std::vector<const void*>& inputs, const std::vector<int>& channels,
                          void* y, int64_t rows, cudaStream_t stream);

}  // namespace cnnrt::cuda
