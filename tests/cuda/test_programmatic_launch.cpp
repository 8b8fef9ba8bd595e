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
#include "kernels/cuda/device_traits.h"
#include "kernels/cuda/elementwise_fp16.h"
#include "kernels/cuda/launch.h"
#include "runtime/cuda/device_info.h"

namespace cnnrt::cuda {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!cuda_device_present()) GTEST_SKIP() << "no CUDA device"

#define CHECK_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

struct DeviceBuffer {
  void* pointer = nullptr;
  explicit DeviceBuffer(size_t bytes) {
    if (cudaMalloc(&pointer, bytes) != cudaSuccess) pointer = nullptr;
  }
  ~DeviceBuffer() { cudaFree(pointer); }
};

TEST(ProgrammaticLaunch, OnWhereTheDeviceHasItUnlessTurnedOff) {
  SKIP_WITHOUT_GPU();
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

// Runs `steps` dependent adds on `stream`; the result is in the returned buffer.
void* enqueue_chain(const void* x, void* p, void* q, int64_t count, int steps,
                    cudaStream_t stream) {
  add_fp16(x, x, p, count, false, stream);
  void* last = p;
  for (int i = 1; i < steps; ++i) {
    void* next = last == p ? q : p;
    add_fp16(last, x, next, count, false, stream);
    last = next;
  }
  return last;
}

void expect_multiple(const std::vector<uint16_t>& x_bits, const void* result, int64_t count,
                     int multiple, const std::string& what) {
  std::vector<__half> y(count);
  ASSERT_EQ(cudaMemcpy(y.data(), result, count * sizeof(__half), cudaMemcpyDeviceToHost),
            cudaSuccess);
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
  SKIP_WITHOUT_GPU();
  const int64_t count = int64_t(3) << 20;  // 3 Mi halves: many waves of add_fp16's blocks
  const int steps = 40;                    // values up to 41 · 7: exact in fp16
  std::mt19937 generator(7);
  std::uniform_int_distribution<int> digit(-7, 7);
  std::vector<uint16_t> x_bits(count);
  for (uint16_t& bits : x_bits) {
    const __half_raw raw = __half(float(digit(generator)));
    bits = raw.x;
  }
  DeviceBuffer x(count * 2), p(count * 2), q(count * 2);
  ASSERT_NE(x.pointer, nullptr);
  ASSERT_NE(p.pointer, nullptr);
  ASSERT_NE(q.pointer, nullptr);
  CHECK_CUDA(cudaMemcpy(x.pointer, x_bits.data(), count * 2, cudaMemcpyHostToDevice));
  if (!device_traits().programmatic_launch) GTEST_SKIP() << "no programmatic launch here";
  ProgrammaticLaunchScope programmatic(true);
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  const void* launched = enqueue_chain(x.pointer, p.pointer, q.pointer, count, steps, stream);
  CHECK_CUDA(cudaStreamSynchronize(stream));
  expect_multiple(x_bits, launched, count, steps + 1, "launched");

  CHECK_CUDA(cudaMemset(p.pointer, 0, count * 2));
  CHECK_CUDA(cudaMemset(q.pointer, 0, count * 2));
  cudaGraph_t graph = nullptr;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const void* captured = enqueue_chain(x.pointer, p.pointer, q.pointer, count, steps, stream);
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 5; ++replay) {
    CHECK_CUDA(cudaGraphLaunch(exec, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    expect_multiple(x_bits, captured, count, steps + 1, "replay " + std::to_string(replay));
    CHECK_CUDA(cudaMemsetAsync(p.pointer, 0, count * 2, stream));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace cnnrt::cuda
