// Image decoding and ImageNet-style preprocessing: file → CHW fp32 tensor for a model's input.
//
// The pipeline is torchvision's classification preset (what AlexNet_Weights.IMAGENET1K_V1
// was evaluated with): decode to RGB → resize so the shorter side is 256 with an antialiased
// bilinear (triangle) filter → centre-crop 224×224 → scale to [0, 1] → normalise per channel.
// For a model whose input is not 224, the resize target keeps the same 256/224 ratio.
//
// Each step is a plain function on an Image so tests can pin them one by one.  Values stay
// float in [0, 255] between steps (PIL rounds to uint8 after the resize; skipping that costs at
// most 0.5/255 per pixel and keeps the steps exact to test).  Bad files throw cnnrt::Error
// naming the file and the decoder's reason; nothing here aborts on garbage input, and decoding
// is deterministic and memory-safe for any byte string (docs/RELIABILITY.md).
#pragma once

#include <string>
#include <vector>

#include "cnnrt/cnnrt.h"

namespace cnnrt {

// An interleaved (HWC) float image; values in [0, 255] as decoded.
struct Image {
  int width = 0;
  int height = 0;
  int channels = 0;           // 1 (grey) or 3 (RGB)
  std::vector<float> pixels;  // height × width × channels

  float& at(int y, int x, int c) {
    return pixels[(static_cast<size_t>(y) * width + x) * channels + c];
  }
  float at(int y, int x, int c) const {
    return pixels[(static_cast<size_t>(y) * width + x) * channels + c];
  }
};

// Largest image decode_image accepts (width × height), so a hostile header cannot make us
// allocate gigabytes: 8192 × 8192.
constexpr long long kMaxImagePixels = 8192LL * 8192LL;

// Decodes PNG (libpng) and JPEG (libjpeg-turbo, baseline and progressive) to `channels`
// channels: 3 = RGB, 1 = grey (ITU-R 601 luma of the RGB, as PIL's convert("L")).  Alpha is
// dropped, 16-bit samples keep their high byte, CMYK JPEGs are converted to RGB.  Throws Error
// naming the file for a missing/unreadable file or a directory, another format, corrupt or
// truncated data (with the decoder's reason), zero-sized or oversized images.
Image decode_image(const std::string& path, int channels = 3);
// Same from bytes already in memory; `name` is used in messages.  `max_pixels` lowers the size
// limit (never above kMaxImagePixels), e.g. for a service that only takes thumbnails.
Image decode_image_from_memory(const std::vector<unsigned char>& bytes, const std::string& name,
                               int channels = 3, long long max_pixels = kMaxImagePixels);

// Separable resize with a triangle filter whose support widens with the downscale factor
// (PIL's BILINEAR, torchvision antialias=True); plain bilinear when upscaling.
Image resize_bilinear_antialias(const Image& image, int out_width, int out_height);

// Resizes so the shorter side becomes `shorter_side`, keeping the aspect ratio (the longer side
// is truncated as torchvision does: long * shorter_side / short).
Image resize_shorter_side(const Image& image, int shorter_side);

// The centred out_height × out_width window (offsets rounded as torchvision: round-half-even of
// (size - crop) / 2).  Throws Error when the image is smaller than the crop.
Image center_crop(const Image& image, int out_width, int out_height);

// CHW fp32: (value / 255 - mean[c]) / std[c].  Empty mean/std: just the [0, 1] scaling.
// Throws Error when mean/std do not have one entry per channel or std has a zero.
std::vector<float> normalize_to_chw(const Image& image, const std::vector<float>& mean,
                                    const std::vector<float>& std);

// The whole pipeline for model.input_shape ([C, H, W], C = 1 or 3).
std::vector<float> load_image_tensor(const std::string& path, const ModelInfo& model);

}  // namespace cnnrt
