// The kernel test harness's machinery (harness.h): weights and inputs for a case, the CPU
// reference, the CPU device, running one kernel on one device, judging its output.
#include "harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>

#include "graph/ops.h"
#include "kernels/cpu/convert_ref.h"
#include "kernels/cpu/reference.h"

namespace cnnrt::harness {

// --- buffers and the CPU device ----------------------------------------------------------------

Buffer::~Buffer() {
  if (device_ != nullptr && pointer_ != nullptr) device_->free(pointer_);
}
Buffer::Buffer(Buffer&& other) noexcept
    : device_(other.device_), pointer_(other.pointer_), bytes_(other.bytes_) {
  other.pointer_ = nullptr;
}
Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (device_ != nullptr && pointer_ != nullptr) device_->free(pointer_);
    device_ = other.device_;
    pointer_ = other.pointer_;
    bytes_ = other.bytes_;
    other.pointer_ = nullptr;
  }
  return *this;
}

namespace {

class CpuHarnessDevice final : public HarnessDevice {
 public:
  Device device() const override { return Device::CPU; }
  bool available() const override { return true; }
  Buffer alloc_poisoned(size_t bytes) const override {
    const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
    void* pointer = std::aligned_alloc(256, rounded);
    if (pointer == nullptr) throw std::bad_alloc();
    std::memset(pointer, 0xFF, rounded);
    return Buffer(this, pointer, bytes);
  }
  void free(void* pointer) const override { std::free(pointer); }
  void upload(void* device_pointer, const void* host, size_t bytes) const override {
    std::memcpy(device_pointer, host, bytes);
  }
  void download(void* host, const void* device_pointer, size_t bytes) const override {
    std::memcpy(host, device_pointer, bytes);
  }
  void* stream() const override { return nullptr; }
  void synchronize() const override {}
  double median_ms(const std::function<void()>& launch, int reps) const override {
    launch();
    std::vector<double> times;
    for (int i = 0; i < reps; ++i) {
      const auto start = std::chrono::steady_clock::now();
      launch();
      times.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
    std::sort(times.begin(), times.end());
    return times.empty() ? 0.0 : times[times.size() / 2];
  }
  bool hwc_vectors() const override { return false; }
};

// --- values on the fp16 grid -------------------------------------------------------------------

float on_fp16_grid(float value) { return ref::half_to_float(ref::float_to_half(value)); }

std::vector<float> uniform_values(size_t count, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(count);
  for (float& v : values) v = on_fp16_grid(dist(rng));
  return values;
}

// Never zero: magnitude in [1/8, 1) times a power of two `scale`, random sign.
std::vector<float> nonzero_values(size_t count, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> magnitude(0.125f, 1.0f);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> values(count);
  for (float& v : values) v = on_fp16_grid(magnitude(rng)) * (negative(rng) ? -scale : scale);
  return values;
}

void assign(HostVector<float>& to, const std::vector<float>& values) {
  to.assign(values.begin(), values.end());
}

// 2^-round(log2(sqrt(fan_in))): keeps sums of fan_in products O(1) and stays on the fp16 grid.
float weight_scale(int64_t fan_in) {
  const int exponent = static_cast<int>(std::lround(0.5 * std::log2(std::max<double>(1, fan_in))));
  return std::ldexp(1.0f, -exponent);
}

// Random non-zero weights for every param the node lists, shaped by the graph's rule.
void bind_weights(Node& node, std::mt19937& rng) {
  int64_t fan_in = 1;
  if (node.op == OpKind::Conv) {
    const ConvAttrs& a = node.get<ConvAttrs>();
    fan_in = node.input_shapes[0][0] / a.groups * a.kernel_h * a.kernel_w;
  } else if (node.op == OpKind::Linear) {
    fan_in = shape_elements(node.input_shapes[0]);
  }
  for (Param& param : node.params) {
    param.value.shape = expected_param_shape(node, param.role);
    const auto count = static_cast<size_t>(shape_elements(param.value.shape));
    if (param.role == "weight" && node.op != OpKind::BatchNorm)
      assign(param.value.data, nonzero_values(count, rng, weight_scale(fan_in)));
    else if (param.role == "running_var")
      assign(param.value.data, uniform_values(count, rng, 0.25f, 2.0f));
    else if (param.role == "weight")  // batchnorm gamma
      assign(param.value.data, uniform_values(count, rng, 0.5f, 1.5f));
    else
      assign(param.value.data, nonzero_values(count, rng, 1.0f));
  }
}

// FNV-1a: a seed per case that does not depend on the standard library's hash.
uint32_t seed_of(const std::string& text) {
  uint32_t hash = 2166136261u;
  for (unsigned char ch : text) hash = (hash ^ ch) * 16777619u;
  return hash;
}

// --- the reference -----------------------------------------------------------------------------

void clamp_values(std::vector<float>& values, const Node& node) {
  if (node.activation == Activation::None) return;
  const ActivationBounds b = activation_bounds(node);
  for (float& v : values) v = v < b.lo ? b.lo : (v > b.hi ? b.hi : v);  // NaN passes
}

// Runs `body(first_sample, samples)` over the batch in parallel slices: the reference of the
// large cases would otherwise dominate the suite's time.
void for_sample_slices(int batch, const std::function<void(int, int)>& body) {
  const int workers =
      std::max(1, std::min<int>(batch, static_cast<int>(std::thread::hardware_concurrency())));
  if (workers == 1) return body(0, batch);
  std::vector<std::thread> threads;
  const int per = (batch + workers - 1) / workers;
  for (int first = 0; first < batch; first += per)
    threads.emplace_back(body, first, std::min(per, batch - first));
  for (std::thread& thread : threads) thread.join();
}

const float* param_data(const Node& node, const char* role) {
  const Param* param = node.find_param(role);
  return param != nullptr && !param->value.data.empty() ? param->value.data.data() : nullptr;
}

// conv + bias (+ the fused residual, inputs[1]) → clamp → max-pool, the passes' order.
std::vector<float> conv_reference(const Node& node, const std::vector<std::vector<float>>& inputs,
                                  int batch) {
  const std::vector<float>& x = inputs.at(0);
  const Shape& in = node.input_shapes[0];
  const Shape& conv_out = node.fused_maxpool ? node.pre_pool_shape : node.output_shape;
  const int c = static_cast<int>(in[0]), h = static_cast<int>(in[1]), w = static_cast<int>(in[2]);
  const int64_t in_sample = shape_elements(in), out_sample = shape_elements(conv_out);
  std::vector<float> pre(static_cast<size_t>(batch * out_sample));
  const float* weight = param_data(node, "weight");
  const float* bias = param_data(node, "bias");
  for_sample_slices(batch, [&](int first, int count) {
    ref::conv2d(x.data() + first * in_sample, count, c, h, w, weight, bias, node.get<ConvAttrs>(),
                pre.data() + first * out_sample);
  });
  if (node.fused_residual)
    ref::add(pre.data(), inputs.at(1).data(), static_cast<int64_t>(pre.size()), pre.data());
  clamp_values(pre, node);
  if (!node.fused_maxpool) return pre;
  std::vector<float> y(static_cast<size_t>(batch * shape_elements(node.output_shape)));
  ref::maxpool2d(pre.data(), batch, static_cast<int>(conv_out[0]), static_cast<int>(conv_out[1]),
                 static_cast<int>(conv_out[2]), *node.fused_maxpool, y.data());
  return y;
}

std::vector<float> linear_reference(const Node& node, const std::vector<float>& x, int batch) {
  const int in = static_cast<int>(shape_elements(node.input_shapes[0]));
  const int out = node.get<LinearAttrs>().out_features;
  std::vector<float> y(static_cast<size_t>(batch) * out);
  for_sample_slices(batch, [&](int first, int count) {
    ref::linear(x.data() + static_cast<int64_t>(first) * in, count, in, param_data(node, "weight"),
                param_data(node, "bias"), out, y.data() + static_cast<int64_t>(first) * out);
  });
  clamp_values(y, node);
  return y;
}

}  // namespace

std::vector<float> reference_output(const Node& node, const std::vector<std::vector<float>>& inputs,
                                    int batch) {
  const Shape& in = node.input_shapes.at(0);
  const std::vector<float>& x = inputs.at(0);
  const int64_t channels = in[0], spatial = shape_elements(in) / in[0];
  std::vector<float> y(static_cast<size_t>(batch * shape_elements(node.output_shape)));
  auto map_dims = [&](int& c, int& h, int& w) {
    c = static_cast<int>(in[0]);
    h = static_cast<int>(in[1]);
    w = static_cast<int>(in[2]);
  };
  int c = 0, h = 0, w = 0;
  switch (node.op) {
    case OpKind::Conv:
      return conv_reference(node, inputs, batch);
    case OpKind::Linear:
      return linear_reference(node, x, batch);
    case OpKind::Relu:
      ref::relu(x.data(), static_cast<int64_t>(x.size()), y.data());
      break;
    case OpKind::Relu6:
      ref::clamp(x.data(), static_cast<int64_t>(x.size()), 0.0f, 6.0f, y.data());
      break;
    case OpKind::Clip:
      ref::clamp(x.data(), static_cast<int64_t>(x.size()), node.get<ClipAttrs>().min,
                 node.get<ClipAttrs>().max, y.data());
      break;
    case OpKind::MaxPool:
      map_dims(c, h, w);
      ref::maxpool2d(x.data(), batch, c, h, w, node.get<PoolAttrs>(), y.data());
      break;
    case OpKind::AvgPool:
      map_dims(c, h, w);
      ref::avgpool2d(x.data(), batch, c, h, w, node.get<PoolAttrs>(), y.data());
      break;
    case OpKind::AdaptiveAvgPool:
      map_dims(c, h, w);
      ref::adaptive_avgpool2d(x.data(), batch, c, h, w, node.get<AdaptivePoolAttrs>().out_h,
                              node.get<AdaptivePoolAttrs>().out_w, y.data());
      break;
    case OpKind::Flatten:
    case OpKind::Dropout:
      y = x;  // NCHW: a flatten keeps (c, h, w) order, a dropout at inference is the identity
      break;
    case OpKind::Softmax:
      ref::softmax(x.data(), batch, channels, spatial, y.data());
      break;
    case OpKind::BatchNorm: {
      const std::vector<float> ones(channels, 1.0f), zeros(channels, 0.0f);
      const float* gamma = param_data(node, "weight");
      const float* beta = param_data(node, "bias");
      ref::batchnorm(x.data(), batch, static_cast<int>(channels), spatial,
                     gamma != nullptr ? gamma : ones.data(), beta != nullptr ? beta : zeros.data(),
                     param_data(node, "running_mean"), param_data(node, "running_var"),
                     node.get<BatchNormAttrs>().eps, y.data());
      clamp_values(y, node);
      break;
    }
    case OpKind::Add:
      ref::add(x.data(), inputs.at(1).data(), static_cast<int64_t>(x.size()), y.data());
      clamp_values(y, node);
      break;
    case OpKind::Concat: {
      std::vector<const float*> pointers;
      std::vector<int> counts;
      for (size_t i = 0; i < inputs.size(); ++i) {
        pointers.push_back(inputs[i].data());
        counts.push_back(static_cast<int>(node.input_shapes[i][0]));
      }
      ref::concat_channels(pointers.data(), counts.data(), static_cast<int>(inputs.size()), batch,
                           spatial, y.data());
      break;
    }
    case OpKind::LRN:
      ref::lrn(x.data(), batch, static_cast<int>(channels), spatial, node.get<LRNAttrs>(),
               y.data());
      break;
  }
  return y;
}

const CaseData& case_data(const OpCase& op_case) {
  static std::string cached_key;
  static std::unique_ptr<CaseData> cached;
  const std::string key = std::string(op_name(op_case.node().op)) + "/" + op_case.name;
  if (cached && cached_key == key) return *cached;
  auto data = std::make_unique<CaseData>();
  data->graph = op_case.graph;
  std::mt19937 rng(seed_of(key));
  Node& node = data->graph.nodes.back();
  bind_weights(node, rng);
  for (const Shape& shape : node.input_shapes)
    data->inputs.push_back(
        uniform_values(static_cast<size_t>(op_case.batch * shape_elements(shape)), rng,
                       op_case.input_lo, op_case.input_hi));
  data->expected = reference_output(node, data->inputs, op_case.batch);
  cached = std::move(data);
  cached_key = key;
  return *cached;
}

const HarnessDevice& cpu_harness_device() {
  static const CpuHarnessDevice device;
  return device;
}

const HarnessDevice* harness_device(Device device) {
  if (device == Device::CPU) return &cpu_harness_device();
#ifdef CNNRT_HARNESS_WITH_CUDA
  if (device == Device::CUDA) return &cuda_harness_device();
#endif
  return nullptr;
}

// --- running a kernel --------------------------------------------------------------------------

namespace {

// (c, h, w) ↔ (h, w, c) per sample of vectors flattened from `source` [C, H, W].
std::vector<float> reorder_flattened(const std::vector<float>& x, int batch, const Shape& source,
                                     bool to_hwc) {
  const int64_t c = source[0], pixels = source[1] * source[2], sample = c * pixels;
  std::vector<float> y(x.size());
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < pixels; ++p) {
        const int64_t chw = n * sample + ch * pixels + p, hwc = n * sample + p * c + ch;
        if (to_hwc)
          y[hwc] = x[chw];
        else
          y[chw] = x[hwc];
      }
  return y;
}

// Padding lanes (channels past the real ones) of `batch` samples of `shape` stored as `type`
// that are not exactly zero (NaN counts).
int64_t nonzero_padding(const std::vector<uint8_t>& bytes, const TensorType& type,
                        const Shape& shape, int batch) {
  const int64_t align = std::max(1, type.channel_align);
  const bool map = shape.size() == 3;
  const int64_t channels = map ? shape[0] : shape.back();
  const int64_t pixels = shape_elements(shape) / channels;
  const int64_t stride = (channels + align - 1) / align * align;
  const bool nhwc = !map || type.layout == Layout::NHWC;
  int64_t bad = 0;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t c = channels; c < stride; ++c) {
        const int64_t index = n * stride * pixels + (nhwc ? p * stride + c : c * pixels + p);
        float value = 0;
        if (type.dtype == DType::F32) {
          std::memcpy(&value, bytes.data() + index * 4, 4);
        } else if (type.dtype == DType::F16) {
          uint16_t bits;
          std::memcpy(&bits, bytes.data() + index * 2, 2);
          value = ref::half_to_float(bits);
        } else {
          value = static_cast<int8_t>(bytes[index]);
        }
        if (value != 0.0f) ++bad;  // NaN != 0 as well
      }
  return bad;
}

