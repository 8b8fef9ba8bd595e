// parallel_for over [0, n) on the host's cores, for build-time loops over weights (packing,
// fp32 → fp16 conversion and int8 quantisation of up to ~60 M values, which took most of the
// engine build serially).  Used by the CUDA families' packing and by the int8 reference's
// per-channel quantisation (kernels/cpu/int8_ref.cpp), whose channels are independent, so the
// result does not depend on the thread count.
//
// Why host threads and not the GPU: converting on the GPU needs a staging buffer, and with one
// AlexNet at batch 1 ran 1.4-1.7% slower (H100, bit-identical weights: the only change was where
// the buffers landed); host threads leave the device allocations exactly as before.  Each call
// splits [0, n) into one contiguous range per thread (at least `min_per_thread` items each),
// so small loops stay on the calling thread.  fn(begin, end) must be safe to run concurrently on
// disjoint ranges; the first exception it throws is rethrown here after all threads joined.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "graph/host_vector.h"  // HostVector: the buffers these loops fill

namespace cnnrt {

template <typename Fn>
void parallel_for(size_t n, size_t min_per_thread, Fn fn) {
  const size_t hardware = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min<size_t>(
      {hardware, size_t{16}, std::max<size_t>(1, n / std::max<size_t>(1, min_per_thread))});
  if (threads <= 1) {
    fn(size_t{0}, n);
    return;
  }
  std::exception_ptr error;
  std::mutex error_mutex;
  std::vector<std::thread> pool;
  const size_t step = (n + threads - 1) / threads;
  for (size_t begin = 0; begin < n; begin += step) {
    const size_t end = std::min(n, begin + step);
    pool.emplace_back([&, begin, end] {
      try {
        fn(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    });
  }
  for (std::thread& thread : pool) thread.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace cnnrt
