// libFuzzer target: the calibration-file reader (`--calibration`, `cnnrt calibrate`'s output)
// on arbitrary text.  Any cnnrt::Error is a correct answer.  What it accepts must write back
// and read again to the same scales (the file cnnrt writes is the file it reads).
#include <string>

#include "cnnrt/error.h"
#include "runtime/calibration.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  cnnrt::Calibration calibration;
  try {
    calibration = cnnrt::calibration_from_json(text, "fuzz.json");
  } catch (const cnnrt::Error&) {
    return 0;
  }
  cnnrt::Calibration again;
  try {
    again = cnnrt::calibration_from_json(cnnrt::calibration_to_json(calibration), "again.json");
  } catch (const cnnrt::Error&) {
    __builtin_trap();  // the writer produced a file its own reader refuses
  }
  if (again.tensors.size() != calibration.tensors.size()) __builtin_trap();
  for (const auto& [name, entry] : calibration.tensors) {
    const cnnrt::TensorCalibration* other = again.find(name);
    if (other == nullptr || other->scale != entry.scale || other->amax != entry.amax)
      __builtin_trap();
  }
  return 0;
}
