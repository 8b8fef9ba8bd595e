// CudaContext: one execution context of a CUDA engine, for one batch size.
//
// It owns, for its whole life, everything a forward needs so run() allocates nothing:
//   - one device arena (a single cudaMalloc) laid out by the memory planner: every typed tensor
//     (the fp32 graph input run() copies in, the fp32 tensor it copies out, every step's output,
//     conversions included) and each kernel's workspace;
//   - every step's KernelPlan, prepared once for this batch (prepare_context);
//   - its own non-blocking stream;
//   - a CUDA graph of the forward (every step, conversion steps included), captured once at
//     creation after one eager warm-up run, so a run is one graph launch between two copies;
//   - where steps stream their weights from DRAM after earlier steps (GEMVs at batch <= 8), an
//     L2 prefetch of some of them on a side branch of that graph, forked at its start and joined
//     after its last step, its budget the fastest of three timed at creation (plan_l2_prefetch,
//     capture_fastest; kernels/cuda/l2_prefetch.h says why);
//   - for run_async, graphs of the same forward that read the caller's device input and write
//     the caller's device output directly (no copies: one graph launch per run).  One is
//     captured the first time a pair of buffers is seen and kept for the last few pairs, since
//     applications reuse their buffers; a pair that cannot be bound (misaligned, overlapping,
//     or a model whose input is updated in place) takes the copy path instead.
// Kernel arguments are resolved to arena pointers once, at creation; graph replays reuse them.
// Handles are RAII so a constructor that throws half-way leaks nothing.  The context holds the
// engine it runs (shared), so it may outlive the Engine object.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <type_traits>
#include <vector>

#include "kernels/cuda/l2_prefetch.h"
#include "runtime/engine_impl.h"

namespace cnnrt::cuda {

struct StreamDeleter {
  void operator()(cudaStream_t stream) const noexcept { cudaStreamDestroy(stream); }
};
struct GraphDeleter {
  void operator()(cudaGraph_t graph) const noexcept { cudaGraphDestroy(graph); }
};
struct GraphExecDeleter {
  void operator()(cudaGraphExec_t exec) const noexcept { cudaGraphExecDestroy(exec); }
};
struct EventDeleter {
  void operator()(cudaEvent_t event) const noexcept { cudaEventDestroy(event); }
};
struct DeviceFree {
  void operator()(void* pointer) const noexcept { cudaFree(pointer); }
};

using StreamHandle = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDeleter>;
using GraphHandle = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, GraphDeleter>;
using GraphExecHandle = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, GraphExecDeleter>;
using EventHandle = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDeleter>;
using DeviceBuffer = std::unique_ptr<void, DeviceFree>;

EventHandle make_event();  // timing event (cudaEventDefault)
DeviceBuffer device_alloc(size_t bytes, const std::string& what);  // throws with sizes on OOM

class CudaContext final : public ContextImpl {
 public:
  CudaContext(std::shared_ptr<const EngineImpl> engine, int batch,
              const ContextOptions& options = {});
  ~CudaContext() override;

  int batch() const override { return batch_; }
  // input/output are host pointers the caller owns and sizes: batch × input_shape and
  // batch × output_shape floats.  Only null is detected; a shorter buffer is undefined behaviour
  // (the API takes raw pointers).
  void run(const float* input, float* output) override;
  void run_async(const float* device_input, float* device_output, void* stream) override;
  // One upload of every input, the runs queued (each as run(): copy in, graph, copy out, but
  // device to device), one download, one wait; device memory for all of them for the call.
  void run_many(const float* inputs, float* outputs, int runs) override;
  size_t input_count() const override { return static_cast<size_t>(input_elements_); }
  size_t output_count() const override { return static_cast<size_t>(output_elements_); }
  std::vector<LayerProfile> profile(int iterations) override;
  std::vector<LayerProfile> first_run() override;
  std::vector<LayerProfile> compare_kernels(int iterations) override;
  std::vector<double> benchmark(int warmup, int iterations) override;
  std::string describe() const override { return prefetch_report_; }
  const MemoryPlan& memory_plan() const override { return prepared_.memory; }
  std::vector<float> read_tensor(const std::string& name) const override;

