// L2 prefetch of weight ranges (see l2_prefetch.h for when and why).
//
// Design: the kernel must cost the layers it runs beside almost nothing, so it holds no data and
// waits for nothing.  On Hopper one thread issues cp.async.bulk.prefetch.L2 for a 16 KB chunk —
// the copy engine fetches it while the thread moves on — so 8 CTAs of 128 threads cover ~16 MB
// per round and finish issuing within a few microseconds.  Older GPUs have no bulk prefetch; each
// thread issues prefetch.global.L2 per 128-byte line of its chunk instead (more instructions,
// still no waiting).  Both carry the evict-last priority (createpolicy / the ::evict_last
// qualifier): the weight-bound layer that follows streams more bytes than the L2 holds, and its
// own reads must not push the prefetched lines out before it reaches them.
#include <algorithm>
#include <cstdint>
#include <string>

#include "cnnrt/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/l2_prefetch.h"

namespace cnnrt::cuda {
namespace {

constexpr unsigned kChunkBytes = 16 * 1024;
constexpr int kThreads = 128, kBlocks = 8;

struct PrefetchList {
  const char* data[kMaxPrefetchRanges];
  unsigned long long bytes[kMaxPrefetchRanges];
  int count;
};

__global__ void __launch_bounds__(kThreads) l2_prefetch_kernel(const PrefetchList list) {
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x * kChunkBytes;
  const unsigned long long first =
      (unsigned long long)(blockIdx.x * blockDim.x + threadIdx.x) * kChunkBytes;
#if __CUDA_ARCH__ >= 900
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
#endif
  for (int r = 0; r < list.count; ++r) {
    const char* base = list.data[r];
    const unsigned long long bytes = list.bytes[r];
    for (unsigned long long offset = first; offset < bytes; offset += stride) {
      // Sizes are multiples of 16 (plan_l2_prefetch), so every chunk is too.
      const unsigned size = unsigned(min(bytes - offset, (unsigned long long)kChunkBytes));
#if __CUDA_ARCH__ >= 900
      asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(
                       base + offset),
                   "r"(size), "l"(policy)
                   : "memory");
#else
      for (unsigned line = 0; line < size; line += 128)
        asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(base + offset + line));
#endif
    }
  }
}

}  // namespace

std::vector<DeviceRange> plan_l2_prefetch(const std::vector<std::vector<DeviceRange>>& per_step,
                                          size_t budget) {
  std::vector<DeviceRange> plan;
  for (const std::vector<DeviceRange>& step : per_step)
    for (const DeviceRange& range : step) {
      if (budget < 16 || plan.size() == size_t(kMaxPrefetchRanges)) return plan;
      if (range.data == nullptr || range.bytes == 0) continue;
      // Align the start up and the size down to 16 bytes (cudaMalloc'd weights already are).
      const auto address = reinterpret_cast<uintptr_t>(range.data);
      const size_t skip = (16 - address % 16) % 16;
      if (range.bytes <= skip) continue;
      size_t bytes = std::min(range.bytes - skip, budget) / 16 * 16;
      if (bytes == 0) continue;
      plan.push_back({static_cast<const char*>(range.data) + skip, bytes});
      budget -= bytes;
    }
  return plan;
}

void l2_prefetch(const std::vector<DeviceRange>& ranges, cudaStream_t stream) {
  if (ranges.empty()) return;
  if (ranges.size() > size_t(kMaxPrefetchRanges))
    throw Error("l2_prefetch: " + std::to_string(ranges.size()) + " ranges, at most " +
                std::to_string(kMaxPrefetchRanges));
  PrefetchList list{};
  for (const DeviceRange& range : ranges) {
    if (reinterpret_cast<uintptr_t>(range.data) % 16 != 0 || range.bytes % 16 != 0)
      throw Error("l2_prefetch: ranges must be 16-byte aligned multiples of 16 bytes");
    list.data[list.count] = static_cast<const char*>(range.data);
    list.bytes[list.count] = range.bytes;
    ++list.count;
  }
  l2_prefetch_kernel<<<kBlocks, kThreads, 0, stream>>>(list);
  CNNRT_CUDA_CHECK_LAUNCH();
}

}  // namespace cnnrt::cuda
