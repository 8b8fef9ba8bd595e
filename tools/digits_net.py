"""The numpy network of tools/train_digits.py (models/digits): layers with hand-written backward
passes, SGD training.  Float64; im2col 3x3 pad 1 convolutions; see train_digits.py's docstring
for the architecture and the recipe."""

from __future__ import annotations

import numpy as np


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


def accuracy_vector(params, x, y):
    """Per image: is the prediction right."""
    return forward(params, x).argmax(axis=1) == y


def accuracy(params, x, y) -> float:
    return float(accuracy_vector(params, x, y).mean() * 100.0)


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
