// The L2 weight prefetch (kernels/cuda/l2_prefetch.h): the host-side plan (execution order, the
// budget, the 16-byte rule of the bulk prefetch) runs everywhere; the kernel runs on a GPU and
// must leave memory untouched and reject ranges it cannot take.  Its effect on a whole forward
// (results unchanged, the decision reported) is tested in test_cuda_engine.cpp.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cnnrt/error.h"
#include "fp16_test_util.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/l2_prefetch.h"

namespace cnnrt::cuda {
namespace {

// Fake device addresses: the plan only does arithmetic on them.
const void* at(uintptr_t address) { return reinterpret_cast<const void*>(address); }

TEST(PlanL2Prefetch, TakesRangesInExecutionOrderUpToTheBudget) {
  const std::vector<std::vector<DeviceRange>> steps = {
      {},                                     // a step without weights
      {{at(0x10000), 4096}},                  // fully covered
      {{at(0x20000), 10000}, {at(0x40000), 800}},  // the first is cut at the budget
      {{at(0x50000), 64}}};                   // past the budget
  const std::vector<DeviceRange> plan = plan_l2_prefetch(steps, 4096 + 5000);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].data, at(0x10000));
  EXPECT_EQ(plan[0].bytes, 4096u);
  EXPECT_EQ(plan[1].data, at(0x20000));
  EXPECT_EQ(plan[1].bytes, 5000u / 16 * 16);  // 4992: sizes are multiples of 16
}

TEST(PlanL2Prefetch, AlignsStartsAndSizesToSixteenBytes) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<uintptr_t> address(0x1000, 0xFFFFF);
  std::uniform_int_distribution<size_t> size(1, 5000);
  for (int trial = 0; trial < 200; ++trial) {
    const DeviceRange range{at(address(rng)), size(rng)};
    const std::vector<DeviceRange> plan = plan_l2_prefetch({{range}}, size_t(1) << 30);
    const auto begin = reinterpret_cast<uintptr_t>(range.data);
    const uintptr_t aligned = (begin + 15) / 16 * 16;
    if (aligned + 16 > begin + range.bytes) {  // no whole aligned 16-byte block inside
      EXPECT_TRUE(plan.empty()) << begin << " + " << range.bytes;
      continue;
    }
    ASSERT_EQ(plan.size(), 1u);
    const auto start = reinterpret_cast<uintptr_t>(plan[0].data);
    EXPECT_EQ(start, aligned);
    EXPECT_EQ(plan[0].bytes % 16, 0u);
    EXPECT_GT(plan[0].bytes, 0u);
    EXPECT_LE(start + plan[0].bytes, begin + range.bytes);  // never past the range
    EXPECT_GT(start + plan[0].bytes + 16, begin + range.bytes);  // and no whole block left out
  }
}

TEST(PlanL2Prefetch, NothingForNoBudgetOrNoRanges) {
  EXPECT_TRUE(plan_l2_prefetch({{{at(0x1000), 4096}}}, 0).empty());
  EXPECT_TRUE(plan_l2_prefetch({{{at(0x1000), 4096}}}, 15).empty());
  EXPECT_TRUE(plan_l2_prefetch({{}, {{nullptr, 4096}}, {{at(0x2000), 0}}}, 1 << 20).empty());
  // At most kMaxPrefetchRanges ranges, whatever the budget.
  std::vector<std::vector<DeviceRange>> many;
  for (int i = 0; i < 3 * kMaxPrefetchRanges; ++i) many.push_back({{at(0x1000 * (i + 1)), 256}});
  EXPECT_EQ(plan_l2_prefetch(many, size_t(1) << 30).size(), size_t(kMaxPrefetchRanges));
}

TEST(L2Prefetch, LeavesMemoryUntouchedAndRejectsBadRanges) {
  if (!test::cuda_device_present()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(std::random_device{}());
  // Odd total size; several ranges, one not a multiple of the 16 KB chunk.
  const size_t bytes = 3 * 1000 * 1000 + 48;
  std::vector<uint8_t> host(bytes);
  for (uint8_t& value : host) value = static_cast<uint8_t>(rng());
  void* device = nullptr;
  CNNRT_CUDA_CHECK(cudaMalloc(&device, bytes));
  const char* base = static_cast<const char*>(device);
  try {
    CNNRT_CUDA_CHECK(cudaMemcpy(device, host.data(), bytes, cudaMemcpyHostToDevice));
    const std::vector<DeviceRange> plan =
        plan_l2_prefetch({{{base, 1000000}}, {{base + 1000000, bytes - 1000000}}}, bytes);
    ASSERT_EQ(plan.size(), 2u);
    l2_prefetch(plan, nullptr);
    l2_prefetch({}, nullptr);  // nothing to do
    CNNRT_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint8_t> after(bytes);
    CNNRT_CUDA_CHECK(cudaMemcpy(after.data(), device, bytes, cudaMemcpyDeviceToHost));
    EXPECT_EQ(std::memcmp(after.data(), host.data(), bytes), 0);

    EXPECT_THROW(l2_prefetch({{base + 8, 4096}}, nullptr), Error);  // misaligned start
    EXPECT_THROW(l2_prefetch({{base, 4100}}, nullptr), Error);      // size not a multiple of 16
    std::vector<DeviceRange> too_many(kMaxPrefetchRanges + 1, DeviceRange{base, 256});
    EXPECT_THROW(l2_prefetch(too_many, nullptr), Error);
  } catch (...) {
    cudaFree(device);
    throw;
  }
  CNNRT_CUDA_CHECK(cudaFree(device));
}

}  // namespace
}  // namespace cnnrt::cuda
