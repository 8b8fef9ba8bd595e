// libFuzzer target: image decoding (PNG via libpng, JPEG via libjpeg-turbo) and the whole
// preprocessing pipeline on arbitrary bytes.  Every input is decoded twice: the two results
// must be identical (a decoder that reads uninitialised memory gives heap-dependent pixels).
// The input size picks grey or RGB and the crop size (so seeds are plain image files); the
// pixel limit is lowered to 2^20 so a run is not dominated by a few huge images (the code
// paths are the same).
#include <algorithm>
#include <cmath>
#include <vector>

#include "cnnrt/error.h"
#include "cnnrt/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int channels = (size & 1) ? 1 : 3;
  const int crop = 1 + static_cast<int>((size >> 1) % 64);
  const std::vector<unsigned char> bytes(data, data + size);
  cnnrt::Image first, second;
  std::string first_error, second_error;
  try {
    first = cnnrt::decode_image_from_memory(bytes, "fuzz", channels, 1 << 20);
  } catch (const cnnrt::Error& error) {
    first_error = error.what();
  }
  try {
    second = cnnrt::decode_image_from_memory(bytes, "fuzz", channels, 1 << 20);
  } catch (const cnnrt::Error& error) {
    second_error = error.what();
  }
  if (first_error != second_error || first.pixels != second.pixels) __builtin_trap();
  if (!first_error.empty()) {
    if (first_error.size() <= std::string("fuzz: cannot decode PNG image: ").size())
      __builtin_trap();  // an error must carry a reason
    return 0;
  }
  try {
    const cnnrt::Image resized =
        cnnrt::resize_shorter_side(first, static_cast<int>(std::lround(crop * 256.0 / 224.0)));
    const cnnrt::Image cropped = cnnrt::center_crop(resized, crop, crop);
    const std::vector<float> chw = cnnrt::normalize_to_chw(cropped, {}, {});
    // Decoded values are 0..255 and resampling is a convex combination, so the [0, 1] scaling
    // stays in range up to float rounding (luma weights sum to 1 + 2^-23).
    for (float v : chw)
      if (!(v >= -1e-5f && v <= 1.0f + 1e-5f)) __builtin_trap();
  } catch (const cnnrt::Error&) {
    // Only a too-small or absurd aspect ratio may fail here.
  }
  return 0;
}
