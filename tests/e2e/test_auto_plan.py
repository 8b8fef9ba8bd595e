#!/usr/bin/env python3
"""`cnnrt build --precision auto` on models/digits (CPU) with the digits test split as held-out set.

Checks: the plan is written (model, model_hash, device, per-layer kernel/precision), `cnnrt run
--plan` runs exactly its kernels (`cnnrt plan --plan --json`) and its rel L2 against fp32 on the
held-out half equals the build's measured figure and is within the budget; a top-1 budget is met
on the labelled data; a second build with the timing cache profiles nothing; a stale plan
(other weights) and a plan for another model are refused; an unparseable budget, an unmeetable
one (the best error is reported), a calibration of another model: one `error:` line, exit 1, no
plan written (and an existing plan left as it was).  Skipped (77) without scikit-learn.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as util  # noqa: E402

BUDGET = 0.03
TINY_YAML = """name: tiny
input: {shape: [3, 9, 9]}
layers:
  - {name: conv, op: conv, out_channels: 4, kernel: 3, weight: w, bias: b}
  - {name: flat, op: flatten}
  - {name: fc, op: linear, out_features: 5, weight: fw, bias: fb}
"""
failures = []


def expect(label, condition, detail=""):
    print(f"{'ok  ' if condition else 'FAIL'} {label}" + ("" if condition else f": {detail}"))
    if not condition:
        failures.append(label)


def expect_refused(label, result, must_mention, plan_path, before=None):
    """Exit 1, exactly one `error:` line mentioning `must_mention`, the plan path untouched."""
    errors = [l for l in result.stderr.splitlines() if l.startswith("error:")]
    expect(f"{label}: exit 1", result.returncode == 1, f"exit {result.returncode}")
    expect(f"{label}: one error line naming '{must_mention}'",
           len(errors) == 1 and must_mention in errors[0], result.stderr)
    if before is None:
        expect(f"{label}: no plan written", not os.path.exists(plan_path))
    else:
        with open(plan_path) as f:
            expect(f"{label}: the existing plan is unchanged", f.read() == before)


def main():
    args, workdir = util.setup(__doc__.splitlines()[0])
    try:
        import sklearn  # noqa: F401
    except ImportError:
        util.skip("scikit-learn is not installed (pip install scikit-learn)")
    import numpy as np
    import digits_data

    cli = args.cli
    j = lambda *p: os.path.join(workdir, *p)  # noqa: E731
    model = os.path.join(args.source_dir, "models", "digits.yaml")
    _, _, x_test, y_test = digits_data.load_split()
    np.save(j("test.npy"), x_test)
    half = len(x_test) // 2  # build calibrates on the first half, measures on the second
    np.save(j("held_out.npy"), x_test[half:])

    plan = j("plan.yaml")
    common = [model, "--device", "cpu", "--precision", "auto", "--batch", "64", "--input",
              j("test.npy"), "--timing-cache", j("timing.json"), "--timing-runs", "3"]
    build = util.run_cli(cli, "build", *common, "--budget", f"rel_l2={BUDGET}", "-o", plan,
                         "--explain", "--json", j("report.json"))
    print(build.stdout)
    expect("build says it made a calibration", "calibrating int8" in build.stderr, build.stderr)
    expect("--explain lists verdicts", "chosen" in build.stdout and "total:" in build.stdout)
    with open(j("report.json")) as f:
        report = json.load(f)
    with open(plan) as f:
        plan_text = f.read()
    import yaml
    written = yaml.safe_load(plan_text)
    expect("plan names model, hash, device, batch",
           written.get("model") == "digits" and len(written.get("model_hash", "")) == 16
           and written.get("device") == "cpu" and written.get("batch") == 64, plan_text)
    layers = written.get("layers", {})
    expect("plan has kernel and precision per layer",
           layers and all("kernel" in v and "precision" in v for v in layers.values()), plan_text)
    int8 = [name for name, v in layers.items() if v["precision"] == "int8"]
    # The build calibrated, so the plan names the file (int8 layers or not: the same graph).
    expect("the plan names its calibration file, which exists",
           os.path.exists(j(written.get("calibration", "?"))), plan_text)
    expect("report: budget met", report["totals"]["met"] is True, report["totals"])

    # The plan is what runs: the kernels of `cnnrt plan --plan` are the plan file's.
    steps = json.loads(util.run_cli(cli, "plan", model, "--device", "cpu", "--batch", "64",
                                    "--plan", plan, "--json", "-").stdout)["steps"]
    ran = {s["name"]: s["kernel"] for s in steps if s.get("sources")}
    expect("cnnrt plan --plan runs the plan's kernels",
           all(ran.get(name) == v["kernel"] for name, v in layers.items()), f"{ran} vs {layers}")

    # Its error on the held-out half, measured here from `cnnrt run` outputs.
    util.run_cli(cli, "run", model, "--device", "cpu", "--input", j("held_out.npy"), "--output",
                 j("fp32.npy"))
    util.run_cli(cli, "run", model, "--device", "cpu", "--plan", plan, "--input",
                 j("held_out.npy"), "--output", j("auto.npy"))
    error = util.rel_l2(np.load(j("auto.npy")), np.load(j("fp32.npy")))
    print(f"held-out rel L2 of the plan: {error:.6f} (build measured "
          f"{report['totals']['rel_l2']:.6f}), int8 layers: {int8}")
    expect(f"run --plan rel L2 {error:.5f} <= budget {BUDGET}", error <= BUDGET)
    expect("run --plan rel L2 equals the build's measurement",
           abs(error - report["totals"]["rel_l2"]) < 1e-5, f"{error} vs {report['totals']}")

    # Which layers take int8 above depends on this machine's timings; int8 only (a generous
    # budget) exercises the int8 path whatever they are: calibration reference, conversions.
    int8_plan = j("int8.yaml")
    int8_build = util.run_cli(cli, "build", *common, "--budget", "rel_l2=0.1", "--precisions",
                              "int8", "-o", int8_plan, "--json", "-")
    int8_report = json.loads(int8_build.stdout)["totals"]
    with open(int8_plan) as f:
        int8_layers = yaml.safe_load(f)["layers"]
    expect("--precisions int8: every layer int8",
           all(v["precision"] == "int8" for v in int8_layers.values()), int8_layers)
    util.run_cli(cli, "run", model, "--device", "cpu", "--plan", int8_plan, "--input",
                 j("held_out.npy"), "--output", j("int8.npy"))
    int8_error = util.rel_l2(np.load(j("int8.npy")), np.load(j("fp32.npy")))
    print(f"all-int8 plan: held-out rel L2 {int8_error:.6f} (build measured "
          f"{int8_report['rel_l2']:.6f})")
    expect("all-int8 plan: run --plan error equals the build's and is within 0.1",
           abs(int8_error - int8_report["rel_l2"]) < 1e-5 and int8_error <= 0.1)

    # A top-1 budget on the labelled data: the plan's predictions agree with fp32 at >= 0.99.
    top1_plan = j("top1.yaml")
    util.run_cli(cli, "build", *common, "--budget", "top1_agreement=0.99", "-o", top1_plan)
    util.run_cli(cli, "run", model, "--device", "cpu", "--plan", top1_plan, "--input",
                 j("held_out.npy"), "--output", j("top1.npy"))
    agree = float(np.mean(np.load(j("top1.npy")).argmax(1) == np.load(j("fp32.npy")).argmax(1)))
    accuracy = float(np.mean(np.load(j("top1.npy")).argmax(1) == y_test[half:]))
    print(f"top-1 agreement of the top1_agreement=0.99 plan: {agree:.4f}, accuracy {accuracy:.4f}")
    expect("top1_agreement=0.99 plan agrees >= 0.99", agree >= 0.99)

    # A second build with the warm timing cache profiles nothing.
    again = util.run_cli(cli, "build", *common, "--budget", f"rel_l2={BUDGET}", "-o",
                         j("again.yaml"), "--json", "-")
    totals = json.loads(again.stdout)["totals"]
    expect("second build: 0 engines profiled", totals["engines_timed"] == 0, totals)
    expect("second build: no fp32 reference run", totals["reference_runs"] == 0, totals)
    expect("second build: no engine built (layers, candidates and wholes from the cache)",
           totals["engines_built"] == 0, totals)
    expect("second build: the calibration comes from the timing cache",
           "calibration: from the timing cache" in again.stderr, again.stderr)

    # Stale plan (other weights), plan for another model.
    result = util.run_cli(cli, "run", model, "--device", "cpu", "--plan", plan,
                          "--random-weights", "5", "--input", j("held_out.npy"), "--output",
                          j("stale.npy"), check=False)
    expect_refused("stale plan", result, "stale plan", j("stale.npy"))
    with open(j("tiny.yaml"), "w") as f:
        f.write(TINY_YAML)
    np.save(j("tiny_x.npy"), np.random.default_rng(args.seed).random((4, 3, 9, 9), np.float32))
    result = util.run_cli(cli, "run", j("tiny.yaml"), "--random-weights", "1", "--device", "cpu",
                          "--plan", plan, "--input", j("tiny_x.npy"), "--output", j("t.npy"),
                          check=False)
    expect_refused("plan for another model", result, "digits", j("t.npy"))

    # Bad input for build: nothing written, an existing plan untouched.
    before = plan_text
    result = util.run_cli(cli, "build", *common, "--budget", "rel_l2=much", "-o", plan,
                          check=False)
    expect_refused("unparseable budget", result, "rel_l2=much", plan, before)
    result = util.run_cli(cli, "build", *common, "--budget", "rel_l2=1e-7", "--precisions",
                          "int8", "-o", j("never.yaml"), check=False)
    expect_refused("unmeetable budget", result, "cannot be met", j("never.yaml"))
    expect("unmeetable budget reports the best error", "reaches rel_l2" in result.stderr,
           result.stderr)
    util.run_cli(cli, "calibrate", j("tiny.yaml"), "--random-weights", "1", "--input",
                 j("tiny_x.npy"), "--method", "minmax", "-o", j("tiny_calib.json"))
    result = util.run_cli(cli, "build", *common, "--budget", "none", "--calib",
                          j("tiny_calib.json"), "-o", j("wrong.yaml"), check=False)
    expect_refused("calibration of another model", result, "tiny_calib.json", j("wrong.yaml"))

    if failures:
        util.fail(f"{len(failures)} check(s) failed: {', '.join(failures)}")
    print("PASS")
    return util.PASS


if __name__ == "__main__":
    sys.exit(main())
