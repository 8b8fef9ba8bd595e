"""Running a cnnrt model from the tools: through the Python module when it can be imported
(`pip install .`, or the BUILD/python folder beside the --bin folder of a CMake build), else
through the `cnnrt run` CLI with .npy files (a build without nanobind has no module).  One
function, so every tool runs models the same way and reports the same errors.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from typing import Optional

import numpy as np


class RunError(Exception):
    """The library's (or the CLI's) error message."""


def load_module(bin_dir: Optional[str] = None):
    """The cnnrt module, or None.  bin_dir (a CMake build's bin/) adds its ../python folder."""
    if bin_dir:
        build_python = os.path.join(os.path.dirname(os.path.abspath(bin_dir)), "python")
        if os.path.isdir(os.path.join(build_python, "cnnrt")) and build_python not in sys.path:
            sys.path.insert(0, build_python)
    try:
        import cnnrt
    except ImportError:
        return None
    return cnnrt


def run_model(bin_dir: str, model: str, x: np.ndarray, weights: Optional[str] = None,
              device: str = "cpu", precision: str = "auto", plan: Optional[str] = None,
              calibration: Optional[str] = None, timeout: float = 900) -> np.ndarray:
    """Runs `model` on the batch x [N, ...] at batch N and returns the float32 output."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    cnnrt = load_module(bin_dir)
    if cnnrt is not None and (device != "cuda" or cnnrt.cuda_available()):
        try:
            engine = cnnrt.Engine.load(model, weights, device=device, precision=precision,
                                       plan=plan, calibration=calibration)
            return engine.create_context(x.shape[0]).run(x)
        except cnnrt.Error as exc:
            raise RunError(str(exc)) from exc
    with tempfile.TemporaryDirectory(prefix="cnnrt_run_") as work:
        input_path, output_path = os.path.join(work, "x.npy"), os.path.join(work, "y.npy")
        np.save(input_path, x)
        command = [os.path.join(bin_dir, "cnnrt"), "run", model, "--input", input_path,
                   "--output", output_path, "--device", device, "--precision", precision]
        for flag, value in (("--weights", weights), ("--plan", plan), ("--calib", calibration)):
            if value:
                command += [flag, value]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RunError(f"{' '.join(command)}: {exc}") from exc
        if result.returncode != 0:
            raise RunError((result.stderr or result.stdout).strip()[-2000:])
        return np.load(output_path)