 private:
  void* tensor_pointer(const std::string& name) const;  // throws when the plan lacks it
  void bind_arguments();
  void fill_random_input();
  // Launches step i with `args`, naming its layer in any error.
  void run_step(size_t i, const KernelArgs& args);
  // One way to prefetch weights into L2 while the early steps run: the patterns (none: no
  // prefetch) and the steps that then read their streams evict-first.
  struct PrefetchChoice {
    std::vector<L2PrefetchPattern> patterns;
    std::vector<size_t> pattern_steps;  // the step whose weights each pattern covers
    std::vector<size_t> evict_first_steps;
    size_t budget_bytes = 0;
  };
  // The candidates, once (empty: no step streams its weights after another, or every budget
  // rounds to nothing): for each budget — none, 0.23 and 0.34 of the device's L2 —
  // l2_prefetch_plan's patterns over the streamed weights (KernelPlan::streamed_weights of the
  // steps after the first), and the streams read before a prefetched one.  CNNRT_L2_PREFETCH_MB
  // fixes the one budget (0 turns the prefetch off: a lab knob for the measurements in
  // docs/PERFORMANCE.md).  Creates the side stream and the fork/join events.
  std::vector<PrefetchChoice> plan_l2_prefetch();
  // Makes `choice` the one enqueue_forward uses (prefetch_, KernelArgs::stream_evict_first).
  void apply_prefetch(const PrefetchChoice& choice);
  // The whole forward on stream_.  annotate adds NVTX ranges (eager runs only, never captured);
  // `events` (2 per step) brackets each step, and then there is no L2 prefetch (each step is
  // timed as it runs alone).  Without events the planned prefetch is forked before step
  // prefetch_fork_step_.
  void enqueue_forward(const std::vector<KernelArgs>& args, bool annotate,
                       std::vector<EventHandle>* events = nullptr);
  // Profile rows of `times` (one per step).
  std::vector<LayerProfile> rows_of(const std::vector<double>& times) const;
  struct CapturedGraph {
    GraphHandle graph;
    GraphExecHandle exec;
  };
  CapturedGraph capture_graph(const std::vector<KernelArgs>& args);
  // The forward's graph with each candidate prefetch, timed by interleaved replays; keeps and
  // applies the fastest (decided once, at creation: outputs are the same bits whichever wins).
  // Untimed (ContextOptions::timed_choices off): the last candidate, the largest budget (AlexNet
  // int8's best in every lease of docs/PERFORMANCE.md run 47, fp16's within 4 µs).
  CapturedGraph capture_fastest(const std::vector<PrefetchChoice>& choices, bool timed);
  // Replays of `exec` on stream_ (benchmark()'s timing): fresh random input before the warm-up
  // and before each timed replay, one event pair around each, one synchronisation; ms each.
  std::vector<double> replay_times(cudaGraphExec_t exec, int warmup, int iterations);
  // "fc7 16.8 MB (whole), fc8 1.0 of 4.1 MB; read evict-first: fc6 fc7", or "none".
  std::string describe_prefetch(const PrefetchChoice& choice) const;
  // Where the graph input and the returned tensor appear in step_args_ (bind_plan), and the
  // graph for caller buffers (input, output), captured on first use; nullptr when the pair
  // cannot be bound.
  void plan_binding();
  cudaGraphExec_t bound_graph(const float* input, float* output);
  void synchronize();
  // Copy in, graph replay, copy out on `stream` (host or device buffers); no synchronisation.
  void enqueue_run(const float* input, float* output, bool device_buffers, cudaStream_t stream);
  // Median time of candidate `entry` on step i, its inputs converted where it reads another
  // type, its output in a buffer of its own; `variant` gets its prepared variant's name.
  double time_candidate(const KernelEntry& entry, size_t i, int iterations, std::string* variant);

  std::shared_ptr<const EngineImpl> engine_;
  const int batch_;
  // The forward's kernels are launched with programmatic stream serialisation (launch.h) on a
  // device with it: each kernel's launch and weight prefetch overlap the completion of the one
  // before (docs/PERFORMANCE.md run 46).
  bool programmatic_launch_ = false;
  PreparedContext prepared_;
  int64_t input_elements_ = 0, output_elements_ = 0;  // per batch, fp32 values

  // Declared before the handles that use them so they are destroyed after them.
  DeviceBuffer arena_;
  StreamHandle stream_;
  // The L2 prefetch (plan_l2_prefetch): its patterns, the side stream it runs on and the events
  // that fork it from stream_ and join it back.
  std::vector<L2PrefetchPattern> prefetch_;
  // The step the prefetch forks before (plan_l2_prefetch): the one after the heaviest
  // activation traffic ahead of the first streamed weights, so that traffic does not flush the
  // prefetched lines (at batch 64, conv1's 38.5 MB fp32 input).
  size_t prefetch_fork_step_ = 0;
  // describe(): the prefetch chosen, what it covers and, when timed, each candidate's median.
  std::string prefetch_report_;
  StreamHandle side_stream_;
  EventHandle fork_event_, join_event_;
  GraphHandle graph_;
  GraphExecHandle graph_exec_;

  // True from the constructor's eager forward until the first profile(): that forward is
  // profile()'s warm-up.
  bool fresh_ = true;
  bool keep_all_ = false;              // every tensor has memory of its own (read_tensor)
  std::vector<double> first_run_ms_;   // per step, the constructor's eager forward
  float* input_ = nullptr;             // fp32 NCHW graph input: what run() copies in
  const float* output_ = nullptr;      // fp32 returned tensor: what run() copies out
  std::vector<KernelArgs> step_args_;  // one per engine step, pointers into the arena

  // run_async binding (plan_binding): the (step, input index) slots that read the graph input,
  // those that read the returned tensor (or a tensor sharing its memory in place), and the steps
  // that write it; index -1 is the step's output.
  struct Slot {
    size_t step;
    int input;
  };
  std::vector<Slot> input_slots_, output_slots_;
  bool bindable_ = false;
  struct BoundGraph {
    const float* input;
    float* output;
    CapturedGraph graph;
  };
  static constexpr size_t kMaxBoundGraphs = 4;
  std::vector<BoundGraph> bound_graphs_;  // most recently used first
  uint32_t random_seed_ = 0x5eed1234u;
};

}  // namespace cnnrt::cuda
