// The Python module cnnrt._cnnrt (nanobind): Engine, Context, preprocess_image over the public
// C++ API (include/cnnrt), nothing else.  docs/PYTHON.md is the user's page.
//
// Why it is shaped this way:
//  - Arrays are checked here, before the library sees them, so that a wrong dtype, shape,
//    layout or device is a ValueError that says what was expected; nanobind's own ndarray
//    constraints would raise a TypeError about overloads, or silently copy a strided array.
//  - Library errors (cnnrt::Error) become cnnrt.Error, a RuntimeError, with the same message.
//  - close() makes later calls raise RuntimeError instead of touching freed state.  Every call
//    first copies the shared_ptr it needs while holding the GIL, so a close() from another thread
//    cannot free what a call that released the GIL is using.
//  - run/profile/benchmark release the GIL.  A context is for one thread at a time (cnnrt.h), so
//    each Python context holds a mutex taken after the GIL is released: two Python threads on one
//    context wait for each other instead of racing in the arena.
//  - The output array is allocated before the GIL is released and written in place: one
//    allocation per call and no copy, which keeps the round trip close to the C++ run().
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "cnnrt/error.h"
#include "cnnrt/image.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using InputArray = nb::ndarray<nb::ro>;
using OutputArray = nb::ndarray<nb::numpy, float>;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

std::string dtype_text(nb::dlpack::dtype dtype) {
  const char* kind = "other";
  switch (static_cast<nb::dlpack::dtype_code>(dtype.code)) {
    case nb::dlpack::dtype_code::Int:
      kind = "int";
      break;
    case nb::dlpack::dtype_code::UInt:
      kind = "uint";
      break;
    case nb::dlpack::dtype_code::Float:
      kind = "float";
      break;
    case nb::dlpack::dtype_code::Bool:
      return "bool";
    case nb::dlpack::dtype_code::Complex:
      kind = "complex";
      break;
    default:
      break;
  }
  return kind + std::to_string(dtype.bits);
}

// A freshly allocated C-contiguous float32 numpy array of `shape`.
OutputArray new_float_array(const std::vector<int64_t>& shape) {
  size_t count = 1;
  std::vector<size_t> dims;
  for (int64_t d : shape) {
    dims.push_back(static_cast<size_t>(d));
    count *= static_cast<size_t>(d);
  }
  auto* data = new float[count];
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<float*>(p); });
  return OutputArray(data, dims.size(), dims.data(), owner);
}

nb::tuple to_tuple(const std::vector<int64_t>& values) {
  nb::list items;
  for (int64_t v : values) items.append(v);
  return nb::tuple(items);
}

std::vector<int64_t> with_batch(int batch, const std::vector<int64_t>& sample_shape) {
  std::vector<int64_t> shape{batch};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  return shape;
}

class PyEngine {
 public:
  explicit PyEngine(std::shared_ptr<cnnrt::Engine> engine) : engine_(std::move(engine)) {}

  std::shared_ptr<cnnrt::Engine> get() const {
    if (!engine_) throw std::runtime_error("cnnrt: the engine is closed");
    return engine_;
  }
  void close() { engine_.reset(); }
  bool closed() const { return !engine_; }

 private:
  std::shared_ptr<cnnrt::Engine> engine_;
};

class PyContext {
 public:
  PyContext(std::shared_ptr<cnnrt::ExecutionContext> context, const cnnrt::ModelInfo& model)
      : context_(std::move(context)),
        input_shape_(with_batch(context_->batch(), model.input_shape)),
        output_shape_(with_batch(context_->batch(), model.output_shape)) {}

  std::shared_ptr<cnnrt::ExecutionContext> get() const {
    if (!context_) throw std::runtime_error("cnnrt: the context is closed");
    return context_;
  }
  void close() { context_.reset(); }
  bool closed() const { return !context_; }
  const std::vector<int64_t>& input_shape() const { return input_shape_; }
  const std::vector<int64_t>& output_shape() const { return output_shape_; }
  std::mutex& mutex() { return mutex_; }

