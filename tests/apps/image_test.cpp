// Image preprocessing: each step of the torchvision pipeline on synthetic images with known
// answers (hand-computed filter weights, constant and ramp images).  Decoding: image_decode_test.
#include "cnnrt/image.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace cnnrt {
namespace {

Image make_image(int width, int height, int channels) {
  Image image;
  image.width = width;
  image.height = height;
  image.channels = channels;
  image.pixels.assign(static_cast<size_t>(width) * height * channels, 0.0f);
  return image;
}

TEST(ImageResize, DownscaleMatchesHandComputedTriangleWeights) {
  // 4 → 2: scale 2, support 2.  Output 0 centres at 1.0 and reads x = 0,1,2 with weights
  // 0.75, 0.75, 0.25; output 1 centres at 3.0 and reads x = 1,2,3 with 0.25, 0.75, 0.75.
  Image row = make_image(4, 1, 1);
  row.pixels = {0, 10, 20, 30};
  const Image out = resize_bilinear_antialias(row, 2, 1);
  ASSERT_EQ(out.pixels.size(), 2u);
  EXPECT_NEAR(out.pixels[0], (0 * 0.75 + 10 * 0.75 + 20 * 0.25) / 1.75, 1e-4);
  EXPECT_NEAR(out.pixels[1], (10 * 0.25 + 20 * 0.75 + 30 * 0.75) / 1.75, 1e-4);
}

TEST(ImageResize, SameSizeIsIdentity) {
  Image image = make_image(13, 7, 3);
  std::mt19937 rng(11);
  for (float& v : image.pixels) v = static_cast<float>(rng() % 256);
  const Image out = resize_bilinear_antialias(image, 13, 7);
  EXPECT_EQ(out.pixels, image.pixels);
}

TEST(ImageResize, ConstantImageStaysConstant) {
  Image image = make_image(37, 23, 3);
  for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = 17.25f + (i % 3) * 50.0f;
  for (auto [w, h] : {std::pair{11, 17}, std::pair{50, 41}, std::pair{5, 3}, std::pair{37, 9}}) {
    const Image out = resize_bilinear_antialias(image, w, h);
    ASSERT_EQ(out.width, w);
    ASSERT_EQ(out.height, h);
    ASSERT_EQ(out.pixels.size(), static_cast<size_t>(w) * h * 3);
    for (size_t i = 0; i < out.pixels.size(); ++i) {
      ASSERT_NEAR(out.pixels[i], 17.25f + (i % 3) * 50.0f, 1e-3) << w << "x" << h << " at " << i;
    }
  }
}

TEST(ImageResize, HorizontalRampStaysMonotoneAndRowsEqual) {
  Image image = make_image(101, 9, 1);
  for (int y = 0; y < 9; ++y) {
    for (int x = 0; x < 101; ++x) image.at(y, x, 0) = 2.5f * x;
  }
  for (int w : {31, 64, 150}) {
    const Image out = resize_bilinear_antialias(image, w, 5);
    for (int y = 0; y < 5; ++y) {
      for (int x = 0; x < w; ++x) {
        EXPECT_NEAR(out.at(y, x, 0), out.at(0, x, 0), 1e-3);  // no vertical change
        if (x > 0) EXPECT_GT(out.at(y, x, 0), out.at(y, x - 1, 0)) << "w=" << w << " x=" << x;
      }
    }
    // Values stay inside the input range (a triangle filter has no overshoot).
    EXPECT_GE(out.at(0, 0, 0), 0.0f);
    EXPECT_LE(out.at(0, w - 1, 0), 250.0f);
  }
}

TEST(ImageResize, ShorterSideGetsTheTargetAspectKept) {
  const Image landscape = resize_shorter_side(make_image(451, 300, 3), 256);
  EXPECT_EQ(landscape.width, 384);  // int(451 * 256 / 300), truncated as torchvision does
  EXPECT_EQ(landscape.height, 256);
  const Image portrait = resize_shorter_side(make_image(99, 201, 1), 64);
  EXPECT_EQ(portrait.width, 64);
  EXPECT_EQ(portrait.height, 129);  // int(201 * 64 / 99) = 129
}

TEST(ImageCrop, TakesTheCentredWindowWithHalfEvenOffsets) {
  Image image = make_image(8, 7, 2);
  for (int y = 0; y < 7; ++y) {
    for (int x = 0; x < 8; ++x) {
      image.at(y, x, 0) = static_cast<float>(x);
      image.at(y, x, 1) = static_cast<float>(y);
    }
  }
  // left = round(5 / 2) = 2 (half to even), top = round(4 / 2) = 2.
  const Image out = center_crop(image, 3, 3);
  ASSERT_EQ(out.width, 3);
  ASSERT_EQ(out.height, 3);
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 3; ++x) {
      EXPECT_EQ(out.at(y, x, 0), 2.0f + x);
      EXPECT_EQ(out.at(y, x, 1), 2.0f + y);
    }
  }
  // (7 - 2) / 2 = 2.5 rounds to 2; (8 - 1) / 2 = 3.5 rounds to 4.
  const Image thin = center_crop(image, 1, 2);
  EXPECT_EQ(thin.at(0, 0, 0), 4.0f);
  EXPECT_EQ(thin.at(0, 0, 1), 2.0f);
  EXPECT_THROW(center_crop(image, 9, 3), Error);
}

