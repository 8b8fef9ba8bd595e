// .npy reader/writer; see npy.h.
//
// The header is parsed by a tiny recursive-descent reader of exactly the dict literal NumPy
// writes (string keys; string, bool and int-tuple values) rather than by searching for
// substrings, so a malformed header is reported as such instead of being half-understood.
// The whole file is read into memory first: the data size is then checked against the real
// file size before anything is allocated for the values.  Hosts are little-endian (x86-64,
// aarch64), so '<f4' data is copied as is.
#include "apps/common/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>

#include "cnnrt/error.h"
#include "graph/atomic_write.h"
#include "graph/bounded_read.h"
#include "graph/host_parallel.h"

namespace cnnrt::apps {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLength = 6;
constexpr int64_t kMaxElements = int64_t{1} << 40;

[[noreturn]] void npy_error(const std::string& name, const std::string& message) {
  ErrorSite site;
  site.file = name;
  throw_error(site, message);
}

// A value of the header dict.
struct HeaderValue {
  enum Kind { String, Bool, Tuple } kind = String;
  std::string text;
  bool flag = false;
  std::vector<int64_t> dims;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& name) : text_(text), name_(name) {}

  std::map<std::string, HeaderValue> parse() {
    std::map<std::string, HeaderValue> entries;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') {
        ++pos_;
        break;
      }
      const std::string key = parse_string();
      expect(':');
      HeaderValue value = parse_value();
      if (!entries.emplace(key, value).second) fail("duplicate key '" + key + "'");
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != '}') {
        fail("expected ',' or '}'");
      }
    }
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the header dict");
    return entries;
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  [[noreturn]] void fail(const std::string& what) const {
    npy_error(name_, "malformed .npy header (" + what + " at offset " + std::to_string(pos_) +
                         "): " + text_);
  }

  std::string parse_string() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    ++pos_;
    const size_t end = text_.find(quote, pos_);
    if (end == std::string::npos) fail("unterminated string");
    std::string out = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }

  int64_t parse_int() {
    skip_space();
    const size_t start = pos_;
    int64_t value = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      if (value > (std::numeric_limits<int64_t>::max() - 9) / 10) fail("dimension too large");
      value = value * 10 + (text_[pos_] - '0');
      ++pos_;
    }
    if (pos_ == start) fail("expected a non-negative integer");
    // NumPy may write Python 2 longs as "3L".
    if (peek() == 'L') ++pos_;
    return value;
  }

  HeaderValue parse_value() {
    skip_space();
    HeaderValue value;
    const char c = peek();
    if (c == '\'' || c == '"') {
      value.kind = HeaderValue::String;
      value.text = parse_string();
    } else if (text_.compare(pos_, 4, "True") == 0) {
      value.kind = HeaderValue::Bool;
      value.flag = true;
      pos_ += 4;
    } else if (text_.compare(pos_, 5, "False") == 0) {
      value.kind = HeaderValue::Bool;
      pos_ += 5;
    } else if (c == '(') {
      ++pos_;
      value.kind = HeaderValue::Tuple;
      while (true) {
        skip_space();
        if (peek() == ')') {
          ++pos_;
          break;
        }
        value.dims.push_back(parse_int());
        skip_space();
        if (peek() == ',') {
          ++pos_;
        } else if (peek() != ')') {
          fail("expected ',' or ')' in the shape");
        }
      }
    } else {
      fail("expected a string, True/False or a shape tuple");
    }
    return value;
  }

  const std::string& text_;
  const std::string& name_;
  size_t pos_ = 0;
};

uint32_t read_le(std::string_view bytes, size_t offset, size_t count) {
  uint32_t value = 0;
  for (size_t i = 0; i < count; ++i) {
    value |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  }
  return value;
}

}  // namespace

