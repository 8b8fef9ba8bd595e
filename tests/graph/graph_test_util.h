// Helpers shared by the graph tests: error capture, fixture paths, scratch files.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>

#include "cnnrt/error.h"

// gmock is not linked: a plain substring check that prints both strings on failure.
#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "  message: " << (text) << "\n  should contain: " << (part)

namespace cnnrt::test {

inline std::string data_path(const std::string& name) {
  return std::string(CNNRT_SOURCE_DIR) + "/tests/graph/data/" + name;
}

// Runs fn, which must throw cnnrt::Error (not anything else, not nothing); returns the message.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected cnnrt::Error, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected cnnrt::Error, nothing was thrown";
  return "";
}

// A fresh scratch directory per test (removed by the caller's ScratchDir destructor).
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = std::filesystem::temp_directory_path() /
           ("cnnrt_graph_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" +
            std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// A model text with a fixed 3-line header, so layer i (0-based) is on line 4 + i.
inline std::string model_text(const std::string& layers, const std::string& shape = "[3, 8, 8]") {
  return "name: t\ninput: {shape: " + shape + "}\nlayers:\n" + layers;
}

}  // namespace cnnrt::test
