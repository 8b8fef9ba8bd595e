#!/usr/bin/env python3
"""`cnnrt build --precision auto` on the GPU (gpu_check.sh's `auto` mode), then the plans benched
against all-fp16 in the same run (docs/PERFORMANCE.md, "Automatic plans").

  AlexNet: random weights (seed 1, written to a file by `cnnrt init-weights` first, so the timed
           builds load weights as a user's would); the calibration and the held-out set are N(0, 1)
           noise (the build calibrates on the first half of --samples — on the GPU — and measures on
           the rest); budget top1_agreement=0.99, the issue's.
  EfficientNet-Lite0: the real weights in .carry/; calibration and held-out sets from
           tools/make_eval_images.py (disjoint by source photo) when scikit-image is there, else
           models/samples/*.png + .carry/coffee.png (too few for a meaningful top-1 figure: said
           so); budget top1_agreement=0.99.
Per model and batch (AlexNet and EfficientNet-Lite0 at 1, 64, 256): build wall time (cold timing
cache; for the first batch also the warm rebuild and `cnnrt run --plan` of the plan on one
batch, the "from a plan file" figure) with the build's own breakdown (the `timing:` line of
--explain: engines built, kernels created, seconds building, profiling, running the held-out set;
and, under CNNRT_TRACE_BUILD, the phases and slowest kernel creations), which layers took which
precision, the measured error, and `cnnrt bench` of the plan vs `--precision fp16` and vs
`--precision int8` (the fastest uniform engines the plan must not lose to).  Every command has a
time limit (LIMITS: per model, cold / warm / later batches / bench) and the whole a deadline
(--total-s): what does not fit is reported as skipped, not run.  Issue 12 asks for an AlexNet
build at one batch size in <= 3 s cold and <= 0.5 s warm or from a plan file
(docs/PERFORMANCE.md runs 27-29).

  python3 scripts/gpu_auto_check.py --bin BUILD/bin --out DIR [--device cuda]
      [--batches alexnet=1,64,256,efficientnet_lite0=64] [--models alexnet,efficientnet_lite0]
      [--samples 16] [--timing-runs 5] [--total-s 225]
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
# Seconds per command: (cold build of the first batch, its warm rebuild, a later batch, a bench).
LIMITS = {"alexnet": (90, 20, 70, 30), "efficientnet_lite0": (200, 30, 150, 40),
          "digits": (60, 30, 60, 30)}
DEADLINE = [float("inf")]


class Skipped(Exception):
    pass


def limit(seconds):
    """`seconds`, or what is left before the deadline; Skipped when almost nothing is."""
    left = DEADLINE[0] - time.time()
    if left < 5:
        raise Skipped("skipped: no time left within --total-s")
    return min(seconds, left)


def run(argv, timeout, env=None):
    started = time.time()
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                            timeout=timeout, env=env)
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
             "--out", sets, "--calib", "64", "--heldout", str(args.heldout)],
            timeout=limit(120))
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


def trace_summary(stderr):
    """The CNNRT_TRACE_BUILD lines of a build: its phases, and the slowest kernel creations
    (summed per layer and kernel)."""
    import re
    phases, kernels = [], {}
    for line in stderr.splitlines():
        m = re.match(r"build:\s+([\d.]+) ms\s+(.*)", line)
        if not m:
            continue
        ms, what = float(m.group(1)), m.group(2)
        if what.startswith("[cnnrt build]"):
            phases.append(f"{what[14:]} {ms / 1000:.2f} s")
        elif what.startswith("["):  # another traced phase, e.g. "[calibration] ..."
            phases.append(f"{what} {ms / 1000:.2f} s")
        elif " (" in what:
            kernels[what] = kernels.get(what, 0.0) + ms
    slowest = sorted(kernels.items(), key=lambda kv: -kv[1])[:5]
    return "; ".join(phases), ", ".join(f"{k} {v:.0f} ms" for k, v in slowest)


def layer_summary(plan_path):
    import yaml
    with open(plan_path) as f:
        layers = yaml.safe_load(f)["layers"]
    counts = {}
    for choice in layers.values():
        counts[choice["precision"]] = counts.get(choice["precision"], 0) + 1
    int8 = [name for name, c in layers.items() if c["precision"] == "int8"]
    return counts, int8


def bench(args, model_args, batch, extra, seconds):
    out, _ = run([args.cli, "bench", *model_args, "--device", args.device, "--batch", batch,
                  "--iterations", 100, "--json", "-", *extra], timeout=limit(seconds))
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
    parser.add_argument("--batches", default="1,64,256",
                        help="MODEL=B,B,... (a bare list: every model)")
    parser.add_argument("--models", default="alexnet,efficientnet_lite0")
    parser.add_argument("--samples", type=int, default=64,
                        help="AlexNet noise inputs (half calibrate, half held out)")
    parser.add_argument("--heldout", type=int, default=96, help="EfficientNet held-out inputs")
    parser.add_argument("--timing-runs", type=int, default=5)
    parser.add_argument("--total-s", type=float, default=225,
                        help="deadline for the whole (gpu_check.sh kills it at 240 s)")
    args = parser.parse_args()
    DEADLINE[0] = time.time() + args.total_s
    batches, current = {}, None
    for item in args.batches.split(","):
        if "=" in item:
            current, item = item.split("=", 1)
        batches.setdefault(current, []).append(item)
    args.cli = os.path.join(args.bin, "cnnrt")
    os.makedirs(args.out, exist_ok=True)
    rows, failures = [], 0
    for model in args.models.split(","):
        yaml_path = os.path.join(REPO, "models", f"{model}.yaml")
        if model == "alexnet":
            weights = os.path.join(args.out, "alexnet_seed1.safetensors")
            run([args.cli, "init-weights", yaml_path, "--seed", "1", "-o", weights], timeout=60)
            model_args = [yaml_path, "--weights", weights]
            noise = os.path.join(args.out, "alexnet_noise.npy")
            rng = np.random.default_rng(0)
            np.save(noise, rng.standard_normal((args.samples, 3, 224, 224), dtype=np.float32))
            inputs, calib, budget = ["--input", noise], None, "top1_agreement=0.99"
            note = f"N(0,1) noise: {args.samples // 2} calibrate, {args.samples - args.samples // 2} held out"
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
            calib = None
            try:
                calib_set, inputs, note = effnet_inputs(args)
                if calib_set:
                    calib = os.path.join(args.out, f"{model}.calib.json")
                    run([args.cli, "calibrate", *model_args, "--input", calib_set, "--method",
                         "entropy", "-o", calib], timeout=limit(120))
            except (RuntimeError, subprocess.TimeoutExpired, Skipped) as error:
                failures += 0 if isinstance(error, Skipped) else 1
                rows.append(dict(model=model, batch=0, failed=f"setup: {str(error)[-300:]}"))
                print(json.dumps(rows[-1]), flush=True)
                continue
            budget = "top1_agreement=0.99"
        print(f"== {model}: budget {budget}; inputs: {note}", flush=True)
        cache = os.path.join(args.out, f"{model}.timing.json")
        cold_s, warm_s, later_s, bench_s = LIMITS.get(model, LIMITS["alexnet"])
        model_batches = batches.get(model, batches.get(None, []))
        for batch in model_batches:
            plan = os.path.join(args.out, f"{model}_b{batch}.yaml")
            argv = [args.cli, "build", *model_args, "--device", args.device, "--precision", "auto",
                    "--budget", budget, "--batch", batch, *inputs, "--timing-cache", cache,
                    "--timing-runs", args.timing_runs]
            if calib:
                argv += ["--calib", calib]
            first = batch == model_batches[0]
            try:
                result, cold = run(argv + ["-o", plan, "--explain"],
                                   timeout=limit(cold_s if first else later_s),
                                   env=dict(os.environ, CNNRT_TRACE_BUILD="1"))
                phases, slowest_kernels = trace_summary(result.stderr)
                with open(os.path.join(args.out, f"{model}_b{batch}_explain.txt"), "w") as f:
                    f.write(result.stdout + "\n".join(l for l in result.stderr.splitlines()
                                                      if not l.startswith("build:")))
                # The warm-cache build once per model (the first batch), to keep within time.
                warm, warm_phases = float("nan"), ""
                traced = dict(os.environ, CNNRT_TRACE_BUILD="1")
                if first:
                    warm_result, warm = run(argv + ["-o", plan + ".warm.yaml"],
                                            timeout=limit(warm_s), env=traced)
                    warm_phases = trace_summary(warm_result.stderr)[0]
                # From the plan file: `cnnrt run --plan` on one input, the whole process's wall
                # (CUDA start, weights, the engine as the plan names it, one forward; no timing).
                from_plan, plan_phases = float("nan"), ""
                if first and inputs[0] == "--input":
                    one = os.path.join(args.out, f"{model}_one.npy")
                    np.save(one, np.load(inputs[1], mmap_mode="r")[:int(batch)])
                    plan_result, from_plan = run(
                        [args.cli, "run", *model_args, "--device", args.device, "--plan", plan,
                         "--input", one, "--output", os.path.join(args.out, f"{model}_one_out.npy")],
                        timeout=limit(warm_s), env=traced)
                    plan_phases, plan_kernels = trace_summary(plan_result.stderr)
                    plan_phases += f"; slowest kernel creations: {plan_kernels}"
                counts, int8 = layer_summary(plan)
                plan_ms = bench(args, model_args, batch, ["--plan", plan], bench_s)
                native = "fp16" if args.device == "cuda" else "fp32"
                fp16_ms = bench(args, model_args, batch, ["--precision", native], bench_s)
                # The all-int8 engine with the calibration the plan used (given, or made by the
                # build next to the plan): the uniform engine the seeds must not lose to.
                int8_calib = calib or plan + ".calib.json"
                int8_ms = float("nan")
                if os.path.exists(int8_calib):
                    int8_ms = bench(args, model_args, batch,
                                    ["--precision", "int8", "--calib", int8_calib], bench_s)
                error_line = next((l for l in result.stdout.splitlines() if l.startswith("error:")),
                                  "")
                wholes = [l for l in result.stdout.splitlines() if l.startswith("whole ")]
                breakdown = next((l for l in result.stdout.splitlines()
                                  if l.startswith("timing:")), "")
                row = dict(model=model, batch=int(batch), build_s=round(cold, 2), breakdown=breakdown,
                           phases=phases, slowest_kernels=slowest_kernels,
                           warm_phases=warm_phases, from_plan_phases=plan_phases,
                           warm_build_s=round(warm, 2) if warm == warm else "-",
                           from_plan_s=round(from_plan, 2) if from_plan == from_plan else "-",
                           precisions=counts, int8_layers=int8, error=error_line, wholes=wholes,
                           plan_ms=plan_ms, fp16_ms=fp16_ms, int8_ms=int8_ms,
                           speedup=fp16_ms / plan_ms if plan_ms > 0 else float("nan"))
            except (RuntimeError, subprocess.TimeoutExpired) as error:
                failures += 1
                row = dict(model=model, batch=int(batch), failed=str(error)[-400:])
            except Skipped as error:
                row = dict(model=model, batch=int(batch), failed=str(error))
            rows.append(row)
            print(json.dumps(row), flush=True)
    with open(os.path.join(args.out, "auto_plans.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print("\n| model | batch | build s (cold / warm / from plan) | layers by precision | int8 layers | "
          "error | plan ms | all-fp16 ms (CPU: all-fp32) | all-int8 ms | speed-up vs fp16 |\n"
          "|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "failed" in r:
            print(f"| {r['model']} | {r['batch']} | FAILED: {r['failed'][:80]} |")
            continue
        print(f"| {r['model']} | {r['batch']} | {r['build_s']} / {r['warm_build_s']} / {r['from_plan_s']} | "
              f"{r['precisions']} | {', '.join(r['int8_layers']) or '-'} | "
              f"{r['error'].replace('error: ', '').split(' (measured')[0]} | {r['plan_ms']:.3f} | "
              f"{r['fp16_ms']:.3f} | {r['int8_ms']:.3f} | {r['speedup']:.2f}x |")
    print("\nWhere each cold build's time went (--explain):")
    for r in rows:
        if "failed" not in r:
            print(f"  {r['model']} b{r['batch']}: {r['breakdown']}\n    phases: {r['phases']}"
                  f"\n    slowest kernel creations: {r['slowest_kernels']}")
            if r.get("warm_phases"):
                print(f"    warm build phases: {r['warm_phases']}")
            if r.get("from_plan_phases"):
                print(f"    run --plan phases: {r['from_plan_phases']}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
