#!/usr/bin/env python3
"""The model zoo on the GPU against the CPU engine (GPU machine; tests/e2e/test_model_zoo.py is
the CPU engine against the float64 reference).

Per model: `cnnrt init-weights` (deterministic random weights), one random normal input of
batch 2, the CPU engine (fp32) and the CUDA engine at fp16 and at fp32 (the fp32 reference
family: every layer, fused residuals included, on the GPU's slow exact kernels).  Pass: rel L2 of
the logits <= 1e-2 (fp16) / 1e-5 (fp32) against the CPU, the same top-1 per sample, finite
logits.  Also counts, from `cnnrt plan`, the steps on the depthwise kernel and those with the
unfused residual epilogue.

  python3 scripts/gpu_zoo_check.py --bin BUILD/bin [--models resnet18,resnet50,...]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools"))
DEFAULT = "resnet18,resnet50,mobilenet_v2,squeezenet1_1,efficientnet_lite0"


def run(binary, *args):
    result = subprocess.run([binary] + [str(a) for a in args], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"cnnrt {' '.join(map(str, args))}: {result.stderr.strip()[-800:]}")
    return result.stdout


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--models", default=DEFAULT)
    args = parser.parse_args()
    from cnnrt_model import load_model

    binary = os.path.join(args.bin, "cnnrt")
    ok = True
    with tempfile.TemporaryDirectory() as work:
        for index, name in enumerate(args.models.split(",")):
            model_path = os.path.join(REPO, "models", f"{name}.yaml")
            weights = os.path.join(work, f"{name}.safetensors")
            run(binary, "init-weights", model_path, "--seed", index + 1, "-o", weights)
            model = load_model(model_path)
            x = np.random.default_rng(index).standard_normal([2] + model.input_shape)
            x_path = os.path.join(work, "x.npy")
            np.save(x_path, x.astype(np.float32))
            outputs = {}
            for label, extra in (("cpu", ["--device", "cpu"]),
                                 ("cuda fp16", ["--device", "cuda", "--precision", "fp16"]),
                                 ("cuda fp32", ["--device", "cuda", "--precision", "fp32"])):
                y_path = os.path.join(work, "y.npy")
                run(binary, "run", model_path, "--weights", weights, "--input", x_path,
                    "--output", y_path, *extra)
                outputs[label] = np.load(y_path).reshape(2, -1)
            reference = outputs["cpu"]
            for label, bound in (("cuda fp16", 1e-2), ("cuda fp32", 1e-5)):
                got = outputs[label]
                error = rel_l2(got, reference)
                same_top1 = bool(np.all(got.argmax(1) == reference.argmax(1)))
                good = np.all(np.isfinite(got)) and error <= bound and same_top1
                ok = ok and good
                print(f"{name:20s} {label} vs cpu: rel L2 {error:.2e} (<= {bound:g}), top-1 "
                      f"{'same' if same_top1 else 'DIFFERS'} -> {'ok' if good else 'FAIL'}",
                      flush=True)
            plan = run(binary, "plan", model_path, "--device", "cuda", "--precision", "fp16",
                       "--batch", 64)
            wrapped = sum("residual add" in line for line in plan.splitlines())
            depthwise = sum("conv_fp16_depthwise" in line for line in plan.splitlines())
            print(f"{name:20s} fp16 plan: {wrapped} conv steps with the unfused residual "
                  f"epilogue, {depthwise} on conv_fp16_depthwise", flush=True)
    print("zoo GPU check " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
