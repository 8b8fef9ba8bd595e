// The 2:4 sparse fp16 linear (kernels/cuda/linear_sparse24.h, entry "linear_fp16_sparse24").
//
// Host-only (run everywhere): the layout and the maps the kernel runs — FastDiv against integer
// division, the byte-permute pick of the two kept inputs, the geometry (input map chosen from
// the flatten, slab counts, bytes of AlexNet's fc6/fc7), the packed slabs decoded back to the
// pruned weight (every kept weight exactly once, nothing else), the slot → x map against the
// NHWC flatten rule, the split choice, and the entry's supports()/factory refusals.
// On a GPU: the kernel against the CPU reference sparse24::linear (and the dense reference on the
// same pruned weights) on odd shapes, plain vectors and NHWC flattens (C not a multiple of 8;
// H·W a multiple of 4 or not), batches 1, 3, 9, 17 (one pass, several passes), every split, with
// and without bias and ReLU; the entry through the registry, in a CUDA graph capture.
// Weights and inputs are non-zero fp16 values (weights pruned 2:4 by magnitude, so each group
// keeps two non-zeros); tolerance: the fp16 one of harness/tolerance.h; outputs start as NaN
// bytes and padded output features must come out exactly zero.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "fp16_test_util.h"
#include "graph/passes_sparsity.h"
#include "harness/tolerance.h"
#include "kernels/cpu/reference.h"
#include "kernels/cpu/sparse24.h"
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/linear_sparse24.h"
#include "runtime/cuda/cuda_registry.h"
#include "sparse24_linear_test_util.h"

