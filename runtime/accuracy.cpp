// Int8 accuracy report (runtime/accuracy.h): the fp32 reference, one engine per configuration
// through BuildOptions::layer_choices, and the output metrics.  Every engine runs on the CPU,
// whose int8 kernels are the integer reference (docs/QUANTIZATION.md), so the figures are what
// the arithmetic gives, on any machine.
#include "runtime/accuracy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "graph/host_parallel.h"
#include "runtime/engine_impl.h"

namespace cnnrt {
namespace {

constexpr const char* kOrigin = "accuracy report";

// The model with its own precision and kernel requests dropped: the reference is fp32
// everywhere, and each configuration sets exactly the precisions it is about.
Graph plain_graph(const Graph& graph) {
  Graph plain = graph;
  for (Node& node : plain.nodes) {
    node.precision_request.clear();
    node.kernel_request.clear();
  }
  return plain;
}

BuildOptions cpu_options(Precision precision, std::shared_ptr<const Calibration> calibration) {
  BuildOptions options;
  options.device = Device::CPU;
  options.precision = precision;
  options.calibration = std::move(calibration);
  // Every engine of one report has the same layers: those of the calibration (int8 builds keep
  // residual adds as layers of their own), also an fp32-only one built without a calibration.
  options.fuse_residual = false;
  return options;
}

// The fused layers the engine runs at `precision` (conversion steps excluded), in order.
std::vector<const Step*> layers_at(const Engine& engine, Precision precision) {
  std::vector<const Step*> layers;
  for (const Step& step : engine.impl().steps)
    if (!step.is_conversion() && step.precision == precision) layers.push_back(&step);
  return layers;
}

// The requested layers (fused or source names) as steps of `available`, in network order.
std::vector<const Step*> select_layers(const Graph& graph,
                                       const std::vector<const Step*>& available,
                                       const std::vector<std::string>& requested,
                                       Precision precision) {
  if (requested.empty()) return available;
  std::map<std::string, std::string> fused_of;  // any layer name -> its fused node
  for (const Node& node : graph.nodes) {
    fused_of[node.name] = node.name;
    for (const std::string& source : node.source_layers) fused_of[source] = node.name;
  }
  std::set<std::string> wanted;
  for (const std::string& name : requested) {
    auto it = std::find_if(available.begin(), available.end(), [&](const Step* step) {
      return step->name == name ||
             std::find(step->sources.begin(), step->sources.end(), name) != step->sources.end();
    });
    if (it == available.end()) {
      std::string names;
      for (const Step* step : available) names += (names.empty() ? "" : ", ") + step->name;
      throw Error(std::string(kOrigin) + ": layer '" + name + "' " +
                  (fused_of.count(name) == 0 ? "is not in model " + graph.name
                                             : std::string("does not run at ") +
                                                   to_string(precision) + " in " + graph.name) +
                  " (layers at " + to_string(precision) + ": " + names + ")");
    }
    wanted.insert((*it)->name);
  }
  std::vector<const Step*> selected;
  for (const Step* step : available)
    if (wanted.count(step->name) != 0) selected.push_back(step);
  return selected;
}

// Ranks the per-layer rows by rel L2, largest first (1 = most sensitive); ties keep network
// order.
void rank_rows(std::vector<AccuracyRow>& rows) {
  std::vector<size_t> order(rows.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return rows[a].agreement.rel_l2 > rows[b].agreement.rel_l2;
  });
  for (size_t r = 0; r < order.size(); ++r) rows[order[r]].rank = static_cast<int>(r) + 1;
}

std::string join(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : separator) + part;
  return out;
}

void add_agreement(nlohmann::ordered_json& item, const OutputAgreement& a) {
  item["rel_l2"] = a.rel_l2;
  item["top1"] = a.has_top1 ? nlohmann::ordered_json(a.top1) : nlohmann::ordered_json();
  item["top5"] = a.has_top5 ? nlohmann::ordered_json(a.top5) : nlohmann::ordered_json();
  item["kl"] = a.has_kl ? nlohmann::ordered_json(a.kl) : nlohmann::ordered_json();
}

