// Programmatic dependent launch, the kernel side (sm_90+; a no-op below).
//
// Why: at batch 1 a forward is ~15 short kernels and each boundary costs the next grid's launch
// and ramp after the previous grid's last block has gone (docs/PERFORMANCE.md run 46).  A kernel
// launched by launch_kernel (launch.h) on a device that allows it may be scheduled while the
// kernel before it in the stream is still running; this is what keeps that safe.
//
// pdl_enter() is the first statement of every kernel launch_kernel may launch:
//   griddepcontrol.wait              — block until the previous grid has completed and its memory
//                                      is visible (a no-op when launched without the attribute);
//                                      nothing of the kernel touches global memory before it, so
//                                      neither a read of the previous layer's output nor a write
//                                      over a buffer it still reads can race;
//   griddepcontrol.launch_dependents — let the next grid be scheduled once every block of this
//                                      one has got here.  The next grid's blocks then wait in
//                                      their own pdl_enter(); only one grid ahead is ever resident
//                                      early, and never before all of this grid is resident, so a
//                                      grid never waits for slots held by a later one.
// A kernel may split the two (pdl_wait, then pdl_launch_dependents) to do constant-only work
// first: prefetch_rows_l2 below.  A kernel that is launched without launch_kernel (a plain
// <<< >>>) serialises fully as before.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cnnrt::cuda {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_enter() {
  pdl_wait();
  pdl_launch_dependents();
}

// One 128-byte line of a constant (see below) into L2.
__device__ __forceinline__ void prefetch_l2(const void* address) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(address));
}

// Before pdl_wait(), a kernel may touch what no kernel writes — its weights — and nothing else.
// This asks L2 for `rows` rows (`pitch` bytes apart) of bytes [begin, end) of such a constant
// matrix, one prefetch.global.L2 per 128-byte line: issued while the previous kernel still runs,
// the weight's DRAM latency is off this kernel's critical path.  `parts` CTAs that read the same
// slice (a conv's M tiles) share the lines — this one, `part`, takes its share — so the requests
// are not repeated once per CTA.
__device__ __forceinline__ void prefetch_rows_l2(const void* base, size_t pitch, int rows,
                                                 size_t begin, size_t end, unsigned part,
                                                 unsigned parts) {
  if (rows <= 0 || end <= begin) return;
  const size_t first = begin & ~size_t(127), lines = (end - first + 127) / 128;
  const size_t total = lines * size_t(rows);
  const size_t from = total * part / parts, to = total * (part + 1) / parts;
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  const unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  for (size_t i = from + tid; i < to; i += threads) {
    const char* line =
        static_cast<const char*>(base) + (i / lines) * pitch + first + (i % lines) * 128;
    prefetch_l2(line);
  }
}

}  // namespace cnnrt::cuda
