#!/usr/bin/env python3
"""CLI conventions (README, "Command-line conventions"): --help on every command with each
flag's meaning and default, --version, exit codes 0 / 1 / 2, -q, '-' as stdin/stdout, and --json
reports that a JSON parser accepts, on a tiny model so the whole check takes seconds.

Run by CTest as: python3 test_cli_conventions.py --bin-dir BIN --source-dir SRC (exit 0 = pass).
"""
import argparse
import io
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

TINY_YAML = """\
name: tiny
input: {shape: [3, 9, 9], mean: [0.5, 0.4, 0.3], std: [0.2, 0.25, 0.3]}
layers:
  - {name: c1, op: conv, out_channels: 4, kernel: 3, padding: 1, weight: c1.weight, bias: c1.bias}
  - {name: r1, op: relu}
  - {name: p1, op: maxpool, kernel: 2}
  - {name: flat, op: flatten}
  - {name: fc, op: linear, out_features: 5, weight: fc.weight, bias: fc.bias}
"""

COMMANDS = ["info", "init-weights", "plan", "run", "profile", "bench", "calibrate", "accuracy",
            "build", "prune"]
failures = []


def expect(label, condition, detail=""):
    print(f"{'ok  ' if condition else 'FAIL'} {label}" + ("" if condition else f": {detail}"))
    if not condition:
        failures.append(label)


def run(argv, stdin=None, text=True):
    return subprocess.run(argv, capture_output=True, text=text, input=stdin, timeout=300)


def parse_json(label, data):
    try:
        return json.loads(data)
    except ValueError as error:
        expect(label, False, f"not JSON ({error}): {data[:200]!r}")
        return None


