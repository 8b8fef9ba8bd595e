#!/usr/bin/env python3
"""Small random models covering every op: C++ engine vs the numpy float64 reference.

Each model below is odd-sized on purpose and aims at the semantics most easily got wrong:
conv with groups / dilation / stride / asymmetric kernel and padding / no bias, batchnorm both
right after a conv (folded by the engine) and standalone after a relu, maxpool with ceil_mode,
avgpool with padding and count_include_pad false (and true), adaptive avgpool with bins that
do not divide the input, LRN with odd and even sizes and a strong alpha, residual add, concat
of branches that start at the graph input, dropout, flatten + linear (with and without bias),
softmax; relu6 and clip (standalone and fused, clip with one bound), depthwise convs, and
conv padding in its asymmetric forms ([top, left, bottom, right] and TF `same`).  Weight
*shapes* come from `cnnrt init-weights` (so that CLI is exercised); their
values are then redrawn here with a random seed (printed) so that batchnorm is far from the
identity, and one model stores them as fp16 to exercise that loader.

Pass: CPU fp32 rel L2 <= 1e-5 for every model; where a GPU is present (`nvidia-smi -L`, or
`cnnrt run --device cuda` succeeding), also cuda fp16 rel L2 <= 1e-2 for the models the CUDA
entries serve (CPU_ONLY lists those they do not yet).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as util  # noqa: E402

CPU_TOLERANCE = 1e-5
FP16_TOLERANCE = 1e-2

# name -> (YAML text, batch, weight dtype)
MODELS = {
    "conv_variants": ("""
name: conv_variants
input: {shape: [3, 17, 19]}
layers:
  - {name: conv1, op: conv, out_channels: 8, kernel: 3, stride: 2, padding: 1, weight: c1.w, bias: c1.b}
  - {name: bn1, op: batchnorm, weight: bn1.w, bias: bn1.b, running_mean: bn1.m, running_var: bn1.v, eps: 0.001}
  - {name: relu1, op: relu}
  - {name: conv2, op: conv, out_channels: 6, kernel: [3, 2], stride: [1, 2], padding: [2, 1], dilation: [2, 1], groups: 2, weight: c2.w, bias: c2.b}
  - {name: relu2, op: relu}
  - {name: pool2, op: maxpool, kernel: 3, stride: 2, ceil_mode: true}
  - {name: conv3, op: conv, out_channels: 9, kernel: 2, groups: 3, weight: c3.w}
  - {name: flat, op: flatten}
  - {name: drop, op: dropout, p: 0.3}
  - {name: fc, op: linear, out_features: 10, weight: fc.w, bias: fc.b}
  - {name: prob, op: softmax}
""", 3, "f32"),
    "pools_and_norms": ("""
name: pools_and_norms
input: {shape: [4, 15, 13]}
layers:
  - {name: conv1, op: conv, out_channels: 7, kernel: 1, weight: c1.w, bias: c1.b}
  - {name: pool1, op: avgpool, kernel: 3, stride: 2, padding: 1, ceil_mode: true, count_include_pad: false}
  - {name: lrn1, op: lrn, size: 3, alpha: 0.5, beta: 0.75, k: 2.0}
  - {name: relu1, op: relu}
  - {name: bn1, op: batchnorm, weight: bn1.w, bias: bn1.b, running_mean: bn1.m, running_var: bn1.v}
  - {name: conv2, op: conv, out_channels: 6, kernel: 3, padding: 1, weight: c2.w, bias: c2.b}
  - {name: lrn2, op: lrn, size: 4, alpha: 0.3, beta: 0.6}
  - {name: pool2, op: avgpool, kernel: 2, stride: 1, padding: 1}
  - {name: gap, op: adaptive_avgpool, output_size: [3, 2]}
  - {name: flat, op: flatten}
  - {name: fc, op: linear, out_features: 5, weight: fc.w, bias: fc.b}
""", 3, "f16"),
    "branches": ("""