// The inputs converted for `device` in the given types, uploaded; the types in `types`.
std::vector<Buffer> upload_inputs(const CaseData& data, const OpCase& op_case,
                                  const HarnessDevice& device,
                                  const std::vector<TensorType>& types) {
  const Node& node = data.node();
  std::vector<Buffer> buffers;
  for (size_t i = 0; i < node.input_shapes.size(); ++i) {
    const Shape& shape = node.input_shapes[i];
    std::vector<float> values = data.inputs[i];
    if (i == 0 && device.hwc_vectors() && !op_case.flattened_source.empty())
      values = reorder_flattened(values, op_case.batch, op_case.flattened_source, true);
    const size_t bytes = tensor_bytes(shape, types[i], op_case.batch);
    std::vector<uint8_t> host(bytes);
    ref::convert_tensor(values.data(), fp32_nchw(), host.data(), types[i], shape, op_case.batch);
    buffers.push_back(device.alloc_poisoned(bytes));
    device.upload(buffers.back().get(), host.data(), bytes);
  }
  return buffers;
}

std::vector<TensorType> bound_types(const LayerKernel& kernel, size_t inputs,
                                    const TensorType& input0_type) {
  std::vector<TensorType> types = {input0_type};
  for (size_t i = 1; i < inputs; ++i) types.push_back(kernel.input_types(i).at(0));
  return types;
}

}  // namespace

