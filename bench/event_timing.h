// Event timing for the benchmark programs (and the GEMV labs' common start, start_lab): the median
// of `iters` launches after 10 untimed ones.
// launch(i) enqueues one run on `stream`; `before_each` (if any: an L2 flush) is enqueued before
// each timed launch, outside its event pair.  All launches are queued before one synchronisation,
// so host launch latency stays outside the event pairs (as in `cnnrt profile`).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace cnnrt::bench {

// The GEMV labs' start (gemv_lab, gemv_sparse_lab): `--iters N` (at least 20) into *iters, and the
// first CUDA device's properties.  Returns the exit status to leave with (2: bad usage, 1: no
// device, printed) or 0 to go on.
inline int start_lab(int argc, char** argv, const char* name, int* iters, cudaDeviceProp* prop) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      *iters = std::max(20, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--iters N>=20]\n", name);
      return 2;
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "%s: no CUDA device\n", name);
    return 1;
  }
  CNNRT_CUDA_CHECK(cudaGetDeviceProperties(prop, 0));
  return 0;
}

inline double median_event_ms(const std::function<void(int)>& launch, int iters,
                              cudaStream_t stream,
                              const std::function<void()>& before_each = nullptr) {
  for (int i = 0; i < 10; ++i) launch(i);
  std::vector<cudaEvent_t> events(2 * static_cast<size_t>(iters));
  for (cudaEvent_t& event : events) CNNRT_CUDA_CHECK(cudaEventCreate(&event));
  for (int i = 0; i < iters; ++i) {
    if (before_each) before_each();
    CNNRT_CUDA_CHECK(cudaEventRecord(events[2 * i], stream));
    launch(i);
    CNNRT_CUDA_CHECK(cudaEventRecord(events[2 * i + 1], stream));
  }
  CNNRT_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> times(iters);
  for (int i = 0; i < iters; ++i)
    CNNRT_CUDA_CHECK(cudaEventElapsedTime(&times[i], events[2 * i], events[2 * i + 1]));
  for (cudaEvent_t event : events) CNNRT_CUDA_CHECK(cudaEventDestroy(event));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace cnnrt::bench
