#!/usr/bin/env python3
"""Real-data int8 accuracy: models/digits (trained by tools/train_digits.py) on the test split of
scikit-learn's digits, through cnnrt calibrate and the Python module (or `cnnrt run` when the
module is not built; tools/eval_digits.py).

Pass: fp32 test accuracy >= 95 %, and for each calibration method (minmax, percentile,
entropy; calibrated on the training split) int8 test accuracy within 0.5 percentage point of
fp32.  Skipped (77) without scikit-learn (the data set comes from it).  Takes a few seconds.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as util  # noqa: E402

FP32_MINIMUM = 95.0
INT8_MAX_LOSS_POINTS = 0.5


def main():
    args, workdir = util.setup(__doc__.splitlines()[0])
    try:
        import sklearn  # noqa: F401
    except ImportError:
        util.skip("scikit-learn is not installed (pip install scikit-learn)")
    import eval_digits  # tools/, put on sys.path by setup

    model = os.path.join(args.source_dir, "models", "digits.yaml")
    try:
        rows = eval_digits.evaluate(args.cli, model, eval_digits.METHODS, workdir)
    except RuntimeError as error:
        util.fail(str(error))
    print(eval_digits.table(rows))
    fp32 = rows[0]["accuracy"]
    if fp32 < FP32_MINIMUM:
        util.fail(f"fp32 test accuracy {fp32:.2f} % < {FP32_MINIMUM} %")
    for row in rows[1:]:
        if row["delta_points"] < -INT8_MAX_LOSS_POINTS:
            util.fail(f"int8 ({row['method']}) test accuracy {row['accuracy']:.2f} % is more than "
                      f"{INT8_MAX_LOSS_POINTS} point below fp32 ({fp32:.2f} %)")
    print("PASS")
    return util.PASS


if __name__ == "__main__":
    sys.exit(main())