NpyArray parse_npy(std::string_view bytes, const std::string& name) {
  if (bytes.size() < kMagicLength + 2 || bytes.compare(0, kMagicLength, kMagic) != 0) {
    npy_error(name, "not a .npy file (bad magic; expected \\x93NUMPY)");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  size_t length_bytes = 0;
  if (major == 1) {
    length_bytes = 2;
  } else if (major == 2 || major == 3) {  // 3.0 only changes the header encoding to UTF-8
    length_bytes = 4;
  } else {
    npy_error(name, "unsupported .npy version " + std::to_string(major) + "." +
                        std::to_string(minor) + " (1.0, 2.0 and 3.0 are read)");
  }
  const size_t prefix = kMagicLength + 2 + length_bytes;
  if (bytes.size() < prefix) npy_error(name, "truncated .npy header");
  const size_t header_length = read_le(bytes, kMagicLength + 2, length_bytes);
  if (bytes.size() - prefix < header_length) {
    npy_error(name, "truncated .npy header (header says " + std::to_string(header_length) +
                        " bytes, file has " + std::to_string(bytes.size() - prefix) + ")");
  }
  const std::string header(bytes.substr(prefix, header_length));
  const std::map<std::string, HeaderValue> entries = HeaderParser(header, name).parse();

  for (const auto& [key, value] : entries) {
    if (key != "descr" && key != "fortran_order" && key != "shape") {
      npy_error(name, "unknown key '" + key + "' in .npy header");
    }
  }
  auto need = [&](const char* key, HeaderValue::Kind kind) -> const HeaderValue& {
    auto it = entries.find(key);
    if (it == entries.end()) npy_error(name, std::string(".npy header has no '") + key + "'");
    if (it->second.kind != kind) {
      npy_error(name, std::string(".npy header key '") + key + "' has the wrong type");
    }
    return it->second;
  };
  const std::string& descr = need("descr", HeaderValue::String).text;
  if (need("fortran_order", HeaderValue::Bool).flag) {
    npy_error(name,
              "fortran_order arrays are not supported (save a C-order array, e.g. "
              "np.ascontiguousarray)");
  }
  size_t item_size = 0;
  if (descr == "<f4") {
    item_size = 4;
  } else if (descr == "<f8") {
    item_size = 8;
  } else {
    npy_error(name, "unsupported dtype '" + descr + "' (expected float32 '<f4' or float64 '<f8')");
  }

  NpyArray array;
  array.shape = need("shape", HeaderValue::Tuple).dims;
  int64_t elements = 1;
  for (int64_t dim : array.shape) {
    if (dim != 0 && elements > kMaxElements / dim) npy_error(name, "shape is too large");
    elements *= dim;
  }
  const size_t data_offset = prefix + header_length;
  const size_t data_bytes = bytes.size() - data_offset;
  const size_t expected_bytes = static_cast<size_t>(elements) * item_size;
  if (data_bytes != expected_bytes) {
    npy_error(
        name, std::string(data_bytes < expected_bytes ? "truncated" : "oversized") +
                  " .npy data: shape (" +
                  [&] {
                    std::string s;
                    for (size_t i = 0; i < array.shape.size(); ++i) {
                      s += (i ? ", " : "") + std::to_string(array.shape[i]);
                    }
                    return s;
                  }() +
                  ") of " + descr + " needs " + std::to_string(expected_bytes) +
                  " bytes, file has " + std::to_string(data_bytes));
  }
  array.data.resize(static_cast<size_t>(elements));
  const char* src = bytes.data() + data_offset;
  if (item_size == 4) {
    // On the host's cores (the buffer is not zeroed: every value is copied here).  A
    // zero-element array has no buffer: memcpy(nullptr, ..., 0) is undefined behaviour.
    constexpr size_t kPiece = size_t{1} << 20;
    const size_t count = array.data.size();
    parallel_for((count + kPiece - 1) / kPiece, 4, [&](size_t begin, size_t end) {
      const size_t first = begin * kPiece, last = std::min(count, end * kPiece);
      if (last > first)  // never memcpy a zero-element array's null buffer
        std::memcpy(array.data.data() + first, src + first * 4, (last - first) * 4);
    });
  } else {
    for (size_t i = 0; i < array.data.size(); ++i) {
      double value;
      std::memcpy(&value, src + 8 * i, 8);
      array.data[i] = static_cast<float>(value);
    }
  }
  return array;
}

NpyArray read_npy(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
    npy_error(path, "is a directory, not a .npy file");
  // A device or a FIFO (/dev/zero) would be read until memory runs out.
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode))
    npy_error(path, "is not a regular file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) npy_error(path, std::string("cannot open .npy file: ") + std::strerror(errno));
  // Read in pieces on the host's cores, straight into a buffer that is not zeroed first: for a
  // 38 MB set of 64 ImageNet-sized inputs (read by every `cnnrt build`) the first touch of the
  // fresh pages, on one core, cost more than the read.  One byte past the size stat gave is
  // asked for at the end, so a file that grew since is noticed as well as one that shrank.
  const size_t size = static_cast<size_t>(info.st_size);
  HostVector<char> bytes(size);
  constexpr size_t kPiece = size_t{4} << 20;
  std::string failure;
  std::mutex failure_mutex;
  parallel_for((size + kPiece - 1) / kPiece, 1, [&](size_t begin, size_t end) {
    for (size_t piece = begin; piece < end; ++piece) {
      const size_t at = piece * kPiece, want = std::min(size, at + kPiece) - at;
      const int64_t got = pread_fully(fd, bytes.data() + at, want, at);
      if (got == static_cast<int64_t>(want)) continue;
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (failure.empty())
        failure = got < 0 ? std::string("cannot read .npy file: ") + std::strerror(errno)
                          : "changed while it was being read (it ended at byte " +
                                std::to_string(at + got) + " of " + std::to_string(size) + ")";
      return;
    }
  });
  char extra = 0;
  if (failure.empty() && ::pread(fd, &extra, 1, static_cast<off_t>(size)) > 0)
    failure = "changed while it was being read (it grew past the " + std::to_string(size) +
              " bytes it had)";
  ::close(fd);
  if (!failure.empty()) npy_error(path, failure);
  return parse_npy(std::string_view(bytes.data(), size), path);
}

