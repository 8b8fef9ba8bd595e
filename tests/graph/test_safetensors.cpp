// safetensors: round trips in F32 and F16, the exact byte layout Python's reader expects, fp16
// conversion, and every kind of corrupt file becoming an Error (never a crash or bad_alloc).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "graph/model_loader.h"
#include "graph/safetensors.h"
#include "graph_test_util.h"

namespace cnnrt {
namespace {

using test::error_of;

HostTensor random_tensor(Shape shape, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  HostTensor tensor{std::move(shape), {}};
  tensor.data.resize(static_cast<size_t>(tensor.elements()));
  for (float& v : tensor.data) v = dist(rng);
  return tensor;
}

std::map<std::string, HostTensor> sample_tensors() {
  std::mt19937 rng(std::random_device{}());
  std::map<std::string, HostTensor> tensors;
  tensors["features.0.weight"] = random_tensor({5, 3, 7, 3}, rng, 2.0f);
  tensors["features.0.bias"] = random_tensor({5}, rng, 100.0f);
  tensors["scalar"] = random_tensor({}, rng, 1.0f);
  tensors["empty"] = HostTensor{{0, 3}, {}};
  tensors["odd"] = random_tensor({13}, rng, 1e-3f);
  return tensors;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le64(uint64_t value) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xFF);
  return out;
}

// A file with the given header text and `data_bytes` bytes of data.
std::string raw_file(const std::string& header, size_t data_bytes) {
  return le64(header.size()) + header + std::string(data_bytes, '\x01');
}

TEST(Safetensors, RoundTripF32IsExact) {
  test::ScratchDir dir;
  const auto tensors = sample_tensors();
  write_safetensors(dir.file("w.safetensors"), tensors, StoredDType::F32, {{"format", "pt"}});
  const auto loaded = read_safetensors(dir.file("w.safetensors"));
  ASSERT_EQ(loaded.size(), tensors.size());
  for (const auto& [name, tensor] : tensors) {
    EXPECT_EQ(loaded.at(name).shape, tensor.shape) << name;
    EXPECT_EQ(loaded.at(name).data, tensor.data) << name;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("w.safetensors.tmp")));
}

TEST(Safetensors, RoundTripF16WithinHalfPrecision) {
  test::ScratchDir dir;
  const auto tensors = sample_tensors();
  write_safetensors(dir.file("h.safetensors"), tensors, StoredDType::F16);
  const auto loaded = read_safetensors(dir.file("h.safetensors"));
  for (const auto& [name, tensor] : tensors) {
    ASSERT_EQ(loaded.at(name).shape, tensor.shape);
    for (size_t i = 0; i < tensor.data.size(); ++i) {
      const float x = tensor.data[i], y = loaded.at(name).data[i];
      // Relative error 2^-11 for normals; absolute 2^-25 in the subnormal range.
      EXPECT_LE(std::fabs(x - y), std::fabs(x) * std::ldexp(1.0f, -11) + std::ldexp(1.0f, -25))
          << name << "[" << i << "]";
      EXPECT_EQ(y, half_to_float(float_to_half(x)));
    }
  }
  // Half the bytes of F32 (plus the header).
  const std::string bytes = read_file(dir.file("h.safetensors"));
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  EXPECT_EQ(bytes.size() - 8 - header, (5 * 3 * 7 * 3 + 5 + 1 + 13) * 2u);
}

TEST(Safetensors, TensorsLargerThanOneReadPieceRoundTripInBothDtypes) {
  // The reader splits the data section into 8 MB pieces read on several threads: tensors that
  // span pieces (and a small one between them, so pieces start mid-file) must come back whole.
  test::ScratchDir dir;
  std::map<std::string, HostTensor> tensors;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  for (const auto& [name, count] : std::vector<std::pair<std::string, size_t>>{
           {"a", (size_t{5} << 20) + 3}, {"b", 7}, {"c", (size_t{3} << 20) + 1}}) {
    HostTensor& t = tensors[name];
    t.shape = {static_cast<int64_t>(count)};
    t.data.resize(count);
    for (float& v : t.data) v = value(rng);
  }
  write_safetensors(dir.file("f.safetensors"), tensors, StoredDType::F32);
  write_safetensors(dir.file("h.safetensors"), tensors, StoredDType::F16);
  const auto f32 = read_safetensors(dir.file("f.safetensors"));
  const auto f16 = read_safetensors(dir.file("h.safetensors"));
  for (const auto& [name, tensor] : tensors) {
    EXPECT_EQ(f32.at(name).data, tensor.data) << name;
    const HostVector<float>& halves = f16.at(name).data;
    ASSERT_EQ(halves.size(), tensor.data.size()) << name;
    size_t wrong = 0;
    for (size_t i = 0; i < halves.size(); ++i)
      wrong += halves[i] != half_to_float(float_to_half(tensor.data[i]));
    EXPECT_EQ(wrong, 0u) << name;
  }
}

