// libFuzzer target: the .npy parser on arbitrary bytes (the data `cnnrt run --input` reads).
#include <string>
#include <vector>

#include "apps/common/npy.h"
#include "cnnrt/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const cnnrt::apps::NpyArray array =
        cnnrt::apps::parse_npy(std::string(reinterpret_cast<const char*>(data), size), "fuzz.npy");
    // What we read must write back and read again to the same values.
    const std::string again = cnnrt::apps::serialize_npy(
        array.shape, std::vector<float>(array.data.begin(), array.data.end()));
    const cnnrt::apps::NpyArray round = cnnrt::apps::parse_npy(again, "round.npy");
    if (round.shape != array.shape || round.data.size() != array.data.size()) __builtin_trap();
  } catch (const cnnrt::Error&) {
  }
  return 0;
}
