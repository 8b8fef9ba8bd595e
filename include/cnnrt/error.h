// cnnrt::Error — the one exception type the library throws.
//
// Library code never exits or aborts on bad input: a malformed model, weight file, image or
// option becomes an Error whose message names the file, the line/column (YAML marks), the
// layer and the tensor where they are known.  CLIs catch it, print "error: <what>" and exit 1.
#pragma once

#include <stdexcept>
#include <string>

namespace cnnrt {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Where an error happened.  Every field is optional; format() joins the known ones as
// "file:line:col: layer 'x': tensor 'y': " so messages read the same everywhere.
struct ErrorSite {
  std::string file;
  int line = 0;    // 1-based; 0 = unknown
  int column = 0;  // 1-based; 0 = unknown
  std::string layer;
  std::string tensor;

  std::string format() const;
};

[[noreturn]] void throw_error(const ErrorSite& site, const std::string& message);

}  // namespace cnnrt
