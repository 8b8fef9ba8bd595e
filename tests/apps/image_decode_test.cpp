// Image decoding: exact pixels from PNGs and JPEGs written here with libpng/libjpeg, and every
// kind of damaged or hostile file as an Error naming the file and the decoder's reason
// (issue 14: a corrupt progressive JPEG made the old decoder read uninitialised memory).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

#include "cnnrt/image.h"
// clang-format off
#include <jpeglib.h>
// clang-format on
#include <png.h>

namespace cnnrt {
namespace {

using Bytes = std::vector<unsigned char>;

std::string temp_path(const std::string& stem) {
  return ::testing::TempDir() + "cnnrt_decode_" + stem + "_" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Bytes random_pixels(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  Bytes out(count);
  for (auto& v : out) v = static_cast<unsigned char>(rng() & 0xff);
  return out;
}

// libpng's simplified writer; format PNG_FORMAT_RGB, _RGBA, _GRAY, ...
Bytes encode_png(int width, int height, png_uint_32 format, const Bytes& pixels) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = width;
  image.height = height;
  image.format = format;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&image, nullptr, &size, 0, pixels.data(), 0, nullptr));
  Bytes out(size);
  EXPECT_TRUE(png_image_write_to_memory(&image, out.data(), &size, 0, pixels.data(), 0, nullptr));
  out.resize(size);
  return out;
}