std::string share_text(bool valid, double share) {
  if (!valid) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", 100.0 * share);
  return text;
}

std::string row_text(const std::string& rank, const std::string& layer, const std::string& sources,
                     const OutputAgreement& a) {
  char kl[32] = "-";
  if (a.has_kl) std::snprintf(kl, sizeof kl, "%.3e", a.kl);
  char line[512];
  std::snprintf(line, sizeof line, "%4s  %-14s %-44s %10.6f %8s %8s %11s\n", rank.c_str(),
                layer.c_str(), sources.c_str(), a.rel_l2, share_text(a.has_top1, a.top1).c_str(),
                share_text(a.has_top5, a.top5).c_str(), kl);
  return line;
}

}  // namespace

namespace {

// run_over_inputs' one loop; `chunk(first, count)` gives the address of inputs first ..
// first + count - 1, contiguous (loaded into a buffer, or where they already are).
template <typename Chunk>
std::vector<float> run_in_chunks(const Engine& engine, int samples, int batch, int64_t chunk_bytes,
                                 Chunk chunk) {
  const int64_t input_size = shape_elements(engine.model().input_shape);
  const int64_t output_size = shape_elements(engine.model().output_shape);
  if (batch < 1) throw Error("run_over_inputs: the batch must be at least 1");
  std::vector<float> outputs(static_cast<size_t>(samples * output_size));
  // Full batches go through run_many in chunks of up to `chunk_bytes` of inputs (one submission
  // each on CUDA instead of a round trip per batch); a short last batch has a context of its own.
  const int full_batches = samples / batch;
  const int64_t batch_bytes = std::max<int64_t>(1, batch * input_size * int64_t{sizeof(float)});
  const int per_chunk = static_cast<int>(
      std::clamp<int64_t>(chunk_bytes / batch_bytes, 1, std::max(full_batches, 1)));
  // Contexts that only collect outputs time no choices at creation (ContextOptions): an
  // automatic plan runs every candidate over the held-out set.
  const ContextOptions collect{/*keep_all_tensors=*/false, /*timed_choices=*/false};
  if (full_batches > 0) {
    std::unique_ptr<ExecutionContext> full = create_context(engine, batch, collect);
    for (int done = 0; done < full_batches;) {
      const int runs = std::min(per_chunk, full_batches - done);
      const int first = done * batch;
      full->impl().run_many(chunk(first, runs * batch), outputs.data() + first * output_size, runs);
      done += runs;
    }
  }
  if (const int rest = samples - full_batches * batch; rest > 0) {
    const int first = full_batches * batch;
    create_context(engine, rest, collect)
        ->run(chunk(first, rest), outputs.data() + first * output_size);
  }
  return outputs;
}

}  // namespace

std::vector<float> run_over_inputs(const Engine& engine, const CalibrationInputs& inputs,
                                   int samples, int batch, int64_t chunk_bytes) {
  const int64_t input_size = shape_elements(engine.model().input_shape);
  HostVector<float> buffer;  // each chunk's inputs; load() writes every value
  return run_in_chunks(engine, samples, batch, chunk_bytes, [&](int first, int count) {
    buffer.resize(static_cast<size_t>(count * input_size));
    inputs.load(first, count, buffer.data());
    return static_cast<const float*>(buffer.data());
  });
}

std::vector<float> run_over_inputs(const Engine& engine, const float* inputs, int samples,
                                   int batch, int64_t chunk_bytes) {
  const int64_t input_size = shape_elements(engine.model().input_shape);
  return run_in_chunks(engine, samples, batch, chunk_bytes,
                       [&](int first, int) { return inputs + first * input_size; });
}

AgreementAccumulator::AgreementAccumulator(int64_t outputs, bool probabilities)
    : outputs_(outputs), probabilities_(probabilities) {
  if (outputs < 1) throw Error("accuracy: the model has no outputs");
}

