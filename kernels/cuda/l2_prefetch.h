// L2 prefetch of a weight stream: while the early layers of a small-batch forward run, the
// memory system is nearly idle (AlexNet at batch 1: ~60 µs of convolutions reading ~6 MB), and
// the first weight-streaming layer after them (fc6's GEMV: 75.5 MB, ~30 µs at 2.5 TB/s) is bound
// by DRAM.  Bringing part of that stream into L2 beforehand moves those bytes off the critical
// DRAM stream.  Design note atop l2_prefetch.cu; the context's use in runtime/cuda/cuda_context.h.
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
};

// The pattern that prefetches about `budget_bytes` of a stream of `bytes`, to a line per period
// (nothing when that rounds to no line; the whole stream when the budget covers it).
L2PrefetchPattern l2_prefetch_pattern(const void* base, size_t bytes, size_t budget_bytes);

// A weight stream of the forward (KernelPlan::streamed_weights), in step order.
struct WeightStream {
  const void* base = nullptr;
  size_t bytes = 0;
};

// Which streams the budget goes to.  kFirstShare: an interleaved share of the first stream only
// (docs/PERFORMANCE.md run 38).  kLaterFirst: the streams after the first, whole, in step order
// while they fit; the first of them that does not fit takes the rest as a share; what is still
// left goes to the first stream as a share.  Why the later ones: the first stream is read right
// after the prefetch, so its prefetched share saves only what DRAM would have streamed anyway,
// while a later stream (AlexNet int8's fc7 + fc8: 20.9 MB) can be in L2 whole when its layer
// starts, provided the streams before it are read evict-first (KernelArgs::stream_evict_first).
enum class L2PrefetchOrder { kFirstShare, kLaterFirst };

// The patterns (prefetched_bytes() > 0 each, streams with nothing to prefetch left out) that
// spend at most about `budget_bytes` (to a line per period of each share) on `streams` in
// `order`.  `stream_index` of each is its index in `streams`.
struct PlannedPrefetch {
  size_t stream_index = 0;
  L2PrefetchPattern pattern;
};
std::vector<PlannedPrefetch> l2_prefetch_plan(const std::vector<WeightStream>& streams,
                                              size_t budget_bytes, L2PrefetchOrder order);

// Issues `prefetch.global.L2` for every 128-byte line of the pattern on `stream`, from a small
// grid (it runs beside other kernels: it must not take their SMs).  Fire and forget: the kernel
// ends once the prefetches are issued, not when the lines have arrived.  No-op for an empty
// pattern; checks its launch.
void l2_prefetch(const L2PrefetchPattern& pattern, cudaStream_t stream);

}  // namespace cnnrt::cuda
