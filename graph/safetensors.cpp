// safetensors reader/writer (format in safetensors.h and docs/FORMAT.md).
//
// The reader treats the file as hostile: sizes are checked against the file size before any
// allocation (a 2^60 header length must not become a bad_alloc), every header field is
// type-checked, byte ranges must lie in the data section, match dtype × shape and not overlap.
// Tensors are read straight into their destination, in pieces on the host's cores (read_entries),
// so peak memory is the weights plus one fp16 staging piece per thread.
//
// The header is limited before it is parsed: at most 100 MB (the limit of Python's reader), at
// most 64 levels of nesting and 4 Mi JSON values (a tensor entry has about ten), so a hostile
// header costs a linear scan, not gigabytes of parse tree.  The tensors must tile the data
// section exactly, as Python's reader requires: no gap, no overlap, no byte after the last.
//
// The writer produces what Python's `safetensors` accepts: header padded with spaces to a
// multiple of 8, tensors contiguous from offset 0 in name order.  It writes through
// write_file_atomically (graph/atomic_write.h): a failure or a second writer never leaves a
// half-written or mixed file.
#include "graph/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "cnnrt/error.h"
#include "graph/atomic_write.h"
#include "graph/bounded_read.h"
#include "graph/host_parallel.h"

namespace cnnrt {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;
constexpr int kMaxHeaderDepth = 64;
constexpr uint64_t kMaxHeaderValues = uint64_t{1} << 22;

bool host_is_little_endian() {
  const uint16_t probe = 1;
  unsigned char first;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

template <typename Values>
void swap_bytes_if_big_endian(Values& values) {
  using T = typename Values::value_type;
  if (host_is_little_endian()) return;
  for (T& value : values) {
    unsigned char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));
    std::reverse(bytes, bytes + sizeof(T));
    std::memcpy(&value, bytes, sizeof(T));
  }
}

uint32_t float_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

float bits_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

struct Entry {
  std::string name;
  StoredDType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

size_t dtype_bytes(StoredDType dtype) { return dtype == StoredDType::F32 ? 4 : 2; }

Entry parse_entry(const std::string& name, const nlohmann::json& value, uint64_t data_bytes,
                  const std::string& path) {
  const ErrorSite site{path, 0, 0, "", name};
  if (!value.is_object()) throw_error(site, "header entry is not a JSON object");
  Entry entry;
  entry.name = name;
  const auto dtype = value.find("dtype");
  if (dtype == value.end() || !dtype->is_string()) throw_error(site, "missing string 'dtype'");
  const std::string dtype_name = dtype->get<std::string>();
  if (dtype_name == "F32") {
    entry.dtype = StoredDType::F32;
  } else if (dtype_name == "F16") {
    entry.dtype = StoredDType::F16;
  } else {
    throw_error(site, "unsupported dtype '" + dtype_name + "' (supported: F32, F16)");
  }

  const auto shape = value.find("shape");
  if (shape == value.end() || !shape->is_array()) throw_error(site, "missing array 'shape'");
  // Element count with overflow checks: no product may exceed what a file could hold.
  uint64_t elements = 1;
  for (const auto& dim : *shape) {
    if (!dim.is_number_unsigned()) throw_error(site, "shape entries must be non-negative integers");
    const uint64_t extent = dim.get<uint64_t>();
    if (extent != 0 && elements > (std::numeric_limits<uint64_t>::max() / 8) / extent)
      throw_error(site, "shape " + shape->dump() + " is absurdly large");
    elements *= extent;
    entry.shape.push_back(static_cast<int64_t>(extent));
  }

  const auto offsets = value.find("data_offsets");
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
    throw_error(site, "'data_offsets' must be [begin, end] with non-negative integers");
  entry.begin = (*offsets)[0].get<uint64_t>();
  entry.end = (*offsets)[1].get<uint64_t>();
  if (entry.begin > entry.end || entry.end > data_bytes)
    throw_error(site, "data_offsets [" + std::to_string(entry.begin) + ", " +
                          std::to_string(entry.end) + "] lie outside the data section (" +
                          std::to_string(data_bytes) + " bytes)");
  const uint64_t needed = elements * dtype_bytes(entry.dtype);
  if (entry.end - entry.begin != needed)
    throw_error(site, "shape " + shape_to_string(entry.shape) + " in " + dtype_name + " needs " +
                          std::to_string(needed) + " bytes, data_offsets give " +
                          std::to_string(entry.end - entry.begin));
  return entry;
}

// One piece of the data section to read: bytes [offset, offset + bytes) of entry `entry`.
struct ReadPiece {
  size_t entry;
  uint64_t offset, bytes;
};

// Reads every entry's data into tensors[i] (sized here, filled whole).  The file is read in
// pieces of up to kPieceBytes with pread on the host's cores: a tensor's first touch of its fresh
// pages (the kernel maps and zeroes them) cost more than the read itself on one core — AlexNet's
// 244 MB took ~0.2 s that way — and spread over the cores it is a fraction of that.
void read_entries(const std::string& path, uint64_t data_start, const std::vector<Entry>& entries,
                  std::vector<HostTensor>& tensors) {
  constexpr uint64_t kPieceBytes = uint64_t{8} << 20;  // even: fp16 pieces hold whole values
  std::vector<ReadPiece> pieces;
  tensors.resize(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    tensors[i].shape = entries[i].shape;
    tensors[i].data.resize(static_cast<size_t>(shape_elements(entries[i].shape)));
    const uint64_t bytes = entries[i].end - entries[i].begin;
    for (uint64_t offset = 0; offset < bytes; offset += kPieceBytes)
      pieces.push_back({i, offset, std::min(kPieceBytes, bytes - offset)});
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_error(ErrorSite{path, 0, 0, "", ""}, "cannot open weight file");
  auto read_exactly = [&](const Entry& entry, char* destination, uint64_t at, uint64_t bytes) {
    if (pread_fully(fd, destination, bytes, at) != static_cast<int64_t>(bytes))
      throw_error(ErrorSite{path, 0, 0, "", entry.name}, "read failed (file truncated?)");
  };
  try {
    parallel_for(pieces.size(), 1, [&](size_t begin, size_t end) {
      std::vector<uint16_t> halves;  // an fp16 piece's staging
      for (size_t p = begin; p < end; ++p) {
        const ReadPiece& piece = pieces[p];
        const Entry& entry = entries[piece.entry];
        const uint64_t at = data_start + entry.begin + piece.offset;
        if (entry.dtype == StoredDType::F32) {
          read_exactly(entry,
                       reinterpret_cast<char*>(tensors[piece.entry].data.data()) + piece.offset, at,
                       piece.bytes);
          continue;
        }
        halves.resize(static_cast<size_t>(piece.bytes / 2));
        read_exactly(entry, reinterpret_cast<char*>(halves.data()), at, piece.bytes);
        swap_bytes_if_big_endian(halves);
        float* out = tensors[piece.entry].data.data() + piece.offset / 2;
        for (size_t i = 0; i < halves.size(); ++i) out[i] = half_to_float(halves[i]);
      }
    });
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].dtype == StoredDType::F32) swap_bytes_if_big_endian(tensors[i].data);
}

}  // namespace

