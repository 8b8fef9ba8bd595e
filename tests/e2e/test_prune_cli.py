#!/usr/bin/env python3
"""`cnnrt prune` on models/digits (committed weights) and random inputs in [0, 1]: --pattern 2:4
writes weights that are 2:4 by an independent numpy check, with the whole-network rel L2 equal
to numpy's on `cnnrt run` outputs, and a plan file asking `sparsity: 2:4` runs the sparse CPU
kernels with the dense kernels' outputs; --channels 0.5 writes weights whose plan is compacted;
bad input (--channels outside (0, 1), a pruning that removes every channel, an unknown layer, a
layer the model says is 2:4 that is not, a layer feeding a residual add) is one "error:" line,
a non-zero exit and no output file.  Takes a few seconds.
"""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as util  # noqa: E402

RESIDUAL_YAML = """\
name: residual
input: {shape: [4, 6, 6]}
layers:
  - {name: c1, op: conv, out_channels: 4, kernel: 3, padding: 1, weight: c1.weight, bias: c1.bias}
  - {name: add, op: add, inputs: [c1, input]}
  - {name: c2, op: conv, out_channels: 3, kernel: 1, weight: c2.weight, bias: c2.bias}
"""


def is_2_4(weight):
    """At most 2 non-zeros in every 4 consecutive input channels at each (output, tap)."""
    w = weight.reshape(weight.shape[0], weight.shape[1], -1)
    pad = (-w.shape[1]) % 4
    w = np.concatenate([w, np.zeros((w.shape[0], pad, w.shape[2]))], axis=1)
    groups = (w.reshape(w.shape[0], -1, 4, w.shape[2]) != 0).sum(axis=2)
    return bool((groups <= 2).all())


def expect_refused(args, label, argv, out, code=1):
    result = util.run_cli(args.cli, *argv, check=False)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    if result.returncode != code or len(errors) != 1 or os.path.exists(out):
        util.fail(f"{label}: exit {result.returncode} (want {code}), {len(errors)} error lines, "
                  f"output left: {os.path.exists(out)}\n{result.stderr}")
    return errors[0]


def main():
    from safetensors.numpy import load_file

    args, workdir = util.setup(__doc__.splitlines()[0])
    j = lambda *p: os.path.join(workdir, *p)  # noqa: E731
    model = os.path.join(args.source_dir, "models", "digits.yaml")
    rng = np.random.default_rng(args.seed)
    np.save(j("x.npy"), rng.uniform(0, 1, (13, 1, 8, 8)).astype(np.float32))

    util.run_cli(args.cli, "prune", model, "--pattern", "2:4", "--input", j("x.npy"), "--batch",
                 "5", "-o", j("p24.safetensors"), "--json", j("p24.json"))
    pruned = load_file(j("p24.safetensors"))
    for key in ("conv1.weight", "conv2.weight", "fc.weight"):
        if not is_2_4(pruned[key]):
            util.fail(f"{key} is not 2:4 after --pattern 2:4")
    report = json.load(open(j("p24.json")))
    conv2 = next(row for row in report["layers"] if row["layer"] == "conv2")
    if abs(conv2["kept_fraction"] - 0.5) > 0.02:
        util.fail(f"conv2 kept {conv2['kept_fraction']}, expected about half")
    util.run_cli(args.cli, "run", model, "--input", j("x.npy"), "--output", j("dense.npy"),
                 "--device", "cpu")
    util.run_cli(args.cli, "run", model, "--weights", j("p24.safetensors"), "--input",
                 j("x.npy"), "--output", j("p24.npy"), "--device", "cpu")
    rel = util.rel_l2(np.load(j("p24.npy")), np.load(j("dense.npy")))
    if abs(rel - report["whole"]["rel_l2"]) > 1e-5 * rel + 1e-9:
        util.fail(f"whole rel L2 {report['whole']['rel_l2']} != numpy's {rel}")
    with open(j("sparse_plan.yaml"), "w") as f:
        f.write('layers:\n  conv2: {sparsity: "2:4"}\n  fc: {sparsity: "2:4"}\n')
    util.run_cli(args.cli, "run", model, "--weights", j("p24.safetensors"), "--plan",
                 j("sparse_plan.yaml"), "--input", j("x.npy"), "--output", j("sparse.npy"),
                 "--device", "cpu")
    if util.rel_l2(np.load(j("sparse.npy")), np.load(j("p24.npy"))) > 1e-6:
        util.fail("sparse kernels differ from the dense kernels on the same 2:4 weights")
    plan = json.loads(util.run_cli(args.cli, "plan", model, "--weights", j("p24.safetensors"),
                                   "--plan", j("sparse_plan.yaml"), "--json", "-").stdout)
    sparse_steps = sorted(s["name"] for s in plan["steps"] if s["sparsity"] == "2:4")
    if sparse_steps != ["conv2", "fc"]:
        util.fail(f"plan: sparse steps {sparse_steps}")

    util.run_cli(args.cli, "prune", model, "--channels", "0.5", "--input", j("x.npy"), "-o",
                 j("pch.safetensors"))
    plan = json.loads(util.run_cli(args.cli, "plan", model, "--weights", j("pch.safetensors"),
                                   "--json", "-").stdout)
    if not any(line.startswith("conv1: 16 -> 8") for line in plan["compacted"]):
        util.fail(f"plan --weights does not show conv1 compacted: {plan['compacted']}")

    out = j("bad.safetensors")
    base = ["prune", model, "--input", j("x.npy"), "-o", out]
    expect_refused(args, "--channels 1.5", base + ["--channels", "1.5"], out, code=2)
    line = expect_refused(args, "--channels 0.01", base + ["--channels", "0.01"], out)
    if "every channel" not in line:
        util.fail(f"--channels 0.01: {line}")
    line = expect_refused(args, "unknown layer", base + ["--pattern", "2:4", "--layers", "nope"],
                          out)
    if "nope" not in line:
        util.fail(f"unknown layer: {line}")
    claimed = j("claimed.yaml")
    with open(model) as f:
        text = f.read()
    with open(claimed, "w") as f:
        f.write(text.replace("bias: fc.bias}", 'bias: fc.bias, sparsity: "2:4"}'))
    weights = os.path.join(os.path.abspath(args.source_dir), "models", "digits.safetensors")
    line = expect_refused(args, "claimed 2:4", ["prune", claimed, "--weights", weights, "--input",
                                                j("x.npy"), "-o", out, "--pattern", "2:4",
                                                "--layers", "conv2"], out)
    if "fc" not in line or "2:4" not in line:
        util.fail(f"claimed 2:4: {line}")
    residual = j("residual.yaml")
    with open(residual, "w") as f:
        f.write(RESIDUAL_YAML)
    util.run_cli(args.cli, "init-weights", residual, "-o", j("res.safetensors"))
    np.save(j("xr.npy"), rng.uniform(0, 1, (3, 4, 6, 6)).astype(np.float32))
    line = expect_refused(args, "residual", ["prune", residual, "--weights", j("res.safetensors"),
                                             "--channels", "0.5", "--input", j("xr.npy"), "-o",
                                             out], out)
    if "c1" not in line or "add" not in line:
        util.fail(f"residual: {line}")
    print("PASS")


if __name__ == "__main__":
    main()
