#!/usr/bin/env python3
"""Hostile inputs through the CLIs (issue 14): each gives exit code 1, one "error: ..." line
naming the file (and layer, tensor, line where they apply) and leaves no file behind; Ctrl-C
during a weight write leaves no temporary.  Uses the error contract of test_cli_errors.py.

Run by CTest as: python3 test_hostile_inputs.py --bin-dir BIN --source-dir SRC  (exit 0 = pass).
"""
import argparse
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import test_cli_errors as cli  # noqa: E402

check, write = cli.check, cli.write


def safetensors_bytes(tensors):
    """A safetensors file from {name: float32 array}, written by hand (no torch needed)."""
    header, data, offset = {}, b"", 0
    for name, array in sorted(tensors.items()):
        raw = np.ascontiguousarray(array, np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def size_or_zero(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def interrupt_weight_write(cnnrt, model, folder):
    """Ctrl-C while `cnnrt init-weights` writes AlexNet's 244 MB: no temporary, no output."""
    target = os.path.join(folder, "alexnet.safetensors")
    proc = subprocess.Popen([cnnrt, "init-weights", model, "-o", target],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    seen = False
    while proc.poll() is None and time.time() < deadline:
        # The weight temporary once it holds data (not the empty probe of the output folder).
        if any(".tmp-" in name and size_or_zero(os.path.join(folder, name)) > (1 << 20)
               for name in os.listdir(folder)):
            seen = True
            proc.send_signal(signal.SIGINT)
            break
        time.sleep(0.001)
    proc.wait(timeout=120)
    leftovers = [name for name in os.listdir(folder) if ".tmp-" in name]
    if not seen:
        print("skip Ctrl-C during a weight write: the write finished before it could be seen")
    elif proc.returncode != -signal.SIGINT or leftovers or os.path.exists(target):
        print(f"FAIL Ctrl-C during a weight write: exit {proc.returncode}, left {leftovers}, "
              f"output exists: {os.path.exists(target)}")
        cli.failures.append("Ctrl-C during a weight write")
    else:
        print("ok   Ctrl-C during a weight write: killed by SIGINT, no temporary left")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--source-dir", required=True)
    args = parser.parse_args()
    cnnrt = os.path.join(args.bin_dir, "cnnrt")
    infer = os.path.join(args.bin_dir, "alexnet_infer")

    with tempfile.TemporaryDirectory(prefix="cnnrt_hostile_") as tmp:
        j = lambda *p: os.path.join(tmp, *p)
        tiny = write(j("tiny.yaml"), cli.TINY_YAML)
        write(j("tiny_labels.txt"), "".join(f"label{i}\n" for i in range(5)))
        out = j("out.npy")
        np.save(j("x.npy"), np.ones((1, 3, 9, 9), np.float32))
        os.mkdir(j("a_dir"))

        # Paths that are directories.
        check("--input is a directory",
              [cnnrt, "run", tiny, "--random-weights", "--input", j("a_dir"), "--output", out],
              [j("a_dir"), "is a directory"], [out])
        check("model path is a directory", [cnnrt, "info", j("a_dir")],
              [j("a_dir"), "is a directory, not a model file"])
        check("image path is a directory", [infer, j("a_dir"), "--model", tiny, "--random-weights"],
              [j("a_dir"), "is a directory"])
        labels_dir = write(j("labels_dir.yaml"),
                           cli.TINY_YAML.replace("tiny_labels.txt", "a_dir"))
        check("labels path is a directory",
              [cnnrt, "run", labels_dir, "--random-weights", "--input", j("x.npy"), "--output",
               out], [j("a_dir"), "is a directory, not a label file"], [out])

        # Images.
        with open(os.path.join(args.source_dir, "models", "samples", "chelsea.png"), "rb") as f:
            png = f.read()
        cut = write(j("cut.png"), png[: len(png) // 2], "wb")
        check("truncated PNG", [infer, cut, "--model", tiny, "--random-weights"],
              ["cut.png", "cannot decode PNG image: file is truncated"])
        huge = write(j("huge.png"), png[:16] + struct.pack(">II", 20000, 20000) + png[24:], "wb")
        check("20000x20000 PNG header", [infer, huge, "--model", tiny, "--random-weights"],
              ["huge.png", "too large (20000x20000, at most 67108864 pixels)"])
        fuzz_jpeg = os.path.join(args.source_dir, "tests", "fuzz", "corpus", "image",
                                 "stb_prog_huff_assert.jpg")
        check("fuzz-found progressive JPEG", [infer, fuzz_jpeg, "--model", tiny,
                                              "--random-weights"],
              ["stb_prog_huff_assert.jpg", "cannot decode JPEG image: "])

        # Models.
        dup = write(j("dup.yaml"), cli.TINY_YAML.replace("out_channels: 4,",
                                                         "out_channels: 4, out_channels: 8,"))
        check("duplicate YAML key", [cnnrt, "info", dup],
              ["dup.yaml:6:", "duplicate key 'out_channels'"])
        deep = write(j("deep.yaml"), "name: x\nlayers: " + "[" * 5000 + "]" * 5000 + "\n")
        check("deep YAML nesting", [cnnrt, "info", deep],
              ["deep.yaml:2:73:", "nests deeper than 64 levels"])
        lrn = write(j("lrn.yaml"), cli.TINY_YAML.replace(
            "  - {name: r1, op: relu}", "  - {name: r1, op: lrn, size: 3, k: 0}"))
        check("LRN k: 0", [cnnrt, "info", lrn], ["lrn.yaml:7:", "layer 'r1'", "'k' must be positive"])

        # Weights.
        rng = np.random.default_rng(1)
        tensors = {"c1.weight": rng.standard_normal((4, 3, 3, 3)), "c1.bias": np.zeros(4),
                   "fc.weight": rng.standard_normal((5, 64)), "fc.bias": np.zeros(5)}
        good = safetensors_bytes(tensors)
        write(j("trailing.safetensors"), good + b"junk!!", "wb")
        check("safetensors with trailing bytes",
              [cnnrt, "run", tiny, "--weights", j("trailing.safetensors"), "--input", j("x.npy"),
               "--output", out], ["trailing.safetensors", "belong to no tensor"], [out])
        tensors["fc.bias"] = np.array([0, 0, np.nan, 0, 0])
        write(j("nan.safetensors"), safetensors_bytes(tensors), "wb")
        check("NaN weight",
              [cnnrt, "run", tiny, "--weights", j("nan.safetensors"), "--input", j("x.npy"),
               "--output", out], ["nan.safetensors", "layer 'fc'", "tensor 'fc.bias'",
                                  "not finite"], [out])
        header = b'{"__metadata__":' + b"[" * 1000000 + b"]" * 1000000 + b"}"
        write(j("deep.safetensors"), struct.pack("<Q", len(header)) + header, "wb")
        check("deeply nested safetensors header",
              [cnnrt, "run", tiny, "--weights", j("deep.safetensors"), "--input", j("x.npy"),
               "--output", out], ["deep.safetensors", "nests deeper than 64 levels"], [out])

        # Outputs.
        start = time.time()
        result = subprocess.run([cnnrt, "bench", tiny, "--random-weights", "--batch", "1",
                                 "--device", "cpu", "--json", j("missing_dir", "b.json")],
                                capture_output=True, text=True, timeout=300)
        if result.returncode != 1 or "b.json" not in result.stderr or result.stdout.strip():
            print(f"FAIL bench --json into a missing directory: exit {result.returncode}, "
                  f"stdout {result.stdout[:200]!r}, stderr {result.stderr.strip()!r}")
            cli.failures.append("bench --json into a missing directory")
        else:
            print(f"ok   bench --json into a missing directory failed before benchmarking "
                  f"({time.time() - start:.2f} s): {result.stderr.strip()}")
        check("run --output is a directory",
              [cnnrt, "run", tiny, "--random-weights", "--input", j("x.npy"), "--output",
               j("a_dir")], [j("a_dir"), "is a directory"])
        os.mkdir(j("ctrl_c"))
        interrupt_weight_write(cnnrt, os.path.join(args.source_dir, "models", "alexnet.yaml"),
                               j("ctrl_c"))

    if cli.failures:
        print(f"\n{len(cli.failures)} check(s) failed: {', '.join(cli.failures)}")
        return 1
    print("\nall hostile-input checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
