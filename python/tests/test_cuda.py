"""The cnnrt module on the GPU (skipped without one): the same run against the numpy reference
and the CPU engine, profiles, and the CPU/GPU engines side by side in one process."""

from __future__ import annotations

import numpy as np
import pytest

import cnnrt
from conftest import DIGITS_YAML, random_digits, rel_l2

pytestmark = pytest.mark.skipif(not cnnrt.cuda_available(),
                                reason="no CUDA device (or a build without the CUDA backend)")


@pytest.mark.parametrize("precision, tolerance", [("fp32", 1e-4), ("fp16", 1e-2)])
def test_cuda_run_matches_the_reference(digits_reference, seed, precision, tolerance):
    engine = cnnrt.Engine.load(DIGITS_YAML, device="cuda", precision=precision)
    assert engine.device == "cuda"
    for batch in (1, 7):
        x = random_digits(np.random.default_rng(seed + batch), batch)
        y = engine.create_context(batch).run(x)
        assert y.shape == (batch, 10)
        assert rel_l2(y, digits_reference(x)) < tolerance


def test_cuda_profile_and_benchmark(seed):
    context = cnnrt.Engine.load(DIGITS_YAML, device="cuda").create_context(2)
    context.run(random_digits(np.random.default_rng(seed), 2))
    rows = context.profile(iterations=5)
    assert rows and all(row["median_ms"] >= 0 for row in rows)  # a view may take no time
    assert all(row["median_ms"] > 0 for row in rows if "conv1" in row["sources"])
    assert any("conv1" in row["sources"] for row in rows)
    times = context.benchmark(warmup=2, iterations=5)
    assert len(times) == 5 and all(t > 0 for t in times)


def test_bad_arrays_on_cuda_raise_value_error(seed):
    context = cnnrt.Engine.load(DIGITS_YAML, device="cuda").create_context(1)
    x = random_digits(np.random.default_rng(seed), 1)
    with pytest.raises(ValueError, match="float32"):
        context.run(x.astype(np.float64))
    with pytest.raises(ValueError, match="shape"):
        context.run(x[0])
    assert context.run(x).shape == (1, 10)
