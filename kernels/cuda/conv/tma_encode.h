// The driver's tensor-map encoders for the TMA convs (tma_conv.cu, tma_s8.cu), looked up once
// through the runtime's cudaGetDriverEntryPointByVersion, so cnnrt links no libcuda.
#pragma once

#include <cuda.h>

namespace cnnrt::cuda::tma {

using EncodeIm2col = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                  const cuuint64_t*, const cuuint64_t*, const int*, const int*,
                                  cuuint32_t, cuuint32_t, const cuuint32_t*, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion,
                                  CUtensorMapFloatOOBfill);
using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                 const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeIm2col / cuTensorMapEncodeTiled; a driver without them is a cnnrt::Error.
EncodeIm2col encode_im2col();
EncodeTiled encode_tiled();

// A failed encode as a cnnrt::Error naming the kernel and the map ("kernel: what failed (...)").
void check_encode(const char* kernel, CUresult status, const char* what);

}  // namespace cnnrt::cuda::tma
