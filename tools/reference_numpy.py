#!/usr/bin/env python3
"""Independent numpy float64 forward pass of a cnnrt model: the golden oracle of the e2e tests.

Why a second reference beside the C++ CPU kernels: both are "obviously right", but they are
written by different people from the PyTorch documentation, in different styles (here: whole-
tensor numpy with im2col + BLAS matmul; there: plain loops), so a shared misreading of a
semantic (ceil_mode windows, avgpool divisors, LRN window, flatten order) is unlikely to hide.
float64 throughout, so the reference error is negligible against the fp32 tolerance (1e-5).

Semantics follow torch.nn (NCHW tensors, batch first):
  conv       Conv2d: zero padding, stride, dilation, groups; weight [O, C/groups, KH, KW].
             Padding may differ per side ([top, left, bottom, right], or TensorFlow "SAME":
             out = ceil(in/stride), total = max((out-1)*stride + (k-1)*dilation + 1 - in, 0),
             top/left = total // 2, bottom/right the rest) -- computed here by
             cnnrt_model.conv_padding, a Python reading of docs/FORMAT.md.
  relu6      min(max(x, 0), 6).   clip: min(max(x, min), max), an absent bound infinite.
  maxpool    MaxPool2d: padding is -inf; with ceil_mode a window may run past the right
             padding, but a window that would *start* in the right padding is dropped.
  avgpool    AvgPool2d: divisor = window clipped to the padded input (count_include_pad) or
             to the real input (count_include_pad false); ceil_mode overhang never counts.
  adaptive_avgpool  bin i covers [floor(i*in/out), ceil((i+1)*in/out)).
  lrn        LocalResponseNorm: window over channels c - size//2 .. c + (size-1)//2 (zero
             outside), b = a / (k + alpha/size * sum a^2)^beta.
  batchnorm  eval mode: (x - running_mean) / sqrt(running_var + eps) * weight + bias.
  softmax    over axis 1.  flatten: NCHW -> N x (C*H*W), C-order.  dropout: identity.

CLI:  python3 tools/reference_numpy.py MODEL --weights W --input X.npy --output Y.npy
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Dict, List

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cnnrt_model import (Layer, Model, ModelError, conv_output_size,  # noqa: E402
                         conv_padding, load_model, load_weights, pool_output_size)


def _strided_windows(padded: np.ndarray, kernel: tuple, stride: tuple, dilation: tuple,
                     out_hw: tuple):
    """Yields (i, j, view) for every kernel offset: view[n, c, oh, ow] = padded[n, c,
    oh*sh + i*dh, ow*sw + j*dw]."""
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, stride, dilation, out_hw
    for i in range(kh):
        for j in range(kw):
            yield i, j, padded[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh,
                               j * dw: j * dw + sw * (ow - 1) + 1: sw]


def conv2d(x: np.ndarray, weight: np.ndarray, bias, stride, padding, dilation,
           groups: int) -> np.ndarray:
    """padding: (h, w) symmetric or (top, left, bottom, right)."""
    n, c, h, w = x.shape
    o, cg, kh, kw = weight.shape
    if c != cg * groups or o % groups:
        raise ValueError(f"conv weight {weight.shape} does not fit input channels {c} with "
                         f"groups {groups}")
    top, left, bottom, right = padding if len(padding) == 4 else tuple(padding) * 2
    (sh, sw), (dh, dw) = stride, dilation
    oh = conv_output_size(h, kh, sh, top, bottom, dh)
    ow = conv_output_size(w, kw, sw, left, right, dw)
    padded = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    # im2col: columns[n, c, i, j, oh, ow], then one batched matmul per group.
    columns = np.empty((n, c, kh, kw, oh, ow), dtype=np.float64)
    for i, j, view in _strided_windows(padded, (kh, kw), (sh, sw), (dh, dw), (oh, ow)):
        columns[:, :, i, j] = view
    columns = columns.reshape(n, groups, cg * kh * kw, oh * ow)
    kernels = weight.reshape(groups, o // groups, cg * kh * kw)
    out = np.matmul(kernels[None], columns).reshape(n, o, oh, ow)
    if bias is not None:
        out += bias.reshape(1, o, 1, 1)
    return out


def _pool_geometry(x: np.ndarray, kernel, stride, padding, ceil_mode):
    _, _, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    if 2 * ph > kh or 2 * pw > kw:
        raise ValueError("pool padding must be at most half the kernel")
    oh = pool_output_size(h, kh, sh, ph, 1, ceil_mode)
    ow = pool_output_size(w, kw, sw, pw, 1, ceil_mode)
    # Right padding: the declared padding, or more when ceil_mode windows overhang.
    right_h = max(ph, (oh - 1) * sh + kh - h - ph)
    right_w = max(pw, (ow - 1) * sw + kw - w - pw)
    return (oh, ow), ((0, 0), (0, 0), (ph, right_h), (pw, right_w))


def max_pool2d(x, kernel, stride, padding, ceil_mode) -> np.ndarray:
    out_hw, pads = _pool_geometry(x, kernel, stride, padding, ceil_mode)
    padded = np.pad(x, pads, constant_values=-np.inf)
    out = np.full(x.shape[:2] + out_hw, -np.inf)
    for _, _, view in _strided_windows(padded, kernel, stride, (1, 1), out_hw):
        np.maximum(out, view, out=out)
    return out


def _avg_divisors(size: int, out: int, kernel: int, stride: int, pad: int,
                  include_pad: bool) -> np.ndarray:
    """Per output position along one axis, how many positions the divisor counts."""
    counts = np.empty(out)
    for o in range(out):
        start = o * stride - pad
        end = min(start + kernel, size + pad)  # the ceil_mode overhang never counts
        if not include_pad:
            start, end = max(start, 0), min(end, size)
        counts[o] = end - start
    return counts


def avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad) -> np.ndarray:
    out_hw, pads = _pool_geometry(x, kernel, stride, padding, ceil_mode)
    padded = np.pad(x, pads)
    total = np.zeros(x.shape[:2] + out_hw)
    for _, _, view in _strided_windows(padded, kernel, stride, (1, 1), out_hw):
        total += view
    div_h = _avg_divisors(x.shape[2], out_hw[0], kernel[0], stride[0], padding[0],
                          count_include_pad)
    div_w = _avg_divisors(x.shape[3], out_hw[1], kernel[1], stride[1], padding[1],
                          count_include_pad)
    return total / np.outer(div_h, div_w)


def adaptive_avg_pool2d(x, output_size) -> np.ndarray:
    n, c, h, w = x.shape
    oh, ow = output_size
    out = np.empty((n, c, oh, ow))
    for i in range(oh):
        h0, h1 = (i * h) // oh, -(-((i + 1) * h) // oh)
        for j in range(ow):
            w0, w1 = (j * w) // ow, -(-((j + 1) * w) // ow)
            out[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
    return out


def local_response_norm(x, size: int, alpha: float, beta: float, k: float) -> np.ndarray:
    squares = x * x
    channels = x.shape[1]
    # Prefix sums over channels make each window sum two lookups.
    prefix = np.concatenate([np.zeros_like(squares[:, :1]), np.cumsum(squares, axis=1)], axis=1)
    lo = np.clip(np.arange(channels) - size // 2, 0, channels)
    hi = np.clip(np.arange(channels) + (size - 1) // 2 + 1, 0, channels)
    window_sum = prefix[:, hi] - prefix[:, lo]
    return x / (k + alpha / size * window_sum) ** beta


def softmax(x) -> np.ndarray:
    shifted = x - x.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)


def _channel(v: np.ndarray, rank: int) -> np.ndarray:
    return v.reshape((1, -1) + (1,) * (rank - 2))


def batch_norm(x, weight, bias, mean, var, eps: float) -> np.ndarray:
    r = x.ndim
    return ((x - _channel(mean, r)) / np.sqrt(_channel(var, r) + eps) * _channel(weight, r)
            + _channel(bias, r))


def linear(x, weight, bias) -> np.ndarray:
    if x.ndim != 2 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"linear weight {weight.shape} does not fit input {x.shape}")
    out = x @ weight.T
    return out + bias if bias is not None else out


def _run_layer(layer: Layer, args: List[np.ndarray], w: Callable) -> np.ndarray:
    a, x = layer.attrs, args[0]
    if layer.op == "conv":
        if x.ndim != 4:
            raise ValueError(f"conv needs an NCHW input, got {x.shape}")
        return conv2d(x, w("weight"), w("bias"), a["stride"],
                      conv_padding(a, x.shape[2], x.shape[3]), a["dilation"], a["groups"])
    if layer.op == "relu":
        return np.maximum(x, 0.0)
    if layer.op == "relu6":
        return np.minimum(np.maximum(x, 0.0), 6.0)
    if layer.op == "clip":
        return np.minimum(np.maximum(x, a["min"]), a["max"])
    if layer.op == "maxpool":
        return max_pool2d(x, a["kernel"], a["stride"], a["padding"], a["ceil_mode"])
    if layer.op == "avgpool":
        return avg_pool2d(x, a["kernel"], a["stride"], a["padding"], a["ceil_mode"],
                          a["count_include_pad"])
    if layer.op == "adaptive_avgpool":
        return adaptive_avg_pool2d(x, a["output_size"])
    if layer.op == "linear":
        return linear(x, w("weight"), w("bias"))
    if layer.op == "flatten":
        return x.reshape(x.shape[0], -1)
    if layer.op == "dropout":
        return x
    if layer.op == "softmax":
        return softmax(x)
    if layer.op == "batchnorm":
        return batch_norm(x, w("weight"), w("bias"), w("running_mean"), w("running_var"),
                          a["eps"])
    if layer.op == "add":
        if args[0].shape != args[1].shape:
            raise ValueError(f"add of shapes {args[0].shape} and {args[1].shape}")
        return args[0] + args[1]
    if layer.op == "concat":
        return np.concatenate(args, axis=1)
    if layer.op == "lrn":
        return local_response_norm(x, a["size"], a["alpha"], a["beta"], a["k"])
    raise ValueError(f"unknown op {layer.op}")


def forward(model: Model, weights: Dict[str, np.ndarray], x: np.ndarray,
            keep_all: bool = False):
    """Runs the model on a batch x [N, C, H, W] in float64.  Returns the output tensor, or the
    dict of every named tensor when keep_all."""
    x = np.asarray(x, dtype=np.float64)
    if list(x.shape[1:]) != list(model.input_shape):
        raise ValueError(f"input shape {list(x.shape)} does not match the model's "
                         f"[N] + {model.input_shape}")
    cache: Dict[str, np.ndarray] = {}

    def weight_of(layer: Layer):
        def w(role: str):
            key = layer.params.get(role)
            if key is None:
                return None
            if key not in cache:
                cache[key] = np.asarray(weights[key], dtype=np.float64)
            return cache[key]
        return w

    env = {"input": x}
    for layer in model.layers:
        try:
            env[layer.name] = _run_layer(layer, [env[i] for i in layer.inputs],
                                         weight_of(layer))
        except ValueError as exc:
            raise ModelError(f"{model.path}:{layer.line}: layer '{layer.name}': {exc}") from exc
    return env if keep_all else env[model.output]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="model YAML")
    parser.add_argument("--weights", help="safetensors file (default: the one the YAML names)")
    parser.add_argument("--input", required=True, help=".npy batch [N, C, H, W]")
    parser.add_argument("--output", required=True, help=".npy to write")
    parser.add_argument("--dtype", choices=["f32", "f64"], default="f32",
                        help="dtype of the written output (computation is always float64)")
    args = parser.parse_args(argv)
    try:
        model = load_model(args.model)
        weights = load_weights(model, args.weights)
        x = np.load(args.input)
        y = forward(model, weights, x)
    except (ModelError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    np.save(args.output, y.astype(np.float32 if args.dtype == "f32" else np.float64))
    print(f"{args.output}: {list(y.shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