namespace cnnrt {
namespace {

using cuda::Sparse24Geometry;
using cuda::Sparse24Input;
using test::DeviceMem;
using namespace sparse24_test;  // NOLINT: the shared cases and helpers

const char* const kEntry = "linear_fp16_sparse24";

// --- host-only ---------------------------------------------------------------------------------

TEST(LinearSparse24, FastDivMatchesIntegerDivision) {
  for (uint32_t d = 1; d <= 600; ++d) {
    const cuda::FastDiv div(d);
    for (uint32_t n = 0; n < 5000; ++n) ASSERT_EQ(div(n), n / d) << n << " / " << d;
  }
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> numerator(0, (1u << 31) - 1);
  for (uint32_t d :
       {3u, 7u, 36u, 169u, 256u, 4095u, 9216u, 65537u, 1u << 20, (1u << 30) - 1, 1u << 30}) {
    const cuda::FastDiv div(d);
    for (uint32_t n : {0u, d - 1, d, d + 1, (1u << 31) - 1}) ASSERT_EQ(div(n), n / d);
    for (int i = 0; i < 20000; ++i) {
      const uint32_t n = numerator(rng);
      ASSERT_EQ(div(n), n / d) << n << " / " << d;
    }
  }
}

TEST(LinearSparse24, PickSelectsTheTwoKeptInputs) {
  const uint16_t halves[4] = {0x1111, 0x2222, 0x3333, 0x4444};  // inputs 0..3 of a group
  const uint32_t lo = halves[0] | (uint32_t{halves[1]} << 16);
  const uint32_t hi = halves[2] | (uint32_t{halves[3]} << 16);
  for (uint32_t nibble = 0; nibble < 16; ++nibble) {
    const uint32_t pair = cuda::sparse24_pick(lo, hi, nibble);
    EXPECT_EQ(pair & 0xFFFFu, halves[nibble & 3u]) << nibble;  // low half: kept0's input
    EXPECT_EQ(pair >> 16, halves[nibble >> 2]) << nibble;
  }
}

TEST(LinearSparse24, GeometryPicksTheInputMapFromTheFlatten) {
  // AlexNet: fc6 reads the flatten of [256, 6, 6] (quads of pixels), fc7 a plain vector; no
  // padding, so 1.125 bytes per dense weight exactly.
  const Sparse24Geometry fc6 = cuda::sparse24_geometry(4096, 9216, Shape{256, 6, 6});
  EXPECT_EQ(fc6.input, Sparse24Input::QuadMajor);
  EXPECT_EQ(fc6.slabs, 18);
  EXPECT_EQ(fc6.last_width, 32);
  EXPECT_EQ(fc6.rows_pad * fc6.row_bytes, int64_t{4096} * 9216 * 9 / 8);
  const Sparse24Geometry fc7 = cuda::sparse24_geometry(4096, 4096, {});
  EXPECT_EQ(fc7.input, Sparse24Input::Vector);
  EXPECT_EQ(fc7.rows_pad * fc7.row_bytes, int64_t{4096} * 4096 * 9 / 8);
  EXPECT_EQ(cuda::sparse24_geometry(5, 148, Shape{37, 2, 2}).input, Sparse24Input::QuadMajor);
  EXPECT_EQ(cuda::sparse24_geometry(5, 52, Shape{13, 2, 2}).input, Sparse24Input::Gather);
  EXPECT_EQ(cuda::sparse24_geometry(5, 195, Shape{13, 3, 5}).input, Sparse24Input::Gather);
  EXPECT_EQ(cuda::sparse24_geometry(5, 7, Shape{7, 1, 1}).input, Sparse24Input::Vector);
  EXPECT_EQ(cuda::sparse24_geometry(5, 20, Shape{1, 4, 5}).input, Sparse24Input::Vector);
  for (const SparseCase& c : kCases) {
    const Sparse24Geometry g = cuda::sparse24_geometry(c.out, c.in, c.flattened);
    SCOPED_TRACE(describe(c));
    EXPECT_EQ(g.rows_pad, test::pad8(c.out));
    EXPECT_EQ(g.x_stride, test::pad8(c.in));
    EXPECT_EQ(g.groups, (c.in + 3) / 4);
    EXPECT_EQ(g.row_bytes % 16, 0);
    EXPECT_TRUE(g.last_width == 8 || g.last_width == 16 || g.last_width == 24 ||
                g.last_width == 32);
    const int slots = (g.slabs - 1) * cuda::kSparse24SlabGroups + 4 * g.last_width;
    EXPECT_GE(slots, g.groups);
    EXPECT_LT(slots - g.groups, 32);  // at most 31 padding groups per row
    EXPECT_EQ(g.row_bytes, int64_t{slots} / 4 * cuda::kSparse24ChunkBytes);
  }
  EXPECT_THROW(cuda::sparse24_geometry(4, 10, Shape{2, 2, 2}), Error);
  EXPECT_THROW(cuda::sparse24_geometry(0, 10, {}), Error);
}

// Decodes the packed bytes with the layout written in linear_sparse24.h (not the kernel's code)
// and rebuilds the dense weight: it must be the pruned weight rounded to fp16, every group of
// every row found exactly once, padding slots and rows zero with valid nibbles.
TEST(LinearSparse24, PackedSlabsHoldEveryKeptWeightAndNothingElse) {
  std::mt19937 rng(21);
  for (const SparseCase& c : kCases) {
    SCOPED_TRACE(describe(c));
    const std::vector<float> weight = pruned_weight(c.out, c.in, rng);
    const std::vector<float> bias = test::random_fp16_values(c.out, rng);
    const cuda::HostSparse24 packed =
        cuda::pack_sparse24(compress(weight, c.out, c.in), bias.data(), c.flattened);
    const Sparse24Geometry& g = packed.geometry;
    ASSERT_EQ(packed.weight.size(), static_cast<size_t>(g.rows_pad) * g.row_bytes);
    ASSERT_EQ(packed.bias.size(), static_cast<size_t>(g.rows_pad));
    for (int r = 0; r < g.rows_pad; ++r) EXPECT_EQ(packed.bias[r], r < c.out ? bias[r] : 0.0f);
    std::vector<float> dense(static_cast<size_t>(c.out) * c.in, 0.0f);
    size_t bad_padding = 0, bad_nibbles = 0, repeats = 0;
    for (int r = 0; r < g.rows_pad; ++r) {
      std::vector<int> seen(g.groups, 0);
      for (int slab = 0; slab < g.slabs; ++slab) {
        const int width = g.width(slab);
        const uint8_t* base =
            packed.weight.data() + r * g.row_bytes + slab * cuda::kSparse24SlabBytes;
        for (int lane = 0; lane < width; ++lane) {
          uint16_t nibbles = 0;
          std::memcpy(&nibbles, base + 16 * width + 2 * lane, 2);
          for (int j = 0; j < 4; ++j) {
            __half pair[2];
            std::memcpy(pair, base + 16 * lane + 4 * j, sizeof(pair));
            const unsigned nibble = (nibbles >> (4 * j)) & 0xFu;
            if ((nibble & 3u) == (nibble >> 2)) ++bad_nibbles;
            const int group = g.group_of_slot(Sparse24Geometry::slot(slab, width, lane, j));
            const float v0 = __half2float(pair[0]), v1 = __half2float(pair[1]);
            if (group < 0 || r >= c.out) {
              if (v0 != 0.0f || v1 != 0.0f) ++bad_padding;
              continue;
            }
            ++seen[group];
            const int f0 = 4 * group + static_cast<int>(nibble & 3u);
            const int f1 = 4 * group + static_cast<int>(nibble >> 2);
            for (auto [f, v] : {std::pair<int, float>{f0, v0}, {f1, v1}}) {
              if (f < c.in)
                dense[static_cast<size_t>(r) * c.in + f] += v;
              else if (v != 0.0f)
                ++bad_padding;
            }
          }
        }
      }
      if (r < c.out)
        for (int count : seen) repeats += count != 1;
    }
    EXPECT_EQ(bad_padding, 0u);
    EXPECT_EQ(bad_nibbles, 0u);
    EXPECT_EQ(repeats, 0u) << "groups not stored exactly once";
    size_t mismatches = 0;
    for (size_t i = 0; i < dense.size(); ++i)
      if (dense[i] != test::round_fp16(weight[i])) ++mismatches;
    EXPECT_EQ(mismatches, 0u);
  }
}

// Slot t of every row holds group_of_slot(t); x_index(t, i) must be where the CUDA flatten puts
// that group's feature i (linear_source_column's rule, written out here independently), the
// slots must cover each group once, and the kernel's direct forms (the Vector 4t, QuadMajor's
// base + i·C and its slot walk, gather_x) must agree with x_index.
TEST(LinearSparse24, InputMapFollowsTheNhwcFlattenRule) {
  for (const SparseCase& c : kCases) {
    SCOPED_TRACE(describe(c));
    const Sparse24Geometry g = cuda::sparse24_geometry(c.out, c.in, c.flattened);
    const int slots = (g.slabs - 1) * cuda::kSparse24SlabGroups + 4 * g.last_width;
    const int64_t channels = c.flattened.empty() ? 0 : c.flattened[0];
    const int64_t hw = c.flattened.empty() ? 0 : c.flattened[1] * c.flattened[2];
    std::set<int> groups;
    size_t wrong = 0;
    for (int t = 0; t < slots; ++t) {
      const int group = g.group_of_slot(t);
      if (group < 0) {
        EXPECT_GE(t, g.groups);
        for (int i = 0; i < 4; ++i) wrong += g.x_index(t, i) != -1;
        continue;
      }
      EXPECT_TRUE(groups.insert(group).second) << "group " << group << " at two slots";
      for (int i = 0; i < 4; ++i) {
        const int64_t f = 4 * group + i;
        int64_t want = f;
        if (channels > 0) want = f < c.in ? (f % hw) * channels + f / hw : -1;
        const int got = g.x_index(t, i);
        if (g.input == Sparse24Input::Vector && f >= c.in)
          wrong += got != f || got >= g.x_stride;  // x's zero padding
        else
          wrong += got != want;
        if (g.input == Sparse24Input::Vector) wrong += got != 4 * t + i;
        if (g.input == Sparse24Input::QuadMajor)
          wrong += got != g.quad_major_x(t, 0) + i * g.channels || got != g.quad_major_x(t, i);
        if (g.input == Sparse24Input::Gather) wrong += got != g.gather_x(t, i);
      }
    }
    EXPECT_EQ(wrong, 0u);
    EXPECT_EQ(static_cast<int>(groups.size()), g.groups);
    if (g.input != Sparse24Input::QuadMajor) continue;
    // The kernel's incremental walk over a lane's 4 slots (one division per slab).
    size_t walk_wrong = 0;
    for (int slab = 0; slab < g.slabs; ++slab) {
      const int width = g.width(slab);
      for (int lane = 0; lane < width; ++lane) {
        const int t0 = Sparse24Geometry::slot(slab, width, lane, 0);
        cuda::QuadMajorWalk walk(g, t0);
        for (int j = 0; j < 4; ++j) {
          if (j > 0) walk.advance(g, width);
          const int t = t0 + j * width;
          if (t < g.groups) walk_wrong += walk.x_base != g.x_index(t, 0);
        }
      }
    }
    EXPECT_EQ(walk_wrong, 0u);
  }
}

TEST(LinearSparse24, SplitChoice) {
  constexpr int kSms = 132;  // H100 / H200
  const Sparse24Geometry fc6 = cuda::sparse24_geometry(4096, 9216, Shape{256, 6, 6});
  const Sparse24Geometry fc7 = cuda::sparse24_geometry(4096, 4096, {});
  const Sparse24Geometry fc8 = cuda::sparse24_geometry(1000, 4096, {});
  // Many rows already fill the GPU at batch 1: no split.
  EXPECT_EQ(cuda::sparse24_choose_split(fc6, 1, kSms), 1);
  EXPECT_EQ(cuda::sparse24_choose_split(fc7, 1, kSms), 1);
  // 1000 rows: split until ≥ 24 warps per SM.
  EXPECT_EQ(cuda::sparse24_choose_split(fc8, 1, kSms), 4);
  // Never more slices than a row has slabs (1 slab: no split).
  EXPECT_EQ(cuda::sparse24_choose_split(cuda::sparse24_geometry(8, 37, {}), 1, kSms), 1);
  for (int64_t batch : {1, 3, 8, 9, 17, 1000}) {
    const int split = cuda::sparse24_choose_split(fc8, batch, kSms);
    EXPECT_TRUE(split == 1 || split == 2 || split == 4 || split == 8) << split;
  }
  EXPECT_THROW(cuda::sparse24_choose_split(fc8, 0, kSms), Error);
  EXPECT_THROW(cuda::sparse24_choose_split(fc8, 1, 0), Error);
}

// Offered only for a 2:4 weight, with the dense fp16 linears' epilogues; the factory names the
// layer when a weight marked 2:4 is not.
TEST(LinearSparse24, EntryRefusesDenseWeightsAndOtherEpilogues) {
  const KernelEntry* entry = sparse_registry().find(kEntry);
  ASSERT_NE(entry, nullptr);
  EXPECT_TRUE(entry->sparse_2_4);
  EXPECT_EQ(entry->precision, Precision::FP16);
  EXPECT_LT(entry->priority, 0);
  std::mt19937 rng(31);
  SparseGraph g = make_sparse_graph({16, 8, {}, true, false}, rng);
  Node node = g.linear();
  for (Activation activation : {Activation::None, Activation::Relu}) {
    node.activation = activation;
    EXPECT_TRUE(entry->supports(node));
  }
  for (Activation activation : {Activation::Relu6, Activation::Clip}) {
    node.activation = activation;
    EXPECT_FALSE(entry->supports(node)) << "accepted an epilogue it does not compute";
  }
  node.activation = Activation::None;
  node.weight_2_4 = false;
  EXPECT_FALSE(entry->supports(node)) << "offered for a weight that is not 2:4";

  Node dense = g.linear();
  dense.params[0].value.data.assign(dense.params[0].value.data.size(), 0.5f);  // 4 of 4 kept
  try {
    entry->create(KernelBuildContext{dense, g.graph});
    ADD_FAILURE() << "built from a weight that is not 2:4";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("fc"), std::string::npos) << error.what();
  }
}

// --- on the GPU --------------------------------------------------------------------------------

// gemv_sparse24_fp16 directly on every case, batches 1 (one sample), 3, 9 (two passes of 5 and
// 4) and 17 (three passes), every split.  The 17 input vectors are drawn once per case; batch b
// uses the first b, so one CPU reference serves all batches.
TEST(LinearSparse24, MatchesTheCpuReferenceOnOddShapesBatchesAndSplits) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  constexpr int kMaxBatch = 17;
  std::mt19937 rng(41);
  for (const SparseCase& c : kCases) {
    const CaseRun r = case_run(c, kMaxBatch, rng);
    const cuda::Sparse24Weights weights(
        cuda::pack_sparse24(r.compressed, c.bias ? r.bias.data() : nullptr, c.flattened));
    // Batch-1 passes stage x in shared memory on Hopper (every case here is small enough).
    if (cuda::device_traits().cc() == 90) EXPECT_TRUE(weights.stages_x()) << describe(c);
    DeviceMem input(gpu_input(r.x, kMaxBatch, c));
    for (int batch : {1, 3, 9, 17})
      for (int split : {0, 1, 2, 4, 8})
        for (bool stage : {true, false}) {
          if (!stage && batch > 1) continue;  // only batch-1 passes stage x
          SCOPED_TRACE(describe(c) + " batch " + std::to_string(batch) + " split " +
                       std::to_string(split) + (stage ? "" : " x unstaged"));
          expect_batch_output(c, r, batch, [&](void* output) {
            cuda::gemv_sparse24_fp16(weights, c.relu, input.get(), output, batch, nullptr, split,
                                     stage);
          });
        }
  }
}

