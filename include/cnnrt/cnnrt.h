// cnnrt public API: load/build an Engine, create an ExecutionContext, run.
//
//   auto engine = cnnrt::Engine::load("models/alexnet.yaml", "alexnet.safetensors", options);
//   auto context = engine->create_context(/*batch=*/1);
//   context->run(input_nchw_fp32, output_fp32);
//
// Thread-safety contract:
//   - An Engine is immutable after build: any number of threads may use one Engine at once
//     (create_context, plan, describe, model).
//   - An ExecutionContext is used by one thread at a time (it owns one arena and, on the GPU, one
//     stream and captured CUDA graph).  Give each thread its own context; contexts of one engine
//     never share mutable state, so they run concurrently.
//   - A context keeps its engine alive: destroying the Engine (or its last shared_ptr) while a
//     context exists is safe; the engine's weights are freed with the last context.
//   - run() allocates nothing and is synchronous; run_async() enqueues on the caller's stream
//     (see there).  Every error is a cnnrt::Error; a failed call leaves the context usable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cnnrt/error.h"

namespace cnnrt {

struct Graph;        // graph/ir.h (internal)
struct MemoryPlan;   // runtime/memory_planner.h (internal)
struct Calibration;  // runtime/calibration.h (internal)

enum class Device { Auto, CPU, CUDA };
enum class Precision { Auto, FP32, FP16, INT8 };

const char* to_string(Device device);
const char* to_string(Precision precision);
Device parse_device(const std::string& text);        // "auto" | "cpu" | "cuda"; throws Error
Precision parse_precision(const std::string& text);  // "auto" | "fp32" | "fp16" | "int8"; throws

// True when a CUDA device is present and usable (always false in a build without CUDA).
bool cuda_available();

// Peak rates used to express achieved throughput as a share of what the device can do.
// For CUDA they are computed from the device's properties (SM count, clocks, bus width); for
// the CPU they are unknown (0).  name is the device name ("NVIDIA H200", "cpu").
struct DeviceInfo {
  std::string name;
  int multiprocessors = 0;
  double peak_fp16_tflops = 0;  // dense tensor-core fp16 with fp32 accumulation
  double peak_fp32_tflops = 0;
  double peak_bandwidth_gbs = 0;  // DRAM, GB/s
};
DeviceInfo device_info(Device device);
// Starts creating the device's context on a background thread and returns at once: CUDA's
// context takes ~0.1-0.2 s to create, which a caller can overlap with reading its model and
// weights (the CLIs do).  Engine::build waits for it.  A no-op for the CPU, without a device,
// or once started; never throws (a device that fails here fails again, with its error, later).
void warm_up_device(Device device);

// One layer's choice of precision and/or kernel (docs/FORMAT.md, "Per-layer choices").
struct LayerChoice {
  Precision precision = Precision::Auto;  // Auto: the model's choice, else the engine default
  std::string kernel;                     // registry name; "" = the model's, else the heuristic
  std::string origin;                     // where it was written ("plan.yaml:4:3"), for messages
  std::string sparsity;  // "2:4" | "dense" | "" (the model's `sparsity:`, else dense kernels)
};

struct BuildOptions {
  Device device = Device::Auto;  // Auto: CUDA when available, else CPU
  // The precision of every layer that neither the model nor layer_choices settles.  Auto: fp32
  // on the CPU, fp16 on CUDA.  A layer with no kernel at it takes the best other precision.
  Precision precision = Precision::Auto;
  bool fuse = true;  // run the graph passes (fusion, BN folding)
  // Fuse a conv with the residual add after it (graph/passes.h).  The builder turns it off by
  // itself when int8 layers are possible (int8 precision, an int8 layer choice, a calibration):
  // the int8 kernels have no residual epilogue, and calibration must see the int8 engine's adds.
  bool fuse_residual = true;
  // Remove all-zero output channels of conv / linear layers with the matching input channels
  // of their consumers (graph/passes_compact.h): a channel-pruned model runs as a smaller one.
  bool compact_channels = true;
  // Layer name (a YAML layer, fused or not) -> choice; overrides the model's own keys.
  std::map<std::string, LayerChoice> layer_choices;
  // The model the layer choices were written for (a plan file's `model:`); when set, building
  // a model of another name is an Error.  "" = any.
  std::string choices_model;
  // The model fingerprint the layer choices were made for (a plan file's `model_hash:`, see
  // runtime/plan_file.h); when set, a model whose structure or weights hash differently is an
  // Error (a stale plan).  "" = unchecked.
  std::string choices_fingerprint;
  // The weight file the layer choices run on (a plan file's `weights:`, resolved against its
  // folder): the model's weights with the layers the plan pruned pruned (`cnnrt build
  // --allow-prune 2:4`).  The build does not load it — the caller binds it to the graph (the CLIs
  // and the Python module do when given no other weights) — but a stale-plan error names it.
  // "" = the model's own weights.
  std::string choices_weights;
  // The tensor scales every int8 layer needs (docs/QUANTIZATION.md; load_calibration below).
  std::shared_ptr<const Calibration> calibration;
  // CUDA only, for planning without a GPU: decide for this described device instead of the
  // present one — a preset ("h100", "a100", ...) or "smXY:SMS" (`cnnrt plan --target`).  The
  // build touches no GPU (weights are sized, not uploaded); the engine can plan() and
  // describe() but create_context() is an Error.  "" = the device present.
  std::string plan_target;
};

// Reads a calibration file written by `cnnrt calibrate` (docs/QUANTIZATION.md); errors name the
// file and the tensor.
std::shared_ptr<const Calibration> load_calibration(const std::string& path);

// Reads a plan file: YAML `layers: {NAME: {precision: fp16|int8|fp32, kernel: NAME, sparsity:
// 2:4|dense}}` and an
// optional `model:` name, stored in *model_name when given (set it as
// BuildOptions::choices_model so a plan for another model is refused).  Errors name the file,
// line and layer.
std::map<std::string, LayerChoice> load_plan_file(const std::string& path,
                                                  std::string* model_name = nullptr);
// Everything a plan file settles, into `options`: its layer choices, the model name and
// fingerprint it was made for (a stale plan is refused at build), the weight file it runs on when
// it names one (choices_weights), the device (an Error when options.device names another; Auto
// becomes the plan's), and its calibration file when options.calibration is not set already.
// What the CLIs' --plan and the Python module use.
void apply_plan_file(const std::string& path, BuildOptions& options);

// One executed (possibly fused) layer, as profile() reports it.
struct LayerProfile {
  std::string name;                  // fused node name
  std::vector<std::string> sources;  // source layers it covers, e.g. conv1, relu1, pool1
  std::string kernel;                // registry name of the kernel that ran
  std::string variant;               // the kernel's variant this context prepared ("" if one)
  std::string precision;
  double median_ms = 0;
  double flops = 0;  // per run at this context's batch
  double bytes = 0;  // minimum bytes moved (inputs + weights + output)
};

// Model facts an application needs to feed and read the engine.
struct ModelInfo {
  std::string name;
  std::vector<int64_t> input_shape;   // per sample, CHW
  std::vector<int64_t> output_shape;  // per sample
  std::vector<float> mean, std;       // per input channel; empty when the model has none
  std::vector<std::string> labels;    // empty when the model has no label file
};

// What a context of one batch size will do, computed without allocating anything: per step the
// kernel, its variant and types; per tensor its bytes, arena offset and lifetime.
struct PlannedStep {
  std::string name;                  // the tensor it writes
  std::vector<std::string> sources;  // YAML layers it covers (empty for a conversion)
  std::string kernel, variant, precision;
  std::vector<std::string> inputs;       // tensors it reads
  std::vector<std::string> input_types;  // e.g. "fp16 NHWC/8", one per input
  std::string output_type;
  size_t workspace_bytes = 0;
  bool in_place = false;    // its output shares its first input's bytes
  bool sparse_2_4 = false;  // its kernel computes from a 2:4 compressed weight
};
struct ExecutionPlan {
  std::string model, device;
  int batch = 0;
  std::vector<PlannedStep> steps;
  struct Tensor {
    std::string name, type;
    size_t bytes = 0, offset = 0;
    int first_step = 0, last_step = 0;
    std::string aliases;  // the tensor whose bytes it shares, or ""
  };
  std::vector<Tensor> tensors;
  size_t arena_bytes = 0, naive_bytes = 0, lower_bound_bytes = 0;
  // What the build's channel compaction did (graph/passes_compact.h), one line per layer; the
  // tensors above are already sized for the compacted layers.
  std::vector<std::string> compacted;
  std::string to_table() const;
  std::string to_json() const;
};

class ExecutionContext;
class EngineImpl;

class Engine {
 public:
  // Loads model YAML + safetensors weights and builds for options.device.  An empty
  // weights_path means the weight file the YAML names (`weights:`); a model that names none is
  // an Error.
  static std::shared_ptr<Engine> load(const std::string& model_path,
                                      const std::string& weights_path = "",
                                      const BuildOptions& options = {});
  // Builds from an already loaded graph (weights bound); used by tools and tests.  The graph is
  // copied (its weights included); pass it as an rvalue to let the engine take it over instead.
  static std::shared_ptr<Engine> build(const Graph& graph, const BuildOptions& options = {});
  static std::shared_ptr<Engine> build(Graph&& graph, const BuildOptions& options = {});

