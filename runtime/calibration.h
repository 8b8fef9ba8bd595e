// Calibration: the scale of every tensor an int8 layer reads or writes (docs/QUANTIZATION.md).
//
// Three parts:
//  * the data — `Calibration`, per tensor of the fused graph its amax and scale — and its JSON
//    form (read here; written by the CLI through its atomic writer: the library writes no files);
//  * the statistics of one tensor over the calibration set, and the four methods that turn them
//    into an amax (minmax, percentile of |x|, TensorRT's entropy / KL search, and the amax of the
//    least expected squared quantisation error, mse);
//  * the collector: builds the fp32 engine of the model on the settings' device (CPU or CUDA)
//    and runs it in a context that keeps every tensor (no arena sharing), so after each forward
//    every tensor of the fused graph — the names the int8 kernels look up — is read back
//    (ContextImpl::read_tensor, as fp32) and observed.  On CUDA a layer with no fp32 kernel runs
//    its engine's fallback kernel and is read in its type (the statistics do not depend on the
//    layout); a layer that names its own kernel (`impl:`) where CUDA has no fp32 kernel serving
//    it makes the whole calibration run on the CPU.
// And the one lookup int8 kernel factories use: `int8_tensor_scale`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"
#include "graph/ir.h"

namespace cnnrt {

struct KernelBuildContext;

struct TensorCalibration {
  float amax = 0;      // what the method chose
  float scale = 0;     // what runs: real = scale × q
  std::string method;  // the method that chose amax
};

struct Calibration {
  std::string model;   // the model's name; an engine of another model refuses the calibration
  std::string method;  // "minmax", "percentile:99.99", "entropy", "mse"
  int64_t samples = 0;
  std::map<std::string, TensorCalibration> tensors;  // "input" and the fused graph's tensors
  std::string source;  // the file it was read from ("" when made in memory), for messages

  const TensorCalibration* find(const std::string& tensor) const;
};

// The JSON form (docs/QUANTIZATION.md, "The calibration file").  Reading checks the format,
// version, model, and that every amax is finite and >= 0 and every scale finite and > 0; errors
// name `source` and the tensor.  (load_calibration in cnnrt.h reads a file.)
std::string calibration_to_json(const Calibration& calibration);
Calibration calibration_from_json(const std::string& text, const std::string& source);

struct CalibrationMethod {
  enum class Kind { MinMax, Percentile, Entropy, Mse };
  Kind kind = Kind::MinMax;
  double percentile = 99.99;  // Percentile only, in (0, 100]
  std::string name() const;   // "minmax", "percentile:99.99", "entropy", "mse"
  bool needs_histogram() const { return kind != Kind::MinMax; }
};
// "minmax" | "percentile" | "percentile:P" | "entropy" | "mse"; Error otherwise.
CalibrationMethod parse_calibration_method(const std::string& text);

// |x| statistics of one tensor.  Pass 1 (observe_range) finds max |x|; pass 2 histograms |x| over
// [0, max |x|] in kFineBins bins (exact zeros also counted apart).  The percentile interpolates
// inside the fine bin; the entropy search merges the fine bins into kEntropyBins.
class TensorStatistics {
 public:
  static constexpr int kFineBins = 65536;
  static constexpr int kEntropyBins = 2048;
  static constexpr int kEntropyLevels = 128;

  // Pass 1.  Returns false (and records nothing) when a value is NaN or infinite.
  [[nodiscard]] bool observe_range(const float* values, int64_t count);
  // Pass 2, after every observe_range.
  void observe_histogram(const float* values, int64_t count);

  float max_abs() const { return max_abs_; }
  float percentile_amax(double percentile) const;  // needs pass 2
  float entropy_amax() const;                      // needs pass 2
  float mse_amax() const;                          // needs pass 2
  float amax(const CalibrationMethod& method) const;
  // The kEntropyBins histogram of the non-zero |x| (bin width max_abs / kEntropyBins).
  std::vector<uint64_t> entropy_histogram() const;

 private:
  float max_abs_ = 0;
  std::vector<uint64_t> fine_;  // allocated by the first observe_histogram
  uint64_t values_ = 0, zeros_ = 0;
};

// TensorRT's KL search on a histogram of |x| with bins of `bin_width`, with Q not renormalised
// after clipping (docs/QUANTIZATION.md, "Calibration"): returns amax = (best number of kept
// bins) × bin_width; 0 for an empty histogram.  Needs at least `levels` bins.
float entropy_threshold(const std::vector<uint64_t>& histogram, double bin_width,
                        int levels = TensorStatistics::kEntropyLevels);

// The amax whose int8 quantisation (step amax / 127, values beyond amax clipped to it) has the
// least expected squared error over a histogram of |x| with bins of `bin_width` (bin i holds the
// values around (i + 0.5) · bin_width; exact zeros left out: they are exact at every scale):
// values below half a step round to zero (error v²), values up to amax carry the rounding error
// of a uniform step, step² / 12, and values beyond amax their clipping error (v − amax)².  The
// candidates are the bins' upper edges; ties keep the larger amax.  0 for an empty histogram.
float mse_threshold(const std::vector<uint64_t>& histogram, double bin_width);

// Where the calibration inputs come from: `load(first, count, out)` writes samples
// [first, first + count) as NCHW fp32 of the model's input shape into `out` (it is called once
// per pass; throw Error naming the source for a bad sample).
struct CalibrationInputs {
  int samples = 0;
  std::function<void(int first, int count, float* out)> load;
};

struct CalibrationSettings {
  CalibrationMethod method;
  // Where the fp32 forward passes run: CUDA is ~100× faster than the CPU reference loops on
  // AlexNet-sized models (what `cnnrt build` on a GPU uses); its fp32 kernels agree with the
  // CPU's to ~1e-7 (docs/PERFORMANCE.md run 14), so the scales agree to about that too.
  Device device = Device::CPU;
  int batch = 16;       // samples per engine run
  int max_batches = 0;  // use only the first N batches; 0 = all
  // Called after every batch with (batches done, batches in all passes).
  std::function<void(int done, int total)> progress;
};

// Runs the model (weights bound) in fp32 on settings.device over the inputs and returns the
// calibration of the graph input and of every tensor a layer of the fused graph writes.  Error for
// no inputs and for a NaN/infinite value in any tensor (naming it).  `engine` (optional) receives
// the fp32 engine the passes ran on: `cnnrt build` takes its held-out reference from it rather
// than packing every layer in fp32 a second time.
Calibration calibrate(const Graph& graph, const CalibrationInputs& inputs,
                      const CalibrationSettings& settings,
                      std::shared_ptr<Engine>* engine = nullptr);

// The scale an int8 kernel of context.node must use for `tensor` (one of its inputs, or its
// own output): the calibration's entry, following views (flatten, dropout) back to the tensor
// that holds the values.  Error naming the calibration file, the layer and the tensor when
// there is no calibration, it is for another model, or it lacks the tensor.
float int8_tensor_scale(const KernelBuildContext& context, const std::string& tensor);

}  // namespace cnnrt
