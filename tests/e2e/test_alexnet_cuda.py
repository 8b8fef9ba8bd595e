#!/usr/bin/env python3
"""AlexNet on the GPU in fp16 vs the numpy float64 reference (skipped without a GPU).

Weights from `cnnrt init-weights --seed S` (random seed, printed), a normal random input batch
of 3 (odd on purpose: no kernel may assume even batches).  Pass: rel L2 <= 1e-2 — fp16 storage
alone costs ~5e-4 per layer, accumulation in fp32 keeps the sum of eight layers near 3e-3;
a wrong tile edge or layout gives O(1).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as util  # noqa: E402

TOLERANCE = 1e-2
BATCH = 3


def main() -> int:
    args, work = util.setup(__doc__.split("\n")[0])
    if not util.gpu_present():
        util.skip("no CUDA device (nvidia-smi -L lists none)")
    import numpy as np
    import reference_numpy
    from cnnrt_model import load_model, load_weights

    model_path = os.path.join(args.source_dir, "models", "alexnet.yaml")
    if not os.path.exists(model_path):
        util.fail(f"{model_path} not found")
    weights_path = os.path.join(work, "w.safetensors")
    input_path = os.path.join(work, "x.npy")
    output_path = os.path.join(work, "y.npy")

    util.run_cli(args.cli, "init-weights", model_path, "--seed", args.seed, "-o", weights_path)
    model = load_model(model_path)
    x = np.random.default_rng(args.seed).standard_normal([BATCH] + model.input_shape)
    x = x.astype(np.float32)
    np.save(input_path, x)
    util.run_cli(args.cli, "run", model_path, "--weights", weights_path, "--input", input_path,
                 "--output", output_path, "--device", "cuda", "--precision", "fp16")
    y = np.load(output_path)
    reference = reference_numpy.forward(model, load_weights(model, weights_path), x)
    error = util.rel_l2(y, reference)
    print(f"alexnet cuda fp16 vs numpy float64: rel L2 {error:.3e} (tolerance {TOLERANCE:.0e}), "
          f"output {list(y.shape)}")
    if not error <= TOLERANCE:
        util.fail(f"rel L2 {error:.3e} > {TOLERANCE:.0e}")
    print("PASS")
    return util.PASS


if __name__ == "__main__":
    sys.exit(main())
