"""2:4 pruning and sparse fine-tuning of the numpy digits network (tools/train_digits.py --prune).

The 2:4 rule is graph/passes_sparsity.h's (what `cnnrt prune --pattern 2:4` applies): along axis 1
of a weight (input channels of an [O, C, KH, KW] conv weight, input features of an [O, I] linear
one), in every group of 4 consecutive entries at each output channel and kernel tap, the two of
largest |w| stay (a tie keeps the lower index); a last partial group is padded with zeros.

A fine-tuning *recipe* (--recipes) is '+'-joined tokens:
    mask        the magnitude mask of the starting weights, kept fixed: pruned weights and their
                momentum are zeroed after every step (the method before SR-STE was added)
    srste[=L]   SR-STE (Zhou et al. 2021, "Learning N:M fine-grained structured sparse neural
                networks from scratch"): the dense weights W are kept; every step runs forward
                and backward with their 2:4 projection W~ = W * mask(W) (the mask recomputed from
                |W| at every step), and the gradient g(W~) updates W straight through, plus the
                sparse-refined decay L * (W * not mask) on the pruned ones (L default
                SRSTE_DECAY, the paper's 2e-4).  It starts from the dense weights (its first mask
                is the magnitude one).  The last quarter of the epochs (at least one) freezes the
                mask of that moment and fine-tunes as 'mask', so the result is exactly 2:4.
    swa         the weights returned are the average of those at the end of each of the last
                quarter of the epochs (at least one; SWA-style, Izmailov et al. 2018): the mask is
                fixed then, so the average keeps it
    ls=E        label smoothing E (the target (1 - E) one-hot + E / 10)
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from digits_net import backward, cross_entropy, forward, shift_images, softmax

PRUNED_KEYS = ("conv1.weight", "conv2.weight", "fc.weight")
SRSTE_DECAY = 2e-4
# --distill: the share of the distillation term in the loss.
DISTILL_WEIGHT = 0.9


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


def is_2_4(weight) -> bool:
    """True if every group of 4 consecutive entries along axis 1 holds at most 2 non-zeros."""
    w = weight.reshape(weight.shape[0], weight.shape[1], -1)
    out, channels, taps = w.shape
    padded = np.zeros((out, (channels + 3) // 4 * 4, taps))
    padded[:, :channels] = w != 0
    return bool((padded.reshape(out, -1, 4, taps).sum(axis=2) <= 2).all())


def prune_2_4(params):
    """A copy of params pruned 2:4 by magnitude, and the masks that keep it so."""
    params = copy.deepcopy(params)
    masks = {key: mask_2_4(params[key]) for key in PRUNED_KEYS}
    for key, mask in masks.items():
        params[key] *= mask
    return params, masks


@dataclass(frozen=True)
class Recipe:
    method: str = "mask"          # "mask" or "srste"
    decay: float = SRSTE_DECAY    # srste's L
    swa: bool = False
    smoothing: float = 0.0

    def __str__(self) -> str:
        parts = [self.method if self.method == "mask" or self.decay == SRSTE_DECAY
                 else f"srste={self.decay:g}"]
        parts += ["swa"] if self.swa else []
        parts += [f"ls={self.smoothing:g}"] if self.smoothing else []
        return "+".join(parts)


def parse_recipe(text: str) -> Recipe:
    """'srste=2e-3+swa+ls=0.1' -> Recipe; ValueError on a bad token."""
    fields = {}
    for token in text.strip().split("+"):
        name, _, value = token.partition("=")
        try:
            if name == "mask" and not value:
                fields["method"] = "mask"
            elif name == "srste":
                fields["method"] = "srste"
                fields["decay"] = float(value) if value else SRSTE_DECAY
                if not fields["decay"] >= 0:
                    raise ValueError
            elif name == "swa" and not value:
                fields["swa"] = True
            elif name == "ls" and 0 <= float(value) < 1:
                fields["smoothing"] = float(value)
            else:
                raise ValueError
        except ValueError:
            raise ValueError(f"--recipes: bad token {token!r} in {text!r} (mask, srste[=L], swa, "
                             "ls=E)") from None
    return Recipe(**fields)


def finetune(dense, recipe: Recipe, x_train, y_train, epochs: int, seed: int, base_lr: float,
             teacher=None, temperature: float = 0.0, log=None):
    """Prunes the dense params 2:4 and fine-tunes them by the recipe; returns 2:4 params.

    SGD as digits_net.train() (momentum 0.9, weight decay 5e-4, batch 32, cosine rate from
    base_lr, one-pixel shifts; randomness from seed + 1).  teacher (dense params) and
    temperature > 0: the loss distills the teacher (train_digits.py's --distill).  log: a
    function called with a line per epoch (training-set accuracy), or None."""
    from digits_net import accuracy

    distill = teacher is not None and temperature > 0
    rng = np.random.default_rng(seed + 1)
    tail = max(1, epochs // 4)  # srste's fixed-mask epochs, swa's averaged epochs
    dynamic_epochs = epochs - tail if recipe.method == "srste" else 0
    if dynamic_epochs > 0:
        params, masks = copy.deepcopy(dense), None
    else:
        params, masks = prune_2_4(dense)
    velocity = {key: np.zeros_like(value) for key, value in params.items()}
    batch, momentum, decay = 32, 0.9, 5e-4
    total_steps = epochs * ((len(x_train) + batch - 1) // batch)
    step, average, averaged = 0, None, 0
    for epoch in range(epochs):
        if epoch == dynamic_epochs and masks is None:  # srste: freeze the mask of this moment
            masks = {key: mask_2_4(params[key]) for key in PRUNED_KEYS}
            for key, mask in masks.items():
                params[key] *= mask
                velocity[key] *= mask
        order = rng.permutation(len(x_train))
        for first in range(0, len(order), batch):
            index = order[first:first + batch]
            x = shift_images(x_train[index], rng)
            if masks is None:  # srste: forward and backward through the 2:4 projection
                step_masks = {key: mask_2_4(params[key]) for key in PRUNED_KEYS}
                used = dict(params)
                for key, mask in step_masks.items():
                    used[key] = params[key] * mask
            else:
                used = params
            logits, caches = forward(used, x, keep=True)
            _, d_logits = cross_entropy(logits, y_train[index])
            if recipe.smoothing:
                # d/dlogits of the cross-entropy with the smoothed target, batch mean.
                onehot = np.eye(10)[y_train[index]]
                d_logits += recipe.smoothing * (onehot - 0.1) / len(index)
            if distill:
                # d/dlogits of T^2 * KL(softmax(t/T) || softmax(s/T)), batch mean: T (p_s - p_t).
                soft = softmax(logits / temperature) - softmax(forward(teacher, x) / temperature)
                d_logits = ((1 - DISTILL_WEIGHT) * d_logits
                            + DISTILL_WEIGHT * temperature * soft / len(index))
            grads = backward(used, caches, d_logits)
            lr = 0.5 * base_lr * (1 + np.cos(np.pi * step / total_steps))
            for key in params:
                g = grads[key] + (decay * params[key] if key.endswith("weight") else 0)
                if masks is None and key in step_masks:  # SR-STE's sparse-refined term
                    g = g + recipe.decay * params[key] * (1 - step_masks[key])
                velocity[key] = momentum * velocity[key] - lr * g
                params[key] += velocity[key]
                if masks is not None and key in masks:
                    params[key] *= masks[key]
                    velocity[key] *= masks[key]
            step += 1
        if recipe.swa and epoch >= epochs - tail:
            averaged += 1
            average = ({key: value.copy() for key, value in params.items()} if average is None
                       else {key: average[key] + (params[key] - average[key]) / averaged
                             for key in params})
        if log is not None:
            log(f"finetune epoch {epoch + 1:3d}  "
                f"train accuracy {accuracy(params, x_train, y_train):.2f} %")
    return average if recipe.swa else params
