#!/usr/bin/env python3
"""Trains models/digits: a small CNN on scikit-learn's 8x8 digits, in numpy only.

    python3 tools/train_digits.py [--out-dir models] [--epochs 60] [--seed 0]
    python3 tools/train_digits.py --prune 2:4 [--weights models/digits.safetensors]
        [--schedules 10/0.01,20/0.01,...] [--distill T] [--seeds 1] --out FILE.safetensors
    python3 tools/train_digits.py --prune 2:4 --finetune-epochs 40 --finetune-lr 0.02 --out F

With --prune 2:4 it loads the dense weights, prunes conv2 and fc 2:4 by magnitude (in every 4
consecutive input channels at each output channel and kernel tap, or 4 consecutive input
features, the two largest |w| stay: graph/passes_sparsity.h's rule; conv1 has one input channel,
so it is 2:4 already), fine-tunes with the masks kept (the pruned weights and their momentum are
zeroed after every step), and writes the weights to --out (the model YAML is unchanged).

--distill T (T > 0) fine-tunes by distilling the dense model (Hinton et al. 2015, "Distilling
the knowledge in a neural network"): the loss is DISTILL_WEIGHT times T^2 * KL(teacher ||
student) of the logits softened by the temperature T, plus 1 - DISTILL_WEIGHT times the
cross-entropy with the labels; the teacher is the dense model the masks come from, run on the
same shifted batch.  The aim: match the dense model's soft outputs, not only the labels.  T = 4
and the weight 0.9 were fixed a priori (common values) and judged on the validation splits only:
over seeds 0-4 and the six SCHEDULES, distillation made 172 validation errors (of 30 x 288
images), labels only 161 -- no better -- so the default stays labels only (--distill 0).
docs/SPARSITY.md has both methods' tables.

The fine-tuning schedule (epochs, initial rate of the cosine schedule) is chosen without the
test set.  A validation split, VALIDATION_FRACTION of the 1437 training images (stratified by
digit, random_state = the seed), is held out; the rest (the fit split) trains a proxy dense
model with the dense recipe (--epochs, the seed) -- the committed dense model was trained on
all 1437 images, validation ones included, so its pruned fine-tunings could not be judged on
them -- and each candidate of SCHEDULES (or --schedules) prunes the proxy and fine-tunes it on
the fit split; the one with the best validation accuracy wins (ties: fewer epochs, then the
earlier in the list).  Then the chosen schedule prunes and fine-tunes the --weights model on
all 1437 training images, and the test accuracy is measured once, for that result.  It prints
the validation table, the chosen schedule, and the dense, pruned and fine-tuned test
accuracies.  --seeds N repeats the selection for seeds --seed .. --seed+N-1 (validation split,
proxy model, fine-tuning order and shifts) and prints the mean and spread of the selected
schedules' test accuracies; --out gets the first seed's weights.  --finetune-epochs and/or
--finetune-lr given: that one schedule (defaults 40 and 0.02), no validation split, no search.
In the search the teacher is the proxy dense model; for the shipped weights, the --weights one.

The network (models/digits.yaml):  [1, 8, 8] floats in [0, 1] (pixel / 16)
    conv1 3x3 pad 1, 16 ch -> relu -> maxpool 2      [16, 4, 4]
    conv2 3x3 pad 1, 32 ch -> relu -> maxpool 2      [32, 2, 2]
    flatten (C, H, W order) -> fc 128 -> 10 logits
6,218 parameters, 25 KB as float32.  Training: float64 numpy (im2col convolutions, hand-written
backward passes), softmax cross-entropy, SGD with momentum 0.9, weight decay 5e-4, batch 32, a
cosine learning-rate schedule from 0.05, random one-pixel shifts of the training images; all
randomness from one seed, so a run is reproducible.  The split is tools/digits_data.py's (1437
train / 360 test).  Writes, each through a temporary file and a rename:
    digits.safetensors  (keys conv1.weight, conv1.bias, conv2.weight, conv2.bias, fc.weight,
                         fc.bias; PyTorch layouts)
    digits.yaml, digits_labels.txt
and prints the test accuracy of the trained float64 network.  Reruns give bit-identical
tensors (the safetensors header may list the metadata in another order).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from digits_data import load_split  # noqa: E402

YAML_TEXT = """\
# A small CNN for scikit-learn's 8x8 digits, trained by tools/train_digits.py (numpy, seed {seed},
# {epochs} epochs; test accuracy {accuracy:.2f} % on tools/digits_data.py's split).
# Input: the 8x8 image as floats in [0, 1] (pixel / 16); output: 10 logits, one per digit.
name: digits
input: {{shape: [1, 8, 8]}}
weights: digits.safetensors
labels: digits_labels.txt
layers:
  - {{name: conv1, op: conv, out_channels: 16, kernel: 3, padding: 1, weight: conv1.weight, bias: conv1.bias}}
  - {{name: relu1, op: relu}}
  - {{name: pool1, op: maxpool, kernel: 2}}
  - {{name: conv2, op: conv, out_channels: 32, kernel: 3, padding: 1, weight: conv2.weight, bias: conv2.bias}}
  - {{name: relu2, op: relu}}
  - {{name: pool2, op: maxpool, kernel: 2}}
  - {{name: flatten, op: flatten}}
  - {{name: fc, op: linear, out_features: 10, weight: fc.weight, bias: fc.bias}}
