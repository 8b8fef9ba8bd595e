// kernels/cuda/conv/tma_encode.h: the host side the TMA convs share.
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

void check_tile(const char* kernel, int variant, int count) {
  if (variant < 0 || variant >= count)
    throw Error(std::string(kernel) + ": no tile " + std::to_string(variant));
}

CUtensorMapSwizzle swizzle_of(int row_bytes) {
  if (row_bytes == 128) return CU_TENSOR_MAP_SWIZZLE_128B;
  return row_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_32B;
}

void encode_weight_map(const char* kernel, CUtensorMap* map, CUtensorMapDataType type,
                       const void* weight, size_t k, size_t rows, size_t row_pitch, int row_elems,
                       int box_rows, int row_bytes, const char* what) {
  const cuuint64_t dims[2] = {cuuint64_t(k), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(row_pitch)};
  const cuuint32_t box[2] = {cuuint32_t(row_elems), cuuint32_t(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  check_encode(
      kernel,
      encode_tiled()(map, type, 2, const_cast<void*>(weight), dims, strides, box, element_strides,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle_of(row_bytes),
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
      what);
}

CUtensorMap encode_im2col_map(const char* kernel, const void* x, const Im2colGeometry& g) {
  CUtensorMap map;
  const cuuint64_t dims[4] = {cuuint64_t(g.channels), cuuint64_t(g.width), cuuint64_t(g.height),
                              cuuint64_t(g.batch)};
  const cuuint64_t pixel = cuuint64_t(g.channels) * g.elem_bytes;
  const cuuint64_t strides[3] = {pixel, cuuint64_t(g.width) * pixel,
                                 cuuint64_t(g.height) * g.width * pixel};
  const cuuint32_t element_strides[4] = {1, cuuint32_t(g.stride_w), cuuint32_t(g.stride_h), 1};
  check_encode(
      kernel,
      encode_im2col()(&map, g.type, 4, const_cast<void*>(x), dims, strides, g.lower, g.upper,
                      cuuint32_t(g.row_elems), cuuint32_t(g.box_pixels), element_strides,
                      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle_of(g.row_bytes),
                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
      "cuTensorMapEncodeIm2col (input)");
  return map;
}

std::string register_problem(const std::vector<KernelImage>& images, int entry_regs) {
  std::string problem;
  for (const KernelImage& image : images) {
    cudaFuncAttributes attr;
    CNNRT_CUDA_CHECK(cudaFuncGetAttributes(&attr, image.fn));
    if (attr.numRegs != entry_regs)
      problem = std::string("tile ") + image.tile + " starts at " + std::to_string(attr.numRegs) +
                " registers, setmaxnreg needs " + std::to_string(entry_regs);
  }
  return problem;
}

void opt_in_smem(const std::vector<KernelImage>& images) {
  for (const KernelImage& image : images)
    CNNRT_CUDA_CHECK(cudaFuncSetAttribute(image.fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(image.smem)));
}

}  // namespace cnnrt::cuda::tma
