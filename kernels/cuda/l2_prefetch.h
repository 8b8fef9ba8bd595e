// L2 prefetch of weight streams: while the early layers of a small-batch forward run, the
// memory system is nearly idle (AlexNet at batch 1: ~40 µs of convolutions reading ~6 MB), and
// the weight-streaming layers after them (the GEMVs of fc6, fc7, fc8: 58.6 MB in int8, 117 MB in
// fp16) are bound by DRAM.  Bringing some of those bytes into L2 beforehand moves them off the
// critical DRAM stream.  Design note atop l2_prefetch.cu; the context's use (which budget, which
// streams read evict-first) in runtime/cuda/cuda_context.h.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace cnnrt::cuda {

// Which bytes of a stream to prefetch: in every block of `block_bytes`, the first `prefix_bytes`
// (both multiples of 128, prefix <= block).  An interleaved share rather than the stream's head,
// so every warp of the consumer, whatever contiguous range it owns, finds the same fraction of
// its bytes in L2 and none finishes long before the others.
struct L2PrefetchPattern {
  const void* base = nullptr;
  size_t bytes = 0;                 // the stream's length
  size_t block_bytes = 0;           // period of the pattern
  size_t prefix_bytes = 0;          // prefetched head of each period
  size_t prefetched_bytes() const;  // what the pattern touches (the last block clipped)
  bool operator==(const L2PrefetchPattern& o) const {
    return base == o.base && bytes == o.bytes && block_bytes == o.block_bytes &&
           prefix_bytes == o.prefix_bytes;
  }
};

// The pattern that prefetches about `budget_bytes` of a stream of `bytes`, to a line per period
// (nothing when that rounds to no line; the whole stream when the budget covers it).
L2PrefetchPattern l2_prefetch_pattern(const void* base, size_t bytes, size_t budget_bytes);

// A weight stream of the forward (KernelPlan::streamed_weights), in step order.
struct WeightStream {
  const void* base = nullptr;
  size_t bytes = 0;
};

// Which bytes of a forward's streams to prefetch: the streams after the first, whole, in step
// order while they fit the budget; the first of them that does not fit takes the rest as a
// share; what is still left goes to the first stream as a share.  Why the later ones first: the
// first stream is read right after the convolutions, so a prefetched share of it only saves
// what DRAM would have streamed a little later anyway, while a later stream (AlexNet int8's fc7:
// 16.8 MB) can sit in L2 whole when its layer starts, provided the streams read before it go
// evict-first (KernelArgs::stream_evict_first).  Measured: docs/PERFORMANCE.md run 47.
// Returns the patterns (prefetched_bytes() > 0 each; streams with nothing to prefetch left out)
// that spend at most about `budget_bytes` (to a line per period of each share); `stream_index`
// of each is its index in `streams`.
struct PlannedPrefetch {
  size_t stream_index = 0;
  L2PrefetchPattern pattern;
};
std::vector<PlannedPrefetch> l2_prefetch_plan(const std::vector<WeightStream>& streams,
                                              size_t budget_bytes);

// Issues `prefetch.global.L2` for every 128-byte line of the pattern on `stream`, from a small
// grid (it runs beside other kernels: it must not take their SMs).  Fire and forget: the kernel
// ends once the prefetches are issued, not when the lines have arrived.  No-op for an empty
// pattern; checks its launch.
void l2_prefetch(const L2PrefetchPattern& pattern, cudaStream_t stream);

}  // namespace cnnrt::cuda
