#!/usr/bin/env python3
"""Memory-bound layers against the DRAM floor: bytes moved per layer over a measured copy.

Reads `cnnrt profile --json` output (each row has the layer's minimum bytes moved — inputs +
output + weights at the profiled batch — and its median time), keeps the rows whose kernel
matches --kernel (default: conv_fp16_depthwise), and states per layer: MB moved, time, achieved
GB/s and the fraction of the floor, where the floor is bytes / (the bandwidth of a plain device
copy measured on the same GPU, read + write).  The copy is a torch tensor copy of --copy-mb MB,
median of 30 after warm-up (measure, not the nominal HBM figure); --copy-gbs skips it.

  python3 tools/roofline_report.py PROFILE.json [--kernel NAME] [--copy-gbs X] [--markdown OUT]
"""

import argparse
import json
import statistics
import sys


def copy_bandwidth_gbs(megabytes: int) -> float:
    import torch

    count = megabytes * (1 << 20) // 2
    x = torch.empty(count, dtype=torch.float16, device="cuda").uniform_()
    y = torch.empty_like(x)
    for _ in range(5):
        y.copy_(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(30):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        y.copy_(x)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return 2.0 * count * 2 / (statistics.median(times) * 1e-3) / 1e9


def report(profile: dict, kernel: str, copy_gbs: float) -> str:
    rows = [r for r in profile.get("layers", []) if r.get("kernel", "").startswith(kernel)]
    lines = [f"Copy bandwidth (read + write, measured): {copy_gbs:.0f} GB/s; batch "
             f"{profile.get('batch', '?')}; kernel {kernel}\n",
             "| layer | variant | MB moved | ms | GB/s | floor ms | % of floor |",
             "|---|---|---:|---:|---:|---:|---:|"]
    total_bytes = total_ms = 0.0
    for r in rows:
        mb, ms = r["bytes"] / 1e6, r["median_ms"]
        floor_ms = r["bytes"] / (copy_gbs * 1e9) * 1e3
        total_bytes += r["bytes"]
        total_ms += ms
        lines.append(f"| {r['name']} | {r.get('variant', '')} | {mb:.1f} | {ms:.4f} | "
                     f"{r['bytes'] / ms / 1e6:.0f} | {floor_ms:.4f} | {100 * floor_ms / ms:.0f}% |")
    if rows:
        floor = total_bytes / (copy_gbs * 1e9) * 1e3
        lines.append(f"| **all {len(rows)}** | | {total_bytes / 1e6:.1f} | {total_ms:.4f} | "
                     f"{total_bytes / total_ms / 1e6:.0f} | {floor:.4f} | "
                     f"{100 * floor / total_ms:.0f}% |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("profile", help="cnnrt profile --json output")
    parser.add_argument("--kernel", default="conv_fp16_depthwise", help="kernel name prefix")
    parser.add_argument("--copy-gbs", type=float, help="copy bandwidth (skip the measurement)")
    parser.add_argument("--copy-mb", type=int, default=1024, help="size of the measured copy")
    parser.add_argument("--markdown", help="also write the table here")
    args = parser.parse_args()
    try:
        with open(args.profile, encoding="utf-8") as handle:
            profile = json.load(handle)
    except (OSError, ValueError) as exc:
        print(f"error: {args.profile}: {exc}", file=sys.stderr)
        return 1
    gbs = args.copy_gbs if args.copy_gbs else copy_bandwidth_gbs(args.copy_mb)
    text = report(profile, args.kernel, gbs)
    print(text)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as handle:
            handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
