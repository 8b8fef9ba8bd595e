#!/usr/bin/env python3
"""Before/after end-to-end timing of two cnnrt builds in one GPU run (A/B, interleaved).

Runs `cnnrt bench --json` of build A and build B alternately (A B A B ...) on the same model,
device and batch sizes, so clock and thermal drift hit both alike, and prints per batch the
median over rounds of each build's median latency and B/A.  Used to check that a refactor
changes no numbers (docs/PERFORMANCE.md).

  python3 scripts/ab_bench.py --a OLD/bin/cnnrt --b NEW/bin/cnnrt --model models/alexnet.yaml \
      --batch 1,64,256 [--rounds 3] [--iterations 200] [--precision int8 --calib CALIB.json] \
      [--json OUT.json]
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile


def bench(binary, model, batches, iterations, extra):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        command = [binary, "bench", model, "--random-weights", "1", "--device", "cuda",
                   "--batch", batches, "--iterations", str(iterations), "--json", out.name] + extra
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        with open(out.name) as f:
            report = json.load(f)
    return {r["batch"]: r["median_ms"] for r in report["results"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--a", required=True, help="cnnrt binary of the baseline")
    parser.add_argument("--b", required=True, help="cnnrt binary under test")
    parser.add_argument("--model", required=True)
    parser.add_argument("--batch", default="1,64,256")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--extra-b", default="", help="extra flags for B only")
    parser.add_argument("--precision", default="fp16", help="the engines' precision (both builds)")
    parser.add_argument("--calib", help="int8 scales (cnnrt calibrate) for --precision int8")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.precision == "int8" and not args.calib:
        parser.error("--precision int8 needs --calib")
    both = ["--precision", args.precision] + (["--calib", args.calib] if args.calib else [])
    runs = {"a": [], "b": []}
    for _ in range(args.rounds):
        runs["a"].append(bench(args.a, args.model, args.batch, args.iterations, both))
        runs["b"].append(bench(args.b, args.model, args.batch, args.iterations,
                               both + args.extra_b.split()))
    rows = []
    print(f"{'batch':>6} {'A ms':>10} {'B ms':>10} {'B/A':>7}   ({args.precision}; median of "
          f"{args.rounds} interleaved rounds, each the median of {args.iterations} runs)")
    for batch in runs["a"][0]:
        a = statistics.median(r[batch] for r in runs["a"])
        b = statistics.median(r[batch] for r in runs["b"])
        rows.append({"batch": batch, "a_ms": a, "b_ms": b, "ratio": b / a,
                     "a_rounds": [r[batch] for r in runs["a"]],
                     "b_rounds": [r[batch] for r in runs["b"]]})
        print(f"{batch:>6} {a:>10.4f} {b:>10.4f} {b / a:>7.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"a": args.a, "b": args.b, "model": args.model, "precision": args.precision,
                       "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