std::map<std::string, HostTensor> read_safetensors(const std::string& path) {
  const ErrorSite file_site{path, 0, 0, "", ""};
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(status))
    throw_error(file_site, "is a directory, not a weight file");
  if (!std::filesystem::exists(status))
    throw_error(file_site, "cannot open weight file (no such file)");
  if (!std::filesystem::is_regular_file(status))
    throw_error(file_site, "cannot open weight file (not a regular file)");
  const uint64_t file_bytes = std::filesystem::file_size(path, ec);
  if (ec) throw_error(file_site, "cannot stat weight file: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error(file_site, "cannot open weight file");
  if (file_bytes < 8)
    throw_error(file_site, "file of " + std::to_string(file_bytes) +
                               " bytes is too short to be safetensors (8-byte header length)");

  unsigned char length_bytes[8];
  in.read(reinterpret_cast<char*>(length_bytes), 8);
  if (!in) throw_error(file_site, "cannot read the header length");
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | length_bytes[i];
  if (header_bytes > kMaxHeaderBytes)
    throw_error(file_site, "header length " + std::to_string(header_bytes) +
                               " exceeds the 100 MB limit: not a safetensors file");
  if (header_bytes > file_bytes - 8)
    throw_error(file_site, "header length " + std::to_string(header_bytes) +
                               " is larger than the rest of the file (" +
                               std::to_string(file_bytes - 8) + " bytes)");

  std::string header_text(static_cast<size_t>(header_bytes), ' ');
  in.read(header_text.data(), static_cast<std::streamsize>(header_bytes));
  if (!in) throw_error(file_site, "cannot read the header");
  // Nesting and value count before nlohmann spends memory and time on them.
  const std::string shape_problem =
      json_shape_problem(header_text, kMaxHeaderDepth, kMaxHeaderValues, 8);
  if (!shape_problem.empty()) throw_error(file_site, "header " + shape_problem);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_text);
  } catch (const nlohmann::json::exception& e) {
    throw_error(file_site, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) throw_error(file_site, "header must be a JSON object");

  const uint64_t data_start = 8 + header_bytes;
  const uint64_t data_bytes = file_bytes - data_start;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") continue;  // free-form string map; nothing to load
    entries.push_back(parse_entry(name, value, data_bytes, path));
  }
  // The tensors, in file order, must tile [0, data_bytes): every byte belongs to exactly one.
  std::vector<const Entry*> by_offset;
  for (const Entry& entry : entries) by_offset.push_back(&entry);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry* entry : by_offset) {
    const ErrorSite site{path, 0, 0, "", entry->name};
    if (entry->begin < covered) throw_error(site, "data overlaps tensor '" + previous->name + "'");
    if (entry->begin > covered)
      throw_error(site, "data starts at byte " + std::to_string(entry->begin) +
                            " of the data section, " + "but the bytes from " +
                            std::to_string(covered) + " belong to no tensor");
    covered = entry->end;
    previous = entry;
  }
  if (covered != data_bytes)
    throw_error(file_site, std::to_string(data_bytes - covered) +
                               " bytes after the last tensor belong to no tensor (the header " +
                               "describes " + std::to_string(covered) + " of the " +
                               std::to_string(data_bytes) + " data bytes)");

  in.close();
  std::vector<HostTensor> read;
  read_entries(path, data_start, entries, read);
  std::map<std::string, HostTensor> tensors;
  for (size_t i = 0; i < entries.size(); ++i) tensors[entries[i].name] = std::move(read[i]);
  return tensors;
}

