// Calibration: file format, statistics and methods, the collector (see calibration.h).
#include "runtime/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "graph/bounded_read.h"
#include "graph/host_parallel.h"
#include "kernels/cpu/int8_ref.h"
#include "runtime/build_trace.h"
#include "runtime/engine_impl.h"
#include "runtime/kernel.h"

namespace cnnrt {

const TensorCalibration* Calibration::find(const std::string& tensor) const {
  auto it = tensors.find(tensor);
  return it == tensors.end() ? nullptr : &it->second;
}

// --- the file --------------------------------------------------------------------------------

namespace {

constexpr const char* kFormat = "cnnrt-calibration";
constexpr int kVersion = 1;
// A calibration file holds one small object per tensor (a few hundred bytes); these bound what a
// hostile or mistaken file can make the JSON parser do: thousands of layers fit easily.
constexpr uint64_t kMaxCalibrationBytes = 64u << 20;
constexpr int kMaxCalibrationDepth = 16;
constexpr uint64_t kMaxCalibrationValues = uint64_t{1} << 22;

}  // namespace

std::string calibration_to_json(const Calibration& calibration) {
  nlohmann::ordered_json root;
  root["format"] = kFormat;
  root["version"] = kVersion;
  root["model"] = calibration.model;
  root["method"] = calibration.method;
  root["samples"] = calibration.samples;
  nlohmann::ordered_json tensors = nlohmann::ordered_json::object();
  for (const auto& [name, entry] : calibration.tensors) {
    nlohmann::ordered_json item;
    // float → double is exact and the writer prints enough digits to read the same float back.
    item["amax"] = static_cast<double>(entry.amax);
    item["scale"] = static_cast<double>(entry.scale);
    item["method"] = entry.method.empty() ? calibration.method : entry.method;
    tensors[name] = item;
  }
  root["tensors"] = tensors;
  return root.dump(2) + "\n";
}

Calibration calibration_from_json(const std::string& text, const std::string& source) {
  auto fail = [&](const std::string& message) -> void { throw Error(source + ": " + message); };
  if (text.size() > kMaxCalibrationBytes)
    fail("calibration text of " + std::to_string(text.size()) + " bytes is larger than " +
         std::to_string(kMaxCalibrationBytes) + " bytes");
  const std::string shape_problem =
      json_shape_problem(text, kMaxCalibrationDepth, kMaxCalibrationValues);
  if (!shape_problem.empty()) fail("not a calibration file (" + shape_problem + ")");
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    throw Error(source + ": not a calibration file (invalid JSON: " + error.what() + ")");
  }
  if (!root.is_object()) fail("not a calibration file (expected a JSON object)");
  if (!root.contains("format") || !root["format"].is_string() ||
      root["format"].get<std::string>() != kFormat)
    fail(std::string("not a calibration file (\"format\" must be \"") + kFormat + "\")");
  if (!root.contains("version") || !root["version"].is_number_integer() ||
      root["version"].get<int64_t>() != kVersion)
    fail("unsupported calibration version (this cnnrt reads version " + std::to_string(kVersion) +
         ")");
  for (const auto& item : root.items()) {
    static const char* known[] = {"format", "version", "model", "method", "samples", "tensors"};
    if (std::find_if(std::begin(known), std::end(known),
                     [&](const char* key) { return item.key() == key; }) == std::end(known))
      fail("unknown key '" + item.key() + "'");
  }
  Calibration calibration;
  calibration.source = source;
  if (!root.contains("model") || !root["model"].is_string() ||
      root["model"].get<std::string>().empty())
    fail("\"model\" must be the model's name");
  calibration.model = root["model"].get<std::string>();
  if (root.contains("method")) {
    if (!root["method"].is_string()) fail("\"method\" must be a string");
    calibration.method = root["method"].get<std::string>();
  }
  if (root.contains("samples")) {
    if (!root["samples"].is_number_integer() || root["samples"].get<int64_t>() < 0)
      fail("\"samples\" must be a non-negative integer");
    calibration.samples = root["samples"].get<int64_t>();
  }
  if (!root.contains("tensors") || !root["tensors"].is_object())
    fail("\"tensors\" must be an object mapping tensor names to {amax, scale}");
  for (const auto& item : root["tensors"].items()) {
    const std::string where = "tensor '" + item.key() + "': ";
    const nlohmann::json& value = item.value();
    if (!value.is_object()) fail(where + "expected {\"amax\": ..., \"scale\": ...}");
    for (const auto& field : value.items())
      if (field.key() != "amax" && field.key() != "scale" && field.key() != "method")
        fail(where + "unknown key '" + field.key() + "' (valid: amax, scale, method)");
    TensorCalibration entry;
    if (!value.contains("amax") || !value["amax"].is_number())
      fail(where + "\"amax\" must be a number");
    if (!value.contains("scale") || !value["scale"].is_number())
      fail(where + "\"scale\" must be a number");
    const double amax = value["amax"].get<double>(), scale = value["scale"].get<double>();
    if (!std::isfinite(amax) || amax < 0 || amax > std::numeric_limits<float>::max())
      fail(where + "amax must be finite and >= 0");
    if (!std::isfinite(scale) || !(scale > 0) || scale > std::numeric_limits<float>::max() ||
        static_cast<float>(scale) == 0.0f)
      fail(where + "scale must be finite and > 0, got " + value["scale"].dump());
    entry.amax = static_cast<float>(amax);
    entry.scale = static_cast<float>(scale);
    if (value.contains("method")) {
      if (!value["method"].is_string()) fail(where + "\"method\" must be a string");
      entry.method = value["method"].get<std::string>();
    } else {
      entry.method = calibration.method;
    }
    calibration.tensors[item.key()] = entry;
  }
  return calibration;
}