std::string serialize_npy(const std::vector<int64_t>& shape, const std::vector<float>& data) {
  int64_t elements = 1;
  std::string dims;
  for (int64_t dim : shape) {
    if (dim < 0) throw Error("write_npy: negative dimension");
    elements *= dim;
    dims += std::to_string(dim) + ", ";
  }
  if (shape.size() > 1) dims.erase(dims.size() - 2);  // (2, 3) but (5,) for rank 1
  if (shape.size() == 1) dims.pop_back();
  if (elements != static_cast<int64_t>(data.size())) {
    throw Error("write_npy: " + std::to_string(data.size()) + " values for a shape of " +
                std::to_string(elements) + " elements");
  }
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // v1.0 has a 2-byte header length; fall back to v2.0 (4 bytes) only when it does not fit.
  const bool v2 = header.size() + 1 + 64 > 65535;
  const size_t prefix = kMagicLength + 2 + (v2 ? 4 : 2);
  const size_t padded = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(padded - prefix - header.size() - 1, ' ');
  header.push_back('\n');

  std::string out(kMagic, kMagicLength);
  out.push_back(static_cast<char>(v2 ? 2 : 1));
  out.push_back(0);
  const uint32_t length = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i) out.push_back(static_cast<char>(length >> (8 * i)));
  out += header;
  out.append(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float));
  return out;
}

void write_npy(const std::string& path, const std::vector<int64_t>& shape,
               const std::vector<float>& data) {
  const std::string bytes = serialize_npy(shape, data);
  write_file_atomically(path, [&](std::ostream& out) { out.write(bytes.data(), bytes.size()); });
}

}  // namespace cnnrt::apps