  ~Engine();
  Device device() const;
  Precision precision() const;
  const ModelInfo& model() const;
  // Human-readable per-step kernel choices and tensor types, conversions included.
  std::string describe() const;
  // The plan a context of `batch` would run (kernels prepared, arena laid out), allocating
  // nothing; throws Error for batch < 1.
  ExecutionPlan plan(int batch) const;
  // Bytes of prepacked weights held on the engine's device.
  size_t weight_bytes() const;

  // Creates a context for exactly `batch` samples; throws Error for batch < 1.
  std::unique_ptr<ExecutionContext> create_context(int batch) const;

  explicit Engine(std::unique_ptr<EngineImpl> impl);
  EngineImpl& impl() const { return *impl_; }
  std::shared_ptr<const EngineImpl> shared_impl() const { return impl_; }

 private:
  // Shared with every context it creates, so a context outlives the Engine object safely.
  std::shared_ptr<EngineImpl> impl_;
};

class ContextImpl;

class ExecutionContext {
 public:
  ~ExecutionContext();
  int batch() const;
  // input: host, NCHW fp32, batch × input_shape; output: host fp32, batch × output size.
  // Synchronous: returns when the output is written.
  void run(const float* input, float* output);
  // The same with the buffer sizes (in floats) checked against the model: a mismatch is an
  // Error naming both counts, before anything runs.
  void run(const float* input, size_t input_count, float* output, size_t output_count);
  // Asynchronous form for data that stays on the device: input and output are device pointers
  // (CUDA engines; host pointers on the CPU, where it runs synchronously), same layouts as run();
  // `stream` is the caller's cudaStream_t (nullptr: the legacy default stream).  It enqueues the
  // forward as one CUDA graph launch that reads `device_input` and writes `device_output` in
  // place, and returns without synchronising: the output is ready when `stream` reaches that
  // point.  The first call with a new pair of buffers captures that graph (about a millisecond
  // on the host; the last 4 pairs are kept), so reuse buffers.  Pointers not aligned to 256
  // bytes, overlapping buffers, or a model that updates its input in place take a slower path
  // with a copy in and out.  Runs of one context must be ordered (one stream, or synchronise
  // between streams); run(), profile() and benchmark() must not overlap an unfinished
  // run_async; the buffers must outlive the runs that use them.
  void run_async(const float* device_input, float* device_output, void* stream);
  size_t input_count() const;   // batch × input elements per sample
  size_t output_count() const;  // batch × output elements per sample
  // Times each layer (median over `iterations` runs after warm-up); the last run's output is
  // left in the arena.  Input is whatever run() last received (random if none yet).
  std::vector<LayerProfile> profile(int iterations = 20);
  // Times every registry candidate of every layer on this context's buffers (the chosen kernel
  // and the rest: own kernels and baselines such as cuDNN or im2col+cuBLAS), one row each;
  // rows of one layer are adjacent, the chosen one first.
  std::vector<LayerProfile> compare_kernels(int iterations = 20);
  // End-to-end forward latency in milliseconds, device-resident input (no host copies), after
  // `warmup` runs: one entry per timed run, in order.  On CUDA each run replays the captured
  // graph and is timed with CUDA events.
  std::vector<double> benchmark(int warmup, int iterations);
  const MemoryPlan& memory_plan() const;
  size_t arena_bytes() const;
  // What the context decided at creation beyond the plan, one line each ("" when nothing): on
  // CUDA the L2 prefetch of the GEMVs' weights, whose budget it chose by timing its candidates.
  std::string describe() const;

  explicit ExecutionContext(std::unique_ptr<ContextImpl> impl);
  ContextImpl& impl() const { return *impl_; }

 private:
  std::unique_ptr<ContextImpl> impl_;
};

}  // namespace cnnrt
