// Image decoding (stb_image) and the torchvision-style preprocessing steps; see cnnrt/image.h.
//
// The file is read into memory first so a missing file (errno) and a corrupt one (stb's reason)
// give different messages, and the header is probed with stbi_info before decoding so a hostile
// width × height is rejected before any large allocation.  The resize is separable: a weight
// table per output row/column, computed once per axis, then one horizontal and one vertical pass.
#include "cnnrt/image.h"

#include <stb_image.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>

#include "graph/ir.h"

namespace cnnrt {
namespace {

[[noreturn]] void image_error(const std::string& name, const std::string& message) {
  ErrorSite site;
  site.file = name;
  throw_error(site, message);
}

std::vector<unsigned char> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) image_error(path, std::string("cannot open image: ") + std::strerror(errno));
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  if (in.bad()) image_error(path, std::string("cannot read image: ") + std::strerror(errno));
  return bytes;
}

// One output sample of a resampled axis: the first input index it reads and its weights.
struct FilterTap {
  int first = 0;
  std::vector<float> weights;
};

// PIL-style resampling weights for one axis.  The triangle filter has support 1 in output
// units; when shrinking it is stretched by the scale so every input pixel contributes
// (this is the antialiasing), when enlarging it stays 1 and reduces to bilinear interpolation.
std::vector<FilterTap> triangle_taps(int in_size, int out_size) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = 1.0 * filter_scale;
  std::vector<FilterTap> taps(out_size);
  for (int i = 0; i < out_size; ++i) {
    const double center = (i + 0.5) * scale;
    int lo = static_cast<int>(center - support + 0.5);
    int hi = static_cast<int>(center + support + 0.5);
    lo = std::max(lo, 0);
    hi = std::min(hi, in_size);
    FilterTap& tap = taps[i];
    tap.first = lo;
    double total = 0;
    std::vector<double> raw;
    for (int x = lo; x < hi; ++x) {
      const double t = (x - center + 0.5) / filter_scale;
      const double w = std::max(0.0, 1.0 - std::fabs(t));
      raw.push_back(w);
      total += w;
    }
    if (total <= 0) {  // cannot happen for sane sizes; fall back to nearest
      tap.first = std::min(static_cast<int>(center), in_size - 1);
      tap.weights = {1.0f};
      continue;
    }
    for (double w : raw) tap.weights.push_back(static_cast<float>(w / total));
  }
  return taps;
}

void check_size(const char* what, int width, int height) {
  if (width < 1 || height < 1 || static_cast<long long>(width) * height > kMaxImagePixels) {
    throw Error(std::string(what) + ": invalid image size " + std::to_string(width) + "x" +
                std::to_string(height));
  }
}

}  // namespace

