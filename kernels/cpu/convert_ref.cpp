#include "kernels/cpu/convert_ref.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "cnnrt/error.h"

namespace cnnrt::ref {

uint16_t float_to_half(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t exponent = (bits >> 23) & 0xffu;
  uint32_t mantissa = bits & 0x7fffffu;
  if (exponent == 0xffu) return static_cast<uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u : 0u));
  const int e = static_cast<int>(exponent) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow: inf
  if (e <= 0) {  // subnormal half (or zero): shift the implicit-one mantissa into place
    if (e < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000u;
    const int shift = 14 - e;
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into inf: right
  return static_cast<uint16_t>(sign | half);
}

float half_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  float value;
  if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    value = mantissa ? std::nanf("") : INFINITY;
  } else {
    value = std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
  }
  return sign ? -value : value;
}

int8_t quantize_int8(float value, float scale) {
  const float q = std::nearbyint(value / scale);  // the default mode rounds to nearest even
  // NaN gives 0, as the GPU's cvt.rni.sat.s8.f32 and __float2int_rn do (measured on an H100;
  // docs/QUANTIZATION.md); cvt saturates low to -128, so a GPU quantiser clamps to -127 after it.
  if (std::isnan(q)) return 0;
  if (q < -127.0f) return -127;
  if (q > 127.0f) return 127;
  return static_cast<int8_t>(q);
}

namespace {

// Logical (n, c, pixel) ↔ element offset for one type; vectors are rows of `channels`.
struct Addressing {
  int64_t channels = 1, pixels = 1, stride = 1;  // stride: padded channel count
  Layout layout = Layout::NCHW;
  int64_t offset(int64_t n, int64_t c, int64_t p) const {
    const int64_t sample = n * stride * pixels;
    return layout == Layout::NHWC ? sample + p * stride + c : sample + c * pixels + p;
  }
  int64_t sample_elements() const { return stride * pixels; }
};

Addressing addressing(const Shape& shape, const TensorType& type) {
  Addressing a;
  const int64_t align = type.channel_align > 1 ? type.channel_align : 1;
  if (shape.size() == 3) {
    a.channels = shape[0];
    a.pixels = shape[1] * shape[2];
    a.layout = type.layout;
  } else {
    a.channels = shape.empty() ? 1 : shape.back();
    for (size_t i = 0; i + 1 < shape.size(); ++i) a.pixels *= shape[i];
    a.layout = Layout::NHWC;  // rows of the last dimension
  }
  a.stride = (a.channels + align - 1) / align * align;
  return a;
}

float load(const void* base, const TensorType& type, int64_t index) {
  switch (type.dtype) {
    case DType::F32:
      return static_cast<const float*>(base)[index];
    case DType::F16:
      return half_to_float(static_cast<const uint16_t*>(base)[index]);
    case DType::I8:
      return type.scale * static_cast<float>(static_cast<const int8_t*>(base)[index]);
  }
  return 0;
}

void store(void* base, const TensorType& type, int64_t index, float value) {
  switch (type.dtype) {
    case DType::F32:
      static_cast<float*>(base)[index] = value;
      break;
    case DType::F16:
      static_cast<uint16_t*>(base)[index] = float_to_half(value);
      break;
    case DType::I8:
      static_cast<int8_t*>(base)[index] = quantize_int8(value, type.scale);
      break;
  }
}

}  // namespace

void convert_tensor(const void* x, const TensorType& from, void* y, const TensorType& to,
                    const Shape& shape, int batch) {
  if ((from.dtype == DType::I8 && !(from.scale > 0)) || (to.dtype == DType::I8 && !(to.scale > 0)))
    throw Error("convert: an int8 tensor needs a positive scale");
  const Addressing in = addressing(shape, from), out = addressing(shape, to);
  // Zero the whole output first so padding lanes are zeros whatever the layout.
  std::memset(y, 0, static_cast<size_t>(batch) * out.sample_elements() * dtype_bytes(to.dtype));
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t c = 0; c < in.channels; ++c)
      for (int64_t p = 0; p < in.pixels; ++p)
        store(y, to, out.offset(n, c, p), load(x, from, in.offset(n, c, p)));
}

}  // namespace cnnrt::ref
