// Event timing for the benchmark programs: the median of `iters` launches after 10 untimed ones.
// launch(i) enqueues one run on `stream`; `before_each` (if any: an L2 flush) is enqueued before
// each timed launch, outside its event pair.  All launches are queued before one synchronisation,
// so host launch latency stays outside the event pairs (as in `cnnrt profile`).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace cnnrt::bench {

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
