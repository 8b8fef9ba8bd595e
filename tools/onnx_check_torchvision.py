#!/usr/bin/env python3
"""torchvision models -> torch.onnx.export -> tools/onnx_import.py -> cnnrt, against onnxruntime.

For AlexNet, ResNet-18, MobileNetV2 and SqueezeNet 1.1 (random initialisation, batchnorm
running statistics randomised so that BN folding is exercised; no network needed): export to
ONNX (TorchScript exporter, opset 13, dynamic batch, constant folding on), import, run cnnrt
on the CPU (the Python module, else `cnnrt run`; tools/cnnrt_run.py) and onnxruntime on the same
input, and print the rel L2 of the logits per model (pass: <= 1e-5).  With --cuda, also cnnrt on
the GPU in fp16
against onnxruntime (pass: <= 1e-2); a model whose layers the CUDA entries do not serve yet
(MobileNetV2's ReLU6 epilogue) is reported, not failed.  Needs torch, torchvision, onnx,
onnxruntime, numpy, pyyaml, safetensors.

  python3 tools/onnx_check_torchvision.py --bin build/bin [--models alexnet,resnet18,...]
      [--batch 2] [--cuda] [--keep DIR] [--seed S]
"""

from __future__ import annotations

import argparse
import inspect
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cnnrt_run import RunError, run_model  # noqa: E402  (the module, else `cnnrt run`)
MODELS = ["alexnet", "resnet18", "mobilenet_v2", "squeezenet1_1"]
CPU_TOLERANCE, FP16_TOLERANCE = 1e-5, 1e-2


def rel_l2(actual, reference) -> float:
    import numpy as np

    actual, reference = np.asarray(actual, np.float64), np.asarray(reference, np.float64)
    if actual.shape != reference.shape:
        return float("inf")
    return float(np.linalg.norm(actual - reference) / max(np.linalg.norm(reference), 1e-300))


def export(torch, torchvision, name: str, path: str, batch: int, seed: int):
    """Exports a randomly initialised torchvision model; returns the example input (numpy)."""
    torch.manual_seed(seed)
    model = getattr(torchvision.models, name)(weights=None).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 1.5)
    x = torch.randn(batch, 3, 224, 224)
    options = dict(input_names=["x"], output_names=["y"], opset_version=13,
                   dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, do_constant_folding=True)
    exporter = "torchscript"
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        options["dynamo"] = False  # the TorchScript exporter first: no onnxscript needed
    try:
        torch.onnx.export(model, (x,), path, **options)
    except Exception as first:  # noqa: BLE001 (a torch without the TorchScript exporter)
        if "dynamo" not in options:
            raise
        # The dynamo exporter (opset 18), batch fixed to the example's: the importer keeps
        # only the per-sample shape, and both runs below use the same batch.
        exporter = "dynamo"
        options.update(dynamo=True, opset_version=18)
        options.pop("dynamic_axes")
        try:
            torch.onnx.export(model, (x,), path, **options)
        except Exception as second:  # noqa: BLE001
            raise RuntimeError(f"torchscript exporter: {first}; dynamo exporter: {second}") \
                from None
    with torch.no_grad():
        reference = model(x).numpy()
    return x.numpy(), reference, exporter


def run(command, timeout=900):
    return subprocess.run([str(c) for c in command], capture_output=True, text=True,
                          timeout=timeout)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", required=True, help="folder holding the cnnrt binary")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cuda", action="store_true", help="also run cnnrt on the GPU (fp16)")
    parser.add_argument("--keep", help="write the .onnx/.yaml/.safetensors files here")
    args = parser.parse_args(argv)
    try:
        import numpy as np
        import onnxruntime
        import torch
        import torchvision
    except ImportError as exc:
        print(f"error: {exc}: pip install torch torchvision onnx onnxruntime", file=sys.stderr)
        return 1
    work = args.keep or tempfile.mkdtemp(prefix="cnnrt_onnx_tv_")
    os.makedirs(work, exist_ok=True)
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, onnxruntime "
          f"{onnxruntime.__version__}; batch {args.batch}, seed {args.seed}; files in {work}")
    rows, failed = [], False
    for name in args.models.split(","):
        onnx_path = os.path.join(work, f"{name}.onnx")
        yaml_path = os.path.join(work, f"{name}.yaml")
        try:
            x, torch_out, exporter = export(torch, torchvision, name, onnx_path, args.batch,
                                            args.seed)
        except Exception as exc:  # noqa: BLE001 (report every exporter failure the same way)
            rows.append((name, f"export failed: {type(exc).__name__}: {exc}"))
            failed = True
            continue
        result = run([sys.executable, os.path.join(HERE, "onnx_import.py"), onnx_path, "-o",
                      yaml_path])
        if result.returncode != 0:
            rows.append((name, f"import failed: {result.stderr.strip()}"))
            failed = True
            continue
        session = onnxruntime.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
        ort_out = session.run(None, {"x": x})[0]
        np.save(os.path.join(work, f"{name}.x.npy"), x)  # kept for reruns by hand (--keep)
        cells = [f"{exporter} export, ort vs torch {rel_l2(ort_out, torch_out):.2e}"]
        runs = [("cpu", "fp32", CPU_TOLERANCE)] + ([("cuda", "fp16", FP16_TOLERANCE)]
                                                   if args.cuda else [])
        for device, precision, tolerance in runs:
            try:
                out = run_model(args.bin, yaml_path, x, device=device, precision=precision)
            except RunError as exc:
                reason = (str(exc).strip().splitlines() or ["?"])[-1]
                cells.append(f"cnnrt {device} FAILED ({reason})")
                failed = failed or device == "cpu"
                continue
            error = rel_l2(out, ort_out)
            same_top1 = bool(np.all(out.argmax(1) == ort_out.argmax(1)))
            verdict = "ok" if error <= tolerance else "FAIL"
            failed = failed or error > tolerance
            cells.append(f"cnnrt {device} {precision} vs ort {error:.2e} (<= {tolerance:.0e}, "
                         f"same top-1 {same_top1}) {verdict}")
        rows.append((name, "; ".join(cells)))
    for name, text in rows:
        print(f"{name:14s} {text}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
