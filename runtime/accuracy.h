// Int8 accuracy report: how far the network's output moves from fp32 when one layer alone, or
// every layer, runs in int8 (docs/QUANTIZATION.md, "Accuracy reports").
//
// Every configuration is an ordinary engine built with the per-layer precision machinery
// (BuildOptions::layer_choices: the one layer at `precision`, the rest fp32; or the engine-wide
// precision for the whole network), run on the CPU over the same inputs as the fp32 reference.
// So a row's figure is exactly what `cnnrt run --plan` with that one layer at int8 gives; nothing
// here computes a layer differently from the engine.
//
// The metrics compare the configuration's output y with the fp32 output r, sample by sample
// (an output is flattened per sample; for a classifier its entries are the class scores):
//   rel L2    sqrt(Σ (y - r)²) / sqrt(Σ r²), pooled over every value of every sample;
//   top-1     share of samples whose argmax agrees (ties: the lowest index, as numpy.argmax);
//   top-5     share of samples where r's argmax is among y's five largest (the fp32 prediction
//             counted as the label of a top-5 accuracy; only with ≥ 5 outputs per sample);
//   KL        mean over samples of KL(softmax(r) ‖ softmax(y)) in nats, in double; when the
//             graph ends in a softmax its outputs are the probabilities (renormalised in
//             double; a zero where fp32 has mass counts as 1e-300).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/ir.h"
#include "runtime/calibration.h"

namespace cnnrt {

struct OutputAgreement {
  int64_t samples = 0;
  double rel_l2 = 0;
  double top1 = 0;  // share in [0, 1]; valid when has_top1
  double top5 = 0;  // share in [0, 1]; valid when has_top5
  double kl = 0;    // nats per sample; valid when has_kl
  bool has_top1 = false, has_top5 = false, has_kl = false;
};

// Accumulates the metrics above over batches.
class AgreementAccumulator {
 public:
  // outputs: values per sample; probabilities: the outputs are already softmax probabilities.
  AgreementAccumulator(int64_t outputs, bool probabilities);
  // reference and test: `count` samples × outputs values each.
  void add(const float* reference, const float* test, int count);
  OutputAgreement result() const;

 private:
  int64_t outputs_;
  bool probabilities_;
  int64_t samples_ = 0, top1_ = 0, top5_ = 0;
  double error_squares_ = 0, reference_squares_ = 0, kl_sum_ = 0;
};

struct AccuracyRow {
  std::string layer;                 // the fused layer ("" for the whole-network row)
  std::vector<std::string> sources;  // YAML layers it covers
  OutputAgreement agreement;
  int rank = 0;  // 1 = the largest rel L2 among the per-layer rows; 0 for the whole network
};

struct AccuracyReport {
  std::string model;
  std::string calibration;  // its file ("" when made in memory) and method, for the header
  std::string method;
  std::string precision;  // the precision under test ("int8")
  int64_t samples = 0;
  std::vector<AccuracyRow> layers;  // network order
  AccuracyRow whole;                // every layer that has a kernel at `precision`
  int whole_layers = 0;             // how many layers the whole-network row runs at `precision`

  std::string to_table() const;
  std::string to_json() const;
};

struct AccuracySettings {
  Precision precision = Precision::INT8;  // FP32 gives an all-zero report (a self-check)
  int batch = 8;                          // samples per engine run
  int max_samples = 0;                    // use only the first N samples; 0 = all
  // The fused layers (or source layers) to report alone; empty = every layer the
  // whole-network engine runs at `precision`.  A name it does not run there is an Error.
  std::vector<std::string> layers;
  bool per_layer = true;  // false: only the whole-network row
  // Called before each configuration with (configurations done, total, its name).
  std::function<void(int done, int total, const std::string& name)> progress;
};

// Runs `engine` over the first `samples` inputs, `batch` at a time (a last, smaller batch gets a
// context of its own; the full ones go through ContextImpl::run_many, a submission per
// `chunk_bytes` of inputs); returns samples × output elements.  Shared by this report and the
// automatic plan (runtime/auto_plan_measure.cpp).
std::vector<float> run_over_inputs(const Engine& engine, const CalibrationInputs& inputs,
                                   int samples, int batch, int64_t chunk_bytes = int64_t{64} << 20);
// The same over inputs already in memory (samples × input elements, contiguous): each chunk is
// submitted from `inputs` itself, with no host copy (the automatic plan's held-out set, run by
// every candidate: a fresh copy of it per run cost ~20 ms of page faults and copying).
std::vector<float> run_over_inputs(const Engine& engine, const float* inputs, int samples,
                                   int batch, int64_t chunk_bytes = int64_t{64} << 20);

// Builds the fp32 reference and one engine per configuration on the CPU, runs them over the
// inputs, and returns the report.  `calibration` may be null only for FP32.  Errors: an empty
// input set, a layer that is not in the model or has no kernel at the precision, and every
// build error (a missing calibration tensor names the file, the layer and the tensor).
AccuracyReport accuracy_report(const Graph& graph, std::shared_ptr<const Calibration> calibration,
                               const CalibrationInputs& inputs, const AccuracySettings& settings);

}  // namespace cnnrt
