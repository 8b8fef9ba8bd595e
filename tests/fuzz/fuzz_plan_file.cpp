// libFuzzer target: the plan-file reader (`--plan`, `cnnrt build`'s output) on arbitrary file
// contents.  Any cnnrt::Error is a correct answer.  What it accepts must survive a round trip:
// plan_file_text() of it reads back to the same fields, else the writer and the reader disagree
// (a plan `cnnrt build` writes that `--plan` then refuses or reads differently).
#include "cnnrt/error.h"
#include "fuzz_util.h"
#include "runtime/plan_file.h"

namespace {

bool same_choices(const cnnrt::PlanFile& a, const cnnrt::PlanFile& b) {
  if (a.layers.size() != b.layers.size()) return false;
  for (const auto& [layer, choice] : a.layers) {
    const auto found = b.layers.find(layer);
    if (found == b.layers.end()) return false;
    const cnnrt::LayerChoice& other = found->second;
    if (choice.precision != other.precision || choice.kernel != other.kernel ||
        choice.sparsity != other.sparsity)
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static cnnrt::fuzz::ScratchFile file("plan");
  static cnnrt::fuzz::ScratchFile again_file("plan_again");
  cnnrt::PlanFile plan;
  try {
    plan = cnnrt::read_plan_file(file.write(data, size));
  } catch (const cnnrt::Error&) {
    return 0;
  }
  const std::string text = cnnrt::plan_file_text(plan, "# round trip");
  cnnrt::PlanFile again;
  try {
    again = cnnrt::read_plan_file(
        again_file.write(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  } catch (const cnnrt::Error&) {
    __builtin_trap();  // the writer produced a plan its own reader refuses
  }
  if (again.model != plan.model || again.model_hash != plan.model_hash ||
      again.device != plan.device || again.batch != plan.batch || again.budget != plan.budget ||
      again.calibration != plan.calibration || again.order != plan.order ||
      again.variants != plan.variants || !same_choices(plan, again))
    __builtin_trap();
  return 0;
}
