#!/usr/bin/env python3
"""Int8 vs fp32 on real images, on the CPU engine: per calibration method, all layers int8 and
int8 with the most sensitive layers kept in fp32 (docs/QUANTIZATION.md, "Accuracy on real
data").  Drives the cnnrt CLI as many processes in parallel (the CPU engine is single-threaded).

    python3 tools/int8_study.py --cli build/bin/cnnrt --weights W.safetensors --sets DIR \
        --out OUT [--model models/efficientnet_lite0.yaml] [--calib-dir DIR] [--jobs 16] \
        [--deadline SECONDS] [--keep 5] [--rank-samples 4]

DIR holds calib.npy and heldout.npy from tools/make_eval_images.py (disjoint by source photo).
Steps (each a job; a job whose output exists is skipped, so a cut-short run can be resumed):
  1. per method (minmax, percentile:99.99, entropy, mse): `cnnrt calibrate` on calib.npy, unless
     --calib-dir already has the file (calib_<method>.json, ':' written '_');
  2. the sensitivity ranking: `cnnrt accuracy` on --rank-samples inputs of the *calibration*
     set (spread over its photos), the layers split over several processes;  the --keep layers
     with the largest rel L2 alone are the ones kept in fp32 (chosen without looking at the
     held-out set);
  3. the held-out set in shards: `cnnrt run` fp32, all-int8 per method, and int8 with the kept
     layers at fp32 (a plan file) per method.
Jobs start in that priority order as workers free up; none starts when it would likely end
after --deadline, and running ones are stopped there.  Then OUT/results.json and the tables on
stdout: per configuration top-1 / top-5 agreement with fp32, mean KL(fp32 ‖ int8), rel L2 of
the logits, and top-1 agreement by fp32 confidence and by source photo.  The metrics are those
of `cnnrt accuracy` (runtime/accuracy.h).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

METHODS = ("minmax", "percentile:99.99", "entropy", "mse")


def tag(method):
    return method.replace(":", "_")


class Job:
    def __init__(self, name, command, outputs, kind, passes, deps=(), on_done=None, priority=()):
        self.name, self.command, self.outputs, self.priority = name, command, outputs, priority
        self.kind, self.passes, self.deps, self.on_done = kind, passes, list(deps), on_done
        self.process = self.started = None
        self.state = "done" if all(os.path.exists(p) for p in outputs) else "waiting"


class Runner:
    """Runs jobs on `workers` processes in list order, respecting deps and a deadline."""

    def __init__(self, workers, deadline, log_dir):
        self.workers, self.deadline, self.log_dir = workers, deadline, log_dir
        self.jobs, self.seconds_per_pass = [], None
        self.start = time.time()

    def add(self, job):
        """Keeps the list in priority order: calibration, fp32, ranking, then shard by shard
        every configuration of that shard (so a run cut short has the same uniform subsample
        of the held-out set for every configuration)."""
        order = {"calibrate": 0, "fp32": 1, "rank": 2, "int8": 3, "mixed": 3}
        key = (order[job.kind],) + tuple(job.priority)
        place = len(self.jobs)
        while place > 0 and (order[self.jobs[place - 1].kind],) + tuple(
                self.jobs[place - 1].priority) > key:
            place -= 1
        self.jobs.insert(place, job)
        if job.state == "done" and job.on_done:
            job.on_done(self)
        return job

    def ready(self, job):
        return job.state == "waiting" and all(self.find(d).state == "done" for d in job.deps)

    def find(self, name):
        return next(j for j in self.jobs if j.name == name)

    def estimate(self, job):
        return (self.seconds_per_pass or 1.5) * job.passes * 1.15 + 2

    def run(self):
        while True:
            now = time.time()
            running = [j for j in self.jobs if j.state == "running"]
            for job in running:
                code = job.process.poll()
                if code is None:
                    if now > self.deadline:
                        job.process.kill()
                        job.process.wait()
                        job.state = "stopped"
                        print(f"  stopped at the deadline: {job.name}", flush=True)
                    continue
                took = now - job.started
                if code != 0:
                    job.state = "failed"
                    print(f"  FAILED ({code}) {job.name}: see {job.log}", flush=True)
                    continue
                job.state = "done"
                rate = took / max(job.passes, 1)
                self.seconds_per_pass = rate if self.seconds_per_pass is None else \
                    0.7 * self.seconds_per_pass + 0.3 * rate
                print(f"  done {job.name} in {took:.0f} s ({rate:.2f} s per pass) "
                      f"[{now - self.start:.0f} s]", flush=True)
                if job.on_done:
                    job.on_done(self)
            running = [j for j in self.jobs if j.state == "running"]
            for job in self.jobs:
                if len(running) >= self.workers:
                    break
                if not self.ready(job):
                    continue
                if time.time() + self.estimate(job) > self.deadline:
                    job.state = "skipped"
                    continue
                job.log = os.path.join(self.log_dir, job.name.replace("/", "_") + ".log")
                job.process = subprocess.Popen(job.command, stdout=open(job.log, "w"),
                                               stderr=subprocess.STDOUT)
                job.started, job.state = time.time(), "running"
                running.append(job)
            if not running and not any(self.ready(j) for j in self.jobs):
                return
            time.sleep(0.5)


def softmax(x):
    x = x.astype(np.float64)
    x = x - x.max(axis=1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=1, keepdims=True)


def agreement(reference, test):
    """The metrics of runtime/accuracy.h on [N, classes] logits."""
    label = reference.argmax(axis=1)
    top1 = (test.argmax(axis=1) == label)
    ref_value = test[np.arange(len(test)), label][:, None]
    index = np.arange(test.shape[1])[None, :]
    place = ((test > ref_value) | ((test == ref_value) & (index < label[:, None]))).sum(axis=1)
    log_p = np.log(softmax(reference))
    log_q = np.log(softmax(test))
    kl = (np.exp(log_p) * (log_p - log_q)).sum(axis=1)
    diff = test.astype(np.float64) - reference
    return {"samples": int(len(test)), "top1": float(top1.mean()), "top5": float((place < 5).mean()),
            "kl": float(kl.mean()),
            "rel_l2": float(np.sqrt((diff ** 2).sum() / (reference.astype(np.float64) ** 2).sum())),
            "_top1_each": top1}


def main():
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", default=os.path.join(root, "build", "bin", "cnnrt"))
    parser.add_argument("--model", default=os.path.join(root, "models", "efficientnet_lite0.yaml"))
    parser.add_argument("--weights", required=True)
    parser.add_argument("--sets", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--calib-dir", default=None)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--deadline", type=float, default=1e9, help="seconds from now")
    parser.add_argument("--keep", type=int, default=5)
    parser.add_argument("--rank-samples", type=int, default=4)
    parser.add_argument("--rank-chunks", type=int, default=8)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--scratch", default=None, help="where the held-out shards go "
                        "(default OUT/work)")
    parser.add_argument("--mixed-methods", default=",".join(METHODS),
                        help="the methods that get a ranking and a mixed-precision run")
    parser.add_argument("--no-mixed", action="store_true",
                        help="no ranking and no mixed-precision runs (all-int8 only)")
    parser.add_argument("--no-run", action="store_true", help="only summarise OUT")
    args = parser.parse_args()
    methods = args.methods.split(",")
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    work = os.path.join(args.out, "work")
    os.makedirs(work, exist_ok=True)
    calib_dir = args.calib_dir or args.out
    common = ["--weights", args.weights]

    heldout_path = os.path.join(args.sets, "heldout.npy")
    calib_set = os.path.join(args.sets, "calib.npy")
    heldout = np.load(heldout_path, mmap_mode="r")
    n = heldout.shape[0]
    scratch = args.scratch or work
    os.makedirs(scratch, exist_ok=True)
    shards = []  # (path, held-out indices): shard k holds samples k, k + shards, ... (every photo)
    for k in range(args.shards):
        path = os.path.join(scratch, f"heldout_{k:02d}.npy")
        indices = np.arange(k, n, args.shards)
        if not os.path.exists(path):
            np.save(path, np.ascontiguousarray(heldout[indices]))
        shards.append((path, indices))
    calib = np.load(calib_set, mmap_mode="r")
    stride = max(calib.shape[0] // args.rank_samples, 1)
    rank_path = os.path.join(work, "rank.npy")
    if not os.path.exists(rank_path):
        np.save(rank_path, np.ascontiguousarray(calib[::stride][:args.rank_samples]))

    runner = Runner(args.jobs, time.time() + args.deadline, os.path.join(args.out, "logs"))

    def fp32_outputs(k):
        return os.path.join(work, f"fp32_{k:02d}.npy")

    for k, (path, indices) in enumerate(shards):
        runner.add(Job(f"fp32/{k}", [args.cli, "run", args.model, *common, "--device", "cpu",
                                     "--input", path, "--output", fp32_outputs(k)],
                       [fp32_outputs(k)], "fp32", len(indices), priority=(k,)))

    def add_method_jobs(runner, method, calib_json):
        """Ranking, all-int8 and mixed jobs of one method, once its calibration exists."""
        layers = list_int8_layers(args, common, calib_json, rank_path,
                                  os.path.join(work, "layers.json"))
        chunks = [list(c) for c in np.array_split(np.array(layers, dtype=object),
                                                  args.rank_chunks) if len(c)]
        plan = os.path.join(work, f"keep_{tag(method)}.yaml")
        rank_names = [f"rank/{tag(method)}/{c}" for c in range(len(chunks))]
        m = methods.index(method)
        mixed = not args.no_mixed and method in args.mixed_methods.split(",")
        for c, chunk in enumerate(chunks if mixed else []):
            out = os.path.join(work, f"rank_{tag(method)}_{c}.json")
            runner.add(Job(rank_names[c],
                           [args.cli, "accuracy", args.model, *common, "--calib", calib_json,
                            "--input", rank_path, "--layers", ",".join(chunk), "--json", out],
                           [out], "rank", (len(chunk) + 2) * args.rank_samples, priority=(m, c),
                           on_done=lambda r: write_keep_plan(r, method, rank_names, plan, args,
                                                             work)))
        m = methods.index(method)
        for k, (path, indices) in enumerate(shards):
            count = len(indices)
            out = os.path.join(work, f"int8_{tag(method)}_{k:02d}.npy")
            runner.add(Job(f"int8/{tag(method)}/{k}",
                           [args.cli, "run", args.model, *common, "--device", "cpu", "--precision",
                            "int8", "--calib", calib_json, "--input", path, "--output", out],
                           [out], "int8", count, priority=(k, 0, m)))
            out = os.path.join(work, f"mixed_{tag(method)}_{k:02d}.npy")
            if not mixed:
                continue
            runner.add(Job(f"mixed/{tag(method)}/{k}",
                           [args.cli, "run", args.model, *common, "--device", "cpu", "--precision",
                            "int8", "--calib", calib_json, "--plan", plan, "--input", path,
                            "--output", out], [out], "mixed", count, deps=rank_names,
                           priority=(k, 1, m)))

    for method in methods:
        calib_json = os.path.join(calib_dir, f"calib_{tag(method)}.json")
        runner.add(Job(f"calibrate/{tag(method)}",
                       [args.cli, "calibrate", args.model, *common, "--input", calib_set,
                        "--method", method, "-o", calib_json], [calib_json], "calibrate",
                       calib.shape[0] * (1 if method == "minmax" else 2), priority=(methods.index(method),),
                       on_done=lambda r, m=method, c=calib_json: add_method_jobs(r, m, c)))
    if not args.no_run:
        runner.run()
    summarise(args, methods, shards, work)


def list_int8_layers(args, common, calib_json, rank_path, layers_json):
    """The fused layers an all-int8 CPU engine runs in int8, in order (from `cnnrt plan`)."""
    if os.path.exists(layers_json):
        return json.load(open(layers_json))
    result = subprocess.run([args.cli, "plan", args.model, "--batch", "1", "--device", "cpu",
                             "--precision", "int8", "--calib", calib_json, "--json", "-"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("error: cannot list the int8 layers:\n" + result.stderr)
    layers = [step["name"] for step in json.loads(result.stdout)["steps"]
              if step["precision"] == "int8" and step["sources"]]
    with open(layers_json, "w") as f:
        json.dump(layers, f)
    return layers


def write_keep_plan(runner, method, rank_names, plan, args, work):
    done = {j.name for j in runner.jobs if j.state == "done"}
    if not all(n in done for n in rank_names) or os.path.exists(plan):
        return
    rows = []
    for name in rank_names:
        rows += json.load(open(runner.find(name).outputs[0]))["layers"]  # noqa: E501
    rows.sort(key=lambda row: -row["rel_l2"])
    keep = [row["layer"] for row in rows[:args.keep]]
    json.dump(rows, open(os.path.join(work, f"ranking_{tag(method)}.json"), "w"), indent=1)
    model_name = re.search(r"^name:\s*(\S+)", open(args.model).read(), re.MULTILINE).group(1)
    text = f"model: {model_name}\n# the {args.keep} layers with the largest rel L2 alone " \
           f"({method}, calibration-set ranking)\nlayers:\n"
    text += "".join(f"  {layer}: {{precision: fp32}}\n" for layer in keep)
    with open(plan + ".tmp", "w") as f:
        f.write(text)
    os.replace(plan + ".tmp", plan)
    print(f"  {method}: keeping {', '.join(keep)} in fp32", flush=True)


def summarise(args, methods, shards, work):
    manifest = {"sets": {}}
    for name in ("manifest.json", "manifest_calib.json", "manifest_heldout.json"):
        path = os.path.join(args.sets, name)
        if os.path.exists(path):
            manifest["sets"].update(json.load(open(path))["sets"])
    groups = np.array([r["group"] for r in manifest["sets"]["heldout"]["inputs"]])

    def gather(prefix):
        """The outputs of the shards that exist, ordered by held-out index, and the indices."""
        parts, indices = [], []
        for k, (_, shard_indices) in enumerate(shards):
            path = os.path.join(work, f"{prefix}_{k:02d}.npy")
            if os.path.exists(path):
                parts.append(np.load(path))
                indices.append(shard_indices)
        if not parts:
            return None, None
        indices = np.concatenate(indices)
        order = np.argsort(indices)
        return np.concatenate(parts)[order], indices[order]

    fp32, fp32_index = gather("fp32")
    results = {"heldout_samples": int(sum(len(i) for _, i in shards)), "configs": [],
               "sets": {k: {"sha256": v["sha256"], "shape": v["shape"],
                            "groups": list(v["groups"])} for k, v in manifest["sets"].items()}}
    if fp32 is None:
        print("no fp32 outputs: nothing to compare")
        json.dump(results, open(os.path.join(args.out, "results.json"), "w"), indent=1)
        return
    confident_all = softmax(fp32).max(axis=1) >= 0.5
    results["fp32_samples"] = int(len(fp32))
    results["fp32_confident_share"] = float(confident_all.mean())
    print(f"held-out: {len(fp32)} of {len(groups)} inputs run in fp32; fp32 top-1 probability "
          f">= 0.5 on {100 * confident_all.mean():.1f} % of them")
    header = (f"{'config':<36} {'N':>4} {'top-1 %':>8} {'top-5 %':>8} {'KL':>9} {'rel L2':>8} "
              f"{'top-1 % (p>=.5)':>16} {'top-1 % (p<.5)':>15}")
    print(header + "\n" + "-" * len(header))
    for method in methods:
        for kind, label in (("int8", "all int8"), ("mixed", f"int8, {args.keep} layers fp32")):
            test, index = gather(f"{kind}_{tag(method)}")
            if test is not None:
                keep = np.isin(index, fp32_index)
                test, index = test[keep], index[keep]
            if test is None or len(index) == 0:
                print(f"{method + ', ' + label:<36} (not run)")
                continue
            row_of = np.searchsorted(fp32_index, index)
            a = agreement(fp32[row_of], test)
            each = a.pop("_top1_each")
            confident, groups_here = confident_all[row_of], groups[index]
            a.update(method=method, config=kind, label=label,
                     top1_confident=float(each[confident].mean()),
                     top1_unconfident=float(each[~confident].mean()) if (~confident).any() else None,
                     top1_by_group={g: float(each[groups_here == g].mean())
                                    for g in sorted(set(groups_here))})
            keep_plan = os.path.join(work, f"keep_{tag(method)}.yaml")
            if kind == "mixed" and os.path.exists(keep_plan):
                a["fp32_layers"] = [line.split(":")[0].strip() for line in open(keep_plan)
                                    if line.startswith("  ")]
            results["configs"].append(a)
            unconf = "-" if a["top1_unconfident"] is None else f"{100 * a['top1_unconfident']:.1f}"
            print(f"{method + ', ' + label:<36} {a['samples']:4d} {100 * a['top1']:8.1f} {100 * a['top5']:8.1f} "
                  f"{a['kl']:9.5f} {a['rel_l2']:8.4f} {100 * a['top1_confident']:16.1f} "
                  f"{unconf:>15}")
    edges = (0.0, 0.1, 0.2, 0.3, 0.5, 1.01)
    probability = softmax(fp32).max(axis=1)
    print("\ntop-1 agreement % by fp32 top-1 probability (samples per bin in the header):")
    bins = [(lo, hi) for lo, hi in zip(edges[:-1], edges[1:])]
    print(f"{'config':<36} " + " ".join(
        f"{f'{lo:.1f}-{min(hi, 1):.1f} ({((probability >= lo) & (probability < hi)).sum()})':>16}"
        for lo, hi in bins))
    for a in results["configs"]:
        test, index = gather(f"{a['config']}_{tag(a['method'])}")
        keep = np.isin(index, fp32_index)
        rows = np.searchsorted(fp32_index, index[keep])
        agree = test[keep].argmax(axis=1) == fp32[rows].argmax(axis=1)
        p = probability[rows]
        a["top1_by_probability"] = {f"{lo:.1f}-{min(hi, 1):.1f}": float(agree[(p >= lo) & (p < hi)].mean())
                                    if ((p >= lo) & (p < hi)).any() else None for lo, hi in bins}
        print(f"{a['method'] + ', ' + a['config']:<36} " + " ".join(
            f"{'-' if v is None else f'{100 * v:.1f}':>16}" for v in a["top1_by_probability"].values()))
    print("\ntop-1 agreement % by source photo (fp32 confident share %):")
    names = sorted(set(groups))
    fp32_groups = groups[fp32_index]
    print(f"{'config':<36} " + " ".join(f"{g[:9]:>9}" for g in names))
    print(f"{'(fp32 p>=.5)':<36} " + " ".join(
        f"{100 * confident_all[fp32_groups == g].mean():9.0f}" if (fp32_groups == g).any()
        else f"{'-':>9}" for g in names))
    for a in results["configs"]:
        print(f"{a['method'] + ', ' + a['config']:<36} " + " ".join(
            f"{100 * a['top1_by_group'][g]:9.0f}" if g in a["top1_by_group"] else f"{'-':>9}"
            for g in names))
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
