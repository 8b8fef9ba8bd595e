// Hostile and silently-wrong model inputs (issue 14): duplicate YAML keys, deep nesting, alias
// blow-up, LRN parameters that give Inf/NaN, NaN/Inf weights, label files whose line count
// does not match the classes, and paths that are directories.  Each is an Error naming the
// file (and line:col, layer, tensor where they apply).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>

#include "graph/model_loader.h"
#include "graph/yaml_read.h"
#include "graph_test_util.h"

namespace cnnrt {
namespace {

using test::error_of;
using test::model_text;

// yaml-cpp keeps the first of two equal keys: `out_channels: 4 ... out_channels: 8` built 4.
TEST(HostileModels, DuplicateKeysAreErrorsAtTheSecondKey) {
  EXPECT_CONTAINS(error_of([] {
                    parse_model(model_text("  - {name: c, op: conv, out_channels: 4, kernel: 3, "
                                           "out_channels: 8, weight: w}\n"),
                                "m.yaml");
                  }),
                  "m.yaml:4:53: duplicate key 'out_channels' (first at line 4, column 25)");
  EXPECT_CONTAINS(error_of([] {
                    parse_model(
                        "name: a\ninput: {shape: [3, 4, 4]}\nname: b\nlayers:\n"
                        "  - {name: r, op: relu}\n",
                        "top.yaml");
                  }),
                  "top.yaml:3:1: duplicate key 'name' (first at line 1, column 1)");
  EXPECT_CONTAINS(error_of([] {
                    parse_model(
                        "name: a\ninput:\n  shape: [3, 4, 4]\n  shape: [3, 8, 8]\n"
                        "layers:\n  - {name: r, op: relu}\n",
                        "in.yaml");
                  }),
                  "in.yaml:4:3: duplicate key 'shape'");
}

TEST(HostileModels, DeepNestingNamesLineAndColumn) {
  // Flow nesting far past yaml-cpp's own guard (which said "bad file" at the end of the input).
  const std::string deep =
      "name: t\ninput: {shape: [3, 8, 8]}\nlayers: " + std::string(100000, '[') +
      std::string(100000, ']') + "\n";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_CONTAINS(error_of([&] { parse_model(deep, "deep.yaml"); }),
                  "deep.yaml:3:73: YAML nests deeper than 64 levels");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  // Block nesting ("- - - ...") is measured on the tree.
  std::string dashes = "name: t\ninput: {shape: [3, 8, 8]}\nlayers:\n  ";
  for (int i = 0; i < 100; ++i) dashes += "- ";
  dashes += "x\n";
  const std::string message = error_of([&] { parse_model(dashes, "dash.yaml"); });
  EXPECT_CONTAINS(message, "dash.yaml:4:");
  EXPECT_CONTAINS(message, "YAML nests deeper than 64 levels");
  // Past yaml-cpp's guard as well.
  std::string many = "name: t\ninput: {shape: [3, 8, 8]}\nlayers:\n  ";
  for (int i = 0; i < 5000; ++i) many += "- ";
  EXPECT_CONTAINS(error_of([&] { parse_model(many + "x\n", "many.yaml"); }),
                  "many.yaml:4: YAML nests deeper than 64 levels");
  // Brackets inside quotes and comments are text.
  parse_model(model_text("  - {name: \"[[[[\", op: relu}  # [[[[[[[[[[\n"), "ok.yaml");
  // A quote inside a plain scalar is a character, not the start of a quoted one: the brackets
  // of the quoted string after it are text too (fuzz_plan_file: a plan written by
  // plan_file_text was refused as "nests deeper" by this check).
  const std::string brackets = std::string(70, '[');
  check_yaml_text_nesting("name: it's\nkernel: 8\"\nlabels: \"" + brackets + "\"\n", "q.yaml");
  check_yaml_text_nesting("a: {b: x\"y, c: '" + brackets + "'}\n", "q.yaml");
  EXPECT_CONTAINS(error_of([&] { check_yaml_text_nesting("a: b\"" + brackets, "q.yaml"); }),
                  "q.yaml:1:70: YAML nests deeper than 64 levels");
}

TEST(HostileModels, AliasBlowUpIsBounded) {
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) text += (k ? ", *a" : "*a") + std::to_string(i - 1);
    text += "]\n";
  }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_CONTAINS(error_of([&] { parse_model(text, "laughs.yaml"); }),
                  "more than 1000000 YAML nodes");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// LRN divides by (k + alpha/n * sum)^beta: k <= 0 gave Inf/NaN outputs with exit 0.
TEST(HostileModels, LrnParametersThatCannotWorkAreErrors) {
  struct Case {
    const char* attrs;
    const char* expected;
  };
  const Case cases[] = {
      {"size: 3, k: 0", "'k' must be positive"},
      {"size: 3, k: -1", "'k' must be positive"},
      {"size: 3, k: 1e300", "'k' must be positive"},  // Inf once narrowed to float
      {"size: 3, alpha: -1", "'alpha' must be a finite non-negative number"},
      {"size: 3, alpha: 1e300", "'alpha' must be a finite non-negative number"},
      {"size: 3, beta: 1e300", "'beta' must be a finite number"},
      {"size: 3, beta: .nan", "'beta' must be a finite number"},
      {"size: 0", "'size' must be positive"},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of([&] {
      parse_model(model_text(std::string("  - {name: n, op: lrn, ") + c.attrs + "}\n"), "m.yaml");
    });
    EXPECT_CONTAINS(msg, "m.yaml:4:") << c.attrs;
    EXPECT_CONTAINS(msg, "layer 'n'") << c.attrs;
    EXPECT_CONTAINS(msg, c.expected) << c.attrs;
  }
  parse_model(model_text("  - {name: n, op: lrn, size: 5, alpha: 0, beta: -0.5, k: 0.5}\n"), "m");
}

TEST(HostileModels, NonFiniteWeightsAreErrorsNamingTheTensor) {
  Graph graph =
      parse_model(model_text("  - {name: c, op: conv, out_channels: 2, kernel: 1, weight: w, "
                             "bias: b}\n"),
                  "m.yaml");
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::map<std::string, HostTensor> weights;
    weights["w"] = HostTensor{{2, 3, 1, 1}, HostVector<float>(6, 0.5f)};
    weights["b"] = HostTensor{{2}, {0.0f, bad}};
    const std::string msg = error_of([&] { bind_weights(graph, weights, "w.safetensors"); });
    EXPECT_CONTAINS(msg, "w.safetensors: layer 'c': tensor 'b': value ");
    EXPECT_CONTAINS(msg, "at index 1 is not finite");
    EXPECT_TRUE(graph.nodes[0].params[0].value.data.empty()) << "nothing bound";
  }
}