TEST(ImageNormalize, ScalesNormalisesAndTransposesToChw) {
  Image image = make_image(3, 2, 3);
  std::mt19937 rng(5);
  for (float& v : image.pixels) v = static_cast<float>(rng() % 256);
  const std::vector<float> mean = {0.485f, 0.456f, 0.406f}, std = {0.229f, 0.224f, 0.225f};
  const std::vector<float> chw = normalize_to_chw(image, mean, std);
  ASSERT_EQ(chw.size(), 18u);
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 2; ++y) {
      for (int x = 0; x < 3; ++x) {
        const float expected = (image.at(y, x, c) / 255.0f - mean[c]) / std[c];
        EXPECT_NEAR(chw[(c * 2 + y) * 3 + x], expected, 1e-5);
      }
    }
  }
  Image white = make_image(1, 1, 1);
  white.pixels = {255.0f};
  EXPECT_NEAR(normalize_to_chw(white, {0.5f}, {0.25f})[0], 2.0f, 1e-6);  // (1 - .5) / .25
  EXPECT_NEAR(normalize_to_chw(white, {}, {})[0], 1.0f, 1e-6);
  EXPECT_THROW(normalize_to_chw(image, {0.5f}, {0.25f}), Error);
  EXPECT_THROW(normalize_to_chw(white, {0.5f}, {0.0f}), Error);
}

TEST(ImagePipeline, ProducesModelShapedNormalisedTensor) {
  ModelInfo model;
  model.name = "m";
  model.input_shape = {3, 224, 224};
  model.mean = {0.485f, 0.456f, 0.406f};
  model.std = {0.229f, 0.224f, 0.225f};
  const std::string cat = std::string(CNNRT_SOURCE_DIR) + "/models/samples/chelsea.png";
  const std::vector<float> tensor = load_image_tensor(cat, model);
  ASSERT_EQ(tensor.size(), 3u * 224 * 224);
  for (size_t c = 0; c < 3; ++c) {
    const float lo = (0.0f - model.mean[c]) / model.std[c],
                hi = (1.0f - model.mean[c]) / model.std[c];
    for (size_t i = 0; i < 224 * 224; ++i) {
      const float v = tensor[c * 224 * 224 + i];
      ASSERT_TRUE(std::isfinite(v));
      ASSERT_GE(v, lo - 1e-4f);
      ASSERT_LE(v, hi + 1e-4f);
    }
  }
  // Grey model with an odd input size, no normalisation: values in [0, 1].
  model.input_shape = {1, 33, 45};
  model.mean.clear();
  model.std.clear();
  const std::vector<float> grey = load_image_tensor(cat, model);
  ASSERT_EQ(grey.size(), 33u * 45);
  for (float v : grey) ASSERT_TRUE(v >= 0.0f && v <= 1.0f);

  model.input_shape = {4, 8, 8};
  EXPECT_THROW(load_image_tensor(cat, model), Error);
}

}  // namespace
}  // namespace cnnrt
