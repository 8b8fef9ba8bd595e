// The mma.sp 2:4 sparse fp16 linear (kernels/cuda/linear_sparse24_mma.h, entry
// "linear_fp16_sparse24_mma").
//
// Host-only (run everywhere): the geometry (row tiles, chunks, bytes of AlexNet's fc6 / fc7);
// the packed fragments decoded by the PTX ISA's rules for mma.sp m16n8k32 f16 (A registers 0-3 =
// row g / g + 8 / g / g + 8, compressed columns 2t, 2t + 1 / 2t, 2t + 1 / 8 + 2t, +1 / 8 + 2t, +1;
// metadata from lanes t = 0, 1 of each quad, bits 0-15 row g, 16-31 row g + 8, groups 4 (t % 2)
// .. +3; steps 4-7 taken from lanes t + 2 as the kernel's shuffle does) back into the dense
// weight, which must be the pruned weight rounded to fp16, padding zero with valid nibbles; the
// split choice; the entry's refusals.
// On a GPU: the kernel against the CPU reference on the shared odd shapes (plain vectors, NHWC
// flattens with C % 8 == 0 — the transposing stage — and not, Gather), batches 1, 3, 8, 9, 17
// (one pass, passes of up to 8), every split; the entry through the registry in a CUDA graph
// capture on fc6's shape.  Outputs start as NaN bytes; padded output features must be zero.
#include <cstring>
#include <random>

#include "fp16_test_util.h"
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/linear_sparse24_mma.h"
#include "runtime/cuda/cuda_registry.h"
#include "sparse24_linear_test_util.h"