void write_safetensors(const std::string& path, const std::map<std::string, HostTensor>& tensors,
                       StoredDType dtype, const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    const ErrorSite site{path, 0, 0, "", name};
    if (name == "__metadata__") throw_error(site, "'__metadata__' is reserved");
    for (int64_t dim : tensor.shape)
      if (dim < 0) throw_error(site, "negative dimension in " + shape_to_string(tensor.shape));
    if (static_cast<int64_t>(tensor.data.size()) != tensor.elements())
      throw_error(site, "holds " + std::to_string(tensor.data.size()) + " values for shape " +
                            shape_to_string(tensor.shape));
    const uint64_t bytes = tensor.data.size() * dtype_bytes(dtype);
    header[name] = {{"dtype", dtype == StoredDType::F32 ? "F32" : "F16"},
                    {"shape", tensor.shape},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');

  write_file_atomically(path, [&](std::ostream& out) {
    unsigned char length_bytes[8];
    for (int i = 0; i < 8; ++i)
      length_bytes[i] =
          static_cast<unsigned char>((uint64_t{header_text.size()} >> (8 * i)) & 0xFF);
    out.write(reinterpret_cast<const char*>(length_bytes), 8);
    out.write(header_text.data(), static_cast<std::streamsize>(header_text.size()));
    std::vector<unsigned char> bytes;
    for (const auto& [name, tensor] : tensors) {
      bytes.clear();
      bytes.reserve(tensor.data.size() * dtype_bytes(dtype));
      for (float value : tensor.data) {
        const uint32_t word = dtype == StoredDType::F32 ? float_bits(value) : float_to_half(value);
        for (size_t i = 0; i < dtype_bytes(dtype); ++i)
          bytes.push_back(static_cast<unsigned char>((word >> (8 * i)) & 0xFF));
      }
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
    }
  });
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0) {  // zero or subnormal: mantissa × 2^-24, exact in float
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return bits_float(float_bits(magnitude) | sign);
  }
  if (exponent == 31) return bits_float(sign | 0x7F800000u | (mantissa << 13));  // inf / NaN
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t float_to_half(float f) {
  const uint32_t bits = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude >= 0x7F800000u)  // inf, or NaN kept quiet with its top payload bits
    return sign | 0x7C00u |
           (magnitude > 0x7F800000u ? static_cast<uint16_t>(0x200u | ((magnitude >> 13) & 0x3FFu))
                                    : 0);
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520 rounds to infinity
  if (magnitude < 0x38800000u) {                        // below 2^-14: half subnormal or zero
    const uint32_t exponent = magnitude >> 23;
    const uint32_t shift = 126 - exponent;  // value / 2^-24 = mantissa24 >> shift
    if (shift > 24) return sign;            // below 2^-25 rounds to zero
    const uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
    uint32_t result = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t result = (magnitude - 0x38000000u) >> 13;  // rebias exponent 127 → 15
  const uint32_t rest = magnitude & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;  // carry may bump exponent
  return static_cast<uint16_t>(sign | result);
}

}  // namespace cnnrt