name: branches
input: {shape: [5, 11, 9]}
layers:
  - {name: conv_a, op: conv, out_channels: 6, kernel: 3, padding: 1, weight: a.w, bias: a.b}
  - {name: relu_a, op: relu}
  - {name: conv_b, op: conv, out_channels: 6, kernel: 3, padding: 1, weight: b.w, bias: b.b}
  - {name: sum, op: add, inputs: [conv_b, relu_a]}
  - {name: relu_sum, op: relu}
  - {name: conv_c, op: conv, out_channels: 3, kernel: 1, input: input, weight: c.w}
  - {name: bn_c, op: batchnorm, weight: bnc.w, bias: bnc.b, running_mean: bnc.m, running_var: bnc.v}
  - {name: cat, op: concat, inputs: [relu_sum, bn_c, relu_a]}
  - {name: pool, op: maxpool, kernel: [2, 3], stride: [1, 2], padding: [1, 1]}
  - {name: pool2, op: avgpool, kernel: 2}
  - {name: flat, op: flatten}
  - {name: fc1, op: linear, out_features: 12, weight: fc1.w}
  - {name: relu_fc, op: relu}
  - {name: fc2, op: linear, out_features: 4, weight: fc2.w, bias: fc2.b}
""", 1, "f32"),
    "mini_alexnet": ("""
name: mini_alexnet
input: {shape: [3, 37, 41]}
layers:
  - {name: conv1, op: conv, out_channels: 16, kernel: 5, stride: 3, padding: 2, weight: features.0.weight, bias: features.0.bias}
  - {name: relu1, op: relu}
  - {name: pool1, op: maxpool, kernel: 3, stride: 2}
  - {name: conv2, op: conv, out_channels: 24, kernel: 3, padding: 1, weight: features.3.weight, bias: features.3.bias}
  - {name: relu2, op: relu}
  - {name: pool2, op: maxpool, kernel: 2, stride: 2, ceil_mode: true}
  - {name: avg, op: adaptive_avgpool, output_size: 3}
  - {name: flatten, op: flatten}
  - {name: drop6, op: dropout}
  - {name: fc6, op: linear, out_features: 33, weight: classifier.1.weight, bias: classifier.1.bias}
  - {name: relu6, op: relu}
  - {name: fc7, op: linear, out_features: 7, weight: classifier.4.weight, bias: classifier.4.bias}
""", 5, "f32"),
    "mobile_blocks": ("""
name: mobile_blocks
input: {shape: [3, 18, 15]}
layers:
  - {name: stem, op: conv, out_channels: 8, kernel: 3, stride: 2, padding: same, weight: s.w}
  - {name: bn0, op: batchnorm, weight: bn0.w, bias: bn0.b, running_mean: bn0.m, running_var: bn0.v, eps: 0.001}
  - {name: act0, op: relu6}
  - {name: dw, op: conv, out_channels: 8, kernel: 5, stride: 2, padding: same, groups: 8, weight: dw.w}
  - {name: bn1, op: batchnorm, weight: bn1.w, bias: bn1.b, running_mean: bn1.m, running_var: bn1.v, eps: 0.001}
  - {name: act1, op: relu6}
  - {name: pw, op: conv, out_channels: 8, kernel: 1, padding: same, weight: pw.w, bias: pw.b}
  - {name: res, op: add, inputs: [pw, act1]}
  - {name: asym, op: conv, out_channels: 6, kernel: [3, 2], padding: [0, 1, 2, 0], weight: a.w, bias: a.b}
  - {name: clip1, op: clip, min: -0.5, max: 0.75}
  - {name: pool, op: maxpool, kernel: 2, ceil_mode: true}
  - {name: clip2, op: clip, max: 0.3}
  - {name: act2, op: relu6}
  - {name: gap, op: adaptive_avgpool, output_size: 1}
  - {name: flat, op: flatten}
  - {name: fc1, op: linear, out_features: 9, weight: fc1.w, bias: fc1.b}
  - {name: fc1_clip, op: clip, min: -0.05}
  - {name: fc2, op: linear, out_features: 4, weight: fc2.w, bias: fc2.b}
  - {name: fc2_act, op: relu6}
