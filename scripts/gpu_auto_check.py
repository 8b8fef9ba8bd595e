#!/usr/bin/env python3
"""`cnnrt build --precision auto` on the GPU (gpu_check.sh's `auto` mode), then the plans benched
against all-fp16 in the same run (docs/PERFORMANCE.md, "Automatic plans").

  AlexNet: random weights (seed 1); the calibration and the held-out set are N(0, 1) noise (the
           build calibrates on the first half of --samples and measures on the rest); budget
           rel_l2=0.05.
  EfficientNet-Lite0: the real weights in .carry/; calibration and held-out sets from
           tools/make_eval_images.py (disjoint by source photo) when scikit-image is there, else
           models/samples/*.png + .carry/coffee.png (too few for a meaningful top-1 figure: said
           so); budget top1_agreement=0.99.
Per model and batch (1, 64, 256): build wall time (cold timing cache; warm for the first batch),
which layers took which precision, the measured error, and `cnnrt bench` of the plan vs
`--precision fp16`.  Every command has a time limit so the whole stays within ~4 minutes.

  python3 scripts/gpu_auto_check.py --bin BUILD/bin --out DIR [--device cuda] [--batches 1,64,256]
      [--models alexnet,efficientnet_lite0] [--samples 32] [--timing-runs 5]
  (--models digits --device cpu: a few-second smoke test of this script anywhere)
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(argv, timeout):
    started = time.time()
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                            timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv[:3]))}: exit {result.returncode}: "
                           f"{result.stderr.strip()[-600:]}")
    return result, time.time() - started


def effnet_inputs(args):
    """(calibration .npy or None, held-out .npy or image folder, note)."""
    model = os.path.join(REPO, "models", "efficientnet_lite0.yaml")
    sets = os.path.join(args.out, "effnet_sets")
    try:
        run([sys.executable, os.path.join(REPO, "tools", "make_eval_images.py"), "--model", model,
             "--out", sets, "--calib", "64", "--heldout", str(args.heldout)], timeout=120)
        return (os.path.join(sets, "calib.npy"), ["--input", os.path.join(sets, "heldout.npy")],
                f"make_eval_images: 64 calibration, {args.heldout} held-out inputs")
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        folder = os.path.join(args.out, "effnet_images")
        os.makedirs(folder, exist_ok=True)
        for source in (os.path.join(REPO, "models", "samples", "chelsea.png"),
                       os.path.join(REPO, ".carry", "coffee.png")):
            if os.path.exists(source):
                target = os.path.join(folder, os.path.basename(source))
                if not os.path.exists(target):
                    os.symlink(source, target)
        return (None, ["--images", folder],
                f"make_eval_images unavailable ({str(error)[:120]}): 2 sample photos only, "
                "calibrated and judged on the same photos; top-1 on 2 inputs means little")


def layer_summary(plan_path):
    import yaml
    with open(plan_path) as f:
        layers = yaml.safe_load(f)["layers"]
    counts = {}
    for choice in layers.values():
        counts[choice["precision"]] = counts.get(choice["precision"], 0) + 1
    int8 = [name for name, c in layers.items() if c["precision"] == "int8"]
    return counts, int8


def bench(args, model_args, batch, extra):
    out, _ = run([args.cli, "bench", *model_args, "--device", args.device, "--batch", batch,
                  "--iterations", 100, "--json", "-", *extra], timeout=90)
    report = json.loads(out.stdout)
    rows = report.get("results") or report.get("batches") or []
    for row in rows:
        if int(row.get("batch", -1)) == int(batch):
            return float(row.get("median_ms", row.get("latency_ms", {}).get("median", "nan")))
    return float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batches", default="1,64,256")
    parser.add_argument("--models", default="alexnet,efficientnet_lite0")
    parser.add_argument("--samples", type=int, default=32, help="AlexNet noise inputs")
    parser.add_argument("--heldout", type=int, default=96, help="EfficientNet held-out inputs")
    parser.add_argument("--timing-runs", type=int, default=5)
    args = parser.parse_args()
    args.cli = os.path.join(args.bin, "cnnrt")
    os.makedirs(args.out, exist_ok=True)
    rows, failures = [], 0
    for model in args.models.split(","):
        yaml_path = os.path.join(REPO, "models", f"{model}.yaml")
        if model == "alexnet":
            model_args = [yaml_path, "--random-weights", "1"]
            noise = os.path.join(args.out, "alexnet_noise.npy")
            rng = np.random.default_rng(0)
            np.save(noise, rng.standard_normal((args.samples, 3, 224, 224), dtype=np.float32))
            inputs, calib, budget, note = ["--input", noise], None, "rel_l2=0.05", "N(0,1) noise"
        elif model == "digits":  # a quick smoke test of this script, on any machine
            sys.path.insert(0, os.path.join(REPO, "tools"))
            import digits_data
            held_out = os.path.join(args.out, "digits_test.npy")
            np.save(held_out, digits_data.load_split()[2])
            model_args, inputs, calib = [yaml_path], ["--input", held_out], None
            budget, note = "rel_l2=0.02", "digits test split"
        else:
            weights = os.path.join(REPO, ".carry", f"{model}.safetensors")
            if not os.path.exists(weights):
                print(f"{model}: {weights} missing, skipped")
                continue
            model_args = [yaml_path, "--weights", weights]
            calib_set, inputs, note = effnet_inputs(args)
            calib = None
            if calib_set:
                calib = os.path.join(args.out, f"{model}.calib.json")
                run([args.cli, "calibrate", *model_args, "--input", calib_set, "--method",
                     "entropy", "-o", calib], timeout=120)
            budget = "top1_agreement=0.99"
        print(f"== {model}: budget {budget}; inputs: {note}", flush=True)
        cache = os.path.join(args.out, f"{model}.timing.json")
        for batch in args.batches.split(","):
            plan = os.path.join(args.out, f"{model}_b{batch}.yaml")
            argv = [args.cli, "build", *model_args, "--device", args.device, "--precision", "auto",
                    "--budget", budget, "--batch", batch, *inputs, "--timing-cache", cache,
                    "--timing-runs", args.timing_runs]
            if calib:
                argv += ["--calib", calib]
            try:
                result, cold = run(argv + ["-o", plan, "--explain"], timeout=150)
                with open(os.path.join(args.out, f"{model}_b{batch}_explain.txt"), "w") as f:
                    f.write(result.stdout + result.stderr)
                # The warm-cache build once per model (the first batch), to keep within time.
                warm = float("nan")
                if batch == args.batches.split(",")[0]:
                    _, warm = run(argv + ["-o", plan + ".warm.yaml"], timeout=60)
                counts, int8 = layer_summary(plan)
                plan_ms = bench(args, model_args, batch, ["--plan", plan])
                native = "fp16" if args.device == "cuda" else "fp32"
                fp16_ms = bench(args, model_args, batch, ["--precision", native])
                error_line = next((l for l in result.stdout.splitlines() if l.startswith("error:")),
                                  "")
                row = dict(model=model, batch=int(batch), build_s=round(cold, 2),
                           warm_build_s=round(warm, 2) if warm == warm else "-", precisions=counts, int8_layers=int8,
                           error=error_line, plan_ms=plan_ms, fp16_ms=fp16_ms,
                           speedup=fp16_ms / plan_ms if plan_ms > 0 else float("nan"))
            except (RuntimeError, subprocess.TimeoutExpired) as error:
                failures += 1
                row = dict(model=model, batch=int(batch), failed=str(error)[-400:])
            rows.append(row)
            print(json.dumps(row), flush=True)
    with open(os.path.join(args.out, "auto_plans.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print("\n| model | batch | build s (cold / warm) | layers by precision | int8 layers | "
          "error | plan ms | all-fp16 ms (CPU: all-fp32) | speed-up |\n|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "failed" in r:
            print(f"| {r['model']} | {r['batch']} | FAILED: {r['failed'][:80]} |")
            continue
        print(f"| {r['model']} | {r['batch']} | {r['build_s']} / {r['warm_build_s']} | "
              f"{r['precisions']} | {', '.join(r['int8_layers']) or '-'} | "
              f"{r['error'].replace('error: ', '').split(' (measured')[0]} | {r['plan_ms']:.3f} | "
              f"{r['fp16_ms']:.3f} | {r['speedup']:.2f}x |")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
