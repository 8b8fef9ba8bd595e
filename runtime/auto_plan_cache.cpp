// What runtime/auto_plan.h keeps between builds: the TimingCache file (step times and whole
// results), and on top of it the calibration an automatic build makes for itself.  Kept apart
// from auto_plan_measure.cpp (engines and timings) so each file stays one concern.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "graph/atomic_write.h"
#include "graph/bounded_read.h"
#include "graph/tensor_type.h"
#include "runtime/auto_plan.h"
#include "runtime/content_hash.h"
#include "runtime/plan_file.h"

namespace cnnrt {
std::string text_hash(const std::string& text) {
  return hash_hex(hash_bytes(text.data(), text.size()));
}

std::string input_set_key(const Graph& graph, const CalibrationInputs& inputs) {
  uint64_t hash = kHashSeed;
  if (inputs.samples > 0 && inputs.load) {
    const size_t per_sample = static_cast<size_t>(shape_elements(graph.input.shape));
    std::vector<float> chunk;
    // 64 samples a chunk: ImageNet-sized ones make 38 MB, hashed in blocks on the host's cores.
    for (int first = 0; first < inputs.samples; first += 64) {
      const int count = std::min(64, inputs.samples - first);
      chunk.resize(per_sample * static_cast<size_t>(count));  // load() writes every value
      inputs.load(first, count, chunk.data());
      hash = hash_bytes_blocked(chunk.data(), chunk.size() * sizeof(float), hash);
    }
  }
  return hash_hex(hash) + "/n" + std::to_string(inputs.samples);
}

std::shared_ptr<const Calibration> cached_calibration(const Graph& graph,
                                                      const CalibrationInputs& inputs,
                                                      const CalibrationSettings& settings,
                                                      TimingCache* cache, bool* computed,
                                                      std::shared_ptr<Engine>* engine) {
  if (engine != nullptr) engine->reset();
  // The calibration depends only on the model (structure and weights), the samples, the method
  // and where its fp32 passes ran (CPU and CUDA agree to ~1e-7, not bit for bit): not on the
  // plan's batch, so every build of this model on this set and device shares it.
  const std::string key = "calibration|" + std::string(to_string(settings.device)) + "|" +
                          model_fingerprint(graph) + "|" + input_set_key(graph, inputs) + "|" +
                          settings.method.name() + "|b" + std::to_string(settings.batch) + "|m" +
                          std::to_string(settings.max_batches);
  std::vector<double> values;
  std::string text;
  if (cache != nullptr && cache->lookup_result(key, &values, &text)) {
    if (computed != nullptr) *computed = false;
    return std::make_shared<Calibration>(calibration_from_json(text, "the timing cache"));
  }
  auto calibration = std::make_shared<Calibration>(calibrate(graph, inputs, settings, engine));
  if (cache != nullptr) cache->store_result(key, {}, calibration_to_json(*calibration));
  if (computed != nullptr) *computed = true;
  return calibration;
}

TimingCache::TimingCache(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec)) return;  // a first build: the cache is made
  // A cache holds a number per candidate step and a short result per candidate engine: a few
  // MB for big models.  The limits stop a wrong path or a hostile file before the JSON parser.
  constexpr uint64_t kMaxCacheBytes = 256u << 20;
  const std::string text = read_bounded_text_file(path_, "timing cache", kMaxCacheBytes);
  const std::string shape_problem = json_shape_problem(text, 8, uint64_t{1} << 26);
  if (!shape_problem.empty())
    throw Error(path_ + ": not a valid timing cache (" + shape_problem + ")");
  try {
    const nlohmann::json root = nlohmann::json::parse(text);
    // Types first: nlohmann's get<int> of a float out of int's range is undefined behaviour
    // (fuzz_timing_cache: "version": 6.7e38).
    const bool ours = root.is_object() && root.contains("format") && root["format"].is_string() &&
                      root["format"].get<std::string>() == "cnnrt-timing-cache" &&
                      root.contains("version") && root["version"].is_number_integer() &&
                      root["version"] == 1;
    if (!ours) throw Error("not a cnnrt timing cache (format cnnrt-timing-cache, version 1)");
    for (const auto& [key, value] : root.at("entries").items()) entries_[key] = value.get<double>();
    if (root.contains("results"))
      for (const auto& [key, value] : root.at("results").items())
        results_[key] = {value.at("values").get<std::vector<double>>(),
                         value.at("text").get<std::string>()};
  } catch (const nlohmann::json::exception& error) {
    throw Error(path_ + ": not a valid timing cache: " + error.what());
  } catch (const Error& error) {
    throw Error(path_ + ": " + error.what());
  }
}

bool TimingCache::lookup(const std::string& key, double* ms) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  *ms = it->second;
  return true;
}

void TimingCache::store(const std::string& key, double ms) {
  entries_[key] = ms;
  dirty_ = true;
}

bool TimingCache::lookup_result(const std::string& key, std::vector<double>* values,
                                std::string* text) const {
  auto it = results_.find(key);
  if (it == results_.end()) return false;
  *values = it->second.first;
  *text = it->second.second;
  return true;
}

void TimingCache::store_result(const std::string& key, const std::vector<double>& values,
                               const std::string& text) {
  results_[key] = {values, text};
  dirty_ = true;
}

void TimingCache::save() const {
  if (path_.empty() || !dirty_) return;
  nlohmann::ordered_json root;
  root["format"] = "cnnrt-timing-cache";
  root["version"] = 1;
  root["entries"] = entries_;
  nlohmann::ordered_json results = nlohmann::ordered_json::object();
  for (const auto& [key, value] : results_)
    results[key] = {{"values", value.first}, {"text", value.second}};
  root["results"] = results;
  write_text_file(path_, root.dump(1) + "\n");
}

}  // namespace cnnrt
