"""Shared plumbing of the Python end-to-end tests (not a test itself: CTest globs test_*.py).

Each test is a script run by CTest as `python3 FILE --bin-dir BIN --source-dir SRC`; exit code
0 = pass, 1 = fail, 77 = skipped.  The golden numbers come from tools/reference_numpy.py, an
independent float64 implementation, never from the C++ code under test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

PASS, FAIL, SKIP = 0, 1, 77


def fail(message: str) -> None:
    print(f"FAIL: {message}", flush=True)
    sys.exit(FAIL)


def skip(message: str) -> None:
    print(f"SKIPPED: {message}", flush=True)
    sys.exit(SKIP)


def setup(description: str):
    """Parses --bin-dir/--source-dir, checks the Python packages, puts tools/ on sys.path.
    Returns (args, workdir); the workdir is removed at exit unless --keep."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bin-dir", required=True, help="folder holding the cnnrt binary")
    parser.add_argument("--source-dir", required=True, help="repository root")
    parser.add_argument("--seed", type=int, default=None, help="fix the random seed")
    parser.add_argument("--keep", action="store_true", help="keep the temporary files")
    args = parser.parse_args()
    missing = []
    for package in ("numpy", "yaml", "safetensors"):
        try:
            __import__(package)
        except ImportError:
            missing.append("pyyaml" if package == "yaml" else package)
    if missing:
        fail(f"python packages missing: {', '.join(missing)} "
             f"(pip install {' '.join(missing)}; scripts/test.sh installs them)")
    sys.path.insert(0, os.path.join(args.source_dir, "tools"))
    if args.seed is None:
        args.seed = int.from_bytes(os.urandom(4), "little") % 1_000_000
    print(f"seed {args.seed} (rerun with --seed {args.seed})", flush=True)
    cli = os.path.join(args.bin_dir, "cnnrt")
    if not os.path.exists(cli):
        fail(f"{cli} not found: build the 'cnnrt' target first")
    args.cli = cli
    workdir = tempfile.mkdtemp(prefix="cnnrt_e2e_")
    if args.keep:
        print(f"temporary files kept in {workdir}")
    else:
        import atexit
        atexit.register(shutil.rmtree, workdir, True)
    return args, workdir


def run_cli(cli: str, *arguments: str, check: bool = True, timeout: float = 600):
    """Runs the cnnrt CLI; on failure (when check) fails the test with its stderr."""
    command = [cli] + [str(a) for a in arguments]
    started = time.time()
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(f"timed out after {timeout:.0f} s: {' '.join(command)}")
    if check and result.returncode != 0:
        fail(f"exit {result.returncode}: {' '.join(command)}\n{result.stdout}{result.stderr}")
    print(f"  [{time.time() - started:6.1f} s] {' '.join(command[1:3])} ...", flush=True)
    return result


def rel_l2(actual, reference) -> float:
    import numpy as np

    actual = np.asarray(actual, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if actual.shape != reference.shape:
        fail(f"output shape {list(actual.shape)} != reference shape {list(reference.shape)}")
    if not np.all(np.isfinite(actual)):
        return float("inf")
    return float(np.linalg.norm(actual - reference) / max(np.linalg.norm(reference), 1e-300))


def gpu_present() -> bool:
    """True when `nvidia-smi -L` lists a GPU."""
    try:
        result = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and "GPU" in result.stdout