  // Raises ValueError unless `input` is a C-contiguous float32 host array of input_shape().
  void check_input(const InputArray& input) const {
    if (input.device_type() != nb::device::cpu::value)
      throw nb::value_error("cnnrt: the input must be a host (CPU) array");
    if (input.dtype() != nb::dtype<float>())
      throw nb::value_error(("cnnrt: the input must be float32, got " + dtype_text(input.dtype()) +
                             " (convert with x.astype(numpy.float32))")
                                .c_str());
    std::vector<int64_t> shape(input.ndim());
    for (size_t i = 0; i < input.ndim(); ++i) shape[i] = static_cast<int64_t>(input.shape(i));
    if (shape != input_shape_)
      throw nb::value_error(("cnnrt: the input must have shape " + shape_text(input_shape_) +
                             " (batch, then the model's input), got " + shape_text(shape))
                                .c_str());
    int64_t expected_stride = 1;  // in elements; dimensions of size 1 may have any stride
    for (size_t i = input.ndim(); i-- > 0;) {
      if (input.shape(i) != 1 && input.stride(i) != expected_stride)
        throw nb::value_error(
            "cnnrt: the input must be C-contiguous (use numpy.ascontiguousarray(x))");
      expected_stride *= static_cast<int64_t>(input.shape(i));
    }
  }

 private:
  std::shared_ptr<cnnrt::ExecutionContext> context_;
  std::vector<int64_t> input_shape_, output_shape_;
  std::mutex mutex_;
};

std::shared_ptr<PyEngine> load_engine(const std::filesystem::path& model,
                                      const std::optional<std::filesystem::path>& weights,
                                      const std::string& device, const std::string& precision,
                                      const std::optional<std::filesystem::path>& plan,
                                      const std::optional<std::filesystem::path>& calibration) {
  cnnrt::BuildOptions options;
  options.device = cnnrt::parse_device(device);
  options.precision = cnnrt::parse_precision(precision);
  std::shared_ptr<cnnrt::Engine> engine;
  {
    nb::gil_scoped_release release;  // loading and building take a while
    // calibration= overrides the scales a plan names; a stale plan (model or weights changed
    // since it was made) is refused at build, as with the CLI's --plan.
    if (calibration) options.calibration = cnnrt::load_calibration(calibration->string());
    if (plan) cnnrt::apply_plan_file(plan->string(), options);
    // A plan that pruned layers runs on its own weight file, unless weights= says otherwise.
    engine = cnnrt::Engine::load(model.string(),
                                 weights ? weights->string() : options.choices_weights, options);
  }
  return std::make_shared<PyEngine>(std::move(engine));
}

std::shared_ptr<PyContext> create_context(const PyEngine& self, int batch) {
  std::shared_ptr<cnnrt::Engine> engine = self.get();
  std::shared_ptr<cnnrt::ExecutionContext> context;
  {
    nb::gil_scoped_release release;  // a CUDA context captures its graph here
    context = engine->create_context(batch);
  }
  return std::make_shared<PyContext>(std::move(context), engine->model());
}

OutputArray run(PyContext& self, const InputArray& input) {
  std::shared_ptr<cnnrt::ExecutionContext> context = self.get();
  self.check_input(input);
  OutputArray output = new_float_array(self.output_shape());
  const auto* in = static_cast<const float*>(input.data());
  float* out = output.data();
  {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(self.mutex());
    context->run(in, context->input_count(), out, context->output_count());
  }
  return output;
}