"""

LABELS = [str(digit) for digit in range(10)]

# --prune 2:4: the candidate fine-tuning schedules (epochs, initial learning rate), the share of
# the training images held out to choose among them, and the one schedule without a search.
SCHEDULES = ((10, 0.01), (20, 0.01), (20, 0.03), (40, 0.02), (40, 0.05), (60, 0.05))
VALIDATION_FRACTION = 0.2
DEFAULT_FINETUNE = (40, 0.02)
# --distill (finetune_masked): the share of the distillation term in the loss.
DISTILL_WEIGHT = 0.9
PRUNED_KEYS = ("conv1.weight", "conv2.weight", "fc.weight")


# --- layers: forward returns (output, cache), backward takes (grad, cache) -----------------------

def im2col(x: np.ndarray) -> np.ndarray:
    """[N, C, H, W] -> [N, C*9, H*W] columns of a 3x3, pad 1, stride 1 convolution."""
    n, c, h, w = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.empty((n, c, 3, 3, h, w), dtype=x.dtype)
    for i in range(3):
        for j in range(3):
            cols[:, :, i, j] = padded[:, :, i:i + h, j:j + w]
    return cols.reshape(n, c * 9, h * w)


def col2im(cols: np.ndarray, shape) -> np.ndarray:
    n, c, h, w = shape
    cols = cols.reshape(n, c, 3, 3, h, w)
    padded = np.zeros((n, c, h + 2, w + 2), dtype=cols.dtype)
    for i in range(3):
        for j in range(3):
            padded[:, :, i:i + h, j:j + w] += cols[:, :, i, j]
    return padded[:, :, 1:1 + h, 1:1 + w]


def conv_forward(x, weight, bias):
    n, _, h, w = x.shape
    cols = im2col(x)
    out = np.matmul(weight.reshape(weight.shape[0], -1), cols) + bias[None, :, None]
    return out.reshape(n, weight.shape[0], h, w), (x.shape, cols, weight)


def conv_backward(grad, cache):
    shape, cols, weight = cache
    n, o = grad.shape[:2]
    grad = grad.reshape(n, o, -1)
    d_weight = np.einsum("nop,nkp->ok", grad, cols).reshape(weight.shape)
    d_bias = grad.sum(axis=(0, 2))
    d_cols = np.matmul(weight.reshape(o, -1).T, grad)
    return col2im(d_cols, shape), d_weight, d_bias


def relu_forward(x):
    return np.maximum(x, 0), x > 0


def maxpool_forward(x):
    n, c, h, w = x.shape
    windows = x.reshape(n, c, h // 2, 2, w // 2, 2)
    out = windows.max(axis=(3, 5))
    mask = windows == out[:, :, :, None, :, None]
    mask = mask / mask.sum(axis=(3, 5), keepdims=True)  # ties share the gradient
    return out, (mask, x.shape)


def maxpool_backward(grad, cache):
    mask, shape = cache
    return (mask * grad[:, :, :, None, :, None]).reshape(shape)


def forward(params, x, keep=False):
    caches = {}
    h, caches["conv1"] = conv_forward(x, params["conv1.weight"], params["conv1.bias"])
    h, caches["relu1"] = relu_forward(h)
    h, caches["pool1"] = maxpool_forward(h)
    h, caches["conv2"] = conv_forward(h, params["conv2.weight"], params["conv2.bias"])
    h, caches["relu2"] = relu_forward(h)
    h, caches["pool2"] = maxpool_forward(h)
    caches["flatten"] = h.shape
    flat = h.reshape(h.shape[0], -1)
    caches["fc"] = flat
    logits = flat @ params["fc.weight"].T + params["fc.bias"]
    return (logits, caches) if keep else logits


def backward(params, caches, d_logits):
    grads = {}
    grads["fc.weight"] = d_logits.T @ caches["fc"]
    grads["fc.bias"] = d_logits.sum(axis=0)
    d = (d_logits @ params["fc.weight"]).reshape(caches["flatten"])
    d = maxpool_backward(d, caches["pool2"]) * caches["relu2"]
    d, grads["conv2.weight"], grads["conv2.bias"] = conv_backward(d, caches["conv2"])
    d = maxpool_backward(d, caches["pool1"]) * caches["relu1"]
    _, grads["conv1.weight"], grads["conv1.bias"] = conv_backward(d, caches["conv1"])
    return grads


def softmax(logits):
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def cross_entropy(logits, labels):
    probabilities = softmax(logits)
    loss = -np.log(probabilities[np.arange(len(labels)), labels] + 1e-300).mean()
    d_logits = probabilities
    d_logits[np.arange(len(labels)), labels] -= 1
    return loss, d_logits / len(labels)


def init_params(rng):
    def he(shape, fan_in):
        return rng.normal(0.0, np.sqrt(2.0 / fan_in), size=shape)

    return {
        "conv1.weight": he((16, 1, 3, 3), 9), "conv1.bias": np.zeros(16),
        "conv2.weight": he((32, 16, 3, 3), 144), "conv2.bias": np.zeros(32),
        "fc.weight": he((10, 128), 128) * 0.5, "fc.bias": np.zeros(10),
    }


def shift_images(x, rng):
    """Each image moved by -1, 0 or +1 pixel in each direction (zeros shifted in)."""
    out = np.zeros_like(x)
    for index in range(len(x)):
        dy, dx = rng.integers(-1, 2, size=2)
        src = x[index, 0]
        dst = out[index, 0]
        dst[max(dy, 0):8 + min(dy, 0), max(dx, 0):8 + min(dx, 0)] = \
            src[max(-dy, 0):8 + min(-dy, 0), max(-dx, 0):8 + min(-dx, 0)]
    return out


def accuracy(params, x, y) -> float:
    return float((forward(params, x).argmax(axis=1) == y).mean() * 100.0)


def train(x_train, y_train, epochs: int, seed: int, log=print):
    rng = np.random.default_rng(seed)
    params = init_params(rng)
    velocity = {key: np.zeros_like(value) for key, value in params.items()}
    batch, base_lr, momentum, decay = 32, 0.05, 0.9, 5e-4
    steps_per_epoch = (len(x_train) + batch - 1) // batch
    total_steps, step = epochs * steps_per_epoch, 0
    x_train = x_train.astype(np.float64)
    for epoch in range(epochs):
        order = rng.permutation(len(x_train))
        losses = []
        for first in range(0, len(order), batch):
            index = order[first:first + batch]
            x = shift_images(x_train[index], rng)
            logits, caches = forward(params, x, keep=True)
            loss, d_logits = cross_entropy(logits, y_train[index])
            grads = backward(params, caches, d_logits)
            lr = 0.5 * base_lr * (1 + np.cos(np.pi * step / total_steps))
            for key in params:
                g = grads[key] + (decay * params[key] if key.endswith("weight") else 0)
                velocity[key] = momentum * velocity[key] - lr * g
                params[key] += velocity[key]
            losses.append(loss)
            step += 1
        if (epoch + 1) % 10 == 0 or epoch == 0:
            log(f"epoch {epoch + 1:3d}  loss {np.mean(losses):.4f}  "
                f"train accuracy {accuracy(params, x_train, y_train):.2f} %")
    return params


def mask_2_4(weight):
    """1 where a weight survives 2:4 magnitude pruning along axis 1 (input channels / features)."""
    w = weight.reshape(weight.shape[0], weight.shape[1], -1)  # [O, C, taps]
    out, channels, taps = w.shape
    padded_c = (channels + 3) // 4 * 4
    padded = np.zeros((out, padded_c, taps))
    padded[:, :channels] = np.abs(w)
    groups = padded.reshape(out, padded_c // 4, 4, taps)
    # The two largest of each group; a stable sort keeps the lower index on a tie, as in C++.
    order = np.argsort(-groups, axis=2, kind="stable")
    keep = np.zeros_like(groups)
    np.put_along_axis(keep, order[:, :, :2], 1.0, axis=2)
    return keep.reshape(out, padded_c, taps)[:, :channels].reshape(weight.shape)


def finetune_masked(params, masks, x_train, y_train, epochs: int, seed: int, base_lr: float,
                    teacher=None, temperature: float = 0.0, log=print):
    # log=None: no per-epoch line (and no training-set accuracy computed for it).
    """SGD as train() (cosine rate from base_lr); masked weights and their momentum stay zero.

    teacher (dense params) and temperature > 0: distillation as the module docstring says."""
    distill = teacher is not None and temperature > 0
    rng = np.random.default_rng(seed + 1)
    velocity = {key: np.zeros_like(value) for key, value in params.items()}
    batch, momentum, decay = 32, 0.9, 5e-4
    total_steps = epochs * ((len(x_train) + batch - 1) // batch)
    step = 0
    for epoch in range(epochs):
        order = rng.permutation(len(x_train))
        for first in range(0, len(order), batch):
            index = order[first:first + batch]
            x = shift_images(x_train[index], rng)
            logits, caches = forward(params, x, keep=True)
            _, d_logits = cross_entropy(logits, y_train[index])
            if distill:
                # d/dlogits of T^2 * KL(softmax(t/T) || softmax(s/T)), batch mean: T (p_s - p_t).
                soft = softmax(logits / temperature) - softmax(forward(teacher, x) / temperature)
                d_logits = ((1 - DISTILL_WEIGHT) * d_logits
                            + DISTILL_WEIGHT * temperature * soft / len(index))
            grads = backward(params, caches, d_logits)
            lr = 0.5 * base_lr * (1 + np.cos(np.pi * step / total_steps))
            for key in params:
                g = grads[key] + (decay * params[key] if key.endswith("weight") else 0)
                velocity[key] = momentum * velocity[key] - lr * g
                params[key] += velocity[key]
                if key in masks:
                    params[key] *= masks[key]
                    velocity[key] *= masks[key]
            step += 1
        if log is not None:
            log(f"finetune epoch {epoch + 1:3d}  "
                f"train accuracy {accuracy(params, x_train, y_train):.2f} %")
    return params


def prune_2_4(params):
    """A copy of params pruned 2:4 by magnitude, and the masks that keep it so."""
    params = copy.deepcopy(params)
    masks = {key: mask_2_4(params[key]) for key in PRUNED_KEYS}
    for key, mask in masks.items():
        params[key] *= mask
    return params, masks


def validation_split(x_train, y_train, seed: int):
    """(x_fit, y_fit, x_val, y_val): VALIDATION_FRACTION of the training images, stratified."""
    from sklearn.model_selection import train_test_split

    x_fit, x_val, y_fit, y_val = train_test_split(
        x_train, y_train, test_size=VALIDATION_FRACTION, random_state=seed, stratify=y_train)
    return x_fit, y_fit, x_val, y_val


def select_schedule(x_train, y_train, schedules, seed: int, dense_epochs: int, temperature):
    """Chooses a schedule on a validation split; returns (chosen, [(schedule, val accuracy)])."""
    x_fit, y_fit, x_val, y_val = validation_split(x_train, y_train, seed)
    print(f"seed {seed}: validation split {len(x_val)} images, fit split {len(x_fit)}; "
          f"proxy dense model: {dense_epochs} epochs on the fit split")
    proxy = train(x_fit, y_fit, dense_epochs, seed, log=lambda line: None)
    print(f"  proxy dense: validation accuracy {accuracy(proxy, x_val, y_val):.2f} %")
    pruned, masks = prune_2_4(proxy)
    print(f"  proxy 2:4 pruned, not fine-tuned: validation accuracy "
          f"{accuracy(pruned, x_val, y_val):.2f} %")
    rows = []
    for epochs, lr in schedules:
        params = finetune_masked(copy.deepcopy(pruned), masks, x_fit, y_fit, epochs, seed, lr,
                                 teacher=proxy, temperature=temperature, log=None)
        rows.append(((epochs, lr), accuracy(params, x_val, y_val)))
    best = max(value for _, value in rows)
    chosen = min((schedule for schedule, value in rows if value == best),
                 key=lambda schedule: schedule[0])  # min() keeps the earliest of equal epochs
    print(f"  {'schedule':>22}  validation accuracy ({len(x_val)} images)")
    for schedule, value in rows:
        mark = "  <- chosen" if schedule == chosen else ""
        print(f"  {schedule[0]:3d} epochs from lr {schedule[1]:<6g}  {value:6.2f} %"
              f" ({round((100 - value) * len(x_val) / 100)} errors){mark}")
    return chosen, rows


def prune_main(args) -> int:
    from safetensors.numpy import load_file, save_file

    x_train, y_train, x_test, y_test = load_split()
    x_train, x_test = x_train.astype(np.float64), x_test.astype(np.float64)
    dense_params = {k: v.astype(np.float64) for k, v in load_file(args.weights).items()}
    dense = accuracy(dense_params, x_test, y_test)
    pruned = accuracy(prune_2_4(dense_params)[0], x_test, y_test)
    search = args.finetune_epochs is None and args.finetune_lr is None
    if search:
        schedules = args.schedules or SCHEDULES
        seeds = range(args.seed, args.seed + args.seeds)
    else:
        schedules = [(args.finetune_epochs if args.finetune_epochs is not None
                      else DEFAULT_FINETUNE[0],
                      args.finetune_lr if args.finetune_lr is not None else DEFAULT_FINETUNE[1])]
        seeds = [args.seed]
    results, out_params = [], None
    method = (f", distilled (T {args.distill:g}, weight {DISTILL_WEIGHT:g})" if args.distill > 0
              else ", labels only")
    for seed in seeds:
        if search:
            (epochs, lr), _ = select_schedule(x_train, y_train, schedules, seed, args.epochs,
                                              args.distill)
        else:
            epochs, lr = schedules[0]
        params, masks = prune_2_4(dense_params)
        params = finetune_masked(params, masks, x_train, y_train, epochs, seed, lr,
                                 teacher=dense_params, temperature=args.distill,
                                 log=None if search else print)
        tuned = accuracy(params, x_test, y_test)
        results.append((seed, epochs, lr, tuned))
        print(f"seed {seed}: test accuracy (float64 numpy, {len(x_test)} images): "
              f"dense {dense:.2f} %, 2:4 pruned {pruned:.2f} %, 2:4 fine-tuned {epochs} epochs "
              f"from lr {lr:g}{method} on all {len(x_train)} training images {tuned:.2f} % "
              f"({tuned - dense:+.2f} points)")
        if out_params is None:
            out_params, out_schedule = params, (epochs, lr)
    if len(results) > 1:
        values = np.array([row[3] for row in results])
        print(f"selected schedules' test accuracy over {len(values)} seeds: mean "
              f"{values.mean():.2f} %, std {values.std(ddof=1):.2f}, min {values.min():.2f} %, "
              f"max {values.max():.2f} % (dense {dense:.2f} %); per seed: " + ", ".join(
                  f"{seed}: {epochs}/{lr:g} {value:.2f} %"
                  for seed, epochs, lr, value in results))
    tensors = {key: np.ascontiguousarray(value, dtype=np.float32)
               for key, value in out_params.items()}
    write_atomically(args.out, lambda path: save_file(tensors, path, metadata={
        "model": "digits", "trainer": "tools/train_digits.py --prune 2:4",
        "finetune_epochs": str(out_schedule[0]), "finetune_lr": str(out_schedule[1]),
        "schedule": "validation" if search else "given", "seed": str(args.seed),
        "distill_temperature": str(args.distill),
        "distill_weight": str(DISTILL_WEIGHT if args.distill > 0 else 0)}))
    print(f"wrote {args.out} (seed {args.seed}, {out_schedule[0]} epochs from lr "
          f"{out_schedule[1]:g})")
    return 0


def parse_schedules(text: str):
    """'10/0.01,20/0.03' -> [(10, 0.01), (20, 0.03)]."""
    schedules = []
    for item in text.split(","):
        epochs, _, lr = item.strip().partition("/")
        try:
            schedule = (int(epochs), float(lr))
        except ValueError:
            raise ValueError(f"--schedules: {item!r} is not EPOCHS/LR") from None
        if schedule[0] < 1 or not schedule[1] > 0:
            raise ValueError(f"--schedules: {item!r}: needs epochs >= 1 and lr > 0")
        schedules.append(schedule)
    return schedules


def write_atomically(path: str, write) -> None:
    temp = f"{path}.tmp-{os.getpid()}"
    try:
        write(temp)
        os.chmod(temp, 0o644)  # safetensors creates its file private
        os.replace(temp, path)
    finally:
        if os.path.exists(temp):
            os.remove(temp)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out-dir", default=os.path.join(os.path.dirname(__file__), "..",
                                                         "models"))
    parser.add_argument("--epochs", type=int, default=60,
                        help="dense training epochs (--prune: of the proxy dense model)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prune", choices=("2:4",), default=None,
                        help="prune the --weights 2:4 and fine-tune with the masks kept")
    parser.add_argument("--weights", default=os.path.join(os.path.dirname(__file__), "..",
                                                          "models", "digits.safetensors"))
    parser.add_argument("--finetune-epochs", type=int, default=None,
                        help="--prune: fine-tune this many epochs, no schedule search "
                             f"(default {DEFAULT_FINETUNE[0]} when only --finetune-lr is given)")
    parser.add_argument("--finetune-lr", type=float, default=None,
                        help="--prune: initial fine-tuning rate, no schedule search "
                             f"(default {DEFAULT_FINETUNE[1]} when only --finetune-epochs is "
                             "given)")
    parser.add_argument("--schedules", default=None,
                        help="--prune: candidate schedules EPOCHS/LR,... chosen among on the "
                             "validation split (default: " + ",".join(
                                 f"{e}/{lr:g}" for e, lr in SCHEDULES) + ")")
    parser.add_argument("--distill", type=float, default=0.0, metavar="T",
                        help="--prune: distill the dense model at temperature T (e.g. 4) "
                             "while fine-tuning (default 0: labels only)")
    parser.add_argument("--seeds", type=int, default=1,
                        help="--prune: repeat the selection for this many seeds from --seed")
    parser.add_argument("--out", default=None, help="--prune: the weights file to write")
    args = parser.parse_args(argv)
    if args.prune:
        if not args.out:
            parser.error("--prune needs --out FILE.safetensors")
        if args.seeds < 1:
            parser.error("--seeds must be >= 1")
        if not args.distill >= 0:
            parser.error("--distill must be >= 0")
        if args.schedules and (args.finetune_epochs is not None or args.finetune_lr is not None):
            parser.error("--schedules is a search; --finetune-epochs/--finetune-lr skip it")
        if args.schedules:
            try:
                args.schedules = parse_schedules(args.schedules)
            except ValueError as error:
                parser.error(str(error))
        return prune_main(args)
    from safetensors.numpy import save_file

    x_train, y_train, x_test, y_test = load_split()
    print(f"digits: {len(x_train)} train, {len(x_test)} test images")
    params = train(x_train, y_train, args.epochs, args.seed)
    test_accuracy = accuracy(params, x_test.astype(np.float64), y_test)
    print(f"test accuracy (float64 numpy): {test_accuracy:.2f} %")

    os.makedirs(args.out_dir, exist_ok=True)
    tensors = {key: np.ascontiguousarray(value, dtype=np.float32) for key, value in params.items()}
    write_atomically(os.path.join(args.out_dir, "digits.safetensors"),
                     lambda path: save_file(tensors, path, metadata={
                         "model": "digits", "trainer": "tools/train_digits.py",
                         "seed": str(args.seed), "epochs": str(args.epochs)}))

    def write_text(text):
        return lambda path: open(path, "w").write(text)

    write_atomically(os.path.join(args.out_dir, "digits.yaml"), write_text(
        YAML_TEXT.format(seed=args.seed, epochs=args.epochs, accuracy=test_accuracy)))
    write_atomically(os.path.join(args.out_dir, "digits_labels.txt"),
                     write_text("\n".join(LABELS) + "\n"))
    print(f"wrote digits.safetensors, digits.yaml, digits_labels.txt to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