void AgreementAccumulator::add(const float* reference, const float* test, int count) {
  for (int s = 0; s < count; ++s) {
    const float* r = reference + s * outputs_;
    const float* y = test + s * outputs_;
    for (int64_t i = 0; i < outputs_; ++i) {
      const double d = static_cast<double>(y[i]) - r[i];
      error_squares_ += d * d;
      reference_squares_ += static_cast<double>(r[i]) * r[i];
    }
    const int64_t label = std::max_element(r, r + outputs_) - r;  // first maximum, as numpy
    const int64_t predicted = std::max_element(y, y + outputs_) - y;
    top1_ += predicted == label ? 1 : 0;
    // The label's place in y sorted by value, descending, ties by index (a stable sort).
    int64_t place = 0;
    for (int64_t i = 0; i < outputs_; ++i)
      place += (y[i] > y[label] || (y[i] == y[label] && i < label)) ? 1 : 0;
    top5_ += place < 5 ? 1 : 0;
    double kl = 0;
    if (probabilities_) {
      // Normalised again in double: an fp32 softmax sums to 1 only within a few ulps, which
      // matters next to the tiny divergences of a good quantisation.
      double r_sum = 0, y_sum = 0;
      for (int64_t i = 0; i < outputs_; ++i) {
        r_sum += r[i];
        y_sum += y[i];
      }
      for (int64_t i = 0; i < outputs_; ++i) {
        if (!(r[i] > 0)) continue;
        const double p = r[i] / r_sum, q = std::max(y[i] / y_sum, 1e-300);
        kl += p * (std::log(p) - std::log(q));
      }
    } else {
      // log-softmax in double, shifted by the maximum for range.
      const double r_max = r[label], y_max = y[predicted];
      double r_sum = 0, y_sum = 0;
      for (int64_t i = 0; i < outputs_; ++i) {
        r_sum += std::exp(double(r[i]) - r_max);
        y_sum += std::exp(double(y[i]) - y_max);
      }
      const double r_lse = r_max + std::log(r_sum), y_lse = y_max + std::log(y_sum);
      for (int64_t i = 0; i < outputs_; ++i) {
        const double log_p = double(r[i]) - r_lse, log_q = double(y[i]) - y_lse;
        kl += std::exp(log_p) * (log_p - log_q);
      }
    }
    kl_sum_ += kl;
  }
  samples_ += count;
}

OutputAgreement AgreementAccumulator::result() const {
  OutputAgreement a;
  a.samples = samples_;
  if (samples_ == 0) return a;
  a.rel_l2 = reference_squares_ > 0 ? std::sqrt(error_squares_ / reference_squares_)
                                    : std::sqrt(error_squares_);
  a.has_top1 = a.has_kl = outputs_ >= 2;
  a.has_top5 = outputs_ >= 5;
  a.top1 = static_cast<double>(top1_) / samples_;
  a.top5 = static_cast<double>(top5_) / samples_;
  a.kl = kl_sum_ / samples_;
  return a;
}