namespace cnnrt {
namespace {

using cuda::Sparse24MmaGeometry;
using test::DeviceMem;
using namespace sparse24_test;  // NOLINT: the shared cases and helpers

const char* const kEntry = "linear_fp16_sparse24_mma";

// --- host-only ---------------------------------------------------------------------------------

TEST(LinearSparse24Mma, GeometryOfAlexNetsLinears) {
  const Sparse24MmaGeometry fc6 = cuda::sparse24_mma_geometry(4096, 9216, Shape{256, 6, 6});
  EXPECT_EQ(fc6.row_tiles, 256);
  EXPECT_EQ(fc6.chunks, 36);  // 2304 groups, 64 a chunk
  EXPECT_EQ(fc6.x_row, 9216 + 8);
  // 1.125 bytes per dense weight: the kept halves and a nibble per group, no padding.
  EXPECT_EQ(fc6.tile_bytes * fc6.row_tiles, int64_t(4096) * 9216 * 9 / 8);
  const Sparse24MmaGeometry fc8 = cuda::sparse24_mma_geometry(1000, 4096, {});
  EXPECT_EQ(fc8.row_tiles, 63);  // the last tile's 8 rows past 1000 are zero
  EXPECT_EQ(fc8.map.rows_pad, 1000);
  const Sparse24MmaGeometry small = cuda::sparse24_mma_geometry(13, 37, {});
  EXPECT_EQ(small.chunks, 1);  // 10 groups padded to 64
  EXPECT_EQ(small.tile_bytes, cuda::kSpMmaChunkBytes);
}

// Decodes every packed lane by the PTX fragment rules (header comment), independently of the
// kernel's code, and rebuilds the dense weight in PyTorch's feature order.
TEST(LinearSparse24Mma, PackedFragmentsHoldEveryKeptWeightAndNothingElse) {
  std::mt19937 rng(22);
  for (const SparseCase& c : kCases) {
    SCOPED_TRACE(describe(c));
    const std::vector<float> weight = pruned_weight(c.out, c.in, rng);
    const std::vector<float> bias = test::random_fp16_values(c.out, rng);
    const cuda::HostSparse24Mma packed =
        cuda::pack_sparse24_mma(compress(weight, c.out, c.in), bias.data(), c.flattened);
    const Sparse24MmaGeometry& g = packed.geometry;
    ASSERT_EQ(packed.weight.size(), size_t(g.row_tiles) * g.tile_bytes);
    ASSERT_EQ(packed.bias.size(), size_t(g.map.rows_pad));
    for (int r = 0; r < g.map.rows_pad; ++r) EXPECT_EQ(packed.bias[r], r < c.out ? bias[r] : 0.0f);
    std::vector<float> dense(size_t(c.out) * c.in, 0.0f);
    size_t bad_padding = 0, bad_nibbles = 0;
    std::vector<int> seen(size_t(g.row_tiles) * 16 * g.chunks * cuda::kSpMmaChunkGroups, 0);
    for (int tile = 0; tile < g.row_tiles; ++tile)
      for (int chunk = 0; chunk < g.chunks; ++chunk) {
        const uint8_t* base = packed.weight.data() + tile * g.tile_bytes;
        auto meta_word = [&](int lane, int w) {
          uint32_t v = 0;
          std::memcpy(&v, base + Sparse24MmaGeometry::meta_offset(chunk, lane) + 4 * w, 4);
          return v;
        };
        for (int step = 0; step < cuda::kSpMmaChunkSteps; ++step)
          for (int lane = 0; lane < 32; ++lane) {
            const int gr = lane / 4, t = lane % 4;
            __half a[8];
            std::memcpy(a, base + Sparse24MmaGeometry::step_offset(chunk, step, lane), 16);
            for (int reg = 0; reg < 4; ++reg)
              for (int k = 0; k < 2; ++k) {
                const int row = 16 * tile + gr + (reg % 2 == 1 ? 8 : 0);
                const int column = (reg >= 2 ? 8 : 0) + 2 * t + k;  // compressed, of 16
                const int group = column / 2, kept = column % 2;    // group of the step's 8
                // The metadata lane of this row: role group / 4 of quad gr; steps 4-7 live in
                // lanes 2 and 3 (word step - 4), steps 0-3 in lanes 0 and 1 (word step).
                const int meta_lane = 4 * gr + group / 4 + (step >= 4 ? 2 : 0);
                const uint32_t word = meta_word(meta_lane, step % 4);
                const uint32_t nibble =
                    (word >> ((row % 16 >= 8 ? 16 : 0) + 4 * (group % 4))) & 0xFu;
                if ((nibble & 3u) == (nibble >> 2) || (nibble & 3u) > (nibble >> 2)) ++bad_nibbles;
                const int index = kept == 0 ? int(nibble & 3u) : int(nibble >> 2);
                const int slot = chunk * cuda::kSpMmaChunkGroups + step * 8 + group;
                const float v = __half2float(a[2 * reg + k]);
                const int pytorch_group = row < c.out ? g.map.group_of_slot(slot) : -1;
                if (pytorch_group < 0) {
                  bad_padding += v != 0.0f;
                  continue;
                }
                if (kept == 0) ++seen[(size_t(row) * g.chunks * 64) + slot];
                const int f = 4 * pytorch_group + index;
                if (f < c.in)
                  dense[size_t(row) * c.in + f] += v;
                else
                  bad_padding += v != 0.0f;
              }
          }
      }
    EXPECT_EQ(bad_padding, 0u);
    EXPECT_EQ(bad_nibbles, 0u);
    size_t repeats = 0;
    for (int row = 0; row < c.out; ++row)
      for (int slot = 0; slot < g.map.groups; ++slot)
        repeats += seen[size_t(row) * g.chunks * 64 + slot] != 1;
    EXPECT_EQ(repeats, 0u) << "groups not stored exactly once";
    size_t mismatches = 0;
    for (size_t i = 0; i < dense.size(); ++i) mismatches += dense[i] != test::round_fp16(weight[i]);
    EXPECT_EQ(mismatches, 0u);
  }
}

TEST(LinearSparse24Mma, SplitChoice) {
  constexpr int kSms = 132;  // H100 / H200
  const Sparse24MmaGeometry fc6 = cuda::sparse24_mma_geometry(4096, 9216, Shape{256, 6, 6});
  const Sparse24MmaGeometry fc8 = cuda::sparse24_mma_geometry(1000, 4096, {});
  // 256 row tiles: split 8 for ≥ 16 warps per SM (2048 of 2112 wanted is the largest split).
  EXPECT_EQ(cuda::sparse24_mma_choose_split(fc6, kSms), 8);
  EXPECT_EQ(cuda::sparse24_mma_choose_split(fc8, kSms), 8);
  EXPECT_EQ(cuda::sparse24_mma_choose_split(fc6, 8), 1);  // a small GPU: rows fill it
  // Never more slices than chunks: one chunk, no split.
  EXPECT_EQ(cuda::sparse24_mma_choose_split(cuda::sparse24_mma_geometry(8, 37, {}), kSms), 1);
  EXPECT_THROW(cuda::sparse24_mma_choose_split(fc8, 0), Error);
}

TEST(LinearSparse24Mma, EntryIsRegisteredBeforeTheCudaCoreGemv) {
  const KernelEntry* entry = sparse_registry().find(kEntry);
  ASSERT_NE(entry, nullptr);
  EXPECT_TRUE(entry->sparse_2_4);
  EXPECT_EQ(entry->precision, Precision::FP16);
  EXPECT_EQ(entry->priority, sparse_registry().find("linear_fp16_sparse24")->priority);
  std::mt19937 rng(32);
  SparseGraph g = make_sparse_graph({16, 8, {}, true, false}, rng);
  Node node = g.linear();
  node.activation = Activation::Relu6;  // refused before the device is asked
  EXPECT_FALSE(entry->supports(node)) << "accepted an epilogue it does not compute";
}

// --- on the GPU --------------------------------------------------------------------------------

// Offered on an sm_80+ device where one staged sample fits; refused for an input whose staged
// sample cannot fit a block's shared memory (the CUDA-core GEMV serves that one).
TEST(LinearSparse24Mma, EntryServesWhereTheStagedInputFits) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const KernelEntry* entry = sparse_registry().find(kEntry);
  ASSERT_NE(entry, nullptr);
  std::mt19937 rng(33);
  const Node node = make_sparse_graph({16, 8, {}, true, true}, rng).linear();
  EXPECT_EQ(entry->supports(node), cuda::device_traits().cc() >= 80);
  const int too_wide = int(cuda::device_traits().smem_optin / 2 + 1024);  // halves > the room
  EXPECT_EQ(cuda::sparse24_mma_max_pass(too_wide), 0);
  if (cuda::device_traits().cc() >= 80) EXPECT_EQ(cuda::sparse24_mma_max_pass(9216), 8);
}

TEST(LinearSparse24Mma, MatchesTheCpuReferenceOnOddShapesBatchesAndSplits) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  if (cuda::device_traits().cc() < 80) GTEST_SKIP() << "mma.sp needs sm_80+";
  constexpr int kMaxBatch = 17;
  std::mt19937 rng(42);
  for (const SparseCase& c : kCases) {
    const CaseRun r = case_run(c, kMaxBatch, rng);
    const cuda::Sparse24MmaWeights weights(
        cuda::pack_sparse24_mma(r.compressed, c.bias ? r.bias.data() : nullptr, c.flattened));
    EXPECT_EQ(weights.max_pass(), cuda::kSpMmaMaxPass) << describe(c);  // all small enough
    DeviceMem input(gpu_input(r.x, kMaxBatch, c));
    for (int batch : {1, 3, 8, 9, 17})
      for (int split : {0, 1, 2, 4, 8}) {
        SCOPED_TRACE(describe(c) + " batch " + std::to_string(batch) + " split " +
                     std::to_string(split));
        expect_batch_output(c, r, batch, [&](void* output) {
          // Splits 4 and 8 read the weights evict-first (KernelArgs::stream_evict_first).
          cuda::gemv_sparse24_mma_fp16(weights, c.relu, input.get(), output, batch, nullptr, split,
                                       split >= 4);
        });
      }
  }
}

