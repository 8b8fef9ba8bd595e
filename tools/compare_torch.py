#!/usr/bin/env python3
"""cnnrt vs PyTorch on the same weights and inputs: the headline benchmark.

In one run, per batch size, on one GPU:
  PyTorch eager fp32 · eager fp16 NCHW · eager fp16 channels_last · both fp16 ones replayed from
  a CUDA graph · torch.compile fp16 (--compile, --compile-mode, max-autotune by default; its
  compile time is recorded) · cnnrt (`cnnrt bench --json`, a separate process on the same
  weights file).  Any model of the format: the PyTorch module is built from the YAML
  (tools/cnnrt_model.py to_torch_module: asymmetric / `same` padding, groups, relu6, clip,
  residual adds, concat), so both run the same weights.
Output agreement: rel L2 of every fp16 config and of cnnrt (`cnnrt run --device cuda
--precision fp16` on the same .npy input) against PyTorch fp32 with TF32 off.
Per layer (at --profile-batch): `cnnrt profile --json` rows next to PyTorch fp16 channels_last
timings of the same fused blocks (each row's source layers run as separate eager module calls),
and block 1 (conv1+relu+pool) in PyTorch eager fp32 / fp16 / torch.compile vs cnnrt's row.

Timing: torch.backends.cudnn.benchmark = True; after warm-up, each call is bracketed by CUDA
events and synchronised (latency, not pipelined throughput); median / min / p90 over --iters
runs.  "PyTorch fp32" keeps PyTorch's defaults (cuDNN may use TF32 for convolutions; the JSON
records the flags) unless --strict-fp32.  Nothing here is specific to AlexNet except defaults.

  python3 tools/compare_torch.py --model models/alexnet.yaml --bin build/bin \
      --batch 1,64,256 [--weights W | --seed S] [--iters 50] [--compile] \
      [--json OUT.json] [--markdown OUT.md]
  python3 tools/compare_torch.py --selftest     # numpy reference vs torch on the CPU
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

import numpy as np

TOOLS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TOOLS)
sys.path.insert(0, TOOLS)
from cnnrt_model import (Model, ModelError, infer_shapes, load_model,  # noqa: E402
                         load_weights, param_shapes, to_torch_module)
from compare_report import markdown  # noqa: E402
from cnnrt_run import RunError, run_model  # noqa: E402

CNNRT = "cnnrt"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=os.path.join(REPO, "models", "alexnet.yaml"))
    parser.add_argument("--weights", help="safetensors file (default: random weights from "
                                          "`cnnrt init-weights --seed S`)")
    parser.add_argument("--seed", type=int, default=0, help="weights and inputs seed")
    parser.add_argument("--bin", default=os.path.join(REPO, "build", "bin"),
                        help="folder with the cnnrt binary")
    parser.add_argument("--batch", default="1,64,256", help="comma-separated batch sizes")
    parser.add_argument("--iters", type=int, default=50, help="timed runs per config (>= 50)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--compile", action="store_true",
                        help="also torch.compile (--compile-mode; max-autotune: about a minute "
                             "per batch for AlexNet, ~5 min for EfficientNet-Lite0)")
    parser.add_argument("--compile-mode", default="max-autotune",
                        choices=["default", "reduce-overhead", "max-autotune",
                                 "max-autotune-no-cudagraphs"],
                        help="torch.compile mode of --compile")
    parser.add_argument("--profile-batch", type=int, default=64,
                        help="batch of the per-layer comparison (0: skip it)")
    parser.add_argument("--strict-fp32", action="store_true",
                        help="time PyTorch fp32 with TF32 disabled")
    parser.add_argument("--skip-cnnrt", action="store_true", help="PyTorch configs only")
    parser.add_argument("--json", help="write all results here")
    parser.add_argument("--markdown", help="write the tables here (for docs/PERFORMANCE.md)")
    parser.add_argument("--selftest", action="store_true",
                        help="check tools/reference_numpy.py and to_torch_module against each "
                             "other on the CPU (float64), then exit")
    args = parser.parse_args(argv)
    try:
        args.batches = [int(b) for b in args.batch.split(",") if b.strip()]
    except ValueError:
        parser.error(f"--batch must be comma-separated integers, got {args.batch!r}")
    if not args.batches or min(args.batches) < 1:
        parser.error("--batch needs positive batch sizes")
    if args.iters < 1 or args.warmup < 0:
        parser.error("--iters must be >= 1 and --warmup >= 0")
    return args


def random_weights(model: Model, seed: int) -> Dict[str, np.ndarray]:
    """PyTorch-like random weights made here (used when no cnnrt binary is at hand)."""
    rng = np.random.default_rng(seed)
    roles = {key: role for layer in model.layers for role, key in layer.params.items()}
    out = {}
    for key, shape in param_shapes(model).items():
        role = roles[key]
        if role == "weight" and len(shape) > 1:
            bound = 1.0 / np.sqrt(np.prod(shape[1:]))
            out[key] = rng.uniform(-bound, bound, shape)
        elif role == "running_var":
            out[key] = rng.uniform(0.5, 2.0, shape)
        elif role == "weight":  # batchnorm scale
            out[key] = rng.uniform(0.5, 1.5, shape)
        else:
            out[key] = rng.normal(0.0, 0.1, shape)
        out[key] = out[key].astype(np.float32)
    return out


# --- cnnrt subprocesses --------------------------------------------------------------------

class CnnrtError(Exception):
    pass


def run_cnnrt(bin_dir: str, *arguments, timeout: float = 900) -> str:
    command = [os.path.join(bin_dir, CNNRT)] + [str(a) for a in arguments]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CnnrtError(f"{' '.join(command)}: {exc}") from exc
    if result.returncode != 0:
        raise CnnrtError(f"{' '.join(command)} exited {result.returncode}: "
                         f"{(result.stderr or result.stdout).strip()[-2000:]}")
    return result.stdout


# --- timing --------------------------------------------------------------------------------

def time_cuda(torch, fn, iters: int, warmup: int) -> Dict[str, float]:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return {"median_ms": statistics.median(times), "min_ms": times[0],
            "p90_ms": times[min(len(times) - 1, int(round(0.9 * (len(times) - 1))))]}


def capture_graph(torch, module, static_input):
    """A CUDA graph of module(static_input); returns (replay function, static output)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # cuDNN benchmark picks its algorithms before capture
            module(static_input)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_output = module(static_input)
    graph.replay()
    torch.cuda.synchronize()
    return graph.replay, static_output, graph