std::shared_ptr<const Calibration> load_calibration(const std::string& path) {
  return std::make_shared<const Calibration>(calibration_from_json(
      read_bounded_text_file(path, "calibration file", kMaxCalibrationBytes), path));
}

// --- methods ---------------------------------------------------------------------------------

std::string CalibrationMethod::name() const {
  switch (kind) {
    case Kind::MinMax:
      return "minmax";
    case Kind::Percentile: {
      std::ostringstream out;
      out << "percentile:" << percentile;
      return out.str();
    }
    case Kind::Entropy:
      return "entropy";
    case Kind::Mse:
      return "mse";
  }
  return "?";
}

CalibrationMethod parse_calibration_method(const std::string& text) {
  CalibrationMethod method;
  if (text == "minmax") return method;
  if (text == "entropy") {
    method.kind = CalibrationMethod::Kind::Entropy;
    return method;
  }
  if (text == "mse") {
    method.kind = CalibrationMethod::Kind::Mse;
    return method;
  }
  const std::string prefix = "percentile";
  if (text.compare(0, prefix.size(), prefix) == 0) {
    method.kind = CalibrationMethod::Kind::Percentile;
    if (text.size() == prefix.size()) return method;
    if (text[prefix.size()] == ':') {
      const std::string number = text.substr(prefix.size() + 1);
      char* end = nullptr;
      const double value = std::strtod(number.c_str(), &end);
      if (!number.empty() && end == number.c_str() + number.size() && value > 0 && value <= 100) {
        method.percentile = value;
        return method;
      }
      throw Error("calibration method '" + text + "': the percentile must be in (0, 100]");
    }
  }
  throw Error("unknown calibration method '" + text +
              "' (valid: minmax, percentile, percentile:P, entropy, mse)");
}

bool TensorStatistics::observe_range(const float* values, int64_t count) {
  float max_abs = max_abs_;
  for (int64_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) return false;
    max_abs = std::max(max_abs, std::fabs(values[i]));
  }
  max_abs_ = max_abs;
  return true;
}

void TensorStatistics::observe_histogram(const float* values, int64_t count) {
  if (fine_.empty()) fine_.assign(kFineBins, 0);
  const double bins_per_unit = max_abs_ > 0 ? kFineBins / static_cast<double>(max_abs_) : 0.0;
  for (int64_t i = 0; i < count; ++i) {
    const double magnitude = std::fabs(static_cast<double>(values[i]));
    if (magnitude == 0) ++zeros_;
    // Values above pass 1's max (none when both passes see the same data) go to the last bin.
    const int64_t bin =
        std::min<int64_t>(static_cast<int64_t>(magnitude * bins_per_unit), kFineBins - 1);
    ++fine_[static_cast<size_t>(bin)];
  }
  values_ += static_cast<uint64_t>(count);
}

float TensorStatistics::percentile_amax(double percentile) const {
  if (values_ == 0 || max_abs_ == 0) return 0.0f;
  const double target = percentile / 100.0 * static_cast<double>(values_);
  const double width = static_cast<double>(max_abs_) / kFineBins;
  double below = 0;  // values in the bins before `bin`
  for (int bin = 0; bin < kFineBins; ++bin) {
    const double here = static_cast<double>(fine_[bin]);
    if (here > 0 && below + here >= target) {
      // Values spread evenly over the bin: the fraction of it the target needs.
      const double fraction = std::clamp((target - below) / here, 0.0, 1.0);
      return static_cast<float>(std::min((bin + fraction) * width, static_cast<double>(max_abs_)));
    }
    below += here;
  }
  return max_abs_;
}

