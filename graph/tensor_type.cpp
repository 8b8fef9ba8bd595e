#include "graph/tensor_type.h"

#include <cstdio>

namespace cnnrt {

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "fp32";
    case DType::F16:
      return "fp16";
    case DType::I8:
      return "int8";
  }
  return "?";
}

const char* to_string(Layout layout) { return layout == Layout::NCHW ? "NCHW" : "NHWC"; }

size_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 4;
    case DType::F16:
      return 2;
    case DType::I8:
      return 1;
  }
  return 0;
}

bool TensorType::operator==(const TensorType& other) const {
  return dtype == other.dtype && layout == other.layout && channel_align == other.channel_align &&
         (dtype != DType::I8 || scale == other.scale);
}

std::string to_string(const TensorType& type) {
  std::string out = std::string(to_string(type.dtype)) + " " + to_string(type.layout);
  if (type.channel_align > 1) out += "/" + std::to_string(type.channel_align);
  if (type.dtype == DType::I8 && type.scale > 0) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, " scale %.6g", static_cast<double>(type.scale));
    out += buffer;
  }
  return out;
}

size_t tensor_bytes(const Shape& shape, const TensorType& type, int batch) {
  const int64_t align = type.channel_align > 1 ? type.channel_align : 1;
  auto padded = [align](int64_t value) { return (value + align - 1) / align * align; };
  int64_t per_sample = 0;
  if (shape.size() == 3) {
    per_sample = padded(shape[0]) * shape[1] * shape[2];
  } else if (shape.empty()) {
    per_sample = padded(1);
  } else {
    per_sample = padded(shape.back());
    for (size_t i = 0; i + 1 < shape.size(); ++i) per_sample *= shape[i];
  }
  return static_cast<size_t>(batch) * static_cast<size_t>(per_sample) * dtype_bytes(type.dtype);
}

}  // namespace cnnrt