def rel_l2(actual, reference) -> float:
    a = np.asarray(actual, dtype=np.float64)
    r = np.asarray(reference, dtype=np.float64)
    if a.shape != r.shape:
        return float("nan")
    return float(np.linalg.norm(a - r) / max(np.linalg.norm(r), 1e-300))


# --- fused blocks for the per-layer table --------------------------------------------------

def fallback_blocks(model: Model) -> List[dict]:
    """conv+relu(+maxpool), linear+relu, the rest alone (dropout dropped): what a fusing
    runtime runs as one kernel each.  Used when `cnnrt profile` is unavailable."""
    consumers: Dict[str, int] = {}
    for layer in model.layers:
        for name in layer.inputs:
            consumers[name] = consumers.get(name, 0) + 1
    blocks, i, layers = [], 0, model.layers
    while i < len(layers):
        layer = layers[i]
        if layer.op == "dropout":
            i += 1
            continue
        names = [layer.name]
        follow = {"conv": ["relu", "maxpool"], "linear": ["relu"]}.get(layer.op, [])
        for op in follow:
            nxt = layers[i + len(names)] if i + len(names) < len(layers) else None
            if (nxt is None or nxt.op != op or nxt.inputs != [names[-1]]
                    or consumers.get(names[-1], 0) != 1 or names[-1] == model.output):
                break
            names.append(nxt.name)
        blocks.append({"name": layer.name, "sources": names})
        i += len(names)
    return blocks


