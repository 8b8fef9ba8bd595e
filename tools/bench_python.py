"""What the Python module adds to a run: Context.run (numpy in, numpy out) against the C++
ExecutionContext::run on the same context, input and process, host to host.

    python3 tools/bench_python.py [--model models/alexnet.yaml] [--device cuda] [--batch 1]
                                  [--iterations 2000] [--rounds 5] [--json out.json]

Both sides are timed per call (Python: time.perf_counter_ns around context.run; C++: a
steady_clock loop inside the module, cnnrt._cnnrt._time_cpp_run) in alternating rounds after a
warm-up, so drift hits both alike; the result is the difference of the medians.  The
device-resident forward (Context.benchmark, CUDA events, no host copies) is printed beside them,
and PyTorch's eager round trip (numpy -> GPU -> numpy, torchvision's AlexNet, fp16) when torch
and torchvision are there.  Weights are random (seeded, never zeros): timing does not depend on
their values.  docs/PERFORMANCE.md records the results.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))


def random_weights(model_path: str, out_path: str, seed: int) -> None:
    """He-scaled normal weights for every parameter the model names (tools/cnnrt_model.py)."""
    import cnnrt_model
    from safetensors.numpy import save_file
    rng = np.random.default_rng(seed)
    tensors = {}
    for key, shape in cnnrt_model.param_shapes(cnnrt_model.load_model(model_path)).items():
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        values = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        if key.endswith("running_var"):  # a variance must be positive
            values = np.abs(values) + 0.5
        tensors[key] = values.astype(np.float32)
    save_file(tensors, out_path)


def time_python(context, x, iterations: int) -> list:
    times = []
    for _ in range(iterations):
        start = time.perf_counter_ns()
        context.run(x)
        times.append((time.perf_counter_ns() - start) / 1e3)
    return times


def import_torch():
    """torch and torchvision, or None.  Imported before cnnrt's module: both load cuBLAS by the
    same soname, and the process then uses torch's (newer or equal) build for both, as
    tools/compare_torch.py does."""
    try:
        import torch
        import torchvision
    except Exception as exc:  # noqa: BLE001 (any import failure only drops the torch row)
        print(f"(no PyTorch row: {type(exc).__name__}: {exc})")
        return None
    return (torch, torchvision) if torch.cuda.is_available() else None


def time_torch(torch_modules, batch: int, x: np.ndarray, iterations: int):
    if torch_modules is None:
        return None
    torch, torchvision = torch_modules
    model = torchvision.models.alexnet().eval().half().cuda()
    times = []
    with torch.inference_mode():
        for i in range(iterations + 50):
            start = time.perf_counter_ns()
            out = model(torch.from_numpy(x).cuda().half()).float().cpu().numpy()
            if i >= 50:
                times.append((time.perf_counter_ns() - start) / 1e3)
    assert out.shape[0] == batch
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=os.path.join(ROOT, "models", "alexnet.yaml"))
    parser.add_argument("--weights", help="safetensors file (default: random, seeded)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=2000, help="timed calls per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()

    torch_modules = import_torch() if args.device != "cpu" else None
    import cnnrt
    with tempfile.TemporaryDirectory() as scratch:
        weights = args.weights
        if weights is None:
            weights = os.path.join(scratch, "w.safetensors")
            random_weights(args.model, weights, args.seed)
        engine = cnnrt.Engine.load(args.model, weights, device=args.device,
                                   precision=args.precision)
    context = engine.create_context(args.batch)
    x = np.random.default_rng(args.seed + 1).standard_normal(context.input_shape).astype(np.float32)

    python_us, cpp_us = [], []
    time_python(context, x, args.warmup)
    cnnrt._cnnrt._time_cpp_run(context, x, args.warmup, 1)
    for _ in range(args.rounds):  # alternating rounds: drift hits both sides alike
        python_us += time_python(context, x, args.iterations)
        cpp_us += cnnrt._cnnrt._time_cpp_run(context, x, 0, args.iterations)
    device_ms = context.benchmark(warmup=args.warmup, iterations=args.iterations)
    torch_us = (time_torch(torch_modules, args.batch, x, args.iterations)
                if engine.device == "cuda" else None)

    def summary(values):
        return {"median_us": statistics.median(values), "p10_us": float(np.percentile(values, 10)),
                "p90_us": float(np.percentile(values, 90)), "count": len(values)}

    result = {
        "model": engine.name, "device": engine.device, "precision": engine.precision,
        "batch": args.batch, "cnnrt_version": cnnrt.__version__,
        "python_run": summary(python_us), "cpp_run": summary(cpp_us),
        "device_forward": summary([t * 1e3 for t in device_ms]),
        "torch_eager_round_trip": summary(torch_us) if torch_us else None,
    }
    added = result["python_run"]["median_us"] - result["cpp_run"]["median_us"]
    result["python_added_us"] = added
    print(f"{engine.name} on {engine.device} ({engine.precision}), batch {args.batch}: "
          f"{args.rounds} x {args.iterations} calls per side")
    print("| path | median µs | p10 µs | p90 µs |")
    print("|---|---:|---:|---:|")
    rows = [("Python Context.run (numpy -> numpy)", "python_run"),
            ("C++ ExecutionContext::run (host -> host)", "cpp_run"),
            ("forward only, input on device (Context.benchmark)", "device_forward"),
            ("PyTorch eager fp16 round trip (numpy -> GPU -> numpy)", "torch_eager_round_trip")]
    for label, key in rows:
        if result[key]:
            r = result[key]
            print(f"| {label} | {r['median_us']:.1f} | {r['p10_us']:.1f} | {r['p90_us']:.1f} |")
    print(f"Python adds {added:.1f} µs per call (median difference)")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
