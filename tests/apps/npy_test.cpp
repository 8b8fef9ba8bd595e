// .npy reader/writer: round trips against the format NumPy writes, and every kind of damaged
// file becomes an Error naming the file (never a crash, never a silent half-read).
#include "apps/common/npy.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>

#include "cnnrt/error.h"

namespace cnnrt::apps {
namespace {

std::string temp_path(const std::string& stem) {
  return ::testing::TempDir() + "cnnrt_npy_" + stem + "_" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".npy";
}

std::vector<float> random_values(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> values(count);
  for (float& v : values) v = dist(rng);
  return values;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), bytes.size());
}

// A hand-built v1.0 file with an arbitrary header dict and payload.
std::string make_npy(const std::string& dict, const std::string& payload, int major = 1) {
  std::string header = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const uint32_t n = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out += static_cast<char>(n >> (8 * i));
  return out + header + payload;
}

std::string float_bytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4);
}

void expect_error_naming(const std::string& path, const std::string& fragment) {
  try {
    read_npy(path);
    FAIL() << "no error for " << path;
  } catch (const Error& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << what;
  }
}

TEST(Npy, RoundTripsOddShapesOfEveryRank) {
  const std::vector<std::vector<int64_t>> shapes = {
      {}, {7}, {3, 5}, {2, 3, 7}, {1, 3, 5, 11}, {2, 1, 3, 1, 5}, {0, 4}};
  uint32_t seed = 1;
  for (const auto& shape : shapes) {
    size_t count = 1;
    for (int64_t d : shape) count *= static_cast<size_t>(d);
    const std::vector<float> values = random_values(count, seed++);
    const std::string path = temp_path("rank" + std::to_string(shape.size()));
    write_npy(path, shape, values);
    const NpyArray back = read_npy(path);
    EXPECT_EQ(back.shape, shape);
    EXPECT_EQ(std::vector<float>(back.data.begin(), back.data.end()),
              values);  // bit-exact: fp32 is stored as is
    std::remove(path.c_str());
  }
}

TEST(Npy, WrittenHeaderIsWhatNumpyWrites) {
  const std::string bytes = serialize_npy({2, 3}, random_values(6, 9));
  ASSERT_GE(bytes.size(), 64u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header_length =
      static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ((10 + header_length) % 64, 0u);  // data 64-byte aligned
  const std::string header = bytes.substr(10, header_length);
  EXPECT_EQ(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0), 0u);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(bytes.size(), 10 + header_length + 6 * 4);
  // Rank 1 needs the trailing comma of a Python 1-tuple.
  EXPECT_NE(serialize_npy({5}, random_values(5, 2)).find("'shape': (5,)"), std::string::npos);
}

TEST(Npy, ReadsVersion2AndFloat64) {
  const std::vector<double> doubles = {1.5, -2.25, 1e-3, 7.0, -0.5, 3.0};
  const std::string payload(reinterpret_cast<const char*>(doubles.data()), doubles.size() * 8);
  const std::string path = temp_path("f8");
  write_bytes(path,
              make_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), }", payload, 2));
  const NpyArray array = read_npy(path);
  ASSERT_EQ(array.shape, (std::vector<int64_t>{3, 2}));
  for (size_t i = 0; i < doubles.size(); ++i) EXPECT_FLOAT_EQ(array.data[i], doubles[i]);
  std::remove(path.c_str());
}

TEST(Npy, KeysInAnyOrderAndDoubleQuotes) {
  const std::vector<float> values = random_values(4, 5);
  const std::string path = temp_path("order");
  write_bytes(path, make_npy("{\"shape\": (4,), \"fortran_order\": False, \"descr\": \"<f4\"}",
                             float_bytes(values)));
  const HostVector<float> back = read_npy(path).data;
  EXPECT_EQ(std::vector<float>(back.begin(), back.end()), values);
  std::remove(path.c_str());
}

struct Corruption {
  const char* name;
  std::string bytes;
  const char* fragment;  // expected in the message
};

