// Image decoding (libpng, libjpeg-turbo) and the torchvision-style preprocessing steps; see
// cnnrt/image.h.
//
// Decoding treats the bytes as hostile (docs/RELIABILITY.md): the format is sniffed from the
// magic bytes and only PNG and JPEG are decoded, by the two reference libraries — the ones
// PIL itself uses, maintained and fuzzed continuously upstream — rather than by stb_image,
// which read uninitialised heap memory and asserted on corrupt progressive JPEGs (issue 14).
// The header is read first and width × height checked against the caller's limit before any
// pixel buffer exists.  Both libraries report errors through a callback that must not return;
// it records the library's message and longjmps back to the setjmp in the decode function.
// That jump is safe because (1) it only crosses C frames of the library, which hold no C++
// objects, (2) the functions holding the setjmp (png_decode, jpeg_decode) keep only trivially
// destructible locals that are not modified after setjmp, with the pixel buffer and the reason
// owned by the caller's DecodeState, and (3) the library's own state is then destroyed with
// its destroy call, which is valid after an error.  No exception ever passes through C code.
// JPEG warnings that mean corrupt data (truncation, bad Huffman codes, a premature marker) are
// errors too: libjpeg would otherwise fill the missing part with grey and carry on.
//
// The resize is separable: a weight table per output row/column, computed once per axis, then
// one horizontal and one vertical pass.
#include "cnnrt/image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

// jpeglib.h needs size_t and FILE declared first.
#include <cstdio>
#include <cstdlib>
// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on
#include <png.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <csetjmp>
#include <cstring>
#include <memory>

#include "graph/ir.h"

