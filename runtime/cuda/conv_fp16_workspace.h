// Where an entry built on ConvFp16 (the mma.sync conv, also the small-batch fallback of the
// wgmma and TMA entries) puts its workspace.  Most variants want scratch for their own step
// (KernelPlan::workspace_bytes); split-K reduced in the kernel wants a buffer that is zero when
// it starts and that it leaves zero, which only the context's kept, zeroed scratch
// (KernelPlan::zeroed_bytes) gives.  prepare() and run() of each entry use the pair below, so the
// rule lives in one place.
#pragma once

#include "kernels/cuda/conv/igemm.h"
#include "runtime/kernel.h"

namespace cnnrt::cuda {

// Adds the variant's workspace to `plan` on the side it needs (after what the entry itself
// asked for on that side; conv_fp16_workspace() hands the inner conv the part after `own`).
inline void add_conv_fp16_workspace(const ConvFp16Plan& p, KernelPlan* plan) {
  (p.workspace_zeroed ? plan->zeroed_bytes : plan->workspace_bytes) += p.workspace_bytes;
}

// The workspace pointer ConvFp16::forward gets: the zeroed scratch when the plan asked for one
// (an entry's own use of KernelPlan::zeroed_bytes would have to come first; none has one), else
// the step's workspace past the entry's own `own` bytes.
inline void* conv_fp16_workspace(const KernelArgs& args, size_t own = 0) {
  if (args.zeroed != nullptr) return args.zeroed;
  return args.workspace == nullptr ? nullptr : static_cast<char*>(args.workspace) + own;
}

}  // namespace cnnrt::cuda
