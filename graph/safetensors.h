// safetensors read/write: an 8-byte little-endian header length, a JSON header
// {"name": {"dtype": "F32"|"F16", "shape": [...], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {...}}, then the raw little-endian tensor bytes.
//
// The reader trusts nothing: header length against file size (absurd sizes rejected before any
// allocation), JSON syntax, dtypes, offsets inside the data section and matching the shape.
// The writer goes to a temporary file and renames, so a failed write leaves no half file.
#pragma once

#include <map>
#include <string>

#include "graph/ir.h"

namespace cnnrt {

enum class StoredDType { F32, F16 };

// All tensors of the file, converted to fp32.  Throws Error naming the file and tensor.
std::map<std::string, HostTensor> read_safetensors(const std::string& path);

// Writes tensors (sorted by name) in `dtype`.
void write_safetensors(const std::string& path, const std::map<std::string, HostTensor>& tensors,
                       StoredDType dtype = StoredDType::F32,
                       const std::map<std::string, std::string>& metadata = {});

// IEEE half <-> float, round to nearest even (host side; no CUDA needed).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);

}  // namespace cnnrt
