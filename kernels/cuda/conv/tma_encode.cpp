// kernels/cuda/conv/tma_encode.h: the driver's tensor-map encoders, looked up once.
#include "kernels/cuda/conv/tma_encode.h"

#include <cuda_runtime.h>

#include <string>

#include "cnnrt/error.h"
#include "kernels/cuda/cuda_check.h"

namespace cnnrt::cuda::tma {
namespace {

void* driver_entry(const char* symbol) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  CNNRT_CUDA_CHECK(cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || fn == nullptr)
    throw Error(std::string("the TMA convs: the CUDA driver has no ") + symbol);
  return fn;
}

}  // namespace

EncodeIm2col encode_im2col() {
  static const auto fn = reinterpret_cast<EncodeIm2col>(driver_entry("cuTensorMapEncodeIm2col"));
  return fn;
}

EncodeTiled encode_tiled() {
  static const auto fn = reinterpret_cast<EncodeTiled>(driver_entry("cuTensorMapEncodeTiled"));
  return fn;
}

void check_encode(const char* kernel, CUresult status, const char* what) {
  if (status != CUDA_SUCCESS)
    throw Error(std::string(kernel) + ": " + what + " failed (CUresult " +
                std::to_string(int(status)) + ")");
}

}  // namespace cnnrt::cuda::tma
