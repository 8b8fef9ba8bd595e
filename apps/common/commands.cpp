// The subcommand table; usage strings live here so `cnnrt help` and errors share them.
#include "apps/common/commands.h"

namespace cnnrt::apps {

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"info", "usage: cnnrt info MODEL", "describe the model graph, before and after fusion",
       cmd_info},
      {"init-weights",
       "usage: cnnrt init-weights MODEL -o FILE.safetensors [--seed N] [--dtype f32|f16]",
       "write deterministic PyTorch-style initial weights", cmd_init_weights},
      {"plan",
       "usage: cnnrt plan MODEL --batch N [--device cpu|cuda|auto] [--precision P] "
       "[--plan PLAN.yaml] [--calib CALIB.json] [--json]",
       "print the kernel and memory plan of a context", cmd_plan},
      {"run",
       "usage: cnnrt run MODEL (--weights W | --random-weights [SEED]) --input X.npy "
       "--output Y.npy [--device auto|cpu|cuda] [--precision auto|fp32|fp16|int8] "
       "[--plan PLAN.yaml] [--calib CALIB.json]",
       "run inference on an [N, C, H, W] float32 .npy", cmd_run},
      {"profile",
       "usage: cnnrt profile MODEL --batch N [--weights W | --random-weights [SEED]] "
       "[--device D] [--precision P] [--plan PLAN.yaml] [--calib CALIB.json] [--iterations K] "
       "[--json FILE] [--trace FILE] [--compare]",
       "per-layer timings (and every candidate kernel with --compare)", cmd_profile},
      {"bench",
       "usage: cnnrt bench MODEL --batch 1,16,64,256 [--weights W | --random-weights [SEED]] "
       "[--device D] [--precision P] [--plan PLAN.yaml] [--calib CALIB.json] [--warmup 20] "
       "[--iterations 100] [--json FILE]",
       "end-to-end latency and throughput per batch size", cmd_bench},
      {"calibrate",
       "usage: cnnrt calibrate MODEL (--weights W | --random-weights [SEED]) (--images DIR | "
       "--input X.npy) --method minmax|percentile[:99.99]|entropy [--batches N] [--batch B] "
       "-o CALIB.json",
       "int8 tensor scales from a calibration set (docs/QUANTIZATION.md)", cmd_calibrate},
      {"accuracy",
       "usage: cnnrt accuracy MODEL (--weights W | --random-weights [SEED]) --calib CALIB.json "
       "(--images DIR | --input X.npy) [--samples N] [--batch B] [--layers L1,L2 | --whole-only] "
       "[--json OUT.json]",
       "int8 vs fp32 per layer and for the whole network (docs/QUANTIZATION.md)", cmd_accuracy},
  };
  return table;
}

const Command* find_command(const std::string& name) {
  for (const Command& command : commands()) {
    if (name == command.name) return &command;
  }
  return nullptr;
}

}  // namespace cnnrt::apps