def block_flops(model: Model, shapes: Dict[str, List[int]], names: List[str]) -> float:
    """Multiply-adds x2 of the conv/linear layers among names, per sample."""
    flops = 0.0
    for layer in model.layers:
        if layer.name not in names:
            continue
        if layer.op == "conv":
            cin = shapes[layer.inputs[0]][0] // layer.attrs["groups"]
            kh, kw = layer.attrs["kernel"]
            flops += 2.0 * float(np.prod(shapes[layer.name])) * cin * kh * kw
        elif layer.op == "linear":
            flops += 2.0 * shapes[layer.inputs[0]][0] * layer.attrs["out_features"]
    return flops


def make_block_module(torch, module, model: Model, names: List[str]):
    """An nn.Module running only `names` (in model order) on their external inputs."""
    ordered = [layer for layer in model.layers if layer.name in names]
    produced = {layer.name for layer in ordered}
    external: List[str] = []
    for layer in ordered:
        for name in layer.inputs:
            if name not in produced and name not in external:
                external.append(name)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = module

        def forward(self, *inputs):
            env = dict(zip(external, inputs))
            return self.inner.run_layers(env, names)[ordered[-1].name]

    return Block().eval(), external


# --- the benchmark -------------------------------------------------------------------------

def prepare_weights(args, model, work: str, use_cnnrt: bool, errors: List[str]):
    """(path, description) of the weights both sides run: --weights, else cnnrt init-weights,
    else (no usable cnnrt) the same distribution drawn here."""
    if args.weights:
        return args.weights, args.weights
    weights_path = os.path.join(work, "weights.safetensors")
    try:
        if not use_cnnrt:
            raise CnnrtError("--skip-cnnrt")
        run_cnnrt(args.bin, "init-weights", args.model, "--seed", args.seed, "-o", weights_path)
        return weights_path, f"cnnrt init-weights --seed {args.seed}"
    except CnnrtError as exc:
        from safetensors.numpy import save_file

        if use_cnnrt:
            errors.append(f"init-weights: {exc}")
        save_file(random_weights(model, args.seed), weights_path)
        return weights_path, f"python random_weights(seed={args.seed})"


def run_info(torch, args, weights_source: str, default_tf32: dict, timing_tf32: dict) -> dict:
    return {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "commit": git_commit(),
        "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
        "model": os.path.relpath(args.model, REPO) if args.model.startswith(REPO)
        else args.model,
        "weights": weights_source,
        "iters": args.iters, "warmup": args.warmup,
        "timing": "CUDA events around each synchronised call; median/min/p90",
        "tf32_defaults": default_tf32, "tf32_while_timing_fp32": timing_tf32,
    }


def bench_cnnrt(args, weights_path: str, work: str, errors: List[str]) -> Dict[int, dict]:
    """cnnrt bench, one process for all batch sizes: {batch: its JSON row}."""
    rows: Dict[int, dict] = {}
    bench_json = os.path.join(work, "bench.json")
    try:
        # The CLI insists on >= 50 timed iterations.
        run_cnnrt(args.bin, "bench", args.model, "--weights", weights_path, "--batch",
                  ",".join(map(str, args.batches)), "--precision", "fp16", "--device",
                  "cuda", "--warmup", args.warmup, "--iterations", max(50, args.iters),
                  "--json", bench_json)
        with open(bench_json, encoding="utf-8") as handle:
            for row in json.load(handle).get("results", []):
                rows[int(row["batch"])] = row
    except (CnnrtError, OSError, ValueError, KeyError) as exc:
        errors.append(f"bench: {exc}")
        print(f"warning: cnnrt bench failed: {exc}", file=sys.stderr)
    return rows