Image decode_image_from_memory(const std::vector<unsigned char>& bytes, const std::string& name,
                               int channels) {
  if (channels != 1 && channels != 3) {
    image_error(name, "unsupported channel count " + std::to_string(channels) +
                          " (images decode to 1 or 3 channels)");
  }
  if (bytes.empty()) image_error(name, "cannot decode image: file is empty");
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    image_error(name, "cannot decode image: file is larger than 2 GiB");
  }
  const int length = static_cast<int>(bytes.size());
  int width = 0, height = 0, file_channels = 0;
  if (!stbi_info_from_memory(bytes.data(), length, &width, &height, &file_channels)) {
    const char* reason = stbi_failure_reason();
    image_error(name, std::string("cannot decode image: ") + (reason ? reason : "unknown format") +
                          " (PNG, JPEG, BMP, GIF, TGA, PSD, PNM and HDR are supported)");
  }
  if (width < 1 || height < 1) {
    image_error(
        name, "image has zero size (" + std::to_string(width) + "x" + std::to_string(height) + ")");
  }
  if (static_cast<long long>(width) * height > kMaxImagePixels) {
    image_error(name, "image is too large (" + std::to_string(width) + "x" +
                          std::to_string(height) + ", at most " + std::to_string(kMaxImagePixels) +
                          " pixels)");
  }
  int got_w = 0, got_h = 0, got_c = 0;
  std::unique_ptr<unsigned char, void (*)(void*)> data(
      stbi_load_from_memory(bytes.data(), length, &got_w, &got_h, &got_c, 3), stbi_image_free);
  if (!data) {
    const char* reason = stbi_failure_reason();
    image_error(name, std::string("cannot decode image: ") + (reason ? reason : "unknown error"));
  }
  if (got_w != width || got_h != height) {  // header and pixel data disagree: distrust both
    image_error(name, "cannot decode image: inconsistent dimensions");
  }

  Image image;
  image.width = width;
  image.height = height;
  image.channels = channels;
  const size_t pixel_count = static_cast<size_t>(width) * height;
  image.pixels.resize(pixel_count * channels);
  const unsigned char* rgb = data.get();
  if (channels == 3) {
    for (size_t i = 0; i < pixel_count * 3; ++i) image.pixels[i] = rgb[i];
  } else {
    // ITU-R 601-2 luma, the weights PIL's convert("L") uses.
    for (size_t i = 0; i < pixel_count; ++i) {
      image.pixels[i] = 0.299f * rgb[3 * i] + 0.587f * rgb[3 * i + 1] + 0.114f * rgb[3 * i + 2];
    }
  }
  return image;
}

Image decode_image(const std::string& path, int channels) {
  return decode_image_from_memory(read_file_bytes(path), path, channels);
}

Image resize_bilinear_antialias(const Image& image, int out_width, int out_height) {
  check_size("resize input", image.width, image.height);
  check_size("resize output", out_width, out_height);
  const int c_count = image.channels;
  if (image.pixels.size() != static_cast<size_t>(image.width) * image.height * c_count) {
    throw Error("resize: image buffer does not match its size");
  }

  // Horizontal pass: height × out_width.
  const std::vector<FilterTap> x_taps = triangle_taps(image.width, out_width);
  std::vector<float> wide(static_cast<size_t>(image.height) * out_width * c_count);
  for (int y = 0; y < image.height; ++y) {
    for (int x = 0; x < out_width; ++x) {
      const FilterTap& tap = x_taps[x];
      for (int c = 0; c < c_count; ++c) {
        float sum = 0;
        for (size_t k = 0; k < tap.weights.size(); ++k) {
          sum += tap.weights[k] * image.at(y, tap.first + static_cast<int>(k), c);
        }
        wide[(static_cast<size_t>(y) * out_width + x) * c_count + c] = sum;
      }
    }
  }

  // Vertical pass.
  const std::vector<FilterTap> y_taps = triangle_taps(image.height, out_height);
  Image out;
  out.width = out_width;
  out.height = out_height;
  out.channels = c_count;
  out.pixels.assign(static_cast<size_t>(out_height) * out_width * c_count, 0.0f);
  for (int y = 0; y < out_height; ++y) {
    const FilterTap& tap = y_taps[y];
    for (size_t k = 0; k < tap.weights.size(); ++k) {
      const float w = tap.weights[k];
      const float* row = &wide[static_cast<size_t>(tap.first + k) * out_width * c_count];
      float* dst = &out.pixels[static_cast<size_t>(y) * out_width * c_count];
      for (int i = 0; i < out_width * c_count; ++i) dst[i] += w * row[i];
    }
  }
  return out;
}

Image resize_shorter_side(const Image& image, int shorter_side) {
  check_size("resize input", image.width, image.height);
  if (shorter_side < 1) throw Error("resize: target size must be positive");
  const bool wide = image.width >= image.height;
  const long long short_in = wide ? image.height : image.width;
  const long long long_in = wide ? image.width : image.height;
  const long long long_out = std::max(1LL, long_in * shorter_side / short_in);
  if (long_out > INT_MAX) throw Error("resize: aspect ratio too extreme");
  const int out_w = wide ? static_cast<int>(long_out) : shorter_side;
  const int out_h = wide ? shorter_side : static_cast<int>(long_out);
  if (out_w == image.width && out_h == image.height) return image;
  return resize_bilinear_antialias(image, out_w, out_h);
}

