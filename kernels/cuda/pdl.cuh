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
// A kernel that is launched without launch_kernel (a plain <<< >>>) serialises fully as before.
#pragma once

namespace cnnrt::cuda {

__device__ __forceinline__ void pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace cnnrt::cuda