TEST(Safetensors, LayoutIsWhatPythonSafetensorsReads) {
  test::ScratchDir dir;
  std::map<std::string, HostTensor> tensors;
  tensors["b"] = HostTensor{{2}, {1.0f, -2.0f}};
  tensors["a"] = HostTensor{{1}, {0.5f}};
  write_safetensors(dir.file("x.safetensors"), tensors);
  const std::string bytes = read_file(dir.file("x.safetensors"));
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ(header_bytes % 8, 0u);
  ASSERT_EQ(bytes.size(), 8 + header_bytes + 12);
  const std::string header = bytes.substr(8, header_bytes);
  EXPECT_EQ(header[0], '{');
  EXPECT_CONTAINS(header, "\"a\":{\"data_offsets\":[0,4],\"dtype\":\"F32\",\"shape\":[1]}");
  EXPECT_CONTAINS(header, "\"b\":{\"data_offsets\":[4,12],\"dtype\":\"F32\",\"shape\":[2]}");
  // Data: little-endian floats, in name order ("a" first): 0.5 = 0x3F000000.
  EXPECT_EQ(bytes.substr(8 + header_bytes, 4), std::string("\x00\x00\x00\x3F", 4));
}

TEST(Safetensors, HalfConversionHandComputedCases) {
  EXPECT_EQ(float_to_half(1.0f), 0x3C00);
  EXPECT_EQ(float_to_half(-2.0f), 0xC000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_half(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00);  // rounds to infinity
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);         // tie → even (0)
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -25)), 0x0002);         // tie → even (2)
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie → even
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(3.0f, -11)), 0x3C02);  // tie → even (up)
  EXPECT_EQ(float_to_half(INFINITY), 0x7C00);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
  EXPECT_EQ(half_to_float(0x3555), 0.333251953125f);
  // Every non-NaN half survives half → float → half.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const bool is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
    if (!is_nan) ASSERT_EQ(float_to_half(half_to_float(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(Safetensors, CorruptFilesAreErrors) {
  test::ScratchDir dir;
  const std::string path = dir.file("bad.safetensors");
  const std::string good_header = R"({"t":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
  struct Case {
    const char* what;
    std::string bytes;
    const char* expected;
  };
  const Case cases[] = {
      {"empty file", "", "too short"},
      {"7 bytes", std::string("\x08\0\0\0\0\0\0", 7), "too short"},
      {"header length 2^60", le64(1ull << 60) + "{}", "exceeds the 100 MB limit"},
      {"header length past end", le64(400) + good_header, "larger than the rest of the file"},
      {"invalid JSON", raw_file(R"({"t": {"dtype": "F32", )", 0), "not valid JSON"},
      {"header not an object", raw_file("[1, 2]", 0), "must be a JSON object"},
      {"bad dtype", raw_file(R"({"t":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", 16),
       "tensor 't': unsupported dtype 'I64'"},
      {"missing shape", raw_file(R"({"t":{"dtype":"F32","data_offsets":[0,4]}})", 4), "'shape'"},
      {"negative dim", raw_file(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
       "non-negative"},
      {"truncated data", raw_file(good_header, 20), "outside the data section"},
      {"offsets out of range",
       raw_file(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[1000,1004]}})", 8),
       "outside the data section"},
      {"offsets reversed", raw_file(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", 8),
       "outside the data section"},
      {"shape/offset mismatch",
       raw_file(R"({"t":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 24),
       "needs 24 bytes, data_offsets give 20"},
      {"absurd shape",
       raw_file(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4),
       "absurdly large"},
      {"overlap",
       raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                12),
       "overlaps tensor 'a'"},
  };
  for (const Case& c : cases) {
    write_file(path, c.bytes);
    const std::string msg = error_of([&] { read_safetensors(path); });
    EXPECT_CONTAINS(msg, c.expected) << c.what;
    EXPECT_CONTAINS(msg, path) << c.what;
  }
  EXPECT_CONTAINS(error_of([&] { read_safetensors(dir.file("missing.safetensors")); }),
                  "no such file");
  // The good header itself loads (the cases above differ from it in one thing each).
  write_file(path, raw_file(good_header, 24));
  EXPECT_EQ(read_safetensors(path).at("t").shape, (Shape{2, 3}));
}

// The header must account for every data byte, as Python's reader requires: two writers used
// to leave one's header with the other's size, and the junk after the last tensor was accepted.
TEST(Safetensors, BytesNoTensorOwnsAreErrors) {
  test::ScratchDir dir;
  const std::string path = dir.file("w.safetensors");
  const std::string one = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  write_file(path, raw_file(one, 8) + "junk");
  EXPECT_CONTAINS(error_of([&] { read_safetensors(path); }),
                  path + ": 4 bytes after the last tensor belong to no tensor");
  write_file(path, raw_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12));
  EXPECT_CONTAINS(error_of([&] { read_safetensors(path); }),
                  "tensor 't': data starts at byte 4 of the data section, but the bytes from 0 "
                  "belong to no tensor");
  write_file(path, raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                            12));
  EXPECT_CONTAINS(error_of([&] { read_safetensors(path); }), "tensor 'b': data starts at byte 8");
  // Zero-size tensors own no bytes and may sit at any boundary.
  write_file(
      path,
      raw_file(R"({"e":{"dtype":"F32","shape":[0],"data_offsets":[8,8]},)" + one.substr(1), 8));
  EXPECT_EQ(read_safetensors(path).size(), 2u);
}

// A 98 MB header of nested arrays used to take 3.7 GB and 7 s before its error; the shape of
// the header is now checked in one pass before nlohmann builds anything.
TEST(Safetensors, DeepOrHugeHeadersFailFastBeforeParsing) {
  test::ScratchDir dir;
  const std::string path = dir.file("deep.safetensors");
  const size_t depth = 40 * 1000 * 1000;
  write_file(path,
             raw_file("{\"a\":" + std::string(depth, '[') + std::string(depth, ']') + "}", 0));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_CONTAINS(error_of([&] { read_safetensors(path); }),
                  "header nests deeper than 64 levels (at byte 76)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  std::string wide = "{\"__metadata__\":[";
  for (int i = 0; i < (1 << 22) + 10; ++i) wide += "0,";
  wide += "0]}";
  write_file(path, raw_file(wide, 0));
  EXPECT_CONTAINS(error_of([&] { read_safetensors(path); }), "more than 4194304 JSON values");
  // 64 levels inside a metadata value are still fine (the limit is not tighter than stated).
  write_file(path,
             raw_file("{\"__metadata__\":" + std::string(63, '[') + std::string(63, ']') + "}", 0));
  EXPECT_TRUE(read_safetensors(path).empty());
}

TEST(Safetensors, TruncatingAValidFileAnywhereIsAnError) {
  test::ScratchDir dir;
  write_safetensors(dir.file("w.safetensors"), sample_tensors(), StoredDType::F16);
  const std::string bytes = read_file(dir.file("w.safetensors"));
  for (size_t cut = 0; cut < bytes.size(); cut += 7) {
    write_file(dir.file("cut.safetensors"), bytes.substr(0, cut));
    EXPECT_FALSE(error_of([&] { read_safetensors(dir.file("cut.safetensors")); }).empty())
        << "cut at " << cut;
  }
}

TEST(Safetensors, FailedWriteLeavesNoFile) {
  test::ScratchDir dir;
  const std::string path = dir.file("no_such_dir/w.safetensors");
  EXPECT_CONTAINS(error_of([&] { write_safetensors(path, sample_tensors()); }), "cannot create");
  EXPECT_FALSE(std::filesystem::exists(path));
  std::map<std::string, HostTensor> inconsistent{{"x", HostTensor{{4}, {1.0f, 2.0f}}}};
  EXPECT_CONTAINS(error_of([&] { write_safetensors(dir.file("x.safetensors"), inconsistent); }),
                  "tensor 'x': holds 2 values for shape [4]");
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.safetensors")));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path));  // no temporary either
}

TEST(Safetensors, LoadWeightsBindsAModel) {
  test::ScratchDir dir;
  Graph graph = load_model(test::data_path("all_ops.yaml"));
  const auto weights = init_weights(graph, 5);
  write_safetensors(dir.file("all_ops.safetensors"), weights);
  load_weights(graph, dir.file("all_ops.safetensors"));
  EXPECT_EQ(graph.find("fc")->find_param("weight")->value.data, weights.at("fc.w").data);
  EXPECT_EQ(graph.find("bn_a")->find_param("running_var")->value.data, weights.at("bn.v").data);
}

}  // namespace
}  // namespace cnnrt