EntryRun run_kernel(LayerKernel& kernel, const CaseData& data, const OpCase& op_case,
                    const HarnessDevice& device, const TensorType& input0_type, bool in_place) {
  const Node& node = data.node();
  const int batch = op_case.batch;
  const std::vector<TensorType> types = bound_types(kernel, node.input_shapes.size(), input0_type);
  std::vector<Buffer> inputs = upload_inputs(data, op_case, device, types);
  EntryRun run;
  run.plan = kernel.prepare({batch, types});
  Buffer workspace;
  if (run.plan.workspace_bytes > 0) workspace = device.alloc_poisoned(run.plan.workspace_bytes);
  const TensorType out_type = kernel.output_type();
  const size_t out_bytes = tensor_bytes(node.output_shape, out_type, batch);
  Buffer output;
  // A guard band after the output (its poison, read back before and after the run): a kernel
  // that writes past its output shows here without compute-sanitizer (the window conv's first
  // form stored the last unit's tail pixels past the batch).
  constexpr size_t kGuardBytes = 4096;
  std::vector<uint8_t> guard_before(kGuardBytes), guard_after(kGuardBytes);
  if (in_place) {
    if (out_bytes != inputs.at(0).bytes())
      throw std::logic_error("harness: in place needs the output to fill input 0 exactly");
  } else {
    output = device.alloc_poisoned(out_bytes + kGuardBytes);
    device.download(guard_before.data(), static_cast<uint8_t*>(output.get()) + out_bytes,
                    kGuardBytes);
  }
  KernelArgs args;
  for (const Buffer& input : inputs) args.inputs.push_back(input.get());
  args.output = in_place ? inputs[0].get() : output.get();
  args.batch = batch;
  args.workspace = workspace.get();
  args.stream = device.stream();
  args.variant = run.plan.variant;
  args.state = run.plan.state.get();
  kernel.run(args);
  device.synchronize();

  std::vector<uint8_t> host(out_bytes);
  device.download(host.data(), args.output, out_bytes);
  if (!in_place) {
    device.download(guard_after.data(), static_cast<uint8_t*>(output.get()) + out_bytes,
                    kGuardBytes);
    for (size_t i = 0; i < kGuardBytes; ++i)
      run.guard_bytes_written += guard_after[i] != guard_before[i];
  }
  // CUDA kernels run a second time into a fresh poisoned buffer (the int8 ones must repeat the
  // bytes: test_harness.cpp): a kernel that keeps state between runs (a split-K arrival counter,
  // a cached map) must leave it as it found it, and one that writes nothing the second time
  // shows as poison.  The second run reads its streamed weights evict-first, as the context
  // asks of a GEMV before a prefetched one (KernelArgs::stream_evict_first): a cache hint only.
  if (!in_place && device.device() == Device::CUDA) {
    Buffer again = device.alloc_poisoned(out_bytes);
    args.output = again.get();
    args.stream_evict_first = true;
    kernel.run(args);
    device.synchronize();
    std::vector<uint8_t> second(out_bytes);
    device.download(second.data(), again.get(), out_bytes);
    run.rerun_differs = second != host;
  }
  run.nonzero_padding = nonzero_padding(host, out_type, node.output_shape, batch);
  run.output.resize(static_cast<size_t>(batch * shape_elements(node.output_shape)));
  ref::convert_tensor(host.data(), out_type, run.output.data(), fp32_nchw(), node.output_shape,
                      batch);
  if (node.op == OpKind::Flatten && device.hwc_vectors() && node.input_shapes[0].size() == 3)
    run.output = reorder_flattened(run.output, batch, node.input_shapes[0], false);
  return run;
}

