// L2 prefetch of weights for small-batch forwards — interface.
//
// At batch 1 AlexNet is bound by reading its weights: the convolutions run ~55 µs with DRAM
// nearly idle, then fc6 streams 75 MB (≈ 22 µs at 3.4 TB/s), fc7 34 MB and fc8 8 MB.  A CUDA
// context whose activations leave the L2 mostly free starts a side branch of its graph that asks
// the L2 to fetch the first part of the weights in execution order while the convolutions run,
// so the weight-bound layers find part of their matrix in L2 instead of DRAM.  The prefetch
// writes nothing, so results never depend on it; it is a hint the hardware may drop.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "runtime/kernel.h"

namespace cnnrt::cuda {

// The ranges to prefetch: each step's weight ranges in execution order, cut off once `budget`
// bytes are covered (the last range is truncated).  Every returned range starts 16-byte aligned
// and its size is a positive multiple of 16 (the bulk prefetch instruction's rule); the parts of
// a range that do not meet it are left out.  Empty ranges and a zero budget give nothing.
std::vector<DeviceRange> plan_l2_prefetch(const std::vector<std::vector<DeviceRange>>& per_step,
                                          size_t budget);

// Enqueues one small kernel that asks the L2 to fetch `ranges` (as planned above) with the
// evict-last priority, so the lines outlive the streaming reads of the layers before them.
// Hopper: one bulk prefetch per 16 KB chunk; older GPUs: one prefetch per 128-byte line.
// Throws Error on more than kMaxPrefetchRanges ranges or a misaligned range.
constexpr int kMaxPrefetchRanges = 16;
void l2_prefetch(const std::vector<DeviceRange>& ranges, cudaStream_t stream);

}  // namespace cnnrt::cuda