nb::list profile(PyContext& self, int iterations) {
  std::shared_ptr<cnnrt::ExecutionContext> context = self.get();
  std::vector<cnnrt::LayerProfile> layers;
  {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(self.mutex());
    layers = context->profile(iterations);
  }
  nb::list rows;
  for (const cnnrt::LayerProfile& layer : layers) {
    nb::dict row;
    row["name"] = layer.name;
    row["sources"] = layer.sources;
    row["kernel"] = layer.kernel;
    row["variant"] = layer.variant;
    row["precision"] = layer.precision;
    row["median_ms"] = layer.median_ms;
    row["flops"] = layer.flops;
    row["bytes"] = layer.bytes;
    rows.append(row);
  }
  return rows;
}

std::vector<double> benchmark(PyContext& self, int warmup, int iterations) {
  std::shared_ptr<cnnrt::ExecutionContext> context = self.get();
  nb::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(self.mutex());
  return context->benchmark(warmup, iterations);
}

// The C++ host-to-host run() timed in a loop, on the same context and buffers as Context.run:
// tools/bench_python.py subtracts it from the Python round trip to get the binding's cost.
std::vector<double> time_cpp_run(PyContext& self, const InputArray& input, int warmup,
                                 int iterations) {
  std::shared_ptr<cnnrt::ExecutionContext> context = self.get();
  self.check_input(input);
  if (warmup < 0 || iterations < 1)
    throw nb::value_error("cnnrt: warmup must be >= 0 and iterations >= 1");
  const auto* in = static_cast<const float*>(input.data());
  std::vector<float> out(context->output_count());
  std::vector<double> times_us;
  nb::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(self.mutex());
  for (int i = 0; i < warmup + iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    context->run(in, context->input_count(), out.data(), out.size());
    const auto stop = std::chrono::steady_clock::now();
    if (i >= warmup)
      times_us.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
  }
  return times_us;
}

OutputArray preprocess_image(const std::filesystem::path& path, const PyEngine& engine) {
  std::shared_ptr<cnnrt::Engine> held = engine.get();
  std::vector<float> chw;
  {
    nb::gil_scoped_release release;
    chw = cnnrt::load_image_tensor(path.string(), held->model());
  }
  OutputArray output = new_float_array(with_batch(1, held->model().input_shape));
  if (output.size() != chw.size())  // load_image_tensor follows input_shape; keep it honest
    throw std::runtime_error("cnnrt: preprocess_image produced " + std::to_string(chw.size()) +
                             " values for an input of " + std::to_string(output.size()));
  std::copy(chw.begin(), chw.end(), output.data());
  return output;
}

void bind_engine(nb::module_& m) {
  nb::class_<PyEngine>(m, "Engine",
                       "A model built for one device: immutable, shareable across threads.")
      .def_static("load", &load_engine, "yaml"_a, "weights"_a = nb::none(), "device"_a = "auto",
                  "precision"_a = "auto", "plan"_a = nb::none(), "calibration"_a = nb::none(),
                  "Loads a model YAML and its safetensors weights (default: the file the YAML "
                  "names in `weights:`) and builds it.\n\n"
                  "device: 'auto' (CUDA when available) | 'cpu' | 'cuda'; precision: 'auto' | "
                  "'fp32' | 'fp16' | 'int8'; plan: a per-layer plan file (`cnnrt plan`); "
                  "calibration: the int8 scales file (`cnnrt calibrate`).")
      .def("create_context", &create_context, "batch"_a = 1,
           "A context that runs exactly `batch` samples at a time (one thread at a time).")
      .def("close", &PyEngine::close,
           "Drops this handle's reference; later calls raise RuntimeError.  Contexts already "
           "created keep working.")
      .def_prop_ro("closed", &PyEngine::closed)
      .def_prop_ro("name", [](const PyEngine& e) { return e.get()->model().name; })
      .def_prop_ro(
          "device",
          [](const PyEngine& e) { return std::string(cnnrt::to_string(e.get()->device())); })
      .def_prop_ro(
          "precision",
          [](const PyEngine& e) { return std::string(cnnrt::to_string(e.get()->precision())); })
      .def_prop_ro(
          "input_shape", [](const PyEngine& e) { return to_tuple(e.get()->model().input_shape); },
          "Per sample, CHW.")
      .def_prop_ro(
          "output_shape", [](const PyEngine& e) { return to_tuple(e.get()->model().output_shape); },
          "Per sample.")
      .def_prop_ro("mean", [](const PyEngine& e) { return e.get()->model().mean; })
      .def_prop_ro("std", [](const PyEngine& e) { return e.get()->model().std; })
      .def_prop_ro("labels", [](const PyEngine& e) { return e.get()->model().labels; })
      .def_prop_ro("weight_bytes", [](const PyEngine& e) { return e.get()->weight_bytes(); })
      .def(
          "describe", [](const PyEngine& e) { return e.get()->describe(); },
          "The per-step kernel choices and tensor types, as text.")
      .def(
          "__enter__", [](PyEngine& e) -> PyEngine& { return e; }, nb::rv_policy::reference)
      .def("__exit__", [](PyEngine& e, nb::args) { e.close(); });
}

