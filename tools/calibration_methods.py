#!/usr/bin/env python3
"""The entropy calibration's search, as TensorRT publishes it and as cnnrt runs it, side by side
on known distributions: the table of docs/QUANTIZATION.md ("Calibration").

    python3 tools/calibration_methods.py

A numpy model of runtime/calibration.cpp's search (2048-bin histogram of the non-zero |x|,
candidates 128..2048 kept bins, 128 levels), not the code the runtime runs; the C++ search is
pinned by tests/runtime/test_calibration.cpp on the same kinds of distributions.
  published: P and Q each normalised to 1; a candidate whose Q is zero where P is not has an
             infinite divergence and is never chosen.
  cnnrt:     P and Q divided by the same total (the clipped mass is lost from Q); a bin of P
             whose level of Q is empty counts half an observation.
"""

import numpy as np

LEVELS, BINS = 128, 2048


def search(hist: np.ndarray, width: float, variant: str) -> float:
    total = hist.sum()
    if total == 0:
        return 0.0
    clipped = np.concatenate([np.cumsum(hist[::-1])[::-1], [0]])
    best_divergence, best_kept = np.inf, BINS
    for kept in range(LEVELS, BINS + 1):
        p = hist[:kept].astype(np.float64)
        p[-1] += clipped[kept]
        level = (np.arange(kept) * LEVELS) // kept
        mass = np.bincount(level, weights=hist[:kept], minlength=LEVELS)
        count = np.bincount(level, weights=(p > 0), minlength=LEVELS)
        q = np.where(p > 0, mass[level] / np.maximum(count[level], 1), 0.0)
        if variant == "published":
            kept_total = total - clipped[kept]
            if kept_total <= 0:
                continue
            p_n, q_n = p / total, q / kept_total
        else:
            p_n, q_n = p / total, np.where(q > 0, q, 0.5) / total
        nonzero = p_n > 0
        if np.any(q_n[nonzero] == 0):
            continue  # infinite divergence
        divergence = np.sum(p_n[nonzero] * np.log(p_n[nonzero] / q_n[nonzero]))
        if divergence < best_divergence:
            best_divergence, best_kept = divergence, kept
    return best_kept * width


def entropy_amax(values: np.ndarray, variant: str) -> float:
    magnitudes = np.abs(values)
    top = magnitudes.max()
    hist, _ = np.histogram(magnitudes[magnitudes > 0], bins=BINS, range=(0, top))
    return min(search(hist, top / BINS, variant), top)


def main() -> None:
    rng = np.random.default_rng(0)
    cases = {
        "uniform [-1, 1]": rng.uniform(-1, 1, 10**6),
        "gaussian sigma 1": rng.normal(0, 1, 10**6),
        "gaussian + 10 values at 1000": np.concatenate([rng.normal(0, 1, 10**6),
                                                        np.full(10, 1000.0)]),
        "ReLU(gaussian)": np.maximum(rng.normal(0, 1, 10**6), 0),
        "laplace b 1": rng.laplace(0, 1, 10**6),
        "17 levels k/16": rng.integers(0, 17, 10**6) / 16.0,
    }
    print(f"{'distribution':30} {'max |x|':>9} {'published':>10} {'cnnrt':>9} {'p99.99':>9}")
    for name, values in cases.items():
        print(f"{name:30} {np.abs(values).max():9.3f} {entropy_amax(values, 'published'):10.3f} "
              f"{entropy_amax(values, 'cnnrt'):9.3f} {np.percentile(np.abs(values), 99.99):9.3f}")


if __name__ == "__main__":
    main()
