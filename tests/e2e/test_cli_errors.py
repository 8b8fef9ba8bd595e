#!/usr/bin/env python3
"""CLI error paths: every bad input gives exactly one "error: ..." line on stderr that names the
culprit, no abort/traceback, and no output file left behind; the exit code is 1 for a runtime
error (bad model, file, device) and 2 for a usage error (bad command line), which also points
at the command's --help.

Run by CTest as: python3 test_cli_errors.py --bin-dir BIN --source-dir SRC  (exit 0 = pass).
Small models are written to a temporary directory so the whole check takes seconds.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

TINY_YAML = """\
name: tiny
input: {shape: [3, 9, 9], mean: [0.5, 0.4, 0.3], std: [0.2, 0.25, 0.3]}
weights: tiny.safetensors
labels: tiny_labels.txt
layers:
  - {name: c1, op: conv, out_channels: 4, kernel: 3, padding: 1, weight: c1.weight, bias: c1.bias}
  - {name: r1, op: relu}
  - {name: p1, op: maxpool, kernel: 2}
  - {name: flat, op: flatten}
  - {name: fc, op: linear, out_features: 5, weight: fc.weight, bias: fc.bias}
"""

# Same tensor names, different shapes (c1 has 6 output channels).
WIDER_YAML = TINY_YAML.replace("name: tiny", "name: wider").replace("out_channels: 4",
                                                                     "out_channels: 6")

failures = []


def check(label, argv, fragments, must_not_exist=(), cwd=None, code=1):
    """Runs argv and checks the error contract; fragments must all appear in the error line."""
    result = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=300)
    problems = []
    if result.returncode != code:
        problems.append(f"exit code {result.returncode}, expected {code}")
    if code == 2 and "--help' for usage" not in result.stderr:
        problems.append("a usage error does not point at --help")
    error_lines = [l for l in result.stderr.splitlines() if l.startswith("error:")]
    if len(error_lines) != 1:
        problems.append(f"{len(error_lines)} 'error:' lines on stderr, expected 1")
    for bad in ("Traceback", "terminate called", "Aborted", "Segmentation", "core dumped"):
        if bad in result.stderr:
            problems.append(f"stderr contains {bad!r}")
    line = error_lines[0] if error_lines else ""
    for fragment in fragments:
        if fragment not in line:
            problems.append(f"error line does not name {fragment!r}")
    for path in must_not_exist:
        if os.path.exists(path):
            problems.append(f"output {path} was left behind")
        folder = os.path.dirname(path) or "."
        leftovers = [f for f in os.listdir(folder) if ".tmp-" in f]
        if leftovers:
            problems.append(f"temporary files left behind: {leftovers}")
    status = "FAIL" if problems else "ok  "
    print(f"{status} {label}: {line or result.stderr.strip()[:200]}")
    for problem in problems:
        print(f"       {problem}")
    if problems:
        print(f"       command: {' '.join(argv)}\n       stderr: {result.stderr.strip()}")
        failures.append(label)


def write(path, text, mode="w"):
    with open(path, mode) as f:
        f.write(text)
    return path


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--source-dir", required=True)
    args = parser.parse_args()
    cnnrt = os.path.join(args.bin_dir, "cnnrt")
    infer = os.path.join(args.bin_dir, "alexnet_infer")
    for binary in (cnnrt, infer):
        if not os.access(binary, os.X_OK):
            print(f"missing binary {binary}")
            return 1

    with tempfile.TemporaryDirectory(prefix="cnnrt_cli_errors_") as tmp:
        j = lambda *p: os.path.join(tmp, *p)
        tiny = write(j("tiny.yaml"), TINY_YAML)
        write(j("tiny_labels.txt"), "".join(f"label{i}\n" for i in range(5)))
        wider = write(j("wider.yaml"), WIDER_YAML)
        out = j("out.npy")

        # Positive control: the happy path works, so the error checks below are meaningful.
        good_weights = j("good.safetensors")
        init = subprocess.run([cnnrt, "init-weights", tiny, "--seed", "3", "-o", good_weights],
                              capture_output=True, text=True)
        x = np.random.default_rng(7).standard_normal((2, 3, 9, 9)).astype(np.float32)
        np.save(j("x.npy"), x)
        run = subprocess.run([cnnrt, "run", tiny, "--weights", good_weights, "--input",
                              j("x.npy"), "--output", out, "--device", "cpu"],
                             capture_output=True, text=True)
        if init.returncode != 0 or run.returncode != 0 or np.load(out).shape != (2, 5):
            print("FAIL positive control:", init.stderr, run.stderr)
            failures.append("positive control")
        else:
            print("ok   positive control: cnnrt run wrote [2, 5]")
        if os.path.exists(out):
            os.remove(out)

        # Images.
        check("missing image", [infer, j("nope.png"), "--model", tiny, "--random-weights"],
              ["nope.png"])
        garbage = write(j("garbage.png"), os.urandom(3000), "wb")
        check("corrupt image", [infer, garbage, "--model", tiny, "--random-weights"],
              ["garbage.png", "cannot decode image"])
        write(j("empty.jpg"), b"", "wb")
        check("empty image", [infer, j("empty.jpg"), "--model", tiny, "--random-weights"],
              ["empty.jpg"])

        # Model files.
        malformed = write(j("malformed.yaml"), "name: x\nlayers: [ {name: a, op: relu\n")
        check("malformed yaml", [cnnrt, "info", malformed], ["malformed.yaml"])
        unknown_op = write(j("unknown_op.yaml"), TINY_YAML.replace("op: relu", "op: frobnicate"))
        check("unknown op", [cnnrt, "info", unknown_op], ["unknown_op.yaml", "frobnicate"])
        unknown_key = write(j("unknown_key.yaml"),
                            TINY_YAML.replace("padding: 1", "paddding: 1"))
        check("unknown key", [cnnrt, "info", unknown_key], ["unknown_key.yaml", "paddding"])
        check("missing model", [cnnrt, "info", j("absent.yaml")], ["absent.yaml"])

        # Weights.
        wider_weights = j("wider.safetensors")
        subprocess.run([cnnrt, "init-weights", wider, "-o", wider_weights], check=True,
                       capture_output=True)
        check("weight shape mismatch",
              [cnnrt, "run", tiny, "--weights", wider_weights, "--input", j("x.npy"),
               "--output", out], ["c1"], [out])
        with open(good_weights, "rb") as f:
            blob = f.read()
        truncated = write(j("truncated.safetensors"), blob[: len(blob) // 2], "wb")
        check("truncated safetensors",
              [cnnrt, "run", tiny, "--weights", truncated, "--input", j("x.npy"),
               "--output", out], ["truncated.safetensors"], [out])
        check("default weight file missing",
              [cnnrt, "run", tiny, "--input", j("x.npy"), "--output", out],
              ["tiny.safetensors", "--random-weights"], [out])

        # .npy inputs.
        np.save(j("wrong_shape.npy"), np.ones((2, 1, 9, 9), np.float32) * 0.5)
        check("npy wrong shape",
              [cnnrt, "run", tiny, "--random-weights", "--input", j("wrong_shape.npy"),
               "--output", out], ["wrong_shape.npy", "[2, 1, 9, 9]", "[N, 3, 9, 9]"], [out])
        np.save(j("int.npy"), np.ones((1, 3, 9, 9), np.int32))
        check("npy wrong dtype",
              [cnnrt, "run", tiny, "--random-weights", "--input", j("int.npy"),
               "--output", out], ["int.npy", "dtype"], [out])
        with open(j("x.npy"), "rb") as f:
            npy_bytes = f.read()
        write(j("cut.npy"), npy_bytes[:-17], "wb")
        check("npy truncated",
              [cnnrt, "run", tiny, "--random-weights", "--input", j("cut.npy"),
               "--output", out], ["cut.npy", "truncated"], [out])
        bad_out = j("no_such_dir", "y.npy")
        check("output into a missing directory",
              [cnnrt, "run", tiny, "--random-weights", "--input", j("x.npy"),
               "--output", bad_out], ["y.npy"])

        # Command lines: usage errors, exit code 2.
        usage = lambda label, argv, fragments, must_not_exist=(): check(
            label, argv, fragments, must_not_exist, code=2)
        usage("batch 0", [cnnrt, "plan", tiny, "--batch", "0"], ["--batch"])
        usage("batch negative", [cnnrt, "profile", tiny, "--batch", "-4", "--random-weights"],
              ["--batch"])
        usage("batch list with 0", [cnnrt, "bench", tiny, "--batch", "1,0", "--random-weights"],
              ["--batch"])
        usage("batch not a number", [cnnrt, "plan", tiny, "--batch", "x"], ["--batch", "'x'"])
        usage("batch without a value", [cnnrt, "plan", tiny, "--batch"], ["--batch"])
        usage("unknown flag", [cnnrt, "info", tiny, "--frobnicate"], ["--frobnicate"])
        usage("unknown flag (alexnet_infer)",
              [infer, garbage, "--model", tiny, "--colour"], ["--colour"])
        usage("unknown command", [cnnrt, "frobnicate", tiny], ["frobnicate"])
        usage("no command", [cnnrt], ["missing command"])
        usage("missing model", [cnnrt, "info"], ["MODEL"])
        usage("bad precision", [cnnrt, "run", tiny, "--random-weights", "--precision", "fp7",
                                "--input", j("x.npy"), "--output", out], ["fp7"], [out])
        usage("bad device", [cnnrt, "plan", tiny, "--batch", "1", "--device", "tpu"], ["tpu"])
        usage("top 0", [infer, garbage, "--model", tiny, "--random-weights", "--top", "0"],
              ["--top"])
        usage("too few iterations",
              [cnnrt, "bench", tiny, "--batch", "1", "--iterations", "10", "--random-weights"],
              ["--iterations", "50"])
        usage("init-weights without -o", [cnnrt, "init-weights", tiny], ["--output"])
        usage("init-weights bad dtype",
              [cnnrt, "init-weights", tiny, "-o", j("w.safetensors"), "--dtype", "bf16"],
              ["bf16"], [j("w.safetensors")])
        usage("weights and random weights", [cnnrt, "run", tiny, "--weights", good_weights,
                                             "--random-weights", "--input", j("x.npy"),
                                             "--output", out], ["--weights", "--random-weights"],
              [out])
        usage("negative seed", [cnnrt, "run", tiny, "--random-weights=-3", "--input", j("x.npy"),
                                "--output", out], ["--random-weights", "-3"], [out])
        usage("quiet and verbose", [cnnrt, "info", tiny, "-q", "-v"], ["--quiet", "--verbose"])
        # '-' where no stream is possible is refused, and no file named '-' appears.
        usage("model from stdin", [cnnrt, "info", "-"], ["MODEL", "'-'"])
        usage("weights to stdout", [cnnrt, "init-weights", tiny, "-o", "-"], ["--output", "'-'"],
              [os.path.join(tmp, "-")])
        usage("two streams on stdout", [cnnrt, "run", tiny, "--random-weights", "--input",
                                        j("x.npy"), "--output", "-", "--json", "-"],
              ["--output", "--json"])
        usage("calibration set twice", [cnnrt, "calibrate", tiny, "--random-weights", "--images",
                                        tmp, "--input", j("x.npy"), "--method", "minmax", "-o",
                                        j("c.json")], ["--images", "--input"], [j("c.json")])
        check("profile json into a missing directory",
              [cnnrt, "profile", tiny, "--random-weights", "--device", "cpu", "--iterations",
               "2", "--json", j("no_such_dir", "p.json")], ["p.json"])

        # Per-layer choices: plan files and the model's own keys.
        plan_args = [cnnrt, "run", tiny, "--random-weights", "--device", "cpu", "--input",
                     j("x.npy"), "--output", out, "--plan"]
        write(j("plan_layer.yaml"), "layers:\n  nope: {precision: fp32}\n")
        check("plan names an unknown layer", plan_args + [j("plan_layer.yaml")],
              ["plan_layer.yaml:2", "nope", "c1"], [out])
        write(j("plan_kernel.yaml"), "layers:\n  c1: {kernel: conv_turbo}\n")
        check("plan names an unknown kernel", plan_args + [j("plan_kernel.yaml")],
              ["plan_kernel.yaml:2", "c1", "conv_turbo", "cpu_ref_conv"], [out])
        write(j("plan_precision.yaml"), "layers:\n  fc: {precision: fp16}\n")
        check("plan asks a precision no kernel has", plan_args + [j("plan_precision.yaml")],
              ["plan_precision.yaml:2", "fc", "fp16", "cpu_ref_linear (fp32)"], [out])
        write(j("plan_key.yaml"), "layers:\n  c1: {precison: fp16}\n")
        check("plan with an unknown key", plan_args + [j("plan_key.yaml")],
              ["plan_key.yaml:2", "precison", "valid: precision, kernel"], [out])
        write(j("plan_model.yaml"), "model: alexnet\nlayers:\n  c1: {precision: fp32}\n")
        check("plan written for another model", plan_args + [j("plan_model.yaml")],
              ["alexnet", "tiny"], [out])
        write(j("plan_bad.yaml"), "layers: [c1\n")
        check("malformed plan", plan_args + [j("plan_bad.yaml")], ["plan_bad.yaml"], [out])
        check("missing plan", plan_args + [j("no_plan.yaml")], ["no_plan.yaml"], [out])
        write(j("impl.yaml"), TINY_YAML.replace("name: r1, op: relu",
                                                "name: r1, op: relu, impl: relu_turbo"))
        check("model asks for an unknown kernel",
              [cnnrt, "plan", j("impl.yaml"), "--batch", "1"],
              ["impl.yaml:7", "r1", "relu_turbo", "cpu_ref_relu"])
        write(j("clash.yaml"), TINY_YAML.replace("name: r1, op: relu",
                                                 "name: r1, op: relu, precision: fp16")
              .replace("padding: 1,", "padding: 1, precision: fp32,"))
        check("fused layers ask for different precisions",
              [cnnrt, "plan", j("clash.yaml"), "--batch", "1"], ["clash.yaml:7", "r1", "c1", "fp16", "fp32"])

    if failures:
        print(f"\n{len(failures)} check(s) failed: {', '.join(failures)}")
        return 1
    print("\nall CLI error checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