""", 2, "f32"),
}

# Models with ops or padding the CUDA entries refuse today (relu6 / clip epilogues, asymmetric
# padding): their CUDA run waits for the CUDA side of issue 8.
CPU_ONLY = {"mobile_blocks"}


def redraw_weights(model, shapes, rng, dtype):
    """Fresh values for every tensor, scaled so activations stay O(1); batchnorm far from the
    identity so a missing or wrong fold shows."""
    import numpy as np

    roles = {key: (layer.op, role) for layer in model.layers for role, key in layer.params.items()}
    out = {}
    for key, shape in shapes.items():
        if key not in roles:
            continue
        op, role = roles[key]
        if op in ("conv", "linear") and role == "weight":
            fan_in = int(np.prod(shape[1:]))
            value = rng.uniform(-1, 1, shape) * np.sqrt(3.0 / fan_in)
        elif op == "batchnorm" and role == "weight":
            value = rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)
        elif op == "batchnorm" and role == "running_var":
            value = rng.uniform(0.3, 2.5, shape)
        elif op == "batchnorm" and role == "running_mean":
            value = rng.normal(0, 0.5, shape)
        else:  # biases
            value = rng.normal(0, 0.3, shape)
        out[key] = value.astype(np.float16 if dtype == "f16" else np.float32)
    return out


def main() -> int:
    args, work = util.setup(__doc__.split("\n")[0])
    import numpy as np
    from safetensors.numpy import load_file, save_file
    import reference_numpy
    from cnnrt_model import load_model, load_weights

    rng = np.random.default_rng(args.seed)
    gpu = util.gpu_present()
    print(f"GPU present (nvidia-smi): {gpu}")
    failures = []
    for index, (name, (text, batch, dtype)) in enumerate(MODELS.items()):
        model_path = os.path.join(work, f"{name}.yaml")
        with open(model_path, "w", encoding="utf-8") as handle:
            handle.write(text)
        model = load_model(model_path)
        # `cnnrt info` needs no weights, batchnorm folding included.
        info = util.run_cli(args.cli, "info", model_path, check=False)
        if info.returncode != 0 or "after fusion" not in info.stdout:
            failures.append(f"{name}: cnnrt info failed: {info.stderr.strip()[-200:]}")
        elif name == "conv_variants" and "1 batchnorm folded" not in info.stdout:
            failures.append(f"{name}: cnnrt info did not fold conv1 + bn1")
        init_path = os.path.join(work, f"{name}.init.safetensors")
        weights_path = os.path.join(work, f"{name}.safetensors")
        util.run_cli(args.cli, "init-weights", model_path, "--seed", args.seed, "-o", init_path)
        shapes = {key: value.shape for key, value in load_file(init_path).items()}
        save_file(redraw_weights(model, shapes, rng, dtype), weights_path)

        x = rng.standard_normal([batch] + model.input_shape).astype(np.float32)
        input_path = os.path.join(work, f"{name}.x.npy")
        np.save(input_path, x)
        reference = reference_numpy.forward(model, load_weights(model, weights_path), x)

        runs = [("cpu", "fp32", CPU_TOLERANCE)]
        if (gpu or index == 0) and name not in CPU_ONLY:
            # without nvidia-smi, probe whether cuda works on the first model
            runs.append(("cuda", "fp16", FP16_TOLERANCE))
        for device, precision, tolerance in runs:
            output_path = os.path.join(work, f"{name}.{device}.npy")
            result = util.run_cli(args.cli, "run", model_path, "--weights", weights_path,
                                  "--input", input_path, "--output", output_path,
                                  "--device", device, "--precision", precision,
                                  check=(device == "cpu" or gpu))
            if result.returncode != 0:
                print(f"  cuda run failed without a GPU listed: GPU checks skipped "
                      f"({result.stderr.strip().splitlines()[-1:]})")
                continue
            if device == "cuda" and not gpu:
                gpu = True
            error = util.rel_l2(np.load(output_path), reference)
            verdict = "ok" if error <= tolerance else "FAIL"
            print(f"{name:16s} {device:4s} {precision}: rel L2 {error:.3e} "
                  f"(tolerance {tolerance:.0e}, batch {batch}, {dtype} weights) {verdict}",
                  flush=True)
            if not error <= tolerance:
                failures.append(f"{name} {device} {precision}: rel L2 {error:.3e}")
    if failures:
        util.fail("; ".join(failures))
    print("PASS" + ("" if gpu else " (CPU only: no GPU)"))
    return util.PASS


if __name__ == "__main__":
    sys.exit(main())