std::vector<uint64_t> TensorStatistics::entropy_histogram() const {
  std::vector<uint64_t> coarse(kEntropyBins, 0);
  if (fine_.empty()) return coarse;
  constexpr int kMerge = kFineBins / kEntropyBins;
  for (int bin = 0; bin < kFineBins; ++bin) coarse[bin / kMerge] += fine_[bin];
  coarse[0] -= zeros_;  // zero is exact at every scale: it says nothing about where to clip
  return coarse;
}

float TensorStatistics::entropy_amax() const {
  if (values_ == 0 || max_abs_ == 0) return 0.0f;
  const float amax =
      entropy_threshold(entropy_histogram(), static_cast<double>(max_abs_) / kEntropyBins);
  return std::min(amax, max_abs_);
}

float TensorStatistics::amax(const CalibrationMethod& method) const {
  switch (method.kind) {
    case CalibrationMethod::Kind::MinMax:
      return max_abs_;
    case CalibrationMethod::Kind::Percentile:
      return percentile_amax(method.percentile);
    case CalibrationMethod::Kind::Entropy:
      return entropy_amax();
    case CalibrationMethod::Kind::Mse:
      return mse_amax();
  }
  return max_abs_;
}

float TensorStatistics::mse_amax() const {
  if (values_ == 0 || max_abs_ == 0) return 0.0f;
  std::vector<uint64_t> nonzero = fine_;
  nonzero[0] -= zeros_;  // zero is exact at every scale
  const float amax = mse_threshold(nonzero, static_cast<double>(max_abs_) / kFineBins);
  return std::min(amax, max_abs_);
}

float mse_threshold(const std::vector<uint64_t>& histogram, double bin_width) {
  const size_t bins = histogram.size();
  // Prefix sums over the bins' centres v (in units of bin_width): count, Σ v, Σ v², so each
  // candidate's three error terms cost O(1).
  std::vector<double> count(bins + 1, 0.0), first(bins + 1, 0.0), second(bins + 1, 0.0);
  for (size_t i = 0; i < bins; ++i) {
    const double c = static_cast<double>(histogram[i]), v = static_cast<double>(i) + 0.5;
    count[i + 1] = count[i] + c;
    first[i + 1] = first[i] + c * v;
    second[i + 1] = second[i] + c * v * v;
  }
  if (count[bins] == 0) return 0.0f;
  size_t best = bins;
  double best_error = std::numeric_limits<double>::infinity();
  for (size_t kept = 1; kept <= bins; ++kept) {  // amax = the upper edge of bin kept - 1
    const double amax = static_cast<double>(kept), step = amax / 127.0;
    // The bins whose centre i + 0.5 is below half a step round to zero: the first `zero`.
    const size_t zero =
        std::min(kept, static_cast<size_t>(std::max(0.0, std::ceil(step / 2 - 0.5))));
    const double rounds_to_zero = second[zero];
    const double rounded = (count[kept] - count[zero]) * step * step / 12.0;
    const double tail_count = count[bins] - count[kept], tail_first = first[bins] - first[kept],
                 tail_second = second[bins] - second[kept];
    const double clipped = tail_second - 2 * amax * tail_first + amax * amax * tail_count;
    const double error = rounds_to_zero + rounded + clipped;
    if (error <= best_error) {  // ties: the larger amax
      best_error = error;
      best = kept;
    }
  }
  return static_cast<float>(static_cast<double>(best) * bin_width);
}