Bytes encode_jpeg(int width, int height, int components, bool progressive, int quality,
                  const Bytes& pixels) {
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr errors{};
  cinfo.err = jpeg_std_error(&errors);
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = width;
  cinfo.image_height = height;
  cinfo.input_components = components;
  cinfo.in_color_space = components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  if (progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row =
        const_cast<unsigned char*>(&pixels[size_t{cinfo.next_scanline} * width * components]);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  Bytes out(buffer, buffer + size);
  std::free(buffer);
  return out;
}

// A valid grey progressive JPEG whose every coefficient (DC and the 63 ACs) is sent in
// `passes` successive-approximation scans: 64 × passes scans in all.
Bytes jpeg_with_scans(int passes) {
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr errors{};
  cinfo.err = jpeg_std_error(&errors);
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = 16;
  cinfo.image_height = 16;
  cinfo.input_components = 1;
  cinfo.in_color_space = JCS_GRAYSCALE;
  jpeg_set_defaults(&cinfo);
  std::vector<jpeg_scan_info> scans;
  for (int coefficient = 0; coefficient < 64; ++coefficient)
    for (int al = passes - 1; al >= 0; --al) {
      jpeg_scan_info scan{};
      scan.comps_in_scan = 1;
      scan.Ss = scan.Se = coefficient;
      scan.Ah = al == passes - 1 ? 0 : al + 1;
      scan.Al = al;
      scans.push_back(scan);
    }
  cinfo.scan_info = scans.data();
  cinfo.num_scans = static_cast<int>(scans.size());
  jpeg_start_compress(&cinfo, TRUE);
  std::vector<unsigned char> row(16);
  while (cinfo.next_scanline < 16) {
    for (int x = 0; x < 16; ++x) row[x] = static_cast<unsigned char>(x * 16 + cinfo.next_scanline);
    JSAMPROW pointer = row.data();
    jpeg_write_scanlines(&cinfo, &pointer, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  Bytes out(buffer, buffer + size);
  std::free(buffer);
  return out;
}

// A PNG signature and IHDR chunk (with its CRC) claiming width × height RGB, then nothing.
Bytes png_header_only(uint32_t width, uint32_t height) {
  Bytes out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13};
  Bytes chunk = {'I', 'H', 'D', 'R'};
  for (uint32_t v : {width, height})
    for (int shift = 24; shift >= 0; shift -= 8) chunk.push_back((v >> shift) & 0xff);
  for (unsigned char b : {8, 2, 0, 0, 0}) chunk.push_back(b);  // 8-bit RGB, no interlace
  uint32_t crc = 0xffffffffu;
  for (unsigned char b : chunk) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  crc ^= 0xffffffffu;
  out.insert(out.end(), chunk.begin(), chunk.end());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back((crc >> shift) & 0xff);
  return out;
}

std::string decode_error(const Bytes& bytes, const std::string& name, long long max_pixels) {
  try {
    decode_image_from_memory(bytes, name, 3, max_pixels);
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "no error for " << name;
  return "";
}

std::string file_error(const std::string& path) {
  try {
    decode_image(path);
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "no error for " << path;
  return "";
}

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << (text) << "\n  lacks: " << (part)

TEST(ImageDecode, PngPixelsExactAndGreyIsLuma) {
  const Bytes rgb = random_pixels(7 * 5 * 3, 21);
  const Bytes png = encode_png(7, 5, PNG_FORMAT_RGB, rgb);
  const Image color = decode_image_from_memory(png, "rgb.png", 3);
  ASSERT_EQ(color.width, 7);
  ASSERT_EQ(color.height, 5);
  ASSERT_EQ(color.channels, 3);
  for (size_t i = 0; i < rgb.size(); ++i) ASSERT_EQ(color.pixels[i], rgb[i]) << i;
  const Image grey = decode_image_from_memory(png, "rgb.png", 1);
  ASSERT_EQ(grey.channels, 1);
  for (size_t p = 0; p < 35; ++p) {
    const float luma = 0.299f * rgb[3 * p] + 0.587f * rgb[3 * p + 1] + 0.114f * rgb[3 * p + 2];
    ASSERT_NEAR(grey.pixels[p], luma, 1e-3);
  }
}

TEST(ImageDecode, PngAlphaIsDroppedAndGreyIsReplicated) {
  const Bytes rgba = random_pixels(4 * 3 * 4, 5);
  const Image from_rgba = decode_image_from_memory(encode_png(4, 3, PNG_FORMAT_RGBA, rgba), "a", 3);
  for (size_t p = 0; p < 12; ++p)
    for (int c = 0; c < 3; ++c) ASSERT_EQ(from_rgba.pixels[3 * p + c], rgba[4 * p + c]);
  const Bytes grey = random_pixels(4 * 3, 6);
  const Image from_grey = decode_image_from_memory(encode_png(4, 3, PNG_FORMAT_GRAY, grey), "g", 3);
  for (size_t p = 0; p < 12; ++p)
    for (int c = 0; c < 3; ++c) ASSERT_EQ(from_grey.pixels[3 * p + c], grey[p]);
}

TEST(ImageDecode, SampleImageDecodes) {
  const Image cat = decode_image(std::string(CNNRT_SOURCE_DIR) + "/models/samples/chelsea.png");
  EXPECT_EQ(cat.width, 451);
  EXPECT_EQ(cat.height, 300);
  EXPECT_EQ(cat.channels, 3);
}

TEST(ImageDecode, BaselineAndProgressiveJpegDecodeToTheSamePixels) {
  // Smooth content so quality 95 stays within a few levels of the source.
  Bytes rgb(32 * 24 * 3);
  for (size_t i = 0; i < rgb.size(); ++i)
    rgb[i] = static_cast<unsigned char>((i / 3) % 32 * 4 + i % 3 * 40);
  const Image baseline = decode_image_from_memory(encode_jpeg(32, 24, 3, false, 95, rgb), "b.jpg");
  const Image progressive =
      decode_image_from_memory(encode_jpeg(32, 24, 3, true, 95, rgb), "p.jpg");
  ASSERT_EQ(baseline.width, 32);
  ASSERT_EQ(baseline.height, 24);
  EXPECT_EQ(baseline.pixels, progressive.pixels);  // same coefficients, same IDCT
  for (size_t i = 0; i < rgb.size(); ++i) ASSERT_NEAR(baseline.pixels[i], rgb[i], 12.0) << i;
  const Bytes grey(16 * 16, 77);
  const Image from_grey = decode_image_from_memory(encode_jpeg(16, 16, 1, true, 90, grey), "g");
  for (float v : from_grey.pixels) ASSERT_NEAR(v, 77.0f, 1.0f);
}

// Inputs found by fuzzing the old decoder (stb_image 2022-09): a 347-byte progressive JPEG that
// hit an assert inside stb (abort) and a 17-byte progressive header with no scan that stb
// "decoded" from uninitialised heap memory.  Now: the same error every time, no crash.
TEST(ImageDecode, FuzzFoundProgressiveJpegsAreDeterministicErrors) {
  for (const char* name : {"stb_prog_huff_assert.jpg", "stb_differential_min.jpg"}) {
    SCOPED_TRACE(name);
    const Bytes bytes =
        read_bytes(std::string(CNNRT_SOURCE_DIR) + "/tests/fuzz/corpus/image/" + name);
    ASSERT_FALSE(bytes.empty());
    const std::string first = decode_error(bytes, name, kMaxImagePixels);
    EXPECT_CONTAINS(first, std::string(name) + ": cannot decode JPEG image: ");
    EXPECT_GT(first.size(), std::string(name).size() + 30);  // a reason, not an empty string
    EXPECT_EQ(decode_error(bytes, name, kMaxImagePixels), first);
  }
}

TEST(ImageDecode, HugeHeaderIsTooLargeBeforeAnyAllocation) {
  EXPECT_CONTAINS(decode_error(png_header_only(20000, 20000), "huge.png", kMaxImagePixels),
                  "huge.png: image is too large (20000x20000, at most 67108864 pixels)");
  // Found by fuzz_image: width × height overflowed a signed 64-bit product (UBSan).
  EXPECT_CONTAINS(decode_error(png_header_only(3665322068u, 3774824116u), "h.png", kMaxImagePixels),
                  "h.png: image is too large (3665322068x3774824116, at most 67108864 pixels)");
  const Bytes small = encode_png(20, 20, PNG_FORMAT_RGB, random_pixels(20 * 20 * 3, 1));
  EXPECT_CONTAINS(decode_error(small, "small.png", 100), "too large (20x20, at most 100 pixels)");
}

// Each scan of a progressive JPEG is a pass over every coefficient: thousands of tiny scans
// make a small file cost minutes.  256 are accepted (real encoders write about 10).
TEST(ImageDecode, ProgressiveJpegWithTooManyScansIsRefused) {
  const Image fine = decode_image_from_memory(jpeg_with_scans(4), "256.jpg");  // 256 scans
  EXPECT_EQ(fine.width, 16);
  EXPECT_CONTAINS(decode_error(jpeg_with_scans(5), "320.jpg", kMaxImagePixels),
                  "320.jpg: cannot decode JPEG image: progressive JPEG with too many scans (more "
                  "than 256)");
}

// Found by fuzz_image: a 127-byte PNG whose tEXt chunk declares 2,113,929,229 bytes made
// libpng allocate and zero 2 GB (3 s) before noticing the file ends.
TEST(ImageDecode, ChunkLongerThanTheFileIsRefusedBeforeLibpngAllocates) {
  const Bytes bytes =
      read_bytes(std::string(CNNRT_SOURCE_DIR) + "/tests/fuzz/corpus/image/png_huge_chunk.png");
  ASSERT_EQ(bytes.size(), 127u);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_CONTAINS(decode_error(bytes, "chunk.png", kMaxImagePixels),
                  "chunk.png: cannot decode PNG image: file is truncated (chunk 'tEXt' declares "
                  "2113929229 bytes, 82 are left)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
}

TEST(ImageDecode, TruncatedFilesNameTheReason) {
  const Bytes png = read_bytes(std::string(CNNRT_SOURCE_DIR) + "/models/samples/chelsea.png");
  for (size_t keep : {size_t{2000}, png.size() - 12, size_t{20}}) {
    SCOPED_TRACE(keep);
    const Bytes cut(png.begin(), png.begin() + keep);
    EXPECT_CONTAINS(decode_error(cut, "cut.png", kMaxImagePixels),
                    "cut.png: cannot decode PNG image: file is truncated");
  }
  const Bytes jpeg = encode_jpeg(64, 64, 3, false, 90, random_pixels(64 * 64 * 3, 3));
  const Bytes cut(jpeg.begin(), jpeg.begin() + jpeg.size() / 2);
  EXPECT_CONTAINS(decode_error(cut, "cut.jpg", kMaxImagePixels),
                  "cut.jpg: cannot decode JPEG image: Premature end of JPEG file");
}

TEST(ImageDecode, DamagedFilesAreErrorsNamingTheFile) {
  std::mt19937 rng(99);
  Bytes garbage(4096);
  for (auto& c : garbage) c = static_cast<unsigned char>(rng() & 0xff);
  const Bytes png = read_bytes(std::string(CNNRT_SOURCE_DIR) + "/models/samples/chelsea.png");
  Bytes flipped = png;  // a bit flipped inside the first IDAT: the chunk CRC fails
  flipped[png.size() / 2] ^= 0x10;
  struct Case {
    const char* name;
    Bytes bytes;
    const char* fragment;
  };
  const std::vector<Case> cases = {
      {"garbage.png", garbage, "unknown format (PNG and JPEG are supported)"},
      {"empty.png", {}, "file is empty"},
      {"ppm.ppm",
       {'P', '6', '\n', '1', ' ', '1', '\n', '2', '5', '5', '\n', 0, 0, 0},
       "unknown format"},
      {"flipped.png", flipped, "cannot decode PNG image: "},
      {"zero.png", png_header_only(0, 0), "cannot decode PNG image: "},
      {"jpeg_magic_only.jpg", {0xFF, 0xD8, 0xFF}, "cannot decode JPEG image: "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = temp_path(c.name);
    write_bytes(path, c.bytes);
    const std::string message = file_error(path);
    EXPECT_CONTAINS(message, path + ": ");
    EXPECT_CONTAINS(message, c.fragment);
    std::remove(path.c_str());
  }
  EXPECT_CONTAINS(file_error(temp_path("missing.png")), "cannot open image");
}

TEST(ImageDecode, DirectoryIsNamedAsADirectory) {
  const std::string dir = temp_path("dir");
  ::mkdir(dir.c_str(), 0700);
  EXPECT_CONTAINS(file_error(dir), dir + ": is a directory, not an image file");
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace cnnrt