// A labels file with a header line ("background") shifted every label by one, silently.
TEST(HostileModels, LabelCountMustMatchTheClasses) {
  test::ScratchDir dir;
  const std::string path = dir.file("labels.txt");
  auto write = [&](const std::string& text) { std::ofstream(path, std::ios::binary) << text; };
  write("background\na\nb\nc\nd\ne\n");
  EXPECT_CONTAINS(error_of([&] { read_labels(path, 5); }),
                  path + ": label file has 6 lines but the model has 5 classes");
  write("a\nb\nc\nd\n");
  EXPECT_CONTAINS(error_of([&] { read_labels(path, 5); }), "has 4 lines but the model has 5");
  write("a\nb\nc\nd\ne\n");  // a final newline is not an extra line
  EXPECT_EQ(read_labels(path, 5).size(), 5u);
  write("a\r\nb\r\nc\r\nd\r\ne\r\n\r\n");  // one trailing empty line is tolerated
  EXPECT_EQ(read_labels(path, 5), (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  write("a\nb\nc\nd\ne\n\n\n");  // two are not
  EXPECT_CONTAINS(error_of([&] { read_labels(path, 5); }), "has 7 lines");
  std::filesystem::resize_file(path, 64u << 20);  // sparse: a wrong path to something huge
  EXPECT_CONTAINS(error_of([&] { read_labels(path, 5); }), "is larger than 16777216 bytes");
}

TEST(HostileModels, DirectoriesAreNamedAsDirectories) {
  test::ScratchDir dir;
  EXPECT_CONTAINS(error_of([&] { read_labels(dir.path.string()); }),
                  dir.path.string() + ": is a directory, not a label file");
  EXPECT_CONTAINS(error_of([&] { load_model(dir.path.string()); }),
                  dir.path.string() + ": is a directory, not a model file");
  EXPECT_CONTAINS(error_of([&] { load_model(dir.file("absent.yaml")); }), "(no such file)");
  EXPECT_CONTAINS(error_of([&] { load_model("/dev/null"); }), "not a regular file");
  Graph empty;
  EXPECT_CONTAINS(error_of([&] { load_weights(empty, dir.path.string()); }),
                  dir.path.string() + ": is a directory, not a weight file");
  EXPECT_CONTAINS(error_of([&] { load_weights(empty, "/dev/zero"); }),
                  "/dev/zero: cannot open weight file (not a regular file)");
}

}  // namespace
}  // namespace cnnrt
