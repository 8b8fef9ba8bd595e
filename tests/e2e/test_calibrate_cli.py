#!/usr/bin/env python3
"""`cnnrt calibrate` and `--calib`: the happy paths (a folder of images, an .npy; the file it
writes runs `--precision int8`) and every bad input of issue 10 — an empty set, an undecodable
image, a wrong .npy shape, a NaN input, a bad method, int8 without a calibration, a calibration
of another model, a missing tensor, a zero scale, a file that is not JSON: exit code 1, exactly
one "error: ..." line naming the culprit (file, layer, tensor), no traceback or abort, and no
calibration file (or temporary file) left behind.
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as util  # noqa: E402

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
OTHER_YAML = TINY_YAML.replace("name: tiny", "name: other")

failures = []


def expect_error(label, argv, fragments, must_not_exist=(), code=1):
    """code 1: a runtime error; 2: a usage error (bad command line)."""
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    problems = []
    if result.returncode != code:
        problems.append(f"exit code {result.returncode}, expected {code}")
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    if len(lines) != 1:
        problems.append(f"{len(lines)} 'error:' lines, expected 1")
    for bad in ("Traceback", "terminate called", "Aborted", "Segmentation", "core dumped"):
        if bad in result.stderr:
            problems.append(f"stderr contains {bad!r}")
    line = lines[0] if lines else ""
    problems += [f"error line does not name {f!r}" for f in fragments if f not in line]
    for path in must_not_exist:
        if os.path.exists(path):
            problems.append(f"{path} was left behind")
        folder = os.path.dirname(path) or "."
        if os.path.isdir(folder):
            leftovers = [f for f in os.listdir(folder) if ".tmp-" in f]
            if leftovers:
                problems.append(f"temporary files left behind: {leftovers}")
    print(f"{'FAIL' if problems else 'ok  '} {label}: {line or result.stderr.strip()[:200]}")
    for problem in problems:
        print(f"       {problem}")
    if problems:
        failures.append(label)


def main():
    args, workdir = util.setup(__doc__.splitlines()[0])
    cli = args.cli
    j = lambda *parts: os.path.join(workdir, *parts)  # noqa: E731
    with open(j("tiny.yaml"), "w") as f:
        f.write(TINY_YAML)
    with open(j("other.yaml"), "w") as f:
        f.write(OTHER_YAML)
    tiny = j("tiny.yaml")
    weights = ["--random-weights", "3"]
    rng = np.random.default_rng(args.seed)

    # Happy paths.
    images = j("images")
    os.makedirs(images)
    sample = os.path.join(args.source_dir, "models", "samples", "chelsea.png")
    for name in ("a.png", "b.PNG", "c.png"):
        shutil.copy(sample, os.path.join(images, name))
    with open(os.path.join(images, "notes.txt"), "w") as f:
        f.write("not an image: ignored\n")
    calib = j("calib.json")
    result = util.run_cli(cli, "calibrate", tiny, *weights, "--images", images, "--method",
                          "percentile:99.9", "--batch", "2", "-o", calib)
    data = json.load(open(calib))
    if data["samples"] != 3 or sorted(data["tensors"]) != ["c1", "fc", "flat", "input"]:
        util.fail(f"unexpected calibration from images: {data}")
    if "wrote 4 tensors (percentile:99.9, 3 samples)" not in result.stdout:
        util.fail(f"unexpected summary: {result.stdout}")
    print("ok   calibrate --images (3 images, batch 2)")

    x = rng.standard_normal((6, 3, 9, 9)).astype(np.float32)
    np.save(j("x.npy"), x)
    util.run_cli(cli, "calibrate", tiny, *weights, "--input", j("x.npy"), "--method", "entropy",
                 "--batches", "2", "--batch", "2", "-o", calib)
    if json.load(open(calib))["samples"] != 4:
        util.fail("--batches 2 --batch 2 did not use 4 samples")
    # --device: the fp32 passes on the CPU give the same file as the default device's run
    # (on a GPU machine the CUDA passes agree to ~1e-7: test_calibration_cuda.cpp holds that).
    cpu_calib = j("calib_cpu.json")
    util.run_cli(cli, "calibrate", tiny, *weights, "--input", j("x.npy"), "--method", "entropy",
                 "--batches", "2", "--batch", "2", "--device", "cpu", "-o", cpu_calib)
    cpu_tensors = json.load(open(cpu_calib))["tensors"]
    auto_tensors = json.load(open(calib))["tensors"]
    if sorted(cpu_tensors) != sorted(auto_tensors):
        util.fail("calibrate --device cpu names other tensors than the default device's run")
    # Equal on a CPU machine; on a GPU one within an entropy bin (the search keeps >= 128 bins,
    # so one bin is <= 1/128 of amax).
    for name, entry in cpu_tensors.items():
        if abs(entry["amax"] - auto_tensors[name]["amax"]) > entry["amax"] / 128 + 1e-30:
            util.fail(f"tensor {name}: amax {entry['amax']} on the CPU, "
                      f"{auto_tensors[name]['amax']} on the default device")
    print("ok   calibrate --device cpu")
    # The int8 run reads a minmax calibration of all six inputs: the entropy one above saw four
    # and clips, and its error on the other two varied with the drawn inputs (rel L2 up to 0.094
    # over 120 seeds: this check failed about once in a hundred runs).  minmax over the set:
    # median 0.008, at most 0.013 over 150 seeds.
    all_calib = j("calib_all.json")
    util.run_cli(cli, "calibrate", tiny, *weights, "--input", j("x.npy"), "--method", "minmax",
                 "-o", all_calib)
    util.run_cli(cli, "run", tiny, *weights, "--input", j("x.npy"), "--output", j("y8.npy"),
                 "--device", "cpu", "--precision", "int8", "--calib", all_calib)
    util.run_cli(cli, "run", tiny, *weights, "--input", j("x.npy"), "--output", j("y32.npy"),
                 "--device", "cpu")
    error = util.rel_l2(np.load(j("y8.npy")), np.load(j("y32.npy")))
    print(f"ok   int8 run with the calibration: rel L2 to fp32 {error:.4f}")
    # 0.04: three times the largest error measured, and a broken scale gives errors ~1.
    if not error < 0.04:
        util.fail(f"int8 output rel L2 {error} to fp32 is too large")
    plan = util.run_cli(cli, "plan", tiny, "--batch", "2", "--device", "cpu", "--precision",
                        "int8", "--calib", calib).stdout
    if "cpu_int8_conv" not in plan or "convert_fp32_nchw_to_int8_nchw" not in plan:
        util.fail(f"plan does not show the int8 steps:\n{plan}")

    expect_error("unknown --device", [cli, "calibrate", tiny, *weights, "--input", j("x.npy"),
                                      "--method", "minmax", "--device", "tpu", "-o", j("d.json")],
                 ["--device"], [j("d.json")], code=2)

    # Bad calibration sets: nothing written.
    out = j("out", "calib.json")
    os.makedirs(j("out"))
    base = [cli, "calibrate", tiny, *weights, "--method", "minmax", "-o", out]
    os.makedirs(j("empty"))
    expect_error("empty image folder", base + ["--images", j("empty")], ["empty", "empty"], [out])
    bad_images = j("bad_images")
    shutil.copytree(images, bad_images)
    with open(os.path.join(bad_images, "b2_broken.png"), "wb") as f:
        f.write(os.urandom(2000))
    expect_error("undecodable image", base + ["--images", bad_images], ["b2_broken.png"], [out])
    expect_error("images not a folder", base + ["--images", sample], ["chelsea.png"], [out])
    np.save(j("wrong.npy"), np.zeros((2, 1, 9, 9), np.float32))
    expect_error("npy wrong shape", base + ["--input", j("wrong.npy")],
                 ["wrong.npy", "[2, 1, 9, 9]", "[N, 3, 9, 9]"], [out])
    np.save(j("none.npy"), np.zeros((0, 3, 9, 9), np.float32))
    expect_error("npy with no samples", base + ["--input", j("none.npy")], ["none.npy", "empty"],
                 [out])
    nan = x.copy()
    nan[3, 1, 2, 2] = np.nan
    np.save(j("nan.npy"), nan)
    expect_error("NaN input", base + ["--input", j("nan.npy")], ["nan.npy", "sample 3", "NaN"],
                 [out])
    expect_error("both sets", base + ["--input", j("x.npy"), "--images", images],
                 ["--images", "--input"], [out], code=2)
    expect_error("no method", [cli, "calibrate", tiny, *weights, "--input", j("x.npy"), "-o", out],
                 ["--method"], [out], code=2)
    for method in ("kl", "percentile:150"):
        expect_error(f"bad method {method}", [cli, "calibrate", tiny, *weights, "--input",
                                              j("x.npy"), "--method", method, "-o", out],
                     [method], [out], code=2)
    expect_error("batch 0", base + ["--input", j("x.npy"), "--batch", "0"], ["--batch"], [out],
                 code=2)
    missing_dir = j("no_such_dir", "calib.json")
    expect_error("unwritable output", [cli, "calibrate", tiny, *weights, "--input", j("x.npy"),
                                       "--method", "minmax", "-o", missing_dir],
                 ["no_such_dir"], [missing_dir])

    # Bad calibrations at run time.
    run = [cli, "run", tiny, *weights, "--input", j("x.npy"), "--output", j("o.npy"), "--device",
           "cpu", "--precision", "int8"]
    expect_error("int8 without a calibration", run, ["layer 'c1'", "--calib"], [j("o.npy")])
    other = j("other.json")
    util.run_cli(cli, "calibrate", j("other.yaml"), *weights, "--input", j("x.npy"), "--method",
                 "minmax", "-o", other)
    expect_error("calibration of another model", run + ["--calib", other],
                 ["other.json", "'other'", "'tiny'"], [j("o.npy")])
    data = json.load(open(calib))
    del data["tensors"]["c1"]
    json.dump(data, open(j("missing.json"), "w"))
    expect_error("missing tensor", run + ["--calib", j("missing.json")],
                 ["missing.json", "layer 'c1'", "tensor 'c1'"], [j("o.npy")])
    data = json.load(open(calib))
    data["tensors"]["flat"]["scale"] = 0
    json.dump(data, open(j("zero.json"), "w"))
    expect_error("zero scale", run + ["--calib", j("zero.json")], ["zero.json", "tensor 'flat'"],
                 [j("o.npy")])
    with open(j("garbage.json"), "w") as f:
        f.write("{ not json")
    expect_error("not JSON", run + ["--calib", j("garbage.json")], ["garbage.json"], [j("o.npy")])
    expect_error("no calibration file", run + ["--calib", j("absent.json")], ["absent.json"],
                 [j("o.npy")])

    if failures:
        util.fail(f"{len(failures)} check(s) failed: {', '.join(failures)}")
    print("PASS")
    return util.PASS


if __name__ == "__main__":
    sys.exit(main())