float entropy_threshold(const std::vector<uint64_t>& histogram, double bin_width, int levels) {
  const int bins = static_cast<int>(histogram.size());
  if (levels < 1 || bins < levels)
    throw Error("entropy calibration: need at least " + std::to_string(levels) + " bins");
  double total = 0;
  for (uint64_t count : histogram) total += static_cast<double>(count);
  if (total == 0) return 0.0f;

  std::vector<double> clipped(bins + 1, 0.0);  // clipped[i] = mass in bins i..end
  for (int j = bins - 1; j >= 0; --j) clipped[j] = clipped[j + 1] + histogram[j];

  int best_bins = bins;
  double best_divergence = std::numeric_limits<double>::infinity();
  std::vector<double> p, level_mass, level_bins;
  for (int kept = levels; kept <= bins; ++kept) {
    // P: the first `kept` bins, the clipped mass folded into the last one (TensorRT).
    p.assign(histogram.begin(), histogram.begin() + kept);
    p[kept - 1] += clipped[kept];
    // Q: the same bins without the clipped mass, merged into `levels` levels; each level's mass
    // spread evenly over its bins where P is non-zero (TensorRT).
    level_mass.assign(levels, 0.0);
    level_bins.assign(levels, 0.0);
    for (int j = 0; j < kept; ++j) {
      const int level = static_cast<int>(static_cast<int64_t>(j) * levels / kept);
      level_mass[level] += static_cast<double>(histogram[j]);
      if (p[j] > 0) level_bins[level] += 1;
    }
    // Both are divided by the same total: the clipped mass is lost from Q, not spread over the
    // kept bins (see docs/QUANTIZATION.md); a bin of P whose level of Q saw nothing counts as
    // half an observation there, so a clipped tail beyond empty bins costs a finite amount.
    double divergence = 0;
    for (int j = 0; j < kept; ++j) {
      if (p[j] == 0) continue;
      const int level = static_cast<int>(static_cast<int64_t>(j) * levels / kept);
      const double mass = level_mass[level] / level_bins[level];
      const double q = (mass > 0 ? mass : 0.5) / total;
      const double p_normalised = p[j] / total;
      divergence += p_normalised * std::log(p_normalised / q);
    }
    if (divergence < best_divergence) {
      best_divergence = divergence;
      best_bins = kept;
    }
  }
  return static_cast<float>(best_bins * bin_width);
}

// --- the collector ---------------------------------------------------------------------------

namespace {

// The fp32 engine the collector runs on `device`.  A layer that names its own kernel (`impl:`)
// keeps a request — it stays unfused, so the tensors are those of the engine the calibration is
// for — but for the device's fp32 entry of its op; Error when the device has none or the build
// refuses it (the caller then calibrates on the CPU, whose reference kernels take every node).
// A layer with no fp32 kernel on the device and no request runs the builder's fallback kernel
// and is read in the type it writes.
std::shared_ptr<Engine> fp32_engine(const Graph& graph, Device device) {
  Graph fp32_graph = graph;
  for (Node& node : fp32_graph.nodes) {
    node.precision_request.clear();
    if (node.kernel_request.empty()) continue;
    node.kernel_request.clear();
    for (const KernelEntry& entry : KernelRegistry::instance().entries())
      if (entry.op == node.op && entry.device == device && entry.precision == Precision::FP32 &&
          !entry.baseline) {
        node.kernel_request = entry.name;
        break;
      }
    if (node.kernel_request.empty())
      throw Error(std::string("calibration: no ") + to_string(device) + " fp32 kernel for layer '" +
                  node.name + "'");
  }
  BuildOptions options;
  options.device = device;
  options.precision = Precision::FP32;
  options.fuse_residual = false;  // the int8 engine keeps its adds: measure their tensors
  return Engine::build(std::move(fp32_graph), options);
}

}  // namespace