namespace cnnrt {
namespace {

// Bigger than any photograph a CNN is fed; keeps a hostile path (a 100 GB sparse file) from
// being read into memory.
constexpr long long kMaxImageFileBytes = 256LL << 20;
// A progressive JPEG may have any number of scans, each a full pass over the coefficients; real
// encoders write about 10.  Far more is a decode-time bomb (libjpeg-turbo's own fuzzers cap
// scans the same way).
constexpr int kMaxJpegScans = 256;

[[noreturn]] void image_error(const std::string& name, const std::string& message) {
  ErrorSite site;
  site.file = name;
  throw_error(site, message);
}

std::vector<unsigned char> read_file_bytes(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) image_error(path, std::string("cannot open image: ") + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0)
    image_error(path, std::string("cannot stat image: ") + std::strerror(errno));
  if (S_ISDIR(info.st_mode)) image_error(path, "is a directory, not an image file");
  if (!S_ISREG(info.st_mode)) image_error(path, "is not a regular file");
  if (info.st_size > kMaxImageFileBytes)
    image_error(path, "image file of " + std::to_string(info.st_size) + " bytes is larger than " +
                          std::to_string(kMaxImageFileBytes) + " bytes");
  std::vector<unsigned char> bytes(static_cast<size_t>(info.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t got = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) image_error(path, std::string("cannot read image: ") + std::strerror(errno));
    if (got == 0) break;  // shrank while we read: decode what is there
    done += static_cast<size_t>(got);
  }
  bytes.resize(done);
  return bytes;
}

// What a decoder hands back.  Owned by the caller so nothing with a destructor lives in the
// frames a longjmp unwinds; `reason` is a fixed buffer because the error callbacks must not
// allocate (they run inside the C library and must not throw).
struct DecodeState {
  const unsigned char* data = nullptr;
  size_t size = 0;
  size_t offset = 0;  // PNG read cursor
  long long max_pixels = 0;
  int width = 0, height = 0;
  std::vector<unsigned char> rgb;    // width × height × 3 on success
  std::vector<unsigned char*> rows;  // one pointer per row of rgb (libpng reads all at once)
  bool too_large = false;
  unsigned claimed_width = 0, claimed_height = 0;  // the header's size, when too_large
  char reason[JMSG_LENGTH_MAX + 64] = {};
  void set_reason(const char* text) { std::snprintf(reason, sizeof(reason), "%s", text); }
};

// False (too_large set) when width × height is over the limit.
bool within_limit(DecodeState* state, unsigned width, unsigned height) {
  // In 64-bit unsigned: a PNG header may claim up to 2^32 - 1 per side.
  if (uint64_t{width} * height <= static_cast<uint64_t>(state->max_pixels)) return true;
  state->claimed_width = width;
  state->claimed_height = height;
  state->too_large = true;
  return false;
}

// Sizes the output buffer; false (reason or too_large set) when it does not fit.  Called inside
// the decoders between setjmp and the library's destroy, so it must not throw.
bool allocate_rgb(DecodeState* state, unsigned width, unsigned height) {
  if (width < 1 || height < 1) {
    state->set_reason("image has zero size");
    return false;
  }
  if (!within_limit(state, width, height)) return false;
  try {
    state->rgb.assign(static_cast<size_t>(width) * height * 3, 0);
    state->rows.resize(height);
  } catch (const std::bad_alloc&) {
    state->set_reason("out of memory for the pixels");
    return false;
  }
  for (unsigned y = 0; y < height; ++y) state->rows[y] = &state->rgb[size_t{y} * width * 3];
  state->width = static_cast<int>(width);
  state->height = static_cast<int>(height);
  return true;
}

// --- PNG --------------------------------------------------------------------------------------

[[noreturn]] void png_fail(png_structp png, png_const_charp message) {
  auto* state = static_cast<DecodeState*>(png_get_error_ptr(png));
  state->set_reason(message ? message : "libpng error");
  png_longjmp(png, 1);
}

void png_ignore_warning(png_structp, png_const_charp) {}

void png_read_memory(png_structp png, png_bytep out, png_size_t count) {
  auto* state = static_cast<DecodeState*>(png_get_io_ptr(png));
  if (count > state->size - state->offset) png_error(png, "file is truncated");
  std::memcpy(out, state->data + state->offset, count);
  state->offset += count;
}

uint32_t big_endian_u32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// libpng 1.6.39 allocates, and zeroes, a buffer of a chunk's declared length before reading
// it: a 127-byte PNG whose tEXt chunk claimed 2 GB cost 2 GB of memory and 3 s (found by
// fuzz_image).  So the chunk list is walked first: every chunk up to IEND must fit in the
// bytes that are really there, which bounds every libpng buffer by the file size.
bool png_chunks_fit(DecodeState* state) {
  size_t offset = 8;
  while (state->size - offset >= 8) {
    const uint32_t length = big_endian_u32(state->data + offset);
    char type[5] = {};
    for (int i = 0; i < 4; ++i) {
      const unsigned char c = state->data[offset + 4 + i];
      type[i] = std::isalpha(c) ? static_cast<char>(c) : '?';
    }
    const size_t left = state->size - offset - 8;
    if (length > 0x7fffffffu || size_t{length} + 4 > left) {
      std::snprintf(state->reason, sizeof(state->reason),
                    "file is truncated (chunk '%s' declares %u bytes, %zu are left)", type, length,
                    left >= 4 ? left - 4 : 0);
      return false;
    }
    if (std::memcmp(type, "IEND", 4) == 0) break;
    offset += size_t{length} + 12;
  }
  return true;  // a missing IEND is reported by libpng ("file is truncated")
}

bool png_decode(DecodeState* state) {
  // The size first, from the IHDR chunk every PNG starts with: a huge image whose data is
  // missing is "too large", not "truncated".
  if (state->size >= 24 && std::memcmp(state->data + 12, "IHDR", 4) == 0) {
    const uint32_t width = big_endian_u32(state->data + 16);
    const uint32_t height = big_endian_u32(state->data + 20);
    if (!within_limit(state, width, height)) return false;
  }
  if (!png_chunks_fit(state)) return false;
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, state, png_fail, png_ignore_warning);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    state->set_reason("out of memory");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, state, png_read_memory);
  // PNG's own maximum size (our pixel limit is checked below with a better message); text and
  // ICC chunks are capped so a compressed chunk cannot inflate to gigabytes.
  png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
  png_set_chunk_malloc_max(png, 8 << 20);
  png_set_chunk_cache_max(png, 128);
  png_read_info(png, info);
  // The same pixels stb_image gave (and PIL gives): palette and low-bit grey expanded, 16-bit
  // samples cut to their high byte, alpha dropped (not composited), grey replicated to RGB.
  png_set_expand(png);
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const png_uint_32 width = png_get_image_width(png, info);
  const png_uint_32 height = png_get_image_height(png, info);
  if (png_get_channels(png, info) != 3 || png_get_rowbytes(png, info) != size_t{width} * 3) {
    state->set_reason("unsupported PNG pixel layout");
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  if (!allocate_rgb(state, width, height)) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_read_image(png, state->rows.data());
  png_read_end(png, nullptr);  // up to IEND: a file cut after its pixels is still truncated
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

// --- JPEG -------------------------------------------------------------------------------------

struct JpegErrorManager {
  jpeg_error_mgr pub;  // first, so libjpeg's j_common_ptr->err casts back to us
  jmp_buf jump;
  DecodeState* state;
};

[[noreturn]] void jpeg_fail(j_common_ptr cinfo) {
  auto* manager = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  // Once the frame header is read the size is known (0 before): a huge image whose data is
  // missing is "too large", not "truncated".
  const auto* decompress = reinterpret_cast<j_decompress_ptr>(cinfo);
  within_limit(manager->state, decompress->image_width, decompress->image_height);
  char message[JMSG_LENGTH_MAX] = {};
  (*cinfo->err->format_message)(cinfo, message);
  manager->state->set_reason(message);
  std::longjmp(manager->jump, 1);
}

// Warnings that mean the data is corrupt or cut short are errors; the rest (an unknown JFIF
// revision, a few junk bytes before a marker, a bad ICC profile we do not use) are ignored.
void jpeg_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace messages
  switch (cinfo->err->msg_code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_ARITH_BAD_CODE:
    case JWRN_BOGUS_PROGRESSION:
    case JWRN_MUST_RESYNC:
    case JWRN_NOT_SEQUENTIAL:
      jpeg_fail(cinfo);
    default:
      return;
  }
}

