// Programmatic dependent launch (kernels/cuda/launch.h, pdl.cuh): where it is on, and that a
// chain of dependent kernels launched with it still sees every write of the kernel before.
//
// The chain: P = X + X, then Q = P + X, P = Q + X, ... (add_fp16, ping-pong buffers), so step i
// reads what step i-1 wrote (read after write) and writes what step i-1 read (write after read).
// Every element of X is a small integer, so after n steps each element is exactly (n + 1) · X in
// fp16; a step that started before the previous one finished would leave a smaller multiple.
// The chain runs as launched and as a captured graph replayed several times, on a tensor of
// several waves so that blocks of consecutive kernels overlap in time.  Device tests skip
// without a GPU.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cnnrt/error.h"
#include "cuda/fp16_test_util.h"
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/elementwise_fp16.h"
#include "kernels/cuda/launch.h"

namespace cnnrt::cuda {
namespace {

using test::DeviceMem;

#define CHECK_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

TEST(ProgrammaticLaunch, OnWhereTheDeviceHasItUnlessTurnedOff) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const DeviceTraits& traits = device_traits();
  const char* knob = std::getenv("CNNRT_PDL");
  const bool off = knob != nullptr && std::string(knob) == "0";
  EXPECT_EQ(traits.programmatic_launch, traits.cc() >= 90 && !off) << traits.name;
}

TEST(ProgrammaticLaunch, TheKnobIsZeroOrOne) {
  EXPECT_TRUE(programmatic_launch_allowed(nullptr));
  EXPECT_TRUE(programmatic_launch_allowed("1"));
  EXPECT_FALSE(programmatic_launch_allowed("0"));
  for (const char* bad : {"", "yes", "2", "0 "}) {
    try {
      programmatic_launch_allowed(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("CNNRT_PDL"), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find("'" + std::string(bad) + "'"), std::string::npos)
          << error.what();
    }
  }
}

TEST(ProgrammaticLaunch, ScopesNestAndRestore) {
  EXPECT_FALSE(programmatic_launch_on);
  {
    ProgrammaticLaunchScope on(true);
    EXPECT_TRUE(programmatic_launch_on);
    {
      ProgrammaticLaunchScope off(false);
      EXPECT_FALSE(programmatic_launch_on);
    }
    EXPECT_TRUE(programmatic_launch_on);
  }
  EXPECT_FALSE(programmatic_launch_on);
}

// Runs `steps` dependent adds of x's `count` halves on `stream`; the result is in the returned
// buffer (p or q).
const DeviceMem& enqueue_chain(const DeviceMem& x, const DeviceMem& p, const DeviceMem& q,
                               int64_t count, int steps, cudaStream_t stream) {
  add_fp16(x.get(), x.get(), p.get(), count, false, stream);
  const DeviceMem* last = &p;
  for (int i = 1; i < steps; ++i) {
    const DeviceMem* next = last == &p ? &q : &p;
    add_fp16(last->get(), x.get(), next->get(), count, false, stream);
    last = next;
  }
  return *last;
}

void expect_multiple(const std::vector<uint16_t>& x_bits, const DeviceMem& result, int64_t count,
                     int multiple, const std::string& what) {
  const std::vector<__half> y = result.halves();
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < count; ++i) {
    __half_raw raw;
    raw.x = x_bits[i];
    const float expected = float(multiple) * __half2float(__half(raw));
    if (__half2float(y[i]) != expected) {
      if (first < 0) first = i;
      ++wrong;
    }
  }
  EXPECT_EQ(wrong, 0) << what << ": " << wrong << " of " << count << " elements wrong, first at "
                      << first << " (" << __half2float(y[first < 0 ? 0 : first]) << ")";
}

TEST(ProgrammaticLaunch, ChainOfDependentKernelsSeesEveryWrite) {
  CNNRT_REQUIRE_CUDA_DEVICE();
  const int64_t count = int64_t(3) << 20;  // 3 Mi halves: many waves of add_fp16's blocks
  const int steps = 40;                    // values up to 41 · 7: exact in fp16
  std::mt19937 generator(7);
  std::uniform_int_distribution<int> digit(-7, 7);
  std::vector<uint16_t> x_bits(count);
  for (uint16_t& bits : x_bits) {
    const __half_raw raw = __half(float(digit(generator)));
    bits = raw.x;
  }
  const DeviceMem x(x_bits), p(count * 2), q(count * 2);
  if (!device_traits().programmatic_launch) GTEST_SKIP() << "no programmatic launch here";
  ProgrammaticLaunchScope programmatic(true);
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  const DeviceMem& launched = enqueue_chain(x, p, q, count, steps, stream);
  CHECK_CUDA(cudaStreamSynchronize(stream));
  expect_multiple(x_bits, launched, count, steps + 1, "launched");

  CHECK_CUDA(cudaMemset(p.get(), 0, count * 2));
  CHECK_CUDA(cudaMemset(q.get(), 0, count * 2));
  cudaGraph_t graph = nullptr;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const DeviceMem& captured = enqueue_chain(x, p, q, count, steps, stream);
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 5; ++replay) {
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    expect_multiple(x_bits, captured, count, steps + 1, "replay " + std::to_string(replay));
    CHECK_CUDA(cudaMemsetAsync(p.get(), 0, count * 2, stream));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace cnnrt::cuda
