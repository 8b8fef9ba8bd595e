"""The markdown report of tools/compare_torch.py (docs/PERFORMANCE.md tables): end-to-end
configs per batch, the detail table, compile times, the per-layer table and block 1."""

import os

import numpy as np


def fmt(value, spec: str = ".3f", missing: str = "–") -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return missing
    return format(value, spec)


def markdown(report: dict) -> str:
    info, lines = report["info"], []
    lines.append(f"### {os.path.basename(info['model'])} — cnnrt vs PyTorch "
                 f"({info['device']})\n")
    lines.append(f"torch {info['torch']}, CUDA {info['cuda']}, cuDNN {info['cudnn']}; commit "
                 f"{info['commit']}; {info['date']}; weights: {info['weights']}; median of "
                 f"{info['iters']} synchronised runs after {info['warmup']} warm-up; fp32 "
                 f"timed with cuDNN TF32 "
                 f"{'on' if info['tf32_while_timing_fp32']['cudnn_allow_tf32'] else 'off'}.\n")
    lines.append(f"`{info['command']}`\n")
    batches = sorted({r["batch"] for r in report["results"]})
    configs = list(dict.fromkeys(r["config"] for r in report["results"]))
    by_key = {(r["config"], r["batch"]): r for r in report["results"]}
    lines.append("| config | " + " | ".join(f"batch {b}" for b in batches) + " |")
    lines.append("|---|" + "---|" * len(batches))
    for config in configs:
        cells = []
        for b in batches:
            r = by_key.get((config, b), {})
            cell = f"{fmt(r.get('median_ms'))} ms"
            if r.get("cnnrt_speedup") and config != "cnnrt fp16":
                cell += f" (cnnrt {r['cnnrt_speedup']:.2f}×)"
            cells.append(cell)
        lines.append(f"| {config} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| config | batch | median ms | min ms | p90 ms | images/s | cnnrt speed-up | "
                 "rel L2 vs fp32 |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in report["results"]:
        lines.append(f"| {r['config']} | {r['batch']} | {fmt(r.get('median_ms'))} | "
                     f"{fmt(r.get('min_ms'))} | {fmt(r.get('p90_ms'))} | "
                     f"{fmt(r.get('images_per_s'), ',.0f')} | "
                     f"{fmt(r.get('cnnrt_speedup'), '.2f')} | "
                     f"{fmt(r.get('rel_l2_vs_fp32'), '.1e')} |")
    if report["compile_seconds"]:
        lines.append("\ntorch.compile time: " + ", ".join(
            f"batch {b}: {s:.0f} s" for b, s in report["compile_seconds"].items()))
    layers = report.get("per_layer") or {}
    if layers.get("rows"):
        lines.append(f"\n#### Per layer, batch {layers['batch']}, fp16 "
                     f"(blocks from {layers['source']})\n")
        lines.append("| cnnrt layer | sources | cnnrt kernel | cnnrt ms | cnnrt TFLOP/s | "
                     "PyTorch fp16 CL ms | PyTorch TFLOP/s | cnnrt speed-up |")
        lines.append("|---|---|---|---:|---:|---:|---:|---:|")
        torch_total = 0.0
        for r in layers["rows"]:
            torch_total += r.get("torch_fp16_cl_ms") or 0.0
            lines.append(f"| {r.get('name', '')} | {'+'.join(r.get('sources', []))} | "
                         f"{r.get('kernel', '–')} | {fmt(r.get('median_ms'))} | "
                         f"{fmt(r.get('tflops'), '.1f')} | {fmt(r.get('torch_fp16_cl_ms'))} | "
                         f"{fmt(r.get('torch_tflops'), '.1f')} | "
                         f"{fmt(r.get('cnnrt_speedup'), '.2f')} |")
        lines.append(f"| **total** | | | {fmt(layers.get('cnnrt_total_ms'))} | | "
                     f"{torch_total:.3f} | | |")
    block1 = layers.get("block1") or {}
    if block1.get("rows"):
        lines.append(f"\n#### Block 1 ({'+'.join(block1['sources'])}), batch "
                     f"{layers['batch']}\n")
        lines.append("| implementation | ms | TFLOP/s |")
        lines.append("|---|---:|---:|")
        for r in block1["rows"]:
            lines.append(f"| {r['impl']} | {fmt(r['median_ms'])} | {fmt(r['tflops'], '.1f')} |")
    if report["errors"]:
        lines.append("\nProblems during the run:\n")
        lines.extend(f"- {e.splitlines()[0][:300]}" for e in report["errors"])
    return "\n".join(lines) + "\n"


