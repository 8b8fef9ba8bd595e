// The kernel test harness (after ggml's test-backend-ops): per op ONE table of cases
// (cases.cpp), run for EVERY registry entry of that op on every device present against the CPU
// reference (kernels/cpu/), with the tolerance of the entry's precision (tolerance.h).  A new
// kernel is tested by registering it: nothing here names a kernel.
//
// One check = (entry, case, accepted type of input 0, out of place / in place):
//  1. the case's node is built with the graph's own shape rule (infer_node_shape) and random
//     non-zero weights; inputs and weights lie on the fp16 grid so every precision's kernel sees
//     exactly the values the reference sees;
//  2. if the entry's device is absent the check is skipped; if supports() refuses the node it is
//     skipped (and counted as such);
//  3. the kernel is created, the NCHW fp32 inputs are converted on the host into the type the
//     kernel accepts (ref::convert_tensor; on CUDA a flattened vector is in (h, w, c) order, the
//     backend's rule) and uploaded; prepare() runs at the case's batch; the workspace it asks for
//     and the output are allocated filled with NaN bytes; the kernel runs;
//  4. the output is downloaded, its padding lanes must be exact zeros, it is converted back to
//     NCHW fp32 and every element compared (tolerance.h).  An entry whose plan says in_place is
//     run a second time with output == inputs[0].
// 2:4 sparse entries (KernelEntry::sparse_2_4) run on the case's weights pruned 2:4 by magnitude
// against the reference on those pruned weights (sparse_mode.cpp).
// int8 entries are held exactly instead (int8_mode.cpp): the case gets a calibration (each
// input's scale from its max |x|, the output's from the fp32 reference's max |y|), the kernel is
// built with it, and its output must equal the integer reference (kernels/cpu/int8_ref.h) on the
// inputs quantised at those scales, bit for bit; conv and linear run twice, writing int8 and
// (as the graph output) dequantised fp32.
// Perf mode (CNNRT_HARNESS_PERF=N): each check that passed is then timed, median of N runs
// (CUDA events on the GPU), and a table printed at the end.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/ir.h"
#include "graph/tensor_type.h"
#include "runtime/calibration.h"
#include "runtime/kernel.h"
#include "tolerance.h"

namespace cnnrt::harness {

// --- cases -------------------------------------------------------------------------------------

// One row of an op's table: the node under test with its inferred shapes (no weights yet), the
// batch and the range inputs are drawn from.
struct OpCase {
  std::string name;  // readable and gtest-safe, e.g. "c3_h31_w37_oc24_k11_s4_p2_b3_relu_pool3s2"
  Graph graph;       // the node under test is graph.nodes.back(); a flatten precedes a linear that
                     // reads one (the CUDA linears permute their weights by it)
  int batch = 1;
  float input_lo = -1.0f, input_hi = 1.0f;
  Shape flattened_source;  // linear only: the [C, H, W] its input was flattened from, or empty
  const Node& node() const { return graph.nodes.back(); }
};

// The ops that have a table, and each op's table (built once, cached).
const std::vector<OpKind>& tested_ops();
const std::vector<OpCase>& op_cases(OpKind op);

// A case made concrete: weights bound (deterministic per case), inputs drawn, the reference
// output computed — NCHW fp32 each.
struct CaseData {
  Graph graph;  // with weights
  std::vector<std::vector<float>> inputs;
  std::vector<float> expected;
  const Node& node() const { return graph.nodes.back(); }
};
// Memoised for the most recent case (the tests of one case run one after another).
const CaseData& case_data(const OpCase& op_case);

// --- devices -----------------------------------------------------------------------------------

class HarnessDevice;

// Memory on a harness device, freed on destruction.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const HarnessDevice* device, void* pointer, size_t bytes)
      : device_(device), pointer_(pointer), bytes_(bytes) {}
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* get() const { return pointer_; }
  size_t bytes() const { return bytes_; }

 private:
  const HarnessDevice* device_ = nullptr;
  void* pointer_ = nullptr;
  size_t bytes_ = 0;
};

