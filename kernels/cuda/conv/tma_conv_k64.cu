// conv_fp16_tma's instances with 64-byte k-tile rows (in_c % 64 == 32: 32 halves per row, the
// 64-byte swizzle; tma_conv.cu's design note), one translation unit of their own so they compile
// beside the 128-byte ones in tma_conv.cu.
#include "kernels/cuda/conv/tma_conv_instances.cuh"

namespace cnnrt::cuda::tma_f16 {

KernelFn kernel_of_rows64(int tile, int kind) { return kernel_of_rows<64>(tile, kind); }

}  // namespace cnnrt::cuda::tma_f16