double time_kernel(LayerKernel& kernel, const CaseData& data, const OpCase& op_case,
                   const HarnessDevice& device, int reps) {
  const Node& node = data.node();
  const std::vector<TensorType> types =
      bound_types(kernel, node.input_shapes.size(), kernel.input_types(0).at(0));
  std::vector<Buffer> inputs = upload_inputs(data, op_case, device, types);
  const KernelPlan plan = kernel.prepare({op_case.batch, types});
  Buffer workspace;
  if (plan.workspace_bytes > 0) workspace = device.alloc_poisoned(plan.workspace_bytes);
  Buffer output =
      device.alloc_poisoned(tensor_bytes(node.output_shape, kernel.output_type(), op_case.batch));
  KernelArgs args;
  for (const Buffer& input : inputs) args.inputs.push_back(input.get());
  args.output = output.get();
  args.batch = op_case.batch;
  args.workspace = workspace.get();
  args.stream = device.stream();
  args.variant = plan.variant;
  args.state = plan.state.get();
  return device.median_ms([&] { kernel.run(args); }, reps);
}

std::string compare(const std::vector<float>& got, const std::vector<float>& expected,
                    const Tolerance& tolerance) {
  if (got.size() != expected.size())
    return "output has " + std::to_string(got.size()) + " values, expected " +
           std::to_string(expected.size());
  double diff2 = 0, ref2 = 0;
  int64_t non_finite = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) continue;
    if (!std::isfinite(got[i])) {
      ++non_finite;
      continue;
    }
    const double d = static_cast<double>(got[i]) - expected[i];
    diff2 += d * d;
    ref2 += static_cast<double>(expected[i]) * expected[i];
  }
  if (ref2 == 0) return "the reference output is all zeros: this check could not fail";
  const double rms = std::sqrt(ref2 / static_cast<double>(got.size()));
  double worst = 0;
  size_t worst_index = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i]) || !std::isfinite(got[i])) continue;
    const double ratio = std::fabs(static_cast<double>(got[i]) - expected[i]) /
                         (std::fabs(static_cast<double>(expected[i])) + rms);
    if (ratio > worst) {
      worst = ratio;
      worst_index = i;
    }
  }
  const double rel_l2 = std::sqrt(diff2 / ref2);
  if (non_finite == 0 && rel_l2 <= tolerance.rel_l2 && worst <= tolerance.element) return "";
  char text[320];
  std::snprintf(text, sizeof text,
                "rel L2 %.3g (limit %.3g); worst element %zu: got %.9g, expected %.9g, "
                "|diff|/(|ref|+rms) %.3g (limit %.3g); %lld non-finite (unwritten) values",
                rel_l2, tolerance.rel_l2, worst_index, static_cast<double>(got[worst_index]),
                static_cast<double>(expected[worst_index]), worst, tolerance.element,
                static_cast<long long>(non_finite));
  return text;
}

}  // namespace cnnrt::harness