def check_help(label, argv, flags_with_defaults):
    """--help: exit 0, a usage line, every flag listed with a description."""
    result = run(argv + ["--help"])
    out = result.stdout
    problems = []
    if result.returncode != 0:
        problems.append(f"exit {result.returncode}")
    if "Usage:" not in out:
        problems.append("no usage line")
    for flag in ("--help", "--version", "--quiet", "--verbose"):
        if flag not in out:
            problems.append(f"{flag} not listed")
    for line in out.splitlines():
        stripped = line.strip()
        # An option line is "--flag TYPE   meaning"; a wrapped one has its meaning on the next
        # line, so only check lines with two or more spaces after the name.
        if stripped.startswith("-") and "  " in stripped:
            if not stripped.split("  ", 1)[1].strip():
                problems.append(f"no description: {stripped}")
    for flag, default in flags_with_defaults:
        rows = [l for l in out.splitlines() if l.strip().startswith(flag)]
        if not rows or f"(default: {default})" not in rows[0]:
            problems.append(f"{flag} does not show its default {default}")
    expect(label, not problems, "; ".join(problems) + f"\n{out}")
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--source-dir", required=True)
    args = parser.parse_args()
    cnnrt = os.path.join(args.bin_dir, "cnnrt")
    infer = os.path.join(args.bin_dir, "alexnet_infer")

    # --help for the program and every command; the defaults that matter are shown.
    top = check_help("cnnrt --help", [cnnrt], [])
    for command in COMMANDS:
        expect(f"cnnrt --help lists {command}", command in top)
    defaults = {"bench": [("--iterations", 100), ("--warmup", 20), ("--device", "auto")],
                "plan": [("--batch", 1), ("--device", "cpu")],
                "profile": [("--iterations", 20), ("--batch", 1)],
                "calibrate": [("--batch", 16)],
                "accuracy": [("--batch", 8), ("--samples", 0)],
                "build": [("--batch", 1), ("--timing-runs", 10), ("--device", "auto")],
                "prune": [("--batch", 8), ("--samples", 0)],
                "init-weights": [("--seed", 0), ("--dtype", "f32")]}
    for command in COMMANDS:
        out = check_help(f"cnnrt {command} --help", [cnnrt, command], defaults.get(command, []))
        expect(f"cnnrt {command} --help names the command", f"cnnrt {command}" in out)
    bench_help = run([cnnrt, "bench", "--help"]).stdout
    expect("bench --help states the minimum iterations", "at least 50" in bench_help)
    check_help("alexnet_infer --help", [infer], [("--top", 5), ("--device", "auto")])
    expect("cnnrt help exits 0", run([cnnrt, "-h"]).returncode == 0)

    # --version, from the program and from a command.
    for argv in ([cnnrt, "--version"], [cnnrt, "run", "--version"], [infer, "--version"]):
        result = run(argv)
        expect(f"{' '.join(os.path.basename(a) for a in argv)}: version, commit, CUDA",
               result.returncode == 0 and result.stdout.startswith("cnnrt ")
               and "commit" in result.stdout and "CUDA" in result.stdout, result.stdout)
    version = run([cnnrt, "--version"]).stdout
    gpu_usable = "device: " in version and "none usable" not in version

    with tempfile.TemporaryDirectory(prefix="cnnrt_cli_conventions_") as tmp:
        j = lambda *p: os.path.join(tmp, *p)
        tiny = j("tiny.yaml")
        with open(tiny, "w") as f:
            f.write(TINY_YAML)
        weights = j("w.safetensors")
        x = np.random.default_rng(3).standard_normal((2, 3, 9, 9)).astype(np.float32)
        np.save(j("x.npy"), x)
        base = ["--weights", weights, "--device", "cpu"]

        # Exit codes: 0 success, 1 runtime error, 2 usage error.
        result = run([cnnrt, "init-weights", tiny, "-o", weights, "--seed", "1"])
        expect("exit 0 on success", result.returncode == 0, result.stderr)
        result = run([cnnrt, "info", j("absent.yaml")])
        expect("exit 1 on a runtime error", result.returncode == 1, result.stderr)
        result = run([cnnrt, "info", tiny, "--bogus"])
        expect("exit 2 on a usage error", result.returncode == 2, result.stderr)

        # '-' as stdin and stdout: .npy through a pipe.
        with open(j("x.npy"), "rb") as f:
            x_bytes = f.read()
        piped = run([cnnrt, "run", tiny, *base, "--input", "-", "--output", "-"], stdin=x_bytes,
                    text=False)
        expect("run --input - --output -: exit 0", piped.returncode == 0, piped.stderr)
        run([cnnrt, "run", tiny, *base, "--input", j("x.npy"), "--output", j("y.npy")])
        if piped.returncode == 0:
            y = np.load(io.BytesIO(piped.stdout))
            expect("run to stdout equals run to a file",
                   np.array_equal(y, np.load(j("y.npy"))) and y.shape == (2, 5))
        expect("no file named '-' is written", not os.path.exists(j("-"))
               and not os.path.exists("-"))

        # -q: a successful run says nothing.
        quiet = run([cnnrt, "run", tiny, *base, "--input", j("x.npy"), "--output", j("q.npy"),
                     "-q"])
        expect("-q: no output on success", quiet.returncode == 0 and not quiet.stdout
               and not quiet.stderr, quiet.stdout + quiet.stderr)
        verbose = run([cnnrt, "run", tiny, *base, "--input", j("x.npy"), "--output",
                       j("v.npy"), "-v"])
        expect("-v: names the stages", "loading model" in verbose.stderr
               and "engine:" in verbose.stderr, verbose.stderr)

        # --json - : only JSON on stdout, for every command that prints a report.
        reports = {
            "info": [cnnrt, "info", tiny],
            "plan": [cnnrt, "plan", tiny, "--batch", "2"],
            "run": [cnnrt, "run", tiny, *base, "--input", j("x.npy"), "--output", j("r.npy")],
            "profile": [cnnrt, "profile", tiny, *base, "--iterations", "3"],
            "bench": [cnnrt, "bench", tiny, *base, "--batch", "1,2", "--iterations", "50",
                      "--warmup", "2"],
        }
        keys = {"info": "fused", "plan": "steps", "run": "output_shape", "profile": "layers",
                "bench": "results"}
        for name, argv in reports.items():
            result = run(argv + ["--json", "-"])
            report = parse_json(f"{name} --json -", result.stdout)
            expect(f"{name} --json -: exit 0 and a '{keys[name]}' entry",
                   result.returncode == 0 and report is not None and keys[name] in report,
                   result.stderr)
            result = run(argv + ["--json", j(f"{name}.json")])
            with open(j(f"{name}.json")) if os.path.exists(j(f"{name}.json")) else io.StringIO(
                    "") as f:
                report = parse_json(f"{name} --json FILE", f.read())
            expect(f"{name} --json FILE: the text report still on stdout",
                   result.returncode == 0 and report is not None and result.stdout.strip()
                   and not result.stdout.lstrip().startswith("{"), result.stderr)
        result = run([infer, j("absent.png"), "--model", tiny, "--json", "-", "--random-weights"])
        expect("alexnet_infer --json - on a bad image: exit 1, empty stdout",
               result.returncode == 1 and not result.stdout, result.stdout)
        result = run([cnnrt, "profile", tiny, *base, "--iterations", "2", "--trace", "-"])
        trace = parse_json("profile --trace -", result.stdout)
        expect("profile --trace -: a Chrome trace", trace is not None and "traceEvents" in trace)
        result = run([cnnrt, "calibrate", tiny, "--weights", weights, "--input", j("x.npy"),
                      "--method", "minmax", "-o", "-"])
        calibration = parse_json("calibrate -o -", result.stdout)
        expect("calibrate -o -: the calibration JSON", calibration is not None
               and calibration.get("samples") == 2, result.stderr)

        # CPU profiles: achieved GFLOP/s, no invented peak.
        table = run([cnnrt, "profile", tiny, *base, "--iterations", "3"]).stdout
        expect("CPU profile: GFLOP/s, no % peak column", "GFLOP/s" in table
               and "% peak" not in table and "% bw" not in table, table)

        # plan --device cuda: the GPU's plan where there is one; without one, a CUDA build
        # plans for the H100 preset and says so (a plan is static), a CPU build refuses.
        result = run([cnnrt, "plan", tiny, "--device", "cuda"])
        if gpu_usable:
            expect("plan --device cuda on a GPU", result.returncode == 0, result.stderr)
        elif "CUDA backend: compiled" in version:
            expect("plan --device cuda without a GPU: the h100 target, stated",
                   result.returncode == 0 and "default target h100" in result.stdout,
                   result.stdout + result.stderr)
        else:
            expect("plan --device cuda in a CPU build: exit 1 saying why",
                   result.returncode == 1 and "no CUDA backend" in result.stderr, result.stderr)

    if failures:
        print(f"\n{len(failures)} check(s) failed: {', '.join(failures)}")
        return 1
    print("\nall CLI convention checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