Image center_crop(const Image& image, int out_width, int out_height) {
  if (out_width < 1 || out_height < 1) throw Error("center crop: size must be positive");
  if (out_width > image.width || out_height > image.height) {
    throw Error("center crop: " + std::to_string(out_width) + "x" + std::to_string(out_height) +
                " does not fit in a " + std::to_string(image.width) + "x" +
                std::to_string(image.height) + " image");
  }
  // nearbyint in the default rounding mode is round-half-even, like Python's round().
  const int top = static_cast<int>(std::nearbyint((image.height - out_height) / 2.0));
  const int left = static_cast<int>(std::nearbyint((image.width - out_width) / 2.0));
  Image out;
  out.width = out_width;
  out.height = out_height;
  out.channels = image.channels;
  out.pixels.resize(static_cast<size_t>(out_width) * out_height * image.channels);
  const size_t row_values = static_cast<size_t>(out_width) * image.channels;
  for (int y = 0; y < out_height; ++y) {
    const float* src =
        &image.pixels[(static_cast<size_t>(top + y) * image.width + left) * image.channels];
    std::copy(src, src + row_values, &out.pixels[y * row_values]);
  }
  return out;
}

std::vector<float> normalize_to_chw(const Image& image, const std::vector<float>& mean,
                                    const std::vector<float>& std) {
  const int c_count = image.channels;
  if (mean.size() != std.size() || (!mean.empty() && mean.size() != static_cast<size_t>(c_count))) {
    throw Error("normalize: mean/std have " + std::to_string(mean.size()) + "/" +
                std::to_string(std.size()) + " entries for a " + std::to_string(c_count) +
                "-channel image");
  }
  for (float s : std) {
    if (!(s != 0.0f) || !std::isfinite(s))
      throw Error("normalize: std must be finite and non-zero");
  }
  const size_t plane = static_cast<size_t>(image.width) * image.height;
  std::vector<float> chw(plane * c_count);
  for (int c = 0; c < c_count; ++c) {
    const float m = mean.empty() ? 0.0f : mean[c];
    const float inv_s = std.empty() ? 1.0f : 1.0f / std[c];
    for (size_t i = 0; i < plane; ++i) {
      chw[c * plane + i] = (image.pixels[i * c_count + c] / 255.0f - m) * inv_s;
    }
  }
  return chw;
}

std::vector<float> load_image_tensor(const std::string& path, const ModelInfo& model) {
  const std::vector<int64_t>& shape = model.input_shape;
  if (shape.size() != 3 || (shape[0] != 1 && shape[0] != 3) || shape[1] < 1 || shape[2] < 1 ||
      shape[1] > 8192 || shape[2] > 8192) {
    ErrorSite site;
    site.file = path;
    throw_error(site, "model '" + model.name + "' input shape " + shape_to_string(shape) +
                          " is not an image ([1 or 3, H, W])");
  }
  const int channels = static_cast<int>(shape[0]);
  const int height = static_cast<int>(shape[1]);
  const int width = static_cast<int>(shape[2]);
  // torchvision resizes to 256 for a 224 crop; keep that ratio for other input sizes.
  const int resize_to = static_cast<int>(std::lround(std::max(height, width) * 256.0 / 224.0));
  const Image decoded = decode_image(path, channels);
  try {
    const Image cropped = center_crop(resize_shorter_side(decoded, resize_to), width, height);
    return normalize_to_chw(cropped, model.mean, model.std);
  } catch (const Error& error) {
    image_error(path, error.what());  // the steps do not know the file name
  }
}

}  // namespace cnnrt