// Called once per pass; in a progressive file each input scan is a pass.
void jpeg_count_scans(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  auto* manager = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  const int scans = reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number;
  if (scans > kMaxJpegScans) {
    manager->state->set_reason("progressive JPEG with too many scans (more than 256)");
    std::longjmp(manager->jump, 1);
  }
}

bool jpeg_decode(DecodeState* state) {
  jpeg_decompress_struct cinfo;
  JpegErrorManager errors;
  jpeg_progress_mgr progress;
  std::memset(&cinfo, 0, sizeof(cinfo));
  cinfo.err = jpeg_std_error(&errors.pub);
  errors.pub.error_exit = jpeg_fail;
  errors.pub.emit_message = jpeg_message;
  errors.state = state;
  progress.progress_monitor = jpeg_count_scans;
  if (setjmp(errors.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  cinfo.progress = &progress;
  // A cap on libjpeg's own allocations (coefficient buffers of progressive files); the pixel
  // limit below comes first for anything but absurd component counts.
  cinfo.mem->max_memory_to_use = 2048L << 20;
  jpeg_mem_src(&cinfo, state->data, static_cast<unsigned long>(state->size));
  if (jpeg_read_header(&cinfo, TRUE) != JPEG_HEADER_OK) {
    state->set_reason("no image in the JPEG file");
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  // CMYK/YCCK (Adobe, inverted) are converted below; everything else libjpeg turns into RGB.
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  if (!allocate_rgb(state, cinfo.image_width, cinfo.image_height)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_start_decompress(&cinfo);
  const unsigned components = cmyk ? 4 : 3;
  if (cinfo.output_width != static_cast<unsigned>(state->width) ||
      cinfo.output_height != static_cast<unsigned>(state->height) ||
      cinfo.output_components != static_cast<int>(components)) {
    state->set_reason("unexpected JPEG output layout");
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  // One scratch row for CMYK, allocated by libjpeg so an error frees it with the decoder.
  JSAMPARRAY cmyk_row = cmyk ? (*cinfo.mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(&cinfo),
                                                          JPOOL_IMAGE, cinfo.output_width * 4, 1)
                             : nullptr;
  while (cinfo.output_scanline < cinfo.output_height) {
    unsigned char* rgb_row = state->rows[cinfo.output_scanline];
    JSAMPROW target = cmyk ? cmyk_row[0] : rgb_row;
    if (jpeg_read_scanlines(&cinfo, &target, 1) != 1) {
      state->set_reason("JPEG decoder stopped early");
      jpeg_destroy_decompress(&cinfo);
      return false;
    }
    if (cmyk) {  // Adobe stores inverted CMYK: R = C' × K' / 255, as stb_image and PIL do
      for (unsigned x = 0; x < cinfo.output_width; ++x) {
        const unsigned char* p = &target[4 * x];
        for (int c = 0; c < 3; ++c)
          rgb_row[3 * x + c] = static_cast<unsigned char>(p[c] * p[3] / 255);
      }
    }
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
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
                               int channels, long long max_pixels) {
  if (channels != 1 && channels != 3) {
    image_error(name, "unsupported channel count " + std::to_string(channels) +
                          " (images decode to 1 or 3 channels)");
  }
  if (bytes.empty()) image_error(name, "cannot decode image: file is empty");
  static const unsigned char kPngMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  static const unsigned char kJpegMagic[3] = {0xFF, 0xD8, 0xFF};
  const bool is_png = bytes.size() >= 8 && std::memcmp(bytes.data(), kPngMagic, 8) == 0;
  const bool is_jpeg = bytes.size() >= 3 && std::memcmp(bytes.data(), kJpegMagic, 3) == 0;
  if (!is_png && !is_jpeg)
    image_error(name, "cannot decode image: unknown format (PNG and JPEG are supported)");

  DecodeState state;
  state.data = bytes.data();
  state.size = bytes.size();
  state.max_pixels = std::min(max_pixels, kMaxImagePixels);
  const bool decoded = is_png ? png_decode(&state) : jpeg_decode(&state);
  if (state.too_large) {
    image_error(name, "image is too large (" + std::to_string(state.claimed_width) + "x" +
                          std::to_string(state.claimed_height) + ", at most " +
                          std::to_string(state.max_pixels) + " pixels)");
  }
  if (!decoded) {
    const std::string reason = state.reason[0] ? state.reason : "unknown error";
    image_error(name,
                std::string("cannot decode ") + (is_png ? "PNG" : "JPEG") + " image: " + reason);
  }

  Image image;
  image.width = state.width;
  image.height = state.height;
  image.channels = channels;
  const size_t pixel_count = static_cast<size_t>(state.width) * state.height;
  image.pixels.resize(pixel_count * channels);
  const unsigned char* rgb = state.rgb.data();
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
  if (long_out > INT_MAX || long_out * shorter_side > kMaxImagePixels)
    throw Error("resize: aspect ratio too extreme (" + std::to_string(image.width) + "x" +
                std::to_string(image.height) + " would become over " +
                std::to_string(kMaxImagePixels) + " pixels)");
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
