#!/usr/bin/env python3
"""The CUDA int8 engine equals the CPU int8 engine bit for bit, end to end through the CLI.

Every int8 kernel follows the integer reference exactly (docs/QUANTIZATION.md), so the logits of
`cnnrt run --device cuda --precision int8` must have the bits of `--device cpu --precision int8`
with the same calibration.  Two models: models/digits (its trained weights; calibrated on random
8x8 images in [0, 1]) and AlexNet (random weights, seed 1; one random image), which between them
take every CUDA int8 path AlexNet-like nets use (the quantising space-to-depth stem, the GEMM
convs with fused pools, split-K, the GEMV, the graph output dequantised).  Skipped (77) without
a GPU.  Takes about a minute (the CPU int8 reference of AlexNet is plain loops).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as util  # noqa: E402


def check_model(cli, workdir, model, inputs, calib_inputs, extra):
    import numpy as np

    name = os.path.splitext(os.path.basename(model))[0]
    calib_x = os.path.join(workdir, f"{name}_calib.npy")
    run_x = os.path.join(workdir, f"{name}_x.npy")
    calib = os.path.join(workdir, f"{name}_calib.json")
    np.save(calib_x, calib_inputs)
    np.save(run_x, inputs)
    util.run_cli(cli, "calibrate", model, *extra, "--input", calib_x, "--method", "minmax", "-o",
                 calib)
    outputs = {}
    for device in ("cpu", "cuda"):
        path = os.path.join(workdir, f"{name}_{device}.npy")
        util.run_cli(cli, "run", model, *extra, "--input", run_x, "--output", path, "--device",
                     device, "--precision", "int8", "--calib", calib)
        outputs[device] = np.load(path)
    cpu, gpu = outputs["cpu"], outputs["cuda"]
    if cpu.shape != gpu.shape:
        util.fail(f"{name}: shapes differ: cpu {cpu.shape}, cuda {gpu.shape}")
    if not np.any(cpu):
        util.fail(f"{name}: the int8 logits are all zero: this check could not fail")
    differing = int(np.count_nonzero(cpu.view(np.uint32) != gpu.view(np.uint32)))
    print(f"{name}: {cpu.size} logits, {differing} differ in any bit")
    if differing:
        util.fail(f"{name}: {differing} of {cpu.size} int8 logits differ between cpu and cuda "
                  f"(max |diff| {float(np.abs(cpu - gpu).max()):.3g})")


def main():
    args, workdir = util.setup(__doc__.splitlines()[0])
    if not util.gpu_present():
        util.skip("no GPU")
    import numpy as np

    rng = np.random.default_rng(args.seed)
    source = args.source_dir
    digits = lambda n: rng.integers(0, 17, size=(n, 1, 8, 8)).astype(np.float32) / 16  # noqa: E731
    check_model(args.cli, workdir, os.path.join(source, "models", "digits.yaml"), digits(37),
                digits(64), [])
    image = lambda: rng.standard_normal((1, 3, 224, 224)).astype(np.float32)  # noqa: E731
    check_model(args.cli, workdir, os.path.join(source, "models", "alexnet.yaml"), image(),
                image(), ["--random-weights", "1"])
    print("PASS")
    return util.PASS


if __name__ == "__main__":
    sys.exit(main())
