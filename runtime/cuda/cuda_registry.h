// Registration of the CUDA kernels, split by family so each file stays small.
// register_cuda_kernels (runtime/kernel.h) calls each of these once.
//
// Layout convention of every CUDA kernel (the CUDA backend's activation layout):
//   feature maps [C, H, W] per sample  → NHWC fp16, channel stride pad8(C) = round_up(C, 8)
//   vectors [F] per sample             → [N][pad8(F)] fp16
// Padding channels / features hold zeros; every kernel writes zeros into its output's padding.
// A flatten of [C, H, W] produces features in (h, w, c) order: when C % 8 == 0 it is a pure view
// (the planner aliases it to its input), otherwise it copies dropping the channel padding.  A
// linear that consumes a flattened [C, H, W] permutes its weight columns from PyTorch's
// (c, h, w) order to (h, w, c) once at build time, so no run-time transpose is needed.
#pragma once

#include <optional>

#include "kernels/cuda/conv_fp16.h"
#include "runtime/kernel.h"

namespace cnnrt::cuda {

void register_conv_kernels(KernelRegistry& registry);      // own fp16 implicit GEMM (+ fused)
void register_linear_kernels(KernelRegistry& registry);    // cuBLASLt epilogue, GEMV
void register_misc_kernels(KernelRegistry& registry);      // pools, relu, add, concat, ...
void register_baseline_kernels(KernelRegistry& registry);  // cuDNN, im2col + cuBLAS

// The per-sample shape the flatten that feeds `node` (a linear) flattened, or empty when the
// linear's input is not a flatten of a 3-D tensor.  Looks through dropout-free graphs only
// (dropout is removed before kernels are built).
Shape flattened_source_shape(const Node& node, const Graph& graph);

// The ConvShape the conv kernels see for a (possibly fused) conv node, or nullopt when the node
// is not a 2-D conv or its recorded output shape disagrees with the kernels' arithmetic.
std::optional<ConvShape> conv_shape_of(const Node& node);

}  // namespace cnnrt::cuda
