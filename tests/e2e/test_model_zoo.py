#!/usr/bin/env python3
"""The model zoo (models/*.yaml keyed by torchvision state_dict names) on the CPU engine vs the
numpy float64 reference, with random weights.

Each YAML gets `cnnrt init-weights` (deterministic PyTorch-style weights; batchnorm statistics
perturbed so that folding is exercised) and a random normal input of batch 1; pass: rel L2 <=
1e-5 on the logits, and logits that are not degenerate (finite, not all equal).  ResNet-50
(~27 s on the CPU engine here) and VGG-16 (~95 s) run only with CNNRT_E2E_FULL_ZOO=1, to keep
CI short; the default set is AlexNet's smaller siblings ResNet-18, SqueezeNet 1.1, MobileNetV2
and EfficientNet-Lite0 (random weights; its pretrained weights are tested in
test_efficientnet_lite0.py).
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as util  # noqa: E402

TOLERANCE = 1e-5
DEFAULT_MODELS = ["resnet18", "squeezenet1_1", "mobilenet_v2", "efficientnet_lite0"]
BIG_MODELS = ["resnet50", "vgg16"]


def main() -> int:
    args, work = util.setup(__doc__.split("\n")[0])
    import numpy as np
    import reference_numpy
    from cnnrt_model import load_model, load_weights

    full = bool(os.environ.get("CNNRT_E2E_FULL_ZOO"))
    models = DEFAULT_MODELS + (BIG_MODELS if full else [])
    if not full:
        print(f"  {', '.join(BIG_MODELS)} skipped (set CNNRT_E2E_FULL_ZOO=1 to run them)")
    rng = np.random.default_rng(args.seed)
    failures = []
    for name in models:
        model_path = os.path.join(args.source_dir, "models", f"{name}.yaml")
        weights_path = os.path.join(work, f"{name}.safetensors")
        util.run_cli(args.cli, "init-weights", model_path, "--seed", args.seed, "-o", weights_path)
        model = load_model(model_path)
        x = rng.standard_normal([1] + model.input_shape).astype(np.float32)
        input_path = os.path.join(work, f"{name}.x.npy")
        output_path = os.path.join(work, f"{name}.y.npy")
        np.save(input_path, x)
        util.run_cli(args.cli, "run", model_path, "--weights", weights_path, "--input",
                     input_path, "--output", output_path, "--device", "cpu")
        started = time.time()
        reference = reference_numpy.forward(model, load_weights(model, weights_path), x)
        reference_seconds = time.time() - started
        actual = np.load(output_path)
        error = util.rel_l2(actual, reference)
        degenerate = not np.all(np.isfinite(reference)) or np.ptp(reference) == 0
        verdict = "ok" if error <= TOLERANCE and not degenerate else "FAIL"
        print(f"{name:18s} cpu fp32 vs numpy float64: rel L2 {error:.3e} (tolerance "
              f"{TOLERANCE:.0e}, batch 1; reference {reference_seconds:.1f} s) {verdict}",
              flush=True)
        if verdict != "ok":
            failures.append(f"{name}: rel L2 {error:.3e}" + (" (degenerate logits)"
                                                             if degenerate else ""))
    if failures:
        util.fail("; ".join(failures))
    print("PASS")
    return util.PASS


if __name__ == "__main__":
    sys.exit(main())
