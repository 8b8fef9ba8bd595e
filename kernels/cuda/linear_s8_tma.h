// Hopper (sm_90a) int8 linear layer on the TMA mainloop, split over K (linear_int8_tma) —
// interface.  The kernel and its design note: kernels/cuda/conv/tma_linear_s8_kernel.cuh; the
// host side: linear_s8_tma.cu.
//
// The layer is the int8 family's S8Conv of a linear (in_h = in_w = out_h = out_w = 1, kernel
// 1x1, weight rows of k_pad bytes as linear_int8 packs them, K = in_stride): the same weights,
// biases and multipliers as every int8 linear entry, and the same arithmetic (bit for bit the
// integer reference): raw int32 sums per K slice, then finish_s8_split.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "kernels/cuda/conv/conv_s8.h"

namespace cnnrt::cuda {

class LinearS8TmaImpl;

struct LinearS8TmaPlan {
  int batch = 0;
  int tile = 0, bn = 0;             // batch tile: its index and rows (64, 128, 256)
  int splits = 0, k_per_split = 0;  // K slices and k-tiles (128 bytes) per slice
  int m_tiles = 0, n_tiles = 0;     // out-feature tiles of 128, batch tiles of bn
  int units = 0, ctas = 0;          // m_tiles x n_tiles x splits; persistent CTAs
  size_t workspace_bytes = 0;       // the slices' int32 sums
  double estimated_us = 0;          // the cost model's time (linear_s8_tma.cu's design note)
  std::string name;                 // e.g. "tma_s8_linear_128x256 split-k 4"
};

// The input's tiled map at one batch ([batch][in_stride] int8 rows, boxes of a batch tile's rows).
struct LinearS8TmaInput {
  CUtensorMap map;
  const void* x = nullptr;
  int batch = 0, tile = 0;
};

// A linear's S8Conv this kernel serves: 1x1 everything, groups 1, in_stride % 16 == 0, k_pad a
// multiple of 64 >= in_stride, out_stride pad16 (int8 out) or % 8 == 0 (fp32 out).
bool linear_s8_tma_serves(const S8Conv& linear);

class LinearS8Tma {
 public:
  // Compute capability 9.0 with the sm_90a image (wgmma_s8_device_supported()).
  static bool device_supported();

  // `linear`'s weight, bias and multipliers are on the device and outlive this.  Encodes the
  // weight map and checks the kernel images' register count.  Throws cnnrt::Error.
  explicit LinearS8Tma(const S8Conv& linear);
  ~LinearS8Tma();
  LinearS8Tma(const LinearS8Tma&) = delete;
  LinearS8Tma& operator=(const LinearS8Tma&) = delete;

  // Batch tile, stages and split for `batch` on this device's SMs: batch tile `tile` (0 .. 2:
  // 64, 128, 256 rows), or the cost model's pick (tile < 0).  Throws on a tile out of range.
  LinearS8TmaPlan plan(int batch, int tile = -1) const;
  static int tile_count();
  // The input map for a plan's batch and batch tile.
  LinearS8TmaInput encode_input(const void* x, int batch, int tile) const;
  // x: [batch][in_stride] int8; y: [batch][out_stride] int8 or fp32; workspace: the plan's
  // workspace_bytes (16-byte aligned).
  void forward(const LinearS8TmaPlan& plan, const LinearS8TmaInput& input, void* y, void* workspace,
               cudaStream_t stream) const;

 private:
  std::unique_ptr<LinearS8TmaImpl> impl_;
};

}  // namespace cnnrt::cuda
