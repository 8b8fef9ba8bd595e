"""scikit-learn's 8x8 digits as cnnrt inputs, and the one train/test split every tool uses.

The images are 8x8 grey levels 0..16; cnnrt's models/digits.yaml takes them as [1, 8, 8] floats
in [0, 1] (pixel / 16).  The split is fixed (scikit-learn's train_test_split, 20 % test,
stratified by digit, random_state 0), so tools/train_digits.py, tools/eval_digits.py and the
e2e test see the same 1437 training and 360 test images.
"""

from __future__ import annotations

import numpy as np

TEST_FRACTION = 0.2
SPLIT_SEED = 0


def load_split():
    """Returns (x_train, y_train, x_test, y_test): x as float32 [N, 1, 8, 8] in [0, 1], y int64."""
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError as error:
        raise RuntimeError("scikit-learn is needed for the digits data: pip install scikit-learn"
                           ) from error
    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=TEST_FRACTION, random_state=SPLIT_SEED, stratify=y)
    return (np.ascontiguousarray(x_train), y_train, np.ascontiguousarray(x_test), y_test)
