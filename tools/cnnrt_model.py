"""cnnrt model files (YAML + safetensors) as plain Python data.

Shared by the numpy reference (reference_numpy.py), the PyTorch comparison (compare_torch.py),
the torchvision exporter and the end-to-end tests.  It is deliberately written from the format
description (docs/FORMAT.md) rather than from the C++ loader, so that the Python side is an
independent second reading of the format: if the two disagree, a golden test fails.

Shape of the data:
  Model   name, input_shape [C, H, W], mean/std (may be empty), weights_file / labels_file
          (resolved relative to the YAML), output (tensor name), layers (topological order).
  Layer   name, op, inputs (tensor names; "input" is the graph input), attrs (normalised:
          kernel/stride/padding/dilation/output_size as (h, w) tuples, defaults filled in),
          params (role -> key in the weight file, e.g. "weight" -> "features.0.weight").
          A conv's padding is kept as written, normalised: (top, left, bottom, right) or "same";
          conv_padding(attrs, h, w) gives the four pads for an input size.

to_torch_module(model, weights) builds an equivalent torch.nn.Module; torch is imported inside
that function only, so everything else works on machines without torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np
import yaml


class ModelError(Exception):
    """A model or weight file that does not make sense (message names file, line and layer)."""


# op -> (attribute defaults (None = required), weight roles, optional roles, (min, max) inputs)
# Pair-valued attributes are listed in PAIR_ATTRS.  max inputs -1 = unbounded.
OP_SPECS: Dict[str, tuple] = {
    "conv": ({"out_channels": None, "kernel": None, "stride": 1, "padding": 0, "dilation": 1,
              "groups": 1}, ["weight", "bias"], ["bias"], (1, 1)),
    "relu": ({}, [], [], (1, 1)),
    "relu6": ({}, [], [], (1, 1)),
    "clip": ({"min": -np.inf, "max": np.inf}, [], [], (1, 1)),
    "maxpool": ({"kernel": None, "stride": None, "padding": 0, "ceil_mode": False},
                [], [], (1, 1)),
    "avgpool": ({"kernel": None, "stride": None, "padding": 0, "ceil_mode": False,
                 "count_include_pad": True}, [], [], (1, 1)),
    "adaptive_avgpool": ({"output_size": None}, [], [], (1, 1)),
    "linear": ({"out_features": None}, ["weight", "bias"], ["bias"], (1, 1)),
    "flatten": ({}, [], [], (1, 1)),
    "dropout": ({"p": 0.5}, [], [], (1, 1)),
    "softmax": ({}, [], [], (1, 1)),
    "batchnorm": ({"eps": 1e-5}, ["weight", "bias", "running_mean", "running_var"], [], (1, 1)),
    "add": ({}, [], [], (2, 2)),
    "concat": ({}, [], [], (2, -1)),
    "lrn": ({"size": None, "alpha": 1e-4, "beta": 0.75, "k": 1.0}, [], [], (1, 1)),
}
PAIR_ATTRS = {"kernel", "stride", "padding", "dilation", "output_size"}
STRUCTURE_KEYS = {"name", "op", "input", "inputs", "params"}


@dataclass
class Layer:
    name: str
    op: str
    inputs: List[str]
    attrs: Dict[str, Any]
    params: Dict[str, str]
    line: int = 0

    def pair(self, key: str) -> tuple:
        return self.attrs[key]


@dataclass
class Model:
    name: str
    path: str
    input_shape: List[int]
    mean: List[float]
    std: List[float]
    weights_file: str
    labels_file: str
    output: str
    layers: List[Layer] = field(default_factory=list)

    def layer(self, name: str) -> Layer:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(name)

    def param_keys(self) -> List[str]:
        """Every weight-file key the model references, in layer order, without repeats."""
        keys: List[str] = []
        for layer in self.layers:
            for key in layer.params.values():
                if key not in keys:
                    keys.append(key)
        return keys


def _line_of(node: Any) -> int:
    # PyYAML's SafeLoader keeps no marks on dicts; _MarkedLoader below adds "__line__".
    return node.get("__line__", 0) if isinstance(node, dict) else 0


class _MarkedLoader(yaml.SafeLoader):
    """SafeLoader that records the 1-based line of every mapping (for error messages)."""

    def construct_mapping(self, node, deep=False):  # noqa: N802 (PyYAML API)
        mapping = super().construct_mapping(node, deep=deep)
        mapping["__line__"] = node.start_mark.line + 1
        return mapping


def _pair(value: Any, where: str, key: str, min_value: int) -> tuple:
    if isinstance(value, bool):
        raise ModelError(f"{where}: '{key}' must be an int or [h, w], got {value!r}")
    if isinstance(value, int):
        value = [value, value]
    if (not isinstance(value, list) or len(value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        raise ModelError(f"{where}: '{key}' must be an int or [h, w], got {value!r}")
    if min(value) < min_value:
        raise ModelError(f"{where}: '{key}' must be >= {min_value}, got {value!r}")
    return (value[0], value[1])


def _conv_padding_attr(value: Any, where: str):
    """Conv padding as written -> (top, left, bottom, right) or "same" (docs/FORMAT.md)."""
    if value == "same":
        return "same"
    forms = "an int, [h, w], [top, left, bottom, right] or same"
    if isinstance(value, list) and len(value) == 4:
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise ModelError(f"{where}: 'padding' must be {forms}, got {value!r}")
        pads = tuple(value)
    elif isinstance(value, list) and len(value) != 2:
        raise ModelError(f"{where}: 'padding' must be {forms}, got a list of {len(value)}")
    elif isinstance(value, (int, list)) and not isinstance(value, bool):
        h, w = _pair(value, where, "padding", -(1 << 30))
        pads = (h, w, h, w)
    else:
        raise ModelError(f"{where}: 'padding' must be {forms}, got {value!r}")
    if min(pads) < 0:
        raise ModelError(f"{where}: 'padding' must be non-negative, got {value!r}")
    return pads


def conv_padding(attrs: Dict[str, Any], h: int, w: int) -> tuple:
    """(top, left, bottom, right) of a conv on an h x w input; `same` follows TensorFlow:
    out = ceil(in / stride), total = max((out - 1) * stride + (k - 1) * dilation + 1 - in, 0),
    top/left = total // 2, bottom/right = the rest."""
    padding = attrs["padding"]
    if padding != "same":
        return tuple(padding)
    pads = []
    for size, k, s, d in zip((h, w), attrs["kernel"], attrs["stride"], attrs["dilation"]):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        pads.append((total // 2, total - total // 2))
    (top, bottom), (left, right) = pads
    return (top, left, bottom, right)


def conv_output_size(size: int, kernel: int, stride: int, pad_begin: int, pad_end: int,
                     dilation: int) -> int:
    """torch.nn.Conv2d's output extent with possibly different padding before and after."""
    span = dilation * (kernel - 1) + 1
    numerator = size + pad_begin + pad_end - span
    if numerator < 0:
        raise ValueError(f"window {span} larger than padded input {size + pad_begin + pad_end}")
    return numerator // stride + 1


def _parse_layer(raw: Any, index: int, previous: str, source: str) -> Layer:
    if not isinstance(raw, dict):
        raise ModelError(f"{source}: layer #{index} must be a mapping, got {raw!r}")
    line = _line_of(raw)
    raw = {k: v for k, v in raw.items() if k != "__line__"}
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ModelError(f"{source}:{line}: layer #{index} needs a 'name'")
    where = f"{source}:{line}: layer '{name}'"
    op = raw.get("op")
    if op not in OP_SPECS:
        raise ModelError(f"{where}: unknown op {op!r} (valid: {', '.join(OP_SPECS)})")
    defaults, roles, optional_roles, (min_in, max_in) = OP_SPECS[op]

    if "input" in raw and "inputs" in raw:
        raise ModelError(f"{where}: give either 'input' or 'inputs', not both")
    if "inputs" in raw:
        inputs = raw["inputs"]
        if not isinstance(inputs, list) or not all(isinstance(i, str) for i in inputs):
            raise ModelError(f"{where}: 'inputs' must be a list of layer names")
    elif "input" in raw:
        if not isinstance(raw["input"], str):
            raise ModelError(f"{where}: 'input' must be a layer name")
        inputs = [raw["input"]]
    else:
        inputs = [previous]
    if len(inputs) < min_in or (max_in >= 0 and len(inputs) > max_in):
        raise ModelError(f"{where}: {op} takes {min_in}..{max_in if max_in >= 0 else 'n'} "
                         f"inputs, got {len(inputs)}")

    # Weight keys: top-level role keys (weight: features.0.weight) or a nested params map.
    nested = raw.get("params", {}) or {}
    if not isinstance(nested, dict):
        raise ModelError(f"{where}: 'params' must be a mapping of role to weight key")
    nested = {k: v for k, v in nested.items() if k != "__line__"}
    params: Dict[str, str] = {}
    for role in roles:
        key = raw.get(role, nested.get(role))
        if key is None:
            if role not in optional_roles:
                raise ModelError(f"{where}: missing weight key '{role}'")
            continue
        if not isinstance(key, str):
            raise ModelError(f"{where}: '{role}' must name a tensor in the weight file")
        params[role] = key
    for role in nested:
        if role not in roles:
            raise ModelError(f"{where}: {op} has no weight '{role}'")

    attrs: Dict[str, Any] = {}
    for key, value in raw.items():
        if key in STRUCTURE_KEYS or key in roles:
            continue
        if key not in defaults:
            raise ModelError(f"{where}: unknown key '{key}' for op {op}")
    for key, default in defaults.items():
        value = raw.get(key, default)
        if value is None:
            if key == "stride":  # pools: stride defaults to the kernel
                value = attrs["kernel"]
            else:
                raise ModelError(f"{where}: missing required key '{key}'")
        if key == "padding" and op == "conv":
            value = _conv_padding_attr(value, where)
        elif key in PAIR_ATTRS:
            min_value = 0 if key == "padding" else 1
            value = value if isinstance(value, tuple) else _pair(value, where, key, min_value)
        elif isinstance(default, bool) or key in ("ceil_mode", "count_include_pad"):
            if not isinstance(value, bool):
                raise ModelError(f"{where}: '{key}' must be true or false")
        elif key in ("out_channels", "out_features", "groups", "size"):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ModelError(f"{where}: '{key}' must be a positive int, got {value!r}")
        else:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ModelError(f"{where}: '{key}' must be a number, got {value!r}")
            value = float(value)
        attrs[key] = value
    if op == "clip":
        if "min" not in raw and "max" not in raw:
            raise ModelError(f"{where}: clip needs 'min', 'max' or both")
        if attrs["min"] > attrs["max"]:
            raise ModelError(f"{where}: clip 'min' is greater than 'max'")
    return Layer(name=name, op=op, inputs=list(inputs), attrs=attrs, params=params, line=line)


def parse_model(text: str, source: str = "<string>") -> Model:
    try:
        doc = yaml.load(text, Loader=_MarkedLoader)  # noqa: S506 (SafeLoader subclass)
    except yaml.YAMLError as exc:
        raise ModelError(f"{source}: invalid YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise ModelError(f"{source}: top level must be a mapping")
    base = os.path.dirname(os.path.abspath(source)) if source != "<string>" else os.getcwd()
    known = {"name", "input", "weights", "labels", "output", "layers", "__line__"}
    for key in doc:
        if key not in known:
            raise ModelError(f"{source}: unknown top-level key '{key}'")

    spec = doc.get("input")
    if not isinstance(spec, dict) or "shape" not in spec:
        raise ModelError(f"{source}: 'input' must be a mapping with 'shape: [C, H, W]'")
    shape = spec["shape"]
    if not isinstance(shape, list) or not shape or not all(
            isinstance(d, int) and d > 0 for d in shape):
        raise ModelError(f"{source}: input shape must be a list of positive ints, got {shape!r}")
    mean = [float(v) for v in spec.get("mean", []) or []]
    std = [float(v) for v in spec.get("std", []) or []]

    raw_layers = doc.get("layers")
    if not isinstance(raw_layers, list) or not raw_layers:
        raise ModelError(f"{source}: 'layers' must be a non-empty list")
    layers: List[Layer] = []
    seen = {"input"}
    previous = "input"
    for index, raw in enumerate(raw_layers):
        layer = _parse_layer(raw, index, previous, source)
        if layer.name in seen:
            raise ModelError(f"{source}:{layer.line}: duplicate layer name '{layer.name}'")
        for tensor in layer.inputs:
            if tensor not in seen:
                raise ModelError(f"{source}:{layer.line}: layer '{layer.name}' reads "
                                 f"'{tensor}', which is not defined before it")
        seen.add(layer.name)
        layers.append(layer)
        previous = layer.name

    output = doc.get("output", layers[-1].name)
    if output not in seen or output == "input":
        raise ModelError(f"{source}: output '{output}' is not a layer")

    def resolve(key: str) -> str:
        value = doc.get(key)
        if not value:
            return ""
        return value if os.path.isabs(value) else os.path.join(base, value)

    return Model(name=str(doc.get("name", "")), path=source, input_shape=list(shape),
                 mean=mean, std=std, weights_file=resolve("weights"),
                 labels_file=resolve("labels"), output=output, layers=layers)


def load_model(path: str) -> Model:
    with open(path, "r", encoding="utf-8") as handle:
        return parse_model(handle.read(), path)


def pool_output_size(size: int, kernel: int, stride: int, pad: int, dilation: int,
                     ceil_mode: bool) -> int:
    """Output extent of a sliding window (torch.nn.Conv2d / MaxPool2d docs)."""
    span = dilation * (kernel - 1) + 1
    numerator = size + 2 * pad - span
    if numerator < 0:
        raise ValueError(f"window {span} larger than padded input {size + 2 * pad}")
    out = (-(-numerator // stride) if ceil_mode else numerator // stride) + 1
    # With ceil_mode, a window that would start inside the right padding is dropped.
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def infer_shapes(model: Model) -> Dict[str, List[int]]:
    """Per-sample shape of every tensor ("input" and each layer), for weight shapes and
    messages.  Raises ModelError naming the layer when shapes do not fit."""
    shapes: Dict[str, List[int]] = {"input": list(model.input_shape)}
    for layer in model.layers:
        ins = [shapes[name] for name in layer.inputs]
        x, a = ins[0], layer.attrs
        where = f"{model.path}:{layer.line}: layer '{layer.name}'"
        try:
            if layer.op in ("conv", "maxpool", "avgpool", "adaptive_avgpool") and len(x) != 3:
                raise ValueError(f"needs a [C, H, W] input, got {x}")
            if layer.op == "conv":
                if x[0] % a["groups"] or a["out_channels"] % a["groups"]:
                    raise ValueError(f"channels {x[0]} -> {a['out_channels']} do not divide "
                                     f"into {a['groups']} groups")
                top, left, bottom, right = conv_padding(a, x[1], x[2])
                out = [a["out_channels"]] + [
                    conv_output_size(x[1 + i], a["kernel"][i], a["stride"][i], begin, end,
                                     a["dilation"][i])
                    for i, (begin, end) in enumerate(((top, bottom), (left, right)))]
            elif layer.op in ("maxpool", "avgpool"):
                out = [x[0]] + [pool_output_size(x[1 + i], a["kernel"][i], a["stride"][i],
                                                 a["padding"][i], 1, a["ceil_mode"])
                                for i in range(2)]
            elif layer.op == "adaptive_avgpool":
                out = [x[0]] + list(a["output_size"])
            elif layer.op == "linear":
                if len(x) != 1:
                    raise ValueError(f"needs a flat input, got {x} (add a flatten layer)")
                out = [a["out_features"]]
            elif layer.op == "flatten":
                out = [int(np.prod(x))]
            elif layer.op == "add":
                if ins[0] != ins[1]:
                    raise ValueError(f"add of shapes {ins[0]} and {ins[1]}")
                out = list(x)
            elif layer.op == "concat":
                if any(s[1:] != x[1:] or len(s) != len(x) for s in ins):
                    raise ValueError(f"concat of shapes {ins}")
                out = [sum(s[0] for s in ins)] + list(x[1:])
            else:
                out = list(x)
        except ValueError as exc:
            raise ModelError(f"{where}: {exc}") from exc
        if min(out) < 1:
            raise ModelError(f"{where}: output shape {out} is empty")
        shapes[layer.name] = out
    return shapes


def param_shapes(model: Model) -> Dict[str, List[int]]:
    """Expected shape of every weight-file tensor the model references."""
    shapes = infer_shapes(model)
    result: Dict[str, List[int]] = {}
    for layer in model.layers:
        x, a = shapes[layer.inputs[0]], layer.attrs
        for role, key in layer.params.items():
            if layer.op == "conv":
                shape = ([a["out_channels"], x[0] // a["groups"]] + list(a["kernel"])
                         if role == "weight" else [a["out_channels"]])
            elif layer.op == "linear":
                shape = [a["out_features"], x[0]] if role == "weight" else [a["out_features"]]
            else:  # batchnorm
                shape = [x[0]]
            if key in result and result[key] != shape:
                raise ModelError(f"{model.path}:{layer.line}: tensor '{key}' is used with shapes "
                                 f"{result[key]} and {shape}")
            result[key] = shape
    return result


def load_weights(model: Model, path: Optional[str] = None) -> Dict[str, np.ndarray]:
    """The tensors the model references, as stored (float32 or float16).  Missing keys are an
    error naming the layer; extra tensors in the file are ignored (like the C++ loader)."""
    path = path or model.weights_file
    if not path:
        raise ModelError(f"{model.path}: no weight file given and none named in the model")
    try:
        from safetensors.numpy import load_file
    except ImportError as exc:
        raise ModelError("the 'safetensors' package is needed: pip install safetensors") from exc
    if not os.path.exists(path):
        raise ModelError(f"{path}: weight file not found")
    tensors = load_file(path)
    weights: Dict[str, np.ndarray] = {}
    for layer in model.layers:
        for role, key in layer.params.items():
            if key not in tensors:
                raise ModelError(f"{path}: layer '{layer.name}' needs tensor '{key}' ({role}), "
                                 "which the file does not have")
            weights[key] = tensors[key]
    try:
        expected = param_shapes(model)
    except ModelError:
        return weights  # shape errors are reported where the layer runs
    for key, shape in expected.items():
        if list(weights[key].shape) != shape:
            raise ModelError(f"{path}: tensor '{key}' has shape {list(weights[key].shape)}, "
                             f"the model needs {shape}")
    return weights


def to_torch_module(model: Model, weights: Dict[str, np.ndarray]):
    """An eval-mode torch.nn.Module computing the same function (fp32 parameters, on the CPU;
    move/cast it as needed).  forward(x) returns the model output; run_layers(env, names) runs a
    subset of layers on a dict of named tensors (used to time fused blocks layer by layer)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    def tensor(key: str):
        return torch.from_numpy(np.ascontiguousarray(weights[key], dtype=np.float32))

    class BatchNorm(nn.Module):
        """Inference batchnorm over axis 1 of any rank (BatchNorm1d/2d pick one rank)."""

        def __init__(self, layer: Layer):
            super().__init__()
            self.eps = layer.attrs["eps"]
            for role in ("weight", "bias", "running_mean", "running_var"):
                self.register_buffer(role, tensor(layer.params[role]))

        def forward(self, x):
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                                False, 0.0, self.eps)

    class Clamp(nn.Module):
        def __init__(self, lo: float, hi: float):
            super().__init__()
            self.lo, self.hi = lo, hi

        def forward(self, x):
            return torch.clamp(x, self.lo, self.hi)

    shapes = infer_shapes(model)

    def build(layer: Layer) -> nn.Module:
        a = layer.attrs
        if layer.op == "conv":
            w = tensor(layer.params["weight"])
            in_shape = shapes[layer.inputs[0]]
            top, left, bottom, right = conv_padding(a, in_shape[1], in_shape[2])
            symmetric = (top, left) == (bottom, right)
            conv = nn.Conv2d(w.shape[1] * a["groups"], a["out_channels"], a["kernel"],
                             stride=a["stride"], padding=(top, left) if symmetric else 0,
                             dilation=a["dilation"], groups=a["groups"],
                             bias="bias" in layer.params)
            with torch.no_grad():
                conv.weight.copy_(w)
                if "bias" in layer.params:
                    conv.bias.copy_(tensor(layer.params["bias"]))
            # Asymmetric pads (TF "SAME", ONNX) as an explicit zero pad before the conv.
            return conv if symmetric else nn.Sequential(
                nn.ZeroPad2d((left, right, top, bottom)), conv)
        if layer.op == "linear":
            w = tensor(layer.params["weight"])
            linear = nn.Linear(w.shape[1], a["out_features"], bias="bias" in layer.params)
            with torch.no_grad():
                linear.weight.copy_(w)
                if "bias" in layer.params:
                    linear.bias.copy_(tensor(layer.params["bias"]))
            return linear
        if layer.op == "relu":
            return nn.ReLU()
        if layer.op == "relu6":
            return nn.ReLU6()
        if layer.op == "clip":
            return Clamp(a["min"], a["max"])
        if layer.op == "maxpool":
            return nn.MaxPool2d(a["kernel"], a["stride"], a["padding"], ceil_mode=a["ceil_mode"])
        if layer.op == "avgpool":
            return nn.AvgPool2d(a["kernel"], a["stride"], a["padding"], ceil_mode=a["ceil_mode"],
                                count_include_pad=a["count_include_pad"])
        if layer.op == "adaptive_avgpool":
            return nn.AdaptiveAvgPool2d(a["output_size"])
        if layer.op == "flatten":
            return nn.Flatten(1)
        if layer.op == "dropout":
            return nn.Dropout(a["p"])
        if layer.op == "softmax":
            return nn.Softmax(dim=1)
        if layer.op == "batchnorm":
            return BatchNorm(layer)
        if layer.op == "lrn":
            return nn.LocalResponseNorm(a["size"], a["alpha"], a["beta"], a["k"])
        return nn.Identity()  # add / concat are applied in run_layers

    class CnnrtModule(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer_list = list(model.layers)
            self.output_name = model.output
            # ModuleDict keys may not contain '.'; keep the YAML names for lookups.
            self.key = {layer.name: f"l{i}_" + "".join(c if c.isalnum() else "_"
                                                       for c in layer.name)
                        for i, layer in enumerate(model.layers)}
            self.ops = nn.ModuleDict({self.key[l.name]: build(l) for l in model.layers})

        def run_layer(self, layer: Layer, args: list):
            if layer.op == "add":
                return args[0] + args[1]
            if layer.op == "concat":
                return torch.cat(args, dim=1)
            return self.ops[self.key[layer.name]](args[0])

        def run_layers(self, env: dict, names: list) -> dict:
            for layer in self.layer_list:
                if layer.name in names:
                    env[layer.name] = self.run_layer(layer, [env[i] for i in layer.inputs])
            return env

        def forward(self, x):
            env = {"input": x}
            for layer in self.layer_list:
                env[layer.name] = self.run_layer(layer, [env[i] for i in layer.inputs])
            return env[self.output_name]

    return CnnrtModule().eval()
