// The driver's tensor-map encoders for the TMA convs (tma_conv.cu, tma_s8.cu), looked up once
// through the runtime's cudaGetDriverEntryPointByVersion, so cnnrt links no libcuda.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <mutex>
#include <vector>

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

// A context's encoded input maps (its KernelPlan::state), newest first.  The runtime hands a step
// its input pointer only at run(), so a map is encoded the first time a pointer and batch come
// (at the context's creation: its first forward) and looked up after; a graph replay does not
// call run() at all.  `Input` has `x` and `batch` members; `encode(x, batch)` makes one.
template <typename Input>
class InputMaps {
 public:
  template <typename Encode>
  Input find_or_encode(const void* x, int batch, const Encode& encode) const {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t i = 0;
    while (i < maps_.size() && (maps_[i].x != x || maps_[i].batch != batch)) ++i;
    if (i == maps_.size()) {
      if (maps_.size() == kMax) maps_.pop_back();
      maps_.insert(maps_.begin(), encode(x, batch));
      i = 0;
    }
    return maps_[i];
  }

 private:
  static constexpr size_t kMax = 8;  // bound buffers (run_async) may bring a few more pointers
  mutable std::mutex mutex_;
  mutable std::vector<Input> maps_;
};

}  // namespace cnnrt::cuda::tma