// Through the registry on AlexNet's fc6 shape: the plan (the split, the streamed weights the
// context may prefetch), the bytes it reports, the result against the dense reference on the
// same pruned weights, the first run inside a CUDA graph capture.
TEST(LinearSparse24Mma, EntryMatchesTheDenseReferenceInsideAGraphCapture) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  if (cuda::device_traits().cc() < 80) GTEST_SKIP() << "mma.sp needs sm_80+";
  std::mt19937 rng(52);
  const SparseCase c{9216, 4096, {256, 6, 6}, true, true};
  const SparseGraph g = make_sparse_graph(c, rng);
  test::EntryRunner runner(sparse_registry(), kEntry, g.linear(), g.graph);
  const Sparse24MmaGeometry geometry = cuda::sparse24_mma_geometry(c.out, c.in, c.flattened);
  EXPECT_EQ(runner.kernel().weight_bytes(),
            size_t(geometry.row_tiles) * geometry.tile_bytes + geometry.map.rows_pad * 4);
  for (int batch : {1, 3}) {
    const KernelPlan plan = runner.prepare(batch);
    EXPECT_EQ(plan.workspace_bytes, 0u);
    EXPECT_TRUE(plan.variant == 1 || plan.variant == 2 || plan.variant == 4 || plan.variant == 8);
    EXPECT_NE(plan.streamed_weights, nullptr);
    EXPECT_EQ(plan.streamed_weight_bytes, size_t(geometry.row_tiles) * geometry.tile_bytes);
    const std::vector<float> x = nonzero_fp16_values(size_t(batch) * c.in, rng, 0.05f, 1.0f);
    const std::vector<float> expected =
        test::linear_reference(x, batch, c.in, c.out, g.weight, g.bias, c.relu);
    DeviceMem input(gpu_input(x, batch, c));
    DeviceMem output(size_t(batch) * test::pad8(c.out) * 2);
    runner.run_captured(plan, {input.get()}, output.get(), batch);
    int64_t bad_padding = 0;
    expect_close(test::from_nhwc(output.halves(), batch, c.out, 1, 1, &bad_padding), expected);
    EXPECT_EQ(bad_padding, 0);
  }
}

TEST(LinearSparse24Mma, RejectsInvalidSplitAndAliasing) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  if (cuda::device_traits().cc() < 80) GTEST_SKIP() << "mma.sp needs sm_80+";
  std::mt19937 rng(62);
  const std::vector<float> weight = pruned_weight(16, 24, rng);
  const cuda::Sparse24MmaWeights weights(
      cuda::pack_sparse24_mma(compress(weight, 16, 24), nullptr, {}));
  DeviceMem input(size_t(24) * 2), output(size_t(16) * 2);
  for (int split : {-1, 3, 16})
    EXPECT_THROW(
        cuda::gemv_sparse24_mma_fp16(weights, false, input.get(), output.get(), 1, nullptr, split),
        Error);
  EXPECT_THROW(
      cuda::gemv_sparse24_mma_fp16(weights, false, input.get(), input.get(), 1, nullptr, 1), Error);
}

}  // namespace
}  // namespace cnnrt
