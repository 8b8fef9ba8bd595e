#!/usr/bin/env python3
"""tools/int8_study.py end to end on a small model: the study drives the cnnrt CLI (calibrate,
plan --json, accuracy, run with a plan), so a change of the CLI's conventions breaks it without
this check (it once died on `cnnrt plan --json` taking a file).

models/digits with two calibration methods on 12 random held-out inputs in two shards, one of
them with the ranking and a mixed-precision run.  Pass: the study exits 0, no job failed, and
results.json has the all-int8 configuration of both methods and the mixed one, each on every
held-out input, with finite metrics.  Takes a few seconds.
"""

import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as util  # noqa: E402


def main():
    args, workdir = util.setup(__doc__.splitlines()[0])
    import numpy as np

    rng = np.random.default_rng(args.seed)
    sets = os.path.join(workdir, "sets")
    os.makedirs(sets)
    # digits takes [1, 8, 8] in [0, 1]; the study needs calib.npy, heldout.npy and the manifest
    # tools/make_eval_images.py writes (per held-out input its source group).
    calib = rng.random((8, 1, 8, 8), dtype=np.float32)
    heldout = rng.random((12, 1, 8, 8), dtype=np.float32)
    np.save(os.path.join(sets, "calib.npy"), calib)
    np.save(os.path.join(sets, "heldout.npy"), heldout)
    groups = ["a", "b"]
    manifest = {"sets": {
        "calib": {"sha256": "-", "shape": list(calib.shape), "groups": ["c"],
                  "inputs": [{"group": "c"} for _ in range(len(calib))]},
        "heldout": {"sha256": "-", "shape": list(heldout.shape), "groups": groups,
                    "inputs": [{"group": groups[i % 2]} for i in range(len(heldout))]}}}
    with open(os.path.join(sets, "manifest.json"), "w") as f:
        json.dump(manifest, f)

    out = os.path.join(workdir, "study")
    command = [sys.executable, os.path.join(args.source_dir, "tools", "int8_study.py"),
               "--cli", args.cli, "--model", os.path.join(args.source_dir, "models", "digits.yaml"),
               "--weights", os.path.join(args.source_dir, "models", "digits.safetensors"),
               "--sets", sets, "--out", out, "--jobs", "2", "--shards", "2",
               "--methods", "minmax,mse", "--mixed-methods", "mse", "--keep", "1",
               "--rank-samples", "2", "--rank-chunks", "1"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    print(result.stdout[-3000:])
    if result.returncode != 0:
        util.fail(f"int8_study.py exited {result.returncode}:\n{result.stderr[-3000:]}")
    if "FAILED" in result.stdout:
        util.fail("a job of the study failed (see its log above)")
    results = json.load(open(os.path.join(out, "results.json")))
    got = {(c["method"], c["config"]): c for c in results["configs"]}
    for key in (("minmax", "int8"), ("mse", "int8"), ("mse", "mixed")):
        if key not in got:
            util.fail(f"results.json lacks {key}: has {sorted(got)}")
        config = got[key]
        if config["samples"] != len(heldout):
            util.fail(f"{key} ran on {config['samples']} of {len(heldout)} held-out inputs")
        for metric in ("top1", "top5", "kl", "rel_l2"):
            if not math.isfinite(config[metric]):
                util.fail(f"{key}: {metric} is {config[metric]}")
    if not got[("mse", "mixed")].get("fp32_layers"):
        util.fail("the mixed configuration names no layer kept in fp32")
    print("PASS")


if __name__ == "__main__":
    main()