// Through the registry on AlexNet's fc6 shape (the flatten of [256, 6, 6]) and a small flatten
// with C = 37: the plan, the bytes it reports (what the kernel streams), and the result against
// the dense reference on the same pruned weights (ref::linear); the first run inside a CUDA
// graph capture (no allocation, no sync in run()).
TEST(LinearSparse24, EntryMatchesTheDenseReferenceInsideAGraphCapture) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(51);
  for (const SparseCase& c :
       {SparseCase{9216, 4096, {256, 6, 6}, true, true}, SparseCase{37 * 2 * 2, 13, {37, 2, 2}}}) {
    SCOPED_TRACE(describe(c));
    const SparseGraph g = make_sparse_graph(c, rng);
    test::EntryRunner runner(sparse_registry(), kEntry, g.linear(), g.graph);
    const Sparse24Geometry geometry = cuda::sparse24_geometry(c.out, c.in, c.flattened);
    EXPECT_EQ(runner.kernel().weight_bytes(),
              static_cast<size_t>(geometry.rows_pad) * (geometry.row_bytes + sizeof(float)));
    const int batch = 3;
    const KernelPlan plan = runner.prepare(batch);
    EXPECT_EQ(plan.workspace_bytes, 0u);
    EXPECT_TRUE(plan.variant == 1 || plan.variant == 2 || plan.variant == 4 || plan.variant == 8);

    const std::vector<float> x =
        nonzero_fp16_values(static_cast<size_t>(batch) * c.in, rng, 0.05f, 1.0f);
    const std::vector<float> expected =
        test::linear_reference(x, batch, c.in, c.out, g.weight, g.bias, c.relu);

    DeviceMem input(gpu_input(x, batch, c));
    DeviceMem output(static_cast<size_t>(batch) * test::pad8(c.out) * 2);
    runner.run_captured(plan, {input.get()}, output.get(), batch);
    int64_t bad_padding = 0;
    expect_close(test::from_nhwc(output.halves(), batch, c.out, 1, 1, &bad_padding), expected);
    EXPECT_EQ(bad_padding, 0);
  }
}

TEST(LinearSparse24, RejectsInvalidSplitAndAliasing) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(61);
  const std::vector<float> weight = pruned_weight(16, 24, rng);
  const cuda::Sparse24Weights weights(cuda::pack_sparse24(compress(weight, 16, 24), nullptr, {}));
  DeviceMem input(static_cast<size_t>(24) * 2), output(static_cast<size_t>(16) * 2);
  for (int split : {-1, 3, 16})
    EXPECT_THROW(
        cuda::gemv_sparse24_fp16(weights, false, input.get(), output.get(), 1, nullptr, split),
        Error);
  EXPECT_THROW(cuda::gemv_sparse24_fp16(weights, false, input.get(), input.get(), 1, nullptr, 1),
               Error);
}

}  // namespace
}  // namespace cnnrt