Calibration calibrate(const Graph& graph, const CalibrationInputs& inputs,
                      const CalibrationSettings& settings, std::shared_ptr<Engine>* engine_used) {
  if (inputs.samples < 1 || !inputs.load) throw Error("calibration: the input set is empty");
  if (settings.batch < 1) throw Error("calibration: the batch must be at least 1");
  if (settings.max_batches < 0) throw Error("calibration: the batch count must be at least 1");
  int samples = inputs.samples;
  if (settings.max_batches > 0)
    samples = static_cast<int>(
        std::min<int64_t>(samples, static_cast<int64_t>(settings.max_batches) * settings.batch));
  const int batch = std::min(settings.batch, samples);

  BuildTrace trace("[calibration] ");  // CNNRT_TRACE_BUILD=1: engine, then the passes
  std::shared_ptr<Engine> engine;
  if (settings.device != Device::CPU) {
    try {
      engine = fp32_engine(graph, settings.device);
    } catch (const Error&) {
      // A layer the device cannot run in fp32 as the model asks: the CPU reference can.
    }
  }
  if (!engine) engine = fp32_engine(graph, Device::CPU);
  trace.mark(std::string("fp32 engine built (") + to_string(engine->device()) + ")");
  const EngineImpl& impl = engine->impl();
  // Contexts that keep every tensor (no arena sharing), so each can be read after the forward.
  const std::shared_ptr<const EngineImpl> shared = engine->shared_impl();

  std::vector<std::string> names = {"input"};
  for (const Step& step : impl.steps)
    if (!step.is_conversion()) names.push_back(step.name);
  std::vector<TensorStatistics> statistics(names.size());  // names[i]'s

  const int64_t sample_size = shape_elements(impl.model.input_shape);
  std::vector<float> input(static_cast<size_t>(batch * sample_size));
  std::vector<float> output(static_cast<size_t>(batch * shape_elements(impl.model.output_shape)));
  const int batches = (samples + batch - 1) / batch;
  const int passes = settings.method.needs_histogram() ? 2 : 1;
  std::unique_ptr<ContextImpl> full, last;
  int done = 0;
  for (int pass = 0; pass < passes; ++pass)
    for (int b = 0; b < batches; ++b) {
      const int first = b * batch, count = std::min(batch, samples - first);
      std::unique_ptr<ContextImpl>& context = count == batch ? full : last;
      if (!context)
        context = impl.backend->create_context(
            shared, count, {/*keep_all_tensors=*/true, /*timed_choices=*/false});
      inputs.load(first, count, input.data());
      context->run(input.data(), output.data());
      // Every tensor read back first (one stream), then each tensor's statistics, which are
      // its own, on the host's cores: one thread took most of AlexNet's ~1.5 s calibration.
      std::vector<std::vector<float>> reads(names.size());
      for (size_t i = 1; i < names.size(); ++i) reads[i] = context->read_tensor(names[i]);
      std::vector<char> not_finite(names.size(), 0);
      parallel_for(names.size(), 1, [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) {
          // The input as given (the context holds the same values).
          const float* values = i == 0 ? input.data() : reads[i].data();
          const int64_t elements = shape_elements(impl.tensors.at(names[i]).shape) * count;
          TensorStatistics& stats = statistics[i];
          if (pass == 0)
            not_finite[i] = stats.observe_range(values, elements) ? 0 : 1;
          else
            stats.observe_histogram(values, elements);
        }
      });
      // The first tensor in network order with a NaN or infinity, as a serial pass would name.
      for (size_t i = 0; i < names.size(); ++i)
        if (not_finite[i])
          throw Error("calibration: tensor '" + names[i] + "' has a NaN or infinite value for " +
                      (i == 0 ? "input samples " : "the inputs of samples ") +
                      std::to_string(first) + ".." + std::to_string(first + count - 1));
      if (settings.progress) settings.progress(++done, passes * batches);
    }

  trace.mark(std::to_string(passes) + " passes over " + std::to_string(samples) + " samples (" +
             std::to_string(batches) + " batches)");
  Calibration calibration;
  calibration.model = graph.name;
  calibration.method = settings.method.name();
  calibration.samples = samples;
  // Each tensor's threshold is its own: on the host's cores.  The entropy search tries ~1,900
  // clipping points over 2,048 bins (~60 ms a tensor on one core): serially it was ~0.5 s of
  // AlexNet's GPU calibration and most of EfficientNet-Lite0's (docs/PERFORMANCE.md run 30).
  std::vector<float> amax(names.size());
  parallel_for(names.size(), 1, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) amax[i] = statistics[i].amax(settings.method);
  });
  trace.mark("thresholds (" + calibration.method + ")");
  for (size_t i = 0; i < names.size(); ++i) {
    TensorCalibration entry;
    entry.amax = amax[i];
    entry.scale = ref::scale_from_amax(entry.amax);
    entry.method = calibration.method;
    calibration.tensors[names[i]] = entry;
  }
  if (engine_used != nullptr) *engine_used = engine;
  return calibration;
}

// --- the lookup of int8 kernels --------------------------------------------------------------

float int8_tensor_scale(const KernelBuildContext& context, const std::string& tensor) {
  const Graph& graph = context.graph;
  ErrorSite site = node_site(context);
  site.tensor = tensor;
  const Calibration* calibration = context.calibration;
  if (calibration == nullptr)
    throw_error(site,
                "int8 needs the tensor's scale from a calibration (pass --calib CALIB.json, made "
                "by `cnnrt calibrate`; BuildOptions::calibration in the library)");
  const std::string file = calibration->source.empty() ? "the calibration" : calibration->source;
  if (calibration->model != graph.name)
    throw_error(site,
                file + " is for model '" + calibration->model + "', not '" + graph.name + "'");
  // Views hold their input's values: their scale is the input's.
  std::string holder = tensor;
  for (const Node* producer = graph.find(holder);
       producer != nullptr && !producer->inputs.empty() &&
       (producer->op == OpKind::Flatten || producer->op == OpKind::Dropout);
       producer = graph.find(holder))
    holder = producer->inputs[0];
  const TensorCalibration* entry = calibration->find(holder);
  if (entry == nullptr)
    throw_error(site, file + " has no entry for tensor '" + holder +
                          "' (calibrate this model again: `cnnrt calibrate`)");
  if (!(entry->scale > 0) || !std::isfinite(entry->scale))
    throw_error(site, file + ": tensor '" + holder + "' has no positive finite scale");
  return entry->scale;
}

}  // namespace cnnrt
