"""`cnnrt plan --device cuda --target T` on any machine (issue 13): a CUDA plan is static.

Plans the zoo's AlexNet, EfficientNet-Lite0 and ResNet-50 at batch 1 and 64 for described
GPUs, GPU or not, and checks what only the device description can decide: the sm_90 targets
take the wgmma convs, an sm_80 one never does, the split-K fallbacks follow the SM count (and
nothing else: two targets of one architecture and SM count plan identically), and bad targets
are usage errors.  Whether a target's plan equals the one the GPU itself prints is
scripts/plan_target_check.sh's job, on a GPU machine.  Skipped (77) in a build without CUDA.
"""
import os
import subprocess
import sys

import e2e_util as util

MODELS = ["alexnet", "efficientnet_lite0", "resnet50"]


def plan(cli, model_path, *flags):
    return util.run_cli(cli, "plan", model_path, "--device", "cuda", *flags).stdout


def steps(table):
    """step name -> (kernel, variant) from the plan table (the columns are space-aligned)."""
    rows = {}
    lines = table.splitlines()
    start = lines.index("steps") + 2
    for line in lines[start:]:
        if not line.strip():
            break
        fields = line.split()
        rows[fields[1]] = (fields[3], line)
    return rows


def main():
    args, workdir = util.setup(__doc__)
    version = subprocess.run([args.cli, "--version"], capture_output=True, text=True).stdout
    if "CUDA backend: compiled" not in version:
        util.skip("this build has no CUDA backend")
    cli = args.cli
    models = os.path.join(args.source_dir, "models")
    path = {m: os.path.join(models, m + ".yaml") for m in MODELS}

    # Each plan builds an engine (its weights packed on the host): every plan below is made once.
    h100 = {}
    for model in MODELS:
        for batch in ("1", "64"):
            h100[model, batch] = plan(cli, path[model], "--target", "h100", "--batch", batch)
            if "NVIDIA H100 SXM (target), planned without a device" not in h100[model, batch]:
                util.fail(f"{model} batch {batch}: the header does not name the target:\n"
                          f"{h100[model, batch]}")
        # Same architecture and figures, another name: the same plan, line for line.
        custom = plan(cli, path[model], "--target", "sm90:132", "--batch", "1")
        if h100[model, "1"].splitlines()[1:] != custom.splitlines()[1:]:
            util.fail(f"{model} batch 1: h100 and sm90:132 plan differently")
        # Batch 64 is where sm_90 takes wgmma, so that is where sm_80 must not.
        a100 = plan(cli, path[model], "--target", "a100", "--batch", "64")
        if "wgmma" in a100 or "conv_fp16_tma" in a100:
            util.fail(f"{model} batch 64: an sm_80 target planned a Hopper kernel:\n{a100}")
        print(f"ok   {model}: h100 = sm90:132 (batch 1), a100 without wgmma (batch 64)")

    # sm_90 takes the Hopper convs where they serve: AlexNet conv2-5 (all on the TMA conv, the
    # pooled conv2/conv5 too), ResNet-50's 3x3/1x1 convs.
    hopper = ("conv_fp16_wgmma", "conv_fp16_tma")
    alex = steps(h100["alexnet", "64"])
    for conv in ("conv2", "conv3", "conv4", "conv5"):
        if alex[conv][0] not in hopper:
            util.fail(f"alexnet batch 64 on h100: {conv} runs {alex[conv][0]}, not wgmma/tma")
    if sum(h100["resnet50", "64"].count(name) for name in hopper) < 20:
        util.fail(f"resnet50 batch 64 on h100: too few wgmma convs:\n{h100['resnet50', '64']}")
    print("ok   h100: AlexNet conv2-5 and ResNet-50's convs on wgmma at batch 64")

    # Split-K follows the SM count: AlexNet conv3 at batch 1 fills 132 SMs with another split
    # than 100 (the cost model of kernels/cuda/conv/igemm_plan.cpp, fed the target's SMs).
    big = steps(h100["alexnet", "1"])["conv3"][1]
    small = steps(plan(cli, path["alexnet"], "--target", "sm90:100", "--batch", "1"))["conv3"][1]
    if "split-K" not in big or "split-K" not in small or big == small:
        util.fail(f"conv3 at batch 1: 132 and 100 SMs give\n{big}\n{small}")
    print("ok   AlexNet conv3 at batch 1: split-K differs between 132 and 100 SMs")

    # int8 with a calibration: the Hopper int8 convs (conv_int8_tma, the s2d stem's TMA GEMM)
    # on sm_90, none on sm_80.
    calib = os.path.join(workdir, "calib.json")
    rng_input = os.path.join(workdir, "x.npy")
    import numpy as np

    np.save(rng_input, np.random.default_rng(args.seed).standard_normal((2, 3, 224, 224))
            .astype(np.float32))
    util.run_cli(cli, "calibrate", path["alexnet"], "--random-weights", "--input", rng_input,
                 "--method", "minmax", "-o", calib)
    int8 = ["--precision", "int8", "--calib", calib, "--batch", "64"]
    h100 = plan(cli, path["alexnet"], "--target", "h100", *int8)
    a100 = plan(cli, path["alexnet"], "--target", "a100", *int8)
    if "int8" not in h100 or "tma_s8" not in h100 or "tma_s8" in a100 or "wgmma" in a100:
        util.fail(f"int8 plans: h100\n{h100}\na100\n{a100}")
    print("ok   int8 AlexNet: tma_s8 on h100, no Hopper kernel on a100")
    # The int8 TMA linear is planned on a described target too (it needs no device weight to be
    # chosen), and at batch 1 the int8 TMA conv where a unit's K is short (conv2, conv3, conv5),
    # the mma.sync split-K GEMM where it is long (conv4): ConvS8Tma::runs_small_batches.
    int8_64 = steps(h100)
    if any("tma_s8_linear" not in int8_64[fc][1] for fc in ("fc6", "fc7", "fc8")):
        util.fail(f"int8 linears at batch 64 on h100 are not the TMA GEMM:\n{h100}")
    int8_1 = steps(plan(cli, path["alexnet"], "--target", "h100", "--precision", "int8",
                        "--calib", calib, "--batch", "1"))
    if any("tma_s8" not in int8_1[conv][1] for conv in ("conv2", "conv3", "conv5")) or \
            "igemm_s8" not in int8_1["conv4"][1]:
        util.fail(f"int8 convs at batch 1 on h100: {int8_1}")
    print("ok   int8 AlexNet on h100: TMA linears at 64, TMA conv2/3/5 and split-K conv4 at 1")

    # Bad input: one error line each, exit 2 (usage).
    for label, flags in [("unknown target", ["--device", "cuda", "--target", "h900"]),
                         ("no SMs", ["--device", "cuda", "--target", "sm90:0"]),
                         ("unknown architecture", ["--device", "cuda", "--target", "sm99:10"]),
                         ("--target on the CPU", ["--device", "cpu", "--target", "h100"])]:
        result = util.run_cli(cli, "plan", path["alexnet"], *flags, check=False)
        errors = [l for l in result.stderr.splitlines() if l.startswith("error:")]
        if result.returncode != 2 or len(errors) != 1 or result.stdout:
            util.fail(f"{label}: exit {result.returncode}\n{result.stdout}{result.stderr}")
        print(f"ok   {label}: {errors[0]}")
    print("all plan --target checks passed")


if __name__ == "__main__":
    sys.exit(main())
