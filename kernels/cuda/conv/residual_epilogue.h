// The residual epilogue of the conv kernels that have no native one (igemm, wgmma, s2d): after
// the conv wrote conv(x) + b (no clamp) into y, y = clamp(y + r).  runtime/cuda/
// conv_residual_entries.cpp wraps those entries with it.  Host-only header.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/conv/epilogue_params.h"

namespace cnnrt::cuda {

// y = clamp(y + r) over `pixels` rows of `channel_stride` halves (NHWC, stride a multiple of 8),
// channels >= `channels` written as +0; y and r 16-byte aligned and not aliased.
void residual_add_fp16(void* y, const void* r, int64_t pixels, int channels, int channel_stride,
                       const EpilogueClamp& clamp, cudaStream_t stream);

}  // namespace cnnrt::cuda
