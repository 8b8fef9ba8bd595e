#!/usr/bin/env python3
"""Golden end-to-end check: AlexNet through the C++ CPU engine vs the numpy float64 reference.

Both read the same files: weights from `cnnrt init-weights --seed S` (the seed is random and
printed, so every run tries new weights; rerun with --seed to reproduce) and a fresh normal
random input batch of 2 saved as .npy.  Pass: rel L2 = ||y - ref|| / ||ref|| <= 1e-5 (fp32
accumulation over up to 9216-long dot products leaves ~1e-6; a wrong window, padding or
flatten order gives O(1)), and the same argmax per sample wherever the reference's top two
logits are not a near tie.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as util  # noqa: E402

TOLERANCE = 1e-5
BATCH = 2


def main() -> int:
    args, work = util.setup(__doc__.split("\n")[0])
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
    rng = np.random.default_rng(args.seed)
    model = load_model(model_path)
    x = rng.standard_normal([BATCH] + model.input_shape).astype(np.float32)
    np.save(input_path, x)
    util.run_cli(args.cli, "run", model_path, "--weights", weights_path, "--input", input_path,
                 "--output", output_path, "--device", "cpu", "--precision", "fp32")
    y = np.load(output_path)
    reference = reference_numpy.forward(model, load_weights(model, weights_path), x)

    error = util.rel_l2(y, reference)
    print(f"alexnet cpu fp32 vs numpy float64: rel L2 {error:.3e} (tolerance {TOLERANCE:.0e}), "
          f"output {list(y.shape)}, |ref| {np.linalg.norm(reference):.4g}")
    if not error <= TOLERANCE:
        util.fail(f"rel L2 {error:.3e} > {TOLERANCE:.0e}")

    flat_y, flat_ref = y.reshape(BATCH, -1), reference.reshape(BATCH, -1)
    for sample in range(BATCH):
        top2 = np.sort(flat_ref[sample])[-2:]
        gap = (top2[1] - top2[0]) / max(np.abs(flat_ref[sample]).max(), 1e-30)
        engine_top, ref_top = int(flat_y[sample].argmax()), int(flat_ref[sample].argmax())
        print(f"  sample {sample}: argmax engine {engine_top}, reference {ref_top} "
              f"(top-2 gap {gap:.2e} of max |logit|)")
        if gap > 1e-4 and engine_top != ref_top:
            util.fail(f"sample {sample}: argmax {engine_top} != reference {ref_top}")
    print("PASS")
    return util.PASS


if __name__ == "__main__":
    sys.exit(main())
