#!/usr/bin/env python3
"""`cnnrt accuracy` on models/digits (committed weights) and random inputs in [0, 1]:
the JSON and the table agree, the whole-network row equals the metrics computed here in numpy
from `cnnrt run` fp32 and `cnnrt run --precision int8` outputs, a per-layer row equals a
`cnnrt run --plan` with just that layer at int8 (and `cnnrt bench --plan` names the layers'
precisions: mixed), `--layers` and `--whole-only` select rows,
and bad input (no calibration, an unknown layer, an empty .npy) is one "error:" line with exit
code 2 (a usage error: the missing --calib) or 1, and no JSON file left behind.  Takes a few seconds.
"""

import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as util  # noqa: E402


def metrics(reference, test):
    """runtime/accuracy.h's definitions, written independently."""
    reference = reference.astype(np.float64)
    test = test.astype(np.float64)
    label = reference.argmax(axis=1)
    order = np.argsort(-test, axis=1, kind="stable")
    top5 = np.array([label[i] in order[i, :5] for i in range(len(label))])

    def log_softmax(x):
        x = x - x.max(axis=1, keepdims=True)
        return x - np.log(np.exp(x).sum(axis=1, keepdims=True))

    log_p, log_q = log_softmax(reference), log_softmax(test)
    return {"rel_l2": float(np.linalg.norm(test - reference) / np.linalg.norm(reference)),
            "top1": float((test.argmax(axis=1) == label).mean()), "top5": float(top5.mean()),
            "kl": float((np.exp(log_p) * (log_p - log_q)).sum(axis=1).mean())}


def compare(label, row, expected):
    for key in ("rel_l2", "kl"):
        if abs(row[key] - expected[key]) > 1e-6 * max(abs(expected[key]), 1e-9) + 1e-12:
            util.fail(f"{label}: {key} {row[key]} != {expected[key]} (numpy)")
    for key in ("top1", "top5"):
        if row[key] != expected[key]:
            util.fail(f"{label}: {key} {row[key]} != {expected[key]} (numpy)")


def main():
    args, workdir = util.setup(__doc__.splitlines()[0])
    model = os.path.join(args.source_dir, "models", "digits.yaml")
    rng = np.random.default_rng(args.seed)
    calib_set = os.path.join(workdir, "calib.npy")
    held_out = os.path.join(workdir, "held_out.npy")
    np.save(calib_set, rng.uniform(0, 1, (48, 1, 8, 8)).astype(np.float32))
    np.save(held_out, rng.uniform(0, 1, (21, 1, 8, 8)).astype(np.float32))
    calib = os.path.join(workdir, "calib.json")
    util.run_cli(args.cli, "calibrate", model, "--input", calib_set, "--method", "percentile",
                 "-o", calib)

    report_path = os.path.join(workdir, "report.json")
    result = util.run_cli(args.cli, "accuracy", model, "--calib", calib, "--input", held_out,
                          "--batch", "4", "--json", report_path)
    report = json.load(open(report_path))
    if report["format"] != "cnnrt-accuracy" or report["samples"] != 21:
        util.fail(f"unexpected header: {report['format']}, {report['samples']} samples")
    layers = [row["layer"] for row in report["layers"]]
    if layers != ["conv1", "conv2", "flatten", "fc"]:
        util.fail(f"layers {layers}")
    if sorted(row["rank"] for row in report["layers"]) != [1, 2, 3, 4]:
        util.fail("ranks are not 1..4")
    table = result.stdout
    for row in report["layers"]:
        line = next((l for l in table.splitlines() if f" {row['layer']} " in l), None)
        if line is None or f"{row['rel_l2']:.6f}" not in line:
            util.fail(f"table row of {row['layer']} does not show rel L2 {row['rel_l2']:.6f}:\n"
                      f"{table}")

    fp32_out = os.path.join(workdir, "fp32.npy")
    util.run_cli(args.cli, "run", model, "--input", held_out, "--output", fp32_out, "--device",
                 "cpu")
    fp32 = np.load(fp32_out)
    int8_out = os.path.join(workdir, "int8.npy")
    util.run_cli(args.cli, "run", model, "--input", held_out, "--output", int8_out, "--device",
                 "cpu", "--precision", "int8", "--calib", calib)
    compare("all int8", report["all"], metrics(fp32, np.load(int8_out)))
    if not 0 < report["all"]["rel_l2"] < 0.1:
        util.fail(f"all-int8 rel L2 {report['all']['rel_l2']} outside (0, 0.1)")

    plan = os.path.join(workdir, "plan.yaml")
    with open(plan, "w") as f:
        f.write("model: digits\nlayers:\n  conv2: {precision: int8}\n")
    alone_out = os.path.join(workdir, "alone.npy")
    util.run_cli(args.cli, "run", model, "--input", held_out, "--output", alone_out, "--device",
                 "cpu", "--calib", calib, "--plan", plan)
    compare("conv2 alone", report["layers"][1], metrics(fp32, np.load(alone_out)))
    # bench names the layers' precisions of such a plan, not the engine's default alone.
    bench_json = os.path.join(workdir, "bench.json")
    bench = util.run_cli(args.cli, "bench", model, "--device", "cpu", "--calib", calib, "--plan",
                         plan, "--batch", "2", "--iterations", "50", "--warmup", "1", "--json",
                         bench_json).stdout
    bench_report = json.load(open(bench_json))
    if bench_report["layer_precisions"] != {"fp32": 3, "int8": 1} or \
            "precision mixed (fp32 3, int8 1)" not in bench:
        util.fail(f"bench --plan: {bench_report['layer_precisions']}, printed:\n{bench}")

    selected = util.run_cli(args.cli, "accuracy", model, "--calib", calib, "--input", held_out,
                            "--layers", "relu2,fc", "--samples", "5").stdout
    if " conv2 " not in selected or " fc " not in selected or " conv1 " in selected \
            or "5 samples" not in selected:
        util.fail(f"--layers relu2,fc --samples 5 printed:\n{selected}")
    whole = util.run_cli(args.cli, "accuracy", model, "--calib", calib, "--input", held_out,
                         "--whole-only").stdout
    if " conv1 " in whole or "all int8" not in whole:
        util.fail(f"--whole-only printed:\n{whole}")

    empty = os.path.join(workdir, "empty.npy")
    np.save(empty, np.zeros((0, 1, 8, 8), np.float32))
    bad_json = os.path.join(workdir, "bad.json")
    # A missing flag is a usage error (exit 2), the others runtime errors (exit 1): README.
    for label, argv, fragment, code in (
            ("no calibration", ["--input", held_out], "--calib", 2),
            ("unknown layer", ["--calib", calib, "--input", held_out, "--layers", "conv9"],
             "layer 'conv9' is not in model digits", 1),
            ("empty set", ["--calib", calib, "--input", empty], "empty", 1)):
        result = subprocess.run([args.cli, "accuracy", model, *argv, "--json", bad_json],
                                capture_output=True, text=True, timeout=120)
        errors = [l for l in result.stderr.splitlines() if l.startswith("error:")]
        if result.returncode != code or len(errors) != 1 or fragment not in errors[0]:
            util.fail(f"{label}: exit {result.returncode}, stderr:\n{result.stderr}")
        if os.path.exists(bad_json):
            util.fail(f"{label}: {bad_json} was written")
    print("PASS")
    return util.PASS


if __name__ == "__main__":
    sys.exit(main())