void bind_context(nb::module_& m) {
  nb::class_<PyContext>(m, "Context", "Runs an engine at one batch size; one thread at a time.")
      .def("run", &run, "input"_a.noconvert(),
           "Runs the model on a C-contiguous float32 array of shape input_shape and returns a new "
           "float32 array of shape output_shape.  Releases the GIL while running.")
      .def("profile", &profile, "iterations"_a = 20,
           "Per-layer timings (median over `iterations` runs after warm-up) on the last input: "
           "one dict per executed layer with name, sources, kernel, variant, precision, "
           "median_ms, flops, bytes.")
      .def("benchmark", &benchmark, "warmup"_a = 10, "iterations"_a = 100,
           "End-to-end forward latencies in ms with the input already on the device (no host "
           "copies), one per timed run.")
      .def(
          "describe", [](const PyContext& c) { return c.get()->describe(); },
          "What the context decided at creation beyond the engine's plan, one line each ('' when "
          "nothing): on CUDA the L2 prefetch it chose by timing its candidates.")
      .def("close", &PyContext::close, "Frees the context; later calls raise RuntimeError.")
      .def_prop_ro("closed", &PyContext::closed)
      .def_prop_ro("batch", [](const PyContext& c) { return c.get()->batch(); })
      .def_prop_ro(
          "input_shape", [](const PyContext& c) { return to_tuple(c.input_shape()); },
          "(batch, C, H, W), as numpy's shape.")
      .def_prop_ro(
          "output_shape", [](const PyContext& c) { return to_tuple(c.output_shape()); },
          "(batch, ...), as numpy's shape.")
      .def(
          "__enter__", [](PyContext& c) -> PyContext& { return c; }, nb::rv_policy::reference)
      .def("__exit__", [](PyContext& c, nb::args) { c.close(); });
}

}  // namespace

NB_MODULE(_cnnrt, m) {
  m.doc() = "cnnrt: a minimal CNN inference runtime (docs/PYTHON.md)";
  m.attr("__version__") = CNNRT_VERSION;
  nb::exception<cnnrt::Error>(m, "Error", PyExc_RuntimeError);
  bind_engine(m);
  bind_context(m);
  m.def("preprocess_image", &preprocess_image, "path"_a, "engine"_a,
        "Decodes a PNG/JPEG and applies the model's preprocessing (resize, centre crop, "
        "normalise): a float32 array of shape (1, C, H, W), ready for Context.run at batch 1.");
  m.def("cuda_available", &cnnrt::cuda_available,
        "True when this build has the CUDA backend and a usable GPU.");
  m.def("_time_cpp_run", &time_cpp_run, "context"_a, "input"_a.noconvert(), "warmup"_a,
        "iterations"_a,
        "Microseconds per C++ run() on this context and input (the binding's overhead baseline; "
        "tools/bench_python.py).");
}