def torch_configs(torch, args, batch: int, modules, inputs, errors: List[str],
                  compile_seconds: Dict[int, float]):
    """The PyTorch configurations timed at one batch: (label, fn[, static output]) and the CUDA
    graphs to keep alive while they run."""
    fp32, fp16, fp16_cl = modules
    x32, x16, x16_cl = inputs
    configs = [
        ("PyTorch fp32 eager", lambda: fp32(x32)),
        ("PyTorch fp16 eager NCHW", lambda: fp16(x16)),
        ("PyTorch fp16 eager channels_last", lambda: fp16_cl(x16_cl)),
    ]
    graphs = []
    for label, module, static in (("PyTorch fp16 NCHW + CUDA graph", fp16, x16),
                                  ("PyTorch fp16 channels_last + CUDA graph", fp16_cl, x16_cl)):
        try:
            replay, static_out, graph = capture_graph(torch, module, static)
            graphs.append(graph)
            configs.append((label, replay, static_out))
        except RuntimeError as exc:
            errors.append(f"{label} batch {batch}: {exc}")
    if args.compile:
        try:
            torch._dynamo.reset()
            compiled = torch.compile(fp16, mode=args.compile_mode, dynamic=False)
            started = time.time()
            for _ in range(3):  # compile, then cudagraph-tree warm-up / recording
                compiled(x16)
            torch.cuda.synchronize()
            compile_seconds[batch] = time.time() - started
            print(f"  torch.compile batch {batch}: {compile_seconds[batch]:.1f} s", flush=True)
            configs.append((f"torch.compile {args.compile_mode} fp16", lambda: compiled(x16)))
        except Exception as exc:  # noqa: BLE001 (inductor raises many types)
            errors.append(f"torch.compile batch {batch}: {exc}")
    return configs, graphs


def time_configs(torch, args, batch: int, configs, reference, results: List[dict]) -> None:
    for config in configs:
        label, fn = config[0], config[1]
        if len(config) > 2:  # CUDA graph: its output lives in the static tensor
            fn()
            output = config[2].double().cpu().numpy()
        else:
            output = fn().double().cpu().numpy()
        stats = time_cuda(torch, fn, args.iters, args.warmup)
        results.append(dict(config=label, batch=batch, **stats,
                            images_per_s=batch * 1000.0 / stats["median_ms"],
                            rel_l2_vs_fp32=rel_l2(output, reference)))
        print(f"  batch {batch:4d}  {label:42s} {stats['median_ms']:9.3f} ms  "
              f"rel L2 {results[-1]['rel_l2_vs_fp32']:.2e}", flush=True)


def cnnrt_row(args, batch: int, bench: Optional[dict], x_cpu, reference, weights_path: str,
              errors: List[str]) -> dict:
    """cnnrt's row at one batch: bench's timing, and the output error from one `cnnrt run`."""
    row = {"config": "cnnrt fp16", "batch": batch}
    if bench is not None:
        row.update({k: bench.get(k) for k in ("median_ms", "min_ms", "p90_ms", "arena_bytes",
                                              "weight_bytes")})
        row["images_per_s"] = batch * 1000.0 / bench["median_ms"]
    try:
        output = run_model(args.bin, args.model, x_cpu.numpy(), weights=weights_path,
                           device="cuda", precision="fp16")
        row["rel_l2_vs_fp32"] = rel_l2(output, reference)
    except (RunError, OSError, ValueError) as exc:
        errors.append(f"run batch {batch}: {exc}")
    print(f"  batch {batch:4d}  {'cnnrt fp16':42s} {row.get('median_ms') or float('nan'):9.3f} ms"
          f"  rel L2 {row.get('rel_l2_vs_fp32', float('nan')):.2e}", flush=True)
    return row