AccuracyReport accuracy_report(const Graph& graph, std::shared_ptr<const Calibration> calibration,
                               const CalibrationInputs& inputs, const AccuracySettings& settings) {
  if (inputs.samples < 1 || !inputs.load) throw Error("accuracy: the input set is empty");
  if (settings.batch < 1) throw Error("accuracy: the batch must be at least 1");
  if (settings.precision == Precision::Auto)
    throw Error("accuracy: give the precision to test (int8)");
  const int samples =
      settings.max_samples > 0 ? std::min(settings.max_samples, inputs.samples) : inputs.samples;
  const int batch = std::min(settings.batch, samples);
  const Graph plain = plain_graph(graph);

  const auto reference_engine = Engine::build(plain, cpu_options(Precision::FP32, nullptr));
  const int64_t outputs = shape_elements(reference_engine->model().output_shape);
  const Node* output_node =
      reference_engine->impl().graph->find(reference_engine->impl().graph->output);
  const bool probabilities = output_node != nullptr && output_node->op == OpKind::Softmax;
  // The whole-network engine also says which layers have a kernel at the precision.
  const auto whole_engine = Engine::build(plain, cpu_options(settings.precision, calibration));
  const std::vector<const Step*> available = layers_at(*whole_engine, settings.precision);
  std::vector<const Step*> selected;
  if (settings.per_layer)
    selected =
        select_layers(*whole_engine->impl().graph, available, settings.layers, settings.precision);

  AccuracyReport report;
  report.model = graph.name;
  if (calibration) {
    report.calibration = calibration->source;
    report.method = calibration->method;
  }
  report.precision = to_string(settings.precision);
  report.samples = samples;
  report.whole_layers = static_cast<int>(available.size());

  const int total = static_cast<int>(selected.size()) + 2;
  int done = 0;
  auto progress = [&](const std::string& name) {
    if (settings.progress) settings.progress(done++, total, name);
  };
  progress("fp32 reference");
  const std::vector<float> reference = run_over_inputs(*reference_engine, inputs, samples, batch);
  auto measure = [&](const Engine& engine) {
    const std::vector<float> output = run_over_inputs(engine, inputs, samples, batch);
    AgreementAccumulator accumulator(outputs, probabilities);
    accumulator.add(reference.data(), output.data(), samples);
    return accumulator.result();
  };

  for (const Step* step : selected) {
    progress(step->name);
    BuildOptions options = cpu_options(Precision::FP32, calibration);
    options.layer_choices[step->name] = LayerChoice{settings.precision, "", kOrigin, ""};
    AccuracyRow row;
    row.layer = step->name;
    row.sources = step->sources;
    row.agreement = measure(*Engine::build(plain, options));
    report.layers.push_back(std::move(row));
  }
  rank_rows(report.layers);
  progress("all layers");
  report.whole.agreement = measure(*whole_engine);
  if (settings.progress) settings.progress(total, total, "");
  return report;
}

std::string AccuracyReport::to_table() const {
  std::string out = std::string(precision) + " vs fp32, model " + model + ", calibration " +
                    (calibration.empty() ? "(in memory)" : calibration) +
                    (method.empty() ? "" : " (" + method + ")") + ", " + std::to_string(samples) +
                    " samples\n";
  out += "each row: that layer alone at " + precision +
         ", every other layer fp32; rank 1 = largest rel L2\n";
  char header[256];
  std::snprintf(header, sizeof header, "%4s  %-14s %-44s %10s %8s %8s %11s\n", "rank", "layer",
                "sources", "rel L2", "top-1 %", "top-5 %", "KL (nats)");
  out += header;
  out += std::string(std::string(header).size() - 1, '-') + "\n";
  for (const AccuracyRow& row : layers)
    out += row_text(std::to_string(row.rank), row.layer, join(row.sources, "+"), row.agreement);
  out += row_text("", "all " + precision, std::to_string(whole_layers) + " layers at " + precision,
                  whole.agreement);
  return out;
}

std::string AccuracyReport::to_json() const {
  nlohmann::ordered_json root;
  root["format"] = "cnnrt-accuracy";
  root["version"] = 1;
  root["model"] = model;
  root["calibration"] = calibration;
  root["method"] = method;
  root["precision"] = precision;
  root["samples"] = samples;
  root["metrics"] = {
      {"rel_l2", "sqrt(sum((y - r)^2)) / sqrt(sum(r^2)) over all outputs, r = fp32"},
      {"top1", "share of samples whose argmax equals fp32's"},
      {"top5", "share of samples whose fp32 argmax is among the five largest outputs"},
      {"kl", "mean over samples of KL(softmax(r) || softmax(y)), nats"}};
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const AccuracyRow& row : layers) {
    nlohmann::ordered_json item;
    item["layer"] = row.layer;
    item["sources"] = row.sources;
    item["rank"] = row.rank;
    add_agreement(item, row.agreement);
    rows.push_back(item);
  }
  root["layers"] = rows;
  nlohmann::ordered_json all;
  add_agreement(all, whole.agreement);
  all["layers_at_precision"] = whole_layers;
  root["all"] = all;
  return root.dump(1) + "\n";
}

}  // namespace cnnrt
