#!/usr/bin/env python3
"""What cuBLASLt's int8 GEMM reaches on AlexNet's linear shapes, through PyTorch.

torch._int_mm (int8 x int8 -> int32, cuBLASLt) next to fp16 torch.mm on the same M x K x N,
M the batch: the ceiling a cuBLASLt-based int8 linear can reach, to compare with `cnnrt profile
--compare --precision int8` (docs/PERFORMANCE.md run 40c).  CUDA events, median of 200 launches
after 20 warm-ups; random non-zero operands.  Needs a CUDA GPU and PyTorch.

  python3 tools/int8_mm_probe.py [--batch 64,256]
"""
import argparse

import torch

SHAPES = ((9216, 4096), (4096, 4096), (4096, 1000))  # AlexNet fc6, fc7, fc8: (K, N)


def median_ms(fn, iters=200):
    for _ in range(20):
        fn()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(iters)]
    for start, end in pairs:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return sorted(start.elapsed_time(end) for start, end in pairs)[iters // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", default="64,256", help="comma-separated M values")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("error: int8_mm_probe needs a CUDA device")
    for m in (int(b) for b in args.batch.split(",")):
        for k, n in SHAPES:
            x = torch.randint(1, 100, (m, k), dtype=torch.int8, device="cuda")
            w = torch.randint(1, 100, (n, k), dtype=torch.int8, device="cuda")
            xh, wh = x.half(), w.half()
            times = {"int8 x @ w.T": median_ms(lambda: torch._int_mm(x, w.t())),
                     "fp16 x @ w.T": median_ms(lambda: torch.mm(xh, wh.t()))}
            print(f"M={m} K={k} N={n}: " + ", ".join(
                f"{name} {ms * 1e3:.1f} us ({2 * m * k * n / ms / 1e9:.0f} TOP/s)"
                for name, ms in times.items()), flush=True)


if __name__ == "__main__":
    main()
