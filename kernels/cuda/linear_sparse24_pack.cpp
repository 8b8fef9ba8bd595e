// 2:4 sparse fp16 linears: the host side of the packed layouts — the geometry a weight gets and the
// repack of a compressed weight into the CUDA-core GEMV's slabs (described atop linear_sparse24.cu
// and in linear_sparse24.h) or into the mma.sp GEMV's lane-ordered fragments
// (linear_sparse24_mma.h).  Host code only, so the kernel files hold the kernels.
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "cnnrt/error.h"
#include "graph/host_parallel.h"
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/linear_sparse24.h"
#include "kernels/cuda/linear_sparse24_mma.h"

namespace cnnrt::cuda {

Sparse24Geometry sparse24_geometry(int out_features, int in_features,
                                   const Shape& flattened_source) {
  if (out_features < 1 || in_features < 1)
    throw Error("sparse24 linear: empty weight " + std::to_string(out_features) + " x " +
                std::to_string(in_features));
  Sparse24Geometry g;
  g.rows_pad = static_cast<int>(round_up8(out_features));
  g.in_features = in_features;
  g.x_stride = static_cast<int>(round_up8(in_features));
  g.groups = (in_features + 3) / 4;
  const int chunks = (g.groups + 31) / 32 * 32 / 4;  // a multiple of 8
  g.slabs = (chunks + kSparse24SlabLanes - 1) / kSparse24SlabLanes;
  g.last_width = chunks - (g.slabs - 1) * kSparse24SlabLanes;
  g.row_bytes = static_cast<int64_t>(chunks) * kSparse24ChunkBytes;
  if (flattened_source.size() == 3) {
    if (shape_elements(flattened_source) != in_features)
      throw Error("sparse24 linear: in_features " + std::to_string(in_features) +
                  " does not match the flattened shape " + shape_to_string(flattened_source));
    g.channels = static_cast<int>(flattened_source[0]);
    g.hw = static_cast<int>(flattened_source[1] * flattened_source[2]);
    // C == 1 or H·W == 1: (h, w, c) order is PyTorch's order (linear_source_column's identity).
    if (g.channels > 1 && g.hw > 1) {
      // QuadMajor's slot walk wraps channels at most once per 32 slots: C ≥ 32 (else Gather).
      g.input = g.hw % 4 == 0 && g.channels >= kSparse24SlabLanes ? Sparse24Input::QuadMajor
                                                                  : Sparse24Input::Gather;
      g.div =
          FastDiv(static_cast<uint32_t>(g.input == Sparse24Input::QuadMajor ? g.channels : g.hw));
    }
  }
  return g;
}

namespace {

// Both layouts pack a linear's compressed weight: one tap, arrays of the sizes its shape says.
void check_linear(const sparse24::Compressed& weight) {
  const sparse24::WeightShape& s = weight.shape;
  if (s.taps != 1) throw Error("sparse24 linear: a linear weight has one tap");
  if (weight.values.size() != static_cast<size_t>(s.rows) * s.groups_per_row() * 2 ||
      weight.meta.size() != static_cast<size_t>(s.rows) * weight.meta_words_per_row())
    throw Error("sparse24 linear: compressed weight does not match its shape");
}

}  // namespace

HostSparse24 pack_sparse24(const sparse24::Compressed& weight, const float* bias,
                           const Shape& flattened_source) {
  const sparse24::WeightShape& s = weight.shape;
  check_linear(weight);
  const size_t groups = static_cast<size_t>(s.groups_per_row());
  const size_t words = static_cast<size_t>(weight.meta_words_per_row());
  HostSparse24 host;
  Sparse24Geometry& g = host.geometry;
  g = sparse24_geometry(s.rows, s.channels, flattened_source);
  host.weight.assign(static_cast<size_t>(g.rows_pad) * g.row_bytes, 0);
  host.bias.assign(g.rows_pad, 0.0f);
  if (bias != nullptr) std::copy(bias, bias + s.rows, host.bias.begin());
  if (plan_only()) return host;  // a described target: sizes only

  const uint16_t zero_pair = 0x4u;  // indices 0 and 1: a valid nibble for the zero padding
  parallel_for(static_cast<size_t>(g.rows_pad), 16, [&](size_t begin, size_t end) {
    for (size_t row = begin; row < end; ++row) {
      uint8_t* row_bytes = host.weight.data() + row * g.row_bytes;
      const bool real = row < static_cast<size_t>(s.rows);
      for (int slab = 0; slab < g.slabs; ++slab) {
        const int width = g.width(slab);
        uint8_t* values = row_bytes + static_cast<int64_t>(slab) * kSparse24SlabBytes;
        uint8_t* meta = values + 16 * width;
        for (int lane = 0; lane < width; ++lane) {
          uint16_t nibbles = 0;
          for (int j = 0; j < 4; ++j) {
            const int group = g.group_of_slot(Sparse24Geometry::slot(slab, width, lane, j));
            __half pair[2] = {__float2half_rn(0.0f), __float2half_rn(0.0f)};
            uint16_t nibble = zero_pair;
            if (real && group >= 0) {
              const size_t at = row * groups + static_cast<size_t>(group);
              pair[0] = __float2half_rn(weight.values[2 * at]);
              pair[1] = __float2half_rn(weight.values[2 * at + 1]);
              nibble = (weight.meta[row * words + group / 4] >> (4 * (group % 4))) & 0xFu;
            }
            std::memcpy(values + 16 * lane + 4 * j, pair, sizeof(pair));
            nibbles = static_cast<uint16_t>(nibbles | (nibble << (4 * j)));
          }
          std::memcpy(meta + 2 * lane, &nibbles, sizeof(nibbles));
        }
      }
    }
  });
  return host;
}

// --- the mma.sp GEMV's layout ------------------------------------------------------------------

Sparse24MmaGeometry sparse24_mma_geometry(int out_features, int in_features,
                                          const Shape& flattened_source) {
  Sparse24MmaGeometry g;
  g.map = sparse24_geometry(out_features, in_features, flattened_source);
  g.row_tiles = (out_features + kSpMmaTileRows - 1) / kSpMmaTileRows;
  g.chunks = (g.map.groups + kSpMmaChunkGroups - 1) / kSpMmaChunkGroups;
  g.tile_bytes = int64_t(g.chunks) * kSpMmaChunkBytes;
  g.x_row = g.chunks * kSpMmaChunkGroups * 4 + 8;
  return g;
}

HostSparse24Mma pack_sparse24_mma(const sparse24::Compressed& weight, const float* bias,
                                  const Shape& flattened_source) {
  const sparse24::WeightShape& s = weight.shape;
  check_linear(weight);
  const size_t groups = static_cast<size_t>(s.groups_per_row());
  const size_t words = static_cast<size_t>(weight.meta_words_per_row());
  HostSparse24Mma host;
  Sparse24MmaGeometry& g = host.geometry;
  g = sparse24_mma_geometry(s.rows, s.channels, flattened_source);
  host.weight.assign(static_cast<size_t>(g.row_tiles) * g.tile_bytes, 0);
  host.bias.assign(g.map.rows_pad, 0.0f);
  if (bias != nullptr) std::copy(bias, bias + s.rows, host.bias.begin());
  if (plan_only()) return host;  // a described target: sizes only

  // The PyTorch group a (row, slot) holds, or -1 for padding (rows past out, slots past groups).
  auto group_at = [&](int row, int slot) { return row < s.rows ? g.map.group_of_slot(slot) : -1; };
  auto kept_pair = [&](int row, int slot) {  // fp16 bits of the two kept values, kept0 low
    const int group = group_at(row, slot);
    __half pair[2] = {__float2half_rn(0.0f), __float2half_rn(0.0f)};
    if (group >= 0) {
      const size_t at = static_cast<size_t>(row) * groups + static_cast<size_t>(group);
      pair[0] = __float2half_rn(weight.values[2 * at]);
      pair[1] = __float2half_rn(weight.values[2 * at + 1]);
    }
    uint32_t bits = 0;
    std::memcpy(&bits, pair, sizeof(bits));
    return bits;
  };
  auto nibbles4 = [&](int row, int slot0) {  // slots slot0..+3 at bits 4j; padding {0, 1}
    uint32_t v = 0;
    for (int j = 0; j < 4; ++j) {
      const int group = group_at(row, slot0 + j);
      const uint32_t nibble =
          group < 0
              ? 0x4u
              : (weight.meta[static_cast<size_t>(row) * words + group / 4] >> (4 * (group % 4))) &
                    0xFu;
      v |= nibble << (4 * j);
    }
    return v;
  };
  parallel_for(static_cast<size_t>(g.row_tiles), 4, [&](size_t begin, size_t end) {
    for (size_t tile = begin; tile < end; ++tile) {
      uint8_t* tile_bytes = host.weight.data() + tile * g.tile_bytes;
      const int row0 = static_cast<int>(tile) * kSpMmaTileRows;
      for (int c = 0; c < g.chunks; ++c)
        for (int lane = 0; lane < 32; ++lane) {
          const int gr = lane >> 2, t = lane & 3;
          for (int step = 0; step < kSpMmaChunkSteps; ++step) {
            const int slot0 = c * kSpMmaChunkGroups + step * kSpMmaStepGroups;
            const uint32_t a[4] = {
                kept_pair(row0 + gr, slot0 + t), kept_pair(row0 + gr + 8, slot0 + t),
                kept_pair(row0 + gr, slot0 + 4 + t), kept_pair(row0 + gr + 8, slot0 + 4 + t)};
            std::memcpy(tile_bytes + Sparse24MmaGeometry::step_offset(c, step, lane), a, sizeof(a));
          }
          uint32_t meta[4];
          for (int w = 0; w < 4; ++w) {  // the word step 4 (t / 2) + w needs from role t % 2
            const int step = 4 * (t / 2) + w;
            const int slot0 = c * kSpMmaChunkGroups + step * kSpMmaStepGroups + 4 * (t % 2);
            meta[w] = nibbles4(row0 + gr, slot0) | nibbles4(row0 + gr + 8, slot0) << 16;
          }
          std::memcpy(tile_bytes + Sparse24MmaGeometry::meta_offset(c, lane), meta, sizeof(meta));
        }
    }
  });
  return host;
}

}  // namespace cnnrt::cuda
