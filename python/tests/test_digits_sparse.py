"""tools/digits_sparse.py (tools/train_digits.py --prune 2:4): the 2:4 projection keeps the two
largest magnitudes of every group, and every fine-tuning recipe returns exactly 2:4 weights.
Numpy only, synthetic data (no scikit-learn); a few seconds.  Also runs without the built module:
`python3 -m pytest --noconftest python/tests/test_digits_sparse.py`."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

SOURCE_DIR = os.environ.get(
    "CNNRT_SOURCE_DIR",
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tools"))

import digits_net  # noqa: E402
import digits_sparse  # noqa: E402


def groups_of_4(weight):
    """[O, groups, 4, taps] view of a weight along axis 1, zero-padded to a multiple of 4."""
    w = weight.reshape(weight.shape[0], weight.shape[1], -1)
    padded = np.zeros((w.shape[0], (w.shape[1] + 3) // 4 * 4, w.shape[2]))
    padded[:, :w.shape[1]] = w
    return padded.reshape(w.shape[0], -1, 4, w.shape[2])


@pytest.mark.parametrize("shape", [(32, 16, 3, 3), (5, 6, 3, 3), (10, 128), (3, 10)])
def test_mask_keeps_top_2_magnitudes_per_group(shape):
    rng = np.random.default_rng(1)
    weight = rng.normal(size=shape)
    mask = digits_sparse.mask_2_4(weight)
    assert mask.shape == weight.shape
    assert set(np.unique(mask)) <= {0.0, 1.0}
    kept, magnitude = groups_of_4(mask), groups_of_4(np.abs(weight))
    real = groups_of_4(np.ones(shape))  # 0 on the padding of a last partial group
    for o, g, t in np.ndindex(kept.shape[0], kept.shape[1], kept.shape[3]):
        size = int(real[o, g, :, t].sum())
        expected = np.sort(np.argsort(-magnitude[o, g, :size, t], kind="stable")[:min(2, size)])
        assert list(np.flatnonzero(kept[o, g, :, t])) == list(expected)
    assert digits_sparse.is_2_4(weight * mask)


def test_mask_tie_keeps_lower_index_and_is_2_4_rejects_3_of_4():
    weight = np.array([[1.0, -1.0, 1.0, 0.5, 0.0, 0.0, 0.0, 2.0]])
    assert digits_sparse.mask_2_4(weight).tolist() == [[1, 1, 0, 0, 1, 0, 0, 1]]
    assert not digits_sparse.is_2_4(weight)
    assert digits_sparse.is_2_4(weight * digits_sparse.mask_2_4(weight))


@pytest.mark.parametrize("recipe", ["mask", "srste", "srste=0.01+swa", "mask+swa+ls=0.1"])
def test_finetuned_weights_are_exactly_2_4(recipe):
    rng = np.random.default_rng(0)
    dense = digits_net.init_params(rng)
    x = rng.random((48, 1, 8, 8))
    y = rng.integers(0, 10, size=48)
    recipe = digits_sparse.parse_recipe(recipe)
    tuned = digits_sparse.finetune(dense, recipe, x, y, epochs=4, seed=0, base_lr=0.05)
    for key in digits_sparse.PRUNED_KEYS:
        assert digits_sparse.is_2_4(tuned[key]), key
        # Already its own 2:4 projection: every non-zero is among its group's top two.
        assert np.array_equal(tuned[key] * digits_sparse.mask_2_4(tuned[key]), tuned[key]), key
    for key in ("conv2.weight", "fc.weight"):
        assert np.count_nonzero(tuned[key]) <= tuned[key].size // 2
        assert not np.array_equal(tuned[key], dense[key] * digits_sparse.mask_2_4(dense[key]))
    if recipe.method == "mask":  # a fixed mask: the zeros of the dense weights' magnitude mask
        for key in digits_sparse.PRUNED_KEYS:
            assert not tuned[key][digits_sparse.mask_2_4(dense[key]) == 0].any()


def test_parse_recipe():
    assert str(digits_sparse.parse_recipe("srste")) == "srste"
    recipe = digits_sparse.parse_recipe("srste=2e-3+swa+ls=0.1")
    assert (recipe.method, recipe.decay, recipe.swa, recipe.smoothing) == ("srste", 2e-3, True, 0.1)
    assert str(recipe) == "srste=0.002+swa+ls=0.1"
    for bad in ("", "dense", "ls", "ls=1.5", "srste=x", "mask=1"):
        with pytest.raises(ValueError):
            digits_sparse.parse_recipe(bad)
