#!/usr/bin/env python3
"""fp32 and int8 accuracy of models/digits on the test split, through cnnrt.

    python3 tools/eval_digits.py [--cli build/bin/cnnrt] [--model models/digits.yaml]
                                 [--methods minmax,percentile,entropy] [--json FILE]

Steps: the split of tools/digits_data.py; an fp32 CPU run gives the logits of the 360 test
images; for each calibration method, `cnnrt calibrate` on the 1437 training images (written as
.npy), then an int8 CPU run with that calibration on the test images.  Runs go through the
Python module when it is importable, else `cnnrt run` (tools/cnnrt_run.py).
Prints, per precision/method, the test accuracy, the difference to fp32 in percentage points,
the top-1 agreement with fp32 and the rel L2 of the logits; --json writes the same rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cnnrt_run import run_model  # noqa: E402
from digits_data import load_split  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
METHODS = ("minmax", "percentile", "entropy", "mse")


def run_cli(cli: str, *arguments) -> str:
    command = [cli] + [str(a) for a in arguments]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"exit {result.returncode}: {' '.join(command)}\n{result.stderr}")
    return result.stdout


def evaluate(cli: str, model: str, methods, workdir: str, log=print):
    """Returns a list of rows {precision, method, accuracy, delta_points, agreement, rel_l2}."""
    x_train, _, x_test, y_test = load_split()
    train_path = os.path.join(workdir, "digits_train.npy")
    np.save(train_path, x_train)

    bin_dir = os.path.dirname(cli)
    fp32 = run_model(bin_dir, model, x_test, device="cpu")
    fp32_accuracy = float((fp32.argmax(axis=1) == y_test).mean() * 100)
    rows = [{"precision": "fp32", "method": "-", "accuracy": fp32_accuracy, "delta_points": 0.0,
             "agreement": 100.0, "rel_l2": 0.0}]
    for method in methods:
        calib_path = os.path.join(workdir, f"calib_{method.replace(':', '_')}.json")
        run_cli(cli, "calibrate", model, "--input", train_path, "--method", method, "-o",
                calib_path)
        int8 = run_model(bin_dir, model, x_test, device="cpu", precision="int8",
                         calibration=calib_path)
        accuracy = float((int8.argmax(axis=1) == y_test).mean() * 100)
        rows.append({
            "precision": "int8", "method": method, "accuracy": accuracy,
            "delta_points": accuracy - fp32_accuracy,
            "agreement": float((int8.argmax(axis=1) == fp32.argmax(axis=1)).mean() * 100),
            "rel_l2": float(np.linalg.norm(int8 - fp32) / np.linalg.norm(fp32)),
        })
    return rows


def table(rows) -> str:
    lines = [f"{'precision':9}  {'method':16}  {'test acc %':>10}  {'vs fp32':>8}  "
             f"{'top-1 agree %':>13}  {'logits rel L2':>13}"]
    for row in rows:
        lines.append(f"{row['precision']:9}  {row['method']:16}  {row['accuracy']:10.2f}  "
                     f"{row['delta_points']:+8.2f}  {row['agreement']:13.2f}  "
                     f"{row['rel_l2']:13.5f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cli", default=os.path.join(ROOT, "build", "bin", "cnnrt"))
    parser.add_argument("--model", default=os.path.join(ROOT, "models", "digits.yaml"))
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--json", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cnnrt_digits_") as workdir:
        rows = evaluate(args.cli, args.model, args.methods.split(","), workdir)
    print(table(rows))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
