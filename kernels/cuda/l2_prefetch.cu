// L2 prefetch of a weight stream (interface and the why in l2_prefetch.h).
//
// Design.
//  * Instruction: `prefetch.global.L2` per 128-byte line (sm_80+).  It returns nothing to the SM,
//    so a thread issues its lines back to back without waiting: a few thousand threads keep
//    enough requests in flight for DRAM while the SMs stay free for the kernels beside it.
//    (A bulk copy per SM was measured at well under DRAM speed for a GEMV's stream, run 37d;
//    plain per-line prefetches spread over 16 CTAs do not depend on one SM's copy engine.)
//  * Grid: 16 CTAs of 256 threads, grid-stride over the pattern's lines.  The forward's other
//    kernels at batch 1 use 40-130 CTAs of 132 SMs; 16 small CTAs leave them their slots.
//  * Priority: the default (evict_normal).  evict_last would keep the lines past their one use
//    and push out what later layers could have found in L2.  The streams read between the
//    prefetch and the use go evict-first instead (KernelArgs::stream_evict_first), so they do not
//    push these lines out: without that, prefetching fc7 + fc8 made AlexNet int8 slower (run 47a).
//  * Which bytes (l2_prefetch_plan): the later streams whole before a share of the first; one
//    kernel per pattern on the side branch, which joins the forward after its last step (the
//    prefetch is a hint: nothing waits for it, so no edge breaks the chain of programmatic
//    launches; joining before the first streamed step cost 0.7-1.1 µs at batch 1, run 47b).
//  * What it costs: one graph node on a side branch (runtime/cuda/cuda_context.cpp) and DRAM
//    bandwidth while the early layers run, which at batch 1 read only a few MB.
#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/l2_prefetch.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/pdl.cuh"

namespace cnnrt::cuda {
namespace {

constexpr size_t kLine = 128;
constexpr size_t kBlockBytes = 4096;  // pattern period: a fraction resolution of 1/32
constexpr int kCtas = 16, kThreads = 256;

__global__ void l2_prefetch_kernel(const char* base, size_t bytes, size_t block_bytes,
                                   size_t prefix_lines, size_t lines) {
  pdl_wait();
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t j = size_t(blockIdx.x) * blockDim.x + threadIdx.x; j < lines; j += stride) {
    const size_t offset = (j / prefix_lines) * block_bytes + (j % prefix_lines) * kLine;
    if (offset >= bytes) continue;
    asm volatile("prefetch.global.L2 [%0];" ::"l"(base + offset));
  }
}

}  // namespace

size_t L2PrefetchPattern::prefetched_bytes() const {
  if (bytes == 0 || prefix_bytes == 0) return 0;
  const size_t full = bytes / block_bytes;
  return full * prefix_bytes + std::min(prefix_bytes, bytes - full * block_bytes);
}

L2PrefetchPattern l2_prefetch_pattern(const void* base, size_t bytes, size_t budget_bytes) {
  L2PrefetchPattern pattern;
  pattern.base = base;
  pattern.bytes = bytes;
  pattern.block_bytes = kBlockBytes;
  if (bytes == 0) return pattern;
  if (budget_bytes >= bytes) {
    pattern.prefix_bytes = kBlockBytes;
    return pattern;
  }
  // The share of each period, rounded to lines (none under half a line per period).
  const double share = double(budget_bytes) / double(bytes);
  const size_t lines = size_t(share * (kBlockBytes / kLine) + 0.5);
  pattern.prefix_bytes = std::min(kBlockBytes, lines * kLine);
  return pattern;
}

std::vector<PlannedPrefetch> l2_prefetch_plan(const std::vector<WeightStream>& streams,
                                              size_t budget_bytes) {
  std::vector<PlannedPrefetch> planned;
  size_t left = budget_bytes;
  auto take = [&](size_t i) {
    const L2PrefetchPattern pattern = l2_prefetch_pattern(streams[i].base, streams[i].bytes, left);
    const size_t bytes = pattern.prefetched_bytes();
    if (bytes == 0) return;
    planned.push_back({i, pattern});
    left -= std::min(left, bytes);
  };
  for (size_t i = 1; i < streams.size() && left > 0; ++i) take(i);
  if (!streams.empty() && left > 0) take(0);
  return planned;
}

void l2_prefetch(const L2PrefetchPattern& pattern, cudaStream_t stream) {
  if (pattern.base == nullptr || pattern.prefetched_bytes() == 0) return;
  const size_t blocks = (pattern.bytes + pattern.block_bytes - 1) / pattern.block_bytes;
  const size_t prefix_lines = pattern.prefix_bytes / kLine;
  launch_kernel(l2_prefetch_kernel, kCtas, kThreads, 0, stream,
                static_cast<const char*>(pattern.base), pattern.bytes, pattern.block_bytes,
                prefix_lines, blocks * prefix_lines);
  CNNRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cnnrt::cuda