TEST(Npy, EveryCorruptionIsAnErrorNamingTheFile) {
  const std::string good_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string payload = float_bytes(random_values(6, 3));
  const std::string good = make_npy(good_dict, payload);
  const std::vector<Corruption> cases = {
      {"empty", "", "bad magic"},
      {"magic", "\x93NUMPX" + good.substr(6), "bad magic"},
      {"version", good.substr(0, 6) + "\x07" + good.substr(7), "unsupported .npy version"},
      {"short_prefix", good.substr(0, 9), "truncated .npy header"},
      {"short_header", good.substr(0, 40), "truncated .npy header"},
      {"fortran", make_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", payload),
       "fortran_order"},
      {"dtype_i4", make_npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", payload),
       "unsupported dtype '<i4'"},
      {"dtype_big_endian",
       make_npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", payload),
       "unsupported dtype '>f4'"},
      {"truncated_data", good.substr(0, good.size() - 5), "truncated .npy data"},
      {"extra_data", good + "xyz", "oversized .npy data"},
      {"no_shape", make_npy("{'descr': '<f4', 'fortran_order': False, }", payload), "'shape'"},
      {"unknown_key",
       make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 'y'}", payload),
       "unknown key 'x'"},
      {"bad_value", make_npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3)}", payload),
       "malformed .npy header"},
      {"bad_syntax", make_npy("{'descr': '<f4' 'fortran_order': False}", payload),
       "malformed .npy header"},
      {"negative_dim",
       make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", payload),
       "malformed .npy header"},
      {"huge_shape",
       make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999), }",
                payload),
       "too large"},
      {"shape_not_tuple",
       make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': '6', }", payload), "wrong type"},
      {"unterminated", make_npy("{'descr': '<f4", payload), "malformed .npy header"},
  };
  for (const Corruption& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = temp_path(c.name);
    write_bytes(path, c.bytes);
    expect_error_naming(path, c.fragment);
    std::remove(path.c_str());
  }
}

TEST(Npy, MissingFileNamesIt) { expect_error_naming(temp_path("does_not_exist"), "cannot open"); }

TEST(Npy, WriteRejectsMismatchedDataAndLeavesNoFile) {
  const std::string path = temp_path("mismatch");
  std::remove(path.c_str());
  EXPECT_THROW(write_npy(path, {2, 3}, random_values(5, 1)), Error);
  EXPECT_FALSE(std::ifstream(path).good());
}

TEST(Npy, WriteIntoMissingDirectoryIsAnErrorWithNoLeftovers) {
  const std::string path = ::testing::TempDir() + "cnnrt_no_such_dir/out.npy";
  try {
    write_npy(path, {3}, random_values(3, 4));
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace cnnrt::apps

namespace cnnrt::apps {
namespace {

// Zero-element arrays used to memcpy from a null buffer (undefined behaviour, caught by the
// sanitizer pass): they round-trip now.
TEST(NpyHostile, ZeroElementArraysRoundTrip) {
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{0}, {0, 4}, {3, 0, 2}}) {
    const NpyArray read = parse_npy(serialize_npy(shape, {}), "empty.npy");
    EXPECT_EQ(read.shape, shape);
    EXPECT_TRUE(read.data.empty());
  }
}

// `cnnrt run --input DIR` said "basic_filebuf::underflow error reading the file: Is a
// directory", without the file name.
TEST(NpyHostile, DirectoryIsNamedAsADirectory) {
  const std::string dir = ::testing::TempDir() + "cnnrt_npy_dir_" + std::to_string(::getpid());
  ::mkdir(dir.c_str(), 0700);
  try {
    read_npy(dir);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(dir + ": is a directory, not a .npy file"),
              std::string::npos)
        << error.what();
  }
  ::rmdir(dir.c_str());
  try {
    read_npy("/dev/zero");  // would be read until memory runs out
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("/dev/zero: is not a regular file"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace cnnrt::apps