class HarnessDevice {
 public:
  virtual ~HarnessDevice() = default;
  virtual Device device() const = 0;
  virtual bool available() const = 0;  // never throws
  // `bytes` (at least 1) bytes, 256-byte aligned, every byte 0xFF (NaN in fp32 and fp16).
  virtual Buffer alloc_poisoned(size_t bytes) const = 0;
  virtual void free(void* pointer) const = 0;
  virtual void upload(void* device_pointer, const void* host, size_t bytes) const = 0;
  virtual void download(void* host, const void* device_pointer, size_t bytes) const = 0;
  virtual void* stream() const = 0;      // KernelArgs::stream
  virtual void synchronize() const = 0;  // and report asynchronous errors
  // Median milliseconds of `reps` calls of `launch` after one warm-up call.
  virtual double median_ms(const std::function<void()>& launch, int reps) const = 0;
  // The backend's vector order: on CUDA a flatten of [C, H, W] emits (h, w, c).
  virtual bool hwc_vectors() const = 0;
};

// The device of `device`, or nullptr when this build has none.
const HarnessDevice* harness_device(Device device);
const HarnessDevice& cpu_harness_device();
#ifdef CNNRT_HARNESS_WITH_CUDA
const HarnessDevice& cuda_harness_device();  // cuda_device.cpp, CUDA builds only
#endif

// --- running and judging -------------------------------------------------------------------------

struct EntryRun {
  KernelPlan plan;
  std::vector<float> output;  // NCHW fp32, the reference's order
  int64_t nonzero_padding = 0;
  int64_t guard_bytes_written = 0;  // bytes changed in the guard band past the output
  bool rerun_differs = false;       // a second run (CUDA) gave other bytes
};

// Runs `kernel` (created for data.node()) once on `device` with input 0 in `input0_type` and
// every other input in its preferred type; in place when `in_place` (output == inputs[0]).
EntryRun run_kernel(LayerKernel& kernel, const CaseData& data, const OpCase& op_case,
                    const HarnessDevice& device, const TensorType& input0_type, bool in_place);

// "" when `got` meets `tolerance` against `expected`, else what failed (worst element, rel L2).
std::string compare(const std::vector<float>& got, const std::vector<float>& expected,
                    const Tolerance& tolerance);

// Median milliseconds of the kernel's run() at the case's batch (inputs in preferred types).
double time_kernel(LayerKernel& kernel, const CaseData& data, const OpCase& op_case,
                   const HarnessDevice& device, int reps);

// The reference output of `node` (NCHW fp32) for NCHW fp32 inputs: kernels/cpu/ functions, the
// fused epilogue in the graph's order (conv + bias → clamp → max-pool).
std::vector<float> reference_output(const Node& node, const std::vector<std::vector<float>>& inputs,
                                    int batch);

// --- the 2:4 sparse mode (sparse_mode.cpp) ------------------------------------------------------

// The case with its weight pruned 2:4 by magnitude (Node::weight_2_4 set) and the reference
// output recomputed on the pruned weight; nullopt when the node cannot be 2:4 (grouped conv).
std::optional<CaseData> sparse_case_data(const OpCase& op_case);

// --- the exact int8 mode (int8_mode.cpp)
// ----------------------------------------------------------

// What an int8 entry must produce on a case: the graph to build it from (its output set so that
// a conv / linear writes fp32 when `float_output`), the calibration it reads, and the expected
// output, NCHW, dequantised (int8 output: scale × q, so equal floats mean equal integers) or
// fp32 — from the integer reference kernels.
struct Int8Expectation {
  Graph graph;
  Calibration calibration;
  std::vector<float> input_scales;
  float output_scale = 0;  // 0: fp32 output
  std::vector<float> expected;
};
Int8Expectation int8_expectation(const CaseData& data, const OpCase& op_case, bool float_output);
// The output forms an int8 entry of `op` is checked in: int8, and for conv / linear also fp32.
std::vector<bool> int8_output_modes(OpKind op);
// "" when every value of `got` has the bits of `expected`'s, else how many differ and the first.
std::string compare_exact(const std::vector<float>& got, const std::vector<float>& expected);

}  // namespace cnnrt::harness
