// libFuzzer target: the safetensors reader on arbitrary file contents.  Any cnnrt::Error is a
// correct answer; a crash, a sanitizer report, another exception or a leak is a bug.
#include <cmath>

#include "cnnrt/error.h"
#include "fuzz_util.h"
#include "graph/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static cnnrt::fuzz::ScratchFile file("safetensors");
  try {
    const auto tensors = cnnrt::read_safetensors(file.write(data, size));
    // Touch every value so a wrong size would show up under ASan.
    double sum = 0;
    for (const auto& [name, tensor] : tensors)
      for (float v : tensor.data) sum += std::isfinite(v) ? v : 0.0;
    (void)sum;
  } catch (const cnnrt::Error&) {
  }
  return 0;
}
