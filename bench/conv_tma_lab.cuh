// conv_tma_lab.cuh: the lab's view of the library kernel.  The kernel and its PTX wrappers moved
// to kernels/cuda/conv/tma_kernel.cuh (conv_fp16_tma, issue 9 step 2); the lab times and checks
// that one kernel, so the library and the lab cannot drift apart.  Geom is the lab's problem
// description (one pad for all four sides); run_variant() turns it into TmaConvParams.
#pragma once

#include <cuda.h>
#include <cuda_fp16.h>

#include <cstdint>

#ifdef LAB_DEBUG
#define CNNRT_WGMMA_WAIT_LIMIT (1ull << 30)
#endif
#include "kernels/cuda/conv/tma_kernel.cuh"
#include "kernels/cuda/conv/tma_wa_kernel.cuh"
#include "kernels/cuda/conv/tma_window_kernel.cuh"

struct Geom {
  int n, h, w, c, oc, kh, kw, stride, pad, oh, ow;
  int m, k, k_tiles, c_blocks;
  int m_tiles, n_tiles, units;  // units: (cluster m-block group, n block) pairs
};
