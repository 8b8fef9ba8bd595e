"""Shared fixtures of the Python module's tests (run by CTest as python.pytest, or by hand:
`PYTHONPATH=build/python python3 -m pytest python/tests`, or after `pip install .`)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("CNNRT_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tools"))

import cnnrt  # noqa: E402
import cnnrt_model  # noqa: E402
import reference_numpy  # noqa: E402

DIGITS_YAML = os.path.join(SOURCE_DIR, "models", "digits.yaml")


@pytest.fixture(scope="session")
def seed() -> int:
    value = int(os.environ.get("CNNRT_SEED", int.from_bytes(os.urandom(4), "little") % 1_000_000))
    print(f"seed {value} (rerun with CNNRT_SEED={value})")
    return value


@pytest.fixture(scope="session")
def digits_reference():
    """f(x) -> float64 output of models/digits.yaml by the independent numpy implementation."""
    model = cnnrt_model.load_model(DIGITS_YAML)
    weights = cnnrt_model.load_weights(model)
    return lambda x: reference_numpy.forward(model, weights, x)


@pytest.fixture(scope="session")
def cpu_digits():
    return cnnrt.Engine.load(DIGITS_YAML, device="cpu")


def random_digits(rng: np.random.Generator, batch: int) -> np.ndarray:
    """Inputs in the model's range ([0, 1] grey levels), never all zeros."""
    return rng.uniform(0.0, 1.0, size=(batch, 1, 8, 8)).astype(np.float32)


def rel_l2(actual: np.ndarray, reference: np.ndarray) -> float:
    reference = np.asarray(reference, dtype=np.float64)
    return float(np.linalg.norm(actual - reference) / max(np.linalg.norm(reference), 1e-30))
