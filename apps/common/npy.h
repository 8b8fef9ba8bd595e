// NumPy .npy files: the simplest way to hand tensors between the CLI and Python.
//
// Format (numpy.lib.format): "\x93NUMPY", major, minor, a little-endian header length (2 bytes
// in v1.0, 4 bytes in v2.0/3.0), an ASCII Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces and '\n' so the
// data starts on a 64-byte boundary, then the raw C-order data.
//
// We read dtype '<f4' (and '<f8', converted to float) in C order, any rank; everything else —
// bad magic, malformed header, fortran_order True, other dtypes, truncated or overlong data,
// absurd shapes — is a cnnrt::Error naming the file.  Writes are '<f4' via temp file + rename.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "graph/host_vector.h"

namespace cnnrt::apps {

struct NpyArray {
  std::vector<int64_t> shape;  // empty = a scalar (one element)
  HostVector<float> data;      // C order; filled whole by the reader
};

NpyArray read_npy(const std::string& path);
// Parses bytes already in memory; `name` is used in messages.
NpyArray parse_npy(std::string_view bytes, const std::string& name);

// Throws Error when data.size() does not match the shape.
void write_npy(const std::string& path, const std::vector<int64_t>& shape,
               const std::vector<float>& data);
// The exact bytes write_npy writes (v1.0, or v2.0 when the header needs more than 64 KiB).
std::string serialize_npy(const std::vector<int64_t>& shape, const std::vector<float>& data);

}  // namespace cnnrt::apps
