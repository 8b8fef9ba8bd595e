// Programmatic dependent launch, the kernel side (sm_90+; a no-op below).
//
// Why: at small batches a forward is ~15 short kernels, and each boundary costs the next grid's
// launch and ramp after the previous grid has finished.  A kernel launched by launch_kernel
// (launch.h) inside a ProgrammaticLaunchScope may be scheduled before the kernel ahead of it in
// the stream has completed; this is what keeps that safe.
//
// pdl_wait() comes before the kernel's first access to memory any kernel
// writes: griddepcontrol.wait blocks until the previous grid has completed and its writes are
// visible (a no-op when launched without the attribute), so neither a read of the previous
// layer's output nor a write over a buffer it still reads can race.  Before it a kernel may only
// touch constants — its weights: prefetch_rows_l2 below, or loads into registers.
//
// When the next grid is scheduled: by default when every block of this one has exited (the
// implicit trigger), so the next grid's launch and its pre-wait prefetch overlap this grid's
// completion and memory flush.  A kernel may call pdl_launch_dependents() to let it be scheduled
// as soon as every block of this grid has got there — earlier, but then the next grid's blocks
// take whichever SMs have room while this one still runs.  Measured (docs/PERFORMANCE.md run
// 46, AlexNet on an H100): early triggers in every kernel made fp16 at batch 4-16 up to 15 %
// slower (grids that do not fill the GPU landed on a few SMs); in the dense GEMVs alone they
// cost fp16 2 µs at batch 1; the implicit trigger was never slower than no PDL.  Only the 2:4
// mma GEMV triggers early: the next layer's blocks then stream their first weights while it
// drains (AlexNet with fc6 and fc7 2:4 at batch 1: 0.0785 -> 0.0758 ms).  It is issued after
// the wait, so at most one grid is ever scheduled ahead, and never before all of this grid is
// resident.
// A kernel that is launched with a plain <<< >>> serialises fully as before.
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
