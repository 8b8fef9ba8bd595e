// libFuzzer target: the timing-cache reader (`cnnrt build --precision auto --timing-cache`) on
// arbitrary file contents.  Any cnnrt::Error is a correct answer; a crash, a sanitizer report,
// another exception or a leak is a bug.
#include "cnnrt/error.h"
#include "fuzz_util.h"
#include "runtime/auto_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static cnnrt::fuzz::ScratchFile file("timing_cache");
  try {
    const cnnrt::TimingCache cache(file.write(data, size));
    double ms = 0;
    (void)cache.lookup("fuzz", &ms);
    (void)cache.size();
  } catch (const cnnrt::Error&) {
  }
  return 0;
}