def benchmark(args) -> dict:
    try:
        import torch
    except ImportError:
        print("error: PyTorch is needed (pip install torch)", file=sys.stderr)
        sys.exit(1)
    if not torch.cuda.is_available():
        print("error: no CUDA device visible to PyTorch", file=sys.stderr)
        sys.exit(1)

    model = load_model(args.model)
    shapes = infer_shapes(model)
    work = tempfile.mkdtemp(prefix="cnnrt_compare_")
    errors: List[str] = []
    use_cnnrt = not args.skip_cnnrt
    weights_path, weights_source = prepare_weights(args, model, work, use_cnnrt, errors)
    weights = load_weights(model, weights_path)

    torch.backends.cudnn.benchmark = True
    default_tf32 = {"cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
                    "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32}
    if args.strict_fp32:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    timing_tf32 = {"cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
                   "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32}

    def strict_fp32(fn):
        saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
        try:
            return fn()
        finally:
            torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved

    device = torch.device("cuda")
    fp32 = to_torch_module(model, weights).to(device)
    fp16 = copy.deepcopy(fp32).half()
    fp16_cl = copy.deepcopy(fp16).to(memory_format=torch.channels_last)

    info = run_info(torch, args, weights_source, default_tf32, timing_tf32)
    print(f"device {info['device']} · torch {info['torch']} · CUDA {info['cuda']} · "
          f"cuDNN {info['cudnn']} · commit {info['commit']}", flush=True)
    cnnrt_bench = bench_cnnrt(args, weights_path, work, errors) if use_cnnrt else {}

    results: List[dict] = []
    compile_seconds: Dict[int, float] = {}
    generator = torch.Generator().manual_seed(args.seed + 1)
    with torch.no_grad():
        for batch in args.batches:
            x_cpu = torch.randn([batch] + model.input_shape, generator=generator)
            x32 = x_cpu.to(device)
            x16 = x32.half()
            x16_cl = x16.contiguous(memory_format=torch.channels_last)
            reference = strict_fp32(lambda: fp32(x32).double().cpu().numpy())
            configs, graphs = torch_configs(torch, args, batch, (fp32, fp16, fp16_cl),
                                            (x32, x16, x16_cl), errors, compile_seconds)
            time_configs(torch, args, batch, configs, reference, results)
            del graphs, configs
            torch.cuda.empty_cache()
            if use_cnnrt:
                results.append(cnnrt_row(args, batch, cnnrt_bench.get(batch), x_cpu, reference,
                                         weights_path, errors))

    for row in results:
        cnnrt_result = next((r for r in results if r["config"] == "cnnrt fp16"
                             and r["batch"] == row["batch"] and r.get("median_ms")), None)
        if cnnrt_result and row.get("median_ms"):
            row["cnnrt_speedup"] = row["median_ms"] / cnnrt_result["median_ms"]

    layers = per_layer(torch, args, model, shapes, fp32, fp16, fp16_cl, weights_path, errors)
    return {"info": info, "results": results, "compile_seconds": compile_seconds,
            "per_layer": layers, "errors": errors}


def per_layer(torch, args, model, shapes, fp32, fp16, fp16_cl, weights_path, errors) -> dict:
    batch = args.profile_batch
    if batch <= 0:
        return {}
    profile = None
    if not args.skip_cnnrt:
        profile_json = os.path.join(tempfile.mkdtemp(prefix="cnnrt_profile_"), "profile.json")
        base = ["profile", args.model, "--batch", batch, "--precision", "fp16", "--device",
                "cuda", "--iterations", max(50, args.iters), "--json", profile_json]
        for extra in (["--weights", weights_path], []):  # timing does not need real weights
            try:
                run_cnnrt(args.bin, *(base + extra))
                with open(profile_json, encoding="utf-8") as handle:
                    profile = json.load(handle)
                break
            except (CnnrtError, OSError, ValueError) as exc:
                if not extra:
                    errors.append(f"profile: {exc}")
    known = {layer.name for layer in model.layers}
    rows = [dict(r) for r in profile.get("layers", [])] if profile else [
        {"name": b["name"], "sources": b["sources"]} for b in fallback_blocks(model)]

    device = torch.device("cuda")
    generator = torch.Generator().manual_seed(args.seed + 2)
    x_cpu = torch.randn([batch] + model.input_shape, generator=generator)
    with torch.no_grad():
        x16_cl = x_cpu.to(device).half().contiguous(memory_format=torch.channels_last)
        env16 = fp16_cl.run_layers({"input": x16_cl}, known)
        block1 = None
        for row in rows:
            names = [n for n in row.get("sources", []) if n in known]
            if not names:
                continue
            block, external = make_block_module(torch, fp16_cl, model, names)
            inputs = [env16[name] for name in external]
            stats = time_cuda(torch, lambda: block(*inputs), args.iters, args.warmup)
            flops = block_flops(model, shapes, names) * batch
            row["torch_fp16_cl_ms"] = stats["median_ms"]
            row["torch_tflops"] = flops / stats["median_ms"] / 1e9 if flops else None
            if row.get("median_ms"):
                row["cnnrt_speedup"] = stats["median_ms"] / row["median_ms"]
            if block1 is None and model.layers[0].name in names:
                block1 = (row, names, external)

        comparison = []
        if block1 is not None:
            row, names, external = block1
            flops = block_flops(model, shapes, names) * batch
            x32 = x_cpu.to(device)
            variants = [("PyTorch fp32 eager", fp32, x32),
                        ("PyTorch fp16 eager NCHW", fp16, x32.half()),
                        ("PyTorch fp16 eager channels_last", fp16_cl, x16_cl)]
            for label, module, x in variants:
                env = module.run_layers({"input": x}, known) if external != ["input"] else {
                    "input": x}
                block, _ = make_block_module(torch, module, model, names)
                inputs = [env[name] for name in external]
                stats = time_cuda(torch, lambda: block(*inputs), args.iters, args.warmup)
                comparison.append({"impl": label, "median_ms": stats["median_ms"],
                                   "tflops": flops / stats["median_ms"] / 1e9})
            if args.compile:
                try:
                    torch._dynamo.reset()
                    block, _ = make_block_module(torch, fp16, model, names)
                    compiled = torch.compile(block, mode=args.compile_mode, dynamic=False)
                    env = fp16.run_layers({"input": x32.half()}, known) \
                        if external != ["input"] else {"input": x32.half()}
                    inputs = [env[name] for name in external]
                    for _ in range(3):
                        compiled(*inputs)
                    stats = time_cuda(torch, lambda: compiled(*inputs), args.iters, args.warmup)
                    comparison.append({"impl": f"torch.compile {args.compile_mode} fp16",
                                       "median_ms": stats["median_ms"],
                                       "tflops": flops / stats["median_ms"] / 1e9})
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"torch.compile block1: {exc}")
            if row.get("median_ms"):
                comparison.append({"impl": f"cnnrt ({row.get('kernel', '?')})",
                                   "median_ms": row["median_ms"],
                                   "tflops": row.get("tflops") or flops / row["median_ms"] / 1e9})
    return {"batch": batch, "source": "cnnrt profile" if profile else "fallback grouping",
            "cnnrt_total_ms": profile.get("total_ms") if profile else None, "rows": rows,
            "block1": {"sources": block1[1] if block1 else [], "rows": comparison}}


def git_commit() -> str:
    # A copy of the tree without .git (e.g. sent to a GPU machine) names its commit in
    # CNNRT_COMMIT.
    if os.environ.get("CNNRT_COMMIT"):
        return os.environ["CNNRT_COMMIT"]
    try:
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "-uno"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (head + ("-dirty" if dirty else "")) or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


# --- self-test -----------------------------------------------------------------------------

def selftest() -> int:
    """reference_numpy vs to_torch_module (float64, CPU) on the e2e small models and AlexNet:
    two independent readings of the format against PyTorch's own ops."""
    import torch
    import reference_numpy
    from cnnrt_model import parse_model

    sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
    from test_small_models import MODELS

    cases = [(name, parse_model(text, f"{name}.yaml"), batch)
             for name, (text, batch, _) in MODELS.items()]
    alexnet = os.path.join(REPO, "models", "alexnet.yaml")
    if os.path.exists(alexnet):
        cases.append(("alexnet", load_model(alexnet), 2))
    worst = 0.0
    for index, (name, model, batch) in enumerate(cases):
        weights = random_weights(model, index)
        x = np.random.default_rng(index).standard_normal([batch] + model.input_shape)
        expected = reference_numpy.forward(model, weights, x)
        module = to_torch_module(model, weights).double()
        with torch.no_grad():
            actual = module(torch.from_numpy(x)).numpy()
        error = rel_l2(actual, expected)
        worst = max(worst, error)
        print(f"{name:16s} numpy float64 vs torch float64: rel L2 {error:.2e}")
    ok = worst <= 1e-10
    print("selftest " + ("PASS" if ok else "FAIL") + f" (worst {worst:.2e}, tolerance 1e-10)")
    return 0 if ok else 1


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.selftest:
        return selftest()
    try:
        report = benchmark(args)
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    text = markdown(report)
    print("\n" + text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2, default=str)
        print(f"wrote {args.json}")
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as handle:
            handle.write(text)
        print(f"wrote {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
