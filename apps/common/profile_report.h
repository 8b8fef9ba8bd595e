// Turning per-layer profile rows into what people read: a text table, JSON, a Chrome trace.
//
// One formatter serves `cnnrt profile` and `alexnet_infer --profile`, so the two never
// disagree.  Achieved rates are shown next to the device's peak for the layer's precision
// (fp16 → peak_fp16_tflops, fp32 → peak_fp32_tflops, int8 → 2 × the fp16 peak, the dense int8
// tensor-core rate on Ampere/Hopper), and bandwidth next to peak DRAM bandwidth.  A peak the
// device does not know (0, as for the CPU) drops its "% peak" / "% bw" column instead of
// inventing one; rates are in TFLOP/s when the total reaches 1 TFLOP/s, else in GFLOP/s.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"

namespace cnnrt::apps {

// Peak TFLOP/s (or TOP/s) of `device` for a layer running in `precision` ("fp16", ...); 0 when
// unknown.
double peak_tflops(const DeviceInfo& device, const std::string& precision);

// Sources joined with '+' ("conv1+relu1+pool1"); the layer name when there are none.
std::string join_sources(const LayerProfile& layer);

// One row per layer plus a total row.
std::string format_profile_table(const std::vector<LayerProfile>& layers, const DeviceInfo& device);
// compare_kernels() rows grouped by layer, the chosen kernel first (marked '*'), each with its
// speed relative to the chosen one (2.00x = twice as fast).
std::string format_compare_table(const std::vector<LayerProfile>& candidates,
                                 const DeviceInfo& device);

// {"name","sources","kernel","precision","median_ms","share","tflops","gbs","flops","bytes"};
// share is median_ms / total_ms.
nlohmann::json layer_json(const LayerProfile& layer, double total_ms);
// Chrome trace / Perfetto: layers laid back to back from their median times (microseconds).
nlohmann::json trace_json(const std::vector<LayerProfile>& layers);

double total_ms(const std::vector<LayerProfile>& layers);

// Fixed-width text table; numeric-looking cells are right-aligned.
std::string format_text_table(const std::vector<std::string>& header,
                              const std::vector<std::vector<std::string>>& rows);
// About three significant digits ("0.00155", "2.47", "38.8", "247"); "0" for <= 0.
std::string significant(double value);
// printf("%.*f") into a string.
std::string fixed(double value, int digits);

}  // namespace cnnrt::apps
