"""The op side of tools/onnx_import.py: per supported ONNX op, the attributes it may carry and
a handler that turns one node into a cnnrt layer (through the Importer's small interface:
activation / constant lookups, emit, alias, fail), and the evaluators that fold constant
subgraphs.  Kept apart so the importer's plumbing and the op rules each read in one sitting.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, Optional

import numpy as np

from cnnrt_model import conv_output_size, pool_output_size


class OnnxImportError(Exception):
    pass


SUPPORTED = ("Conv, Relu, Clip, MaxPool, AveragePool, GlobalAveragePool, ReduceMean (over H, W), "
             "Gemm, MatMul (+ Add), "
             "Flatten, Reshape (to [N, features]), BatchNormalization, Add, Concat (axis 1), "
             "Softmax (axis 1), LRN (odd size), Dropout, Identity, and constant subgraphs")

# Attributes each op may carry (anything else is an error naming it); values are checked by
# the handlers.
ATTRIBUTES = {
    "Conv": {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"},
    "MaxPool": {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order",
                "strides"},
    "AveragePool": {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape",
                    "pads", "strides"},
    "GlobalAveragePool": set(), "ReduceMean": {"axes", "keepdims", "noop_with_empty_axes"},
    "Relu": set(), "Clip": {"min", "max"},
    "Gemm": {"alpha", "beta", "transA", "transB"}, "MatMul": set(), "Flatten": {"axis"},
    "Reshape": {"allowzero"}, "BatchNormalization": {"epsilon", "momentum", "spatial",
                                                     "training_mode"},
    "Add": set(), "Concat": {"axis"}, "Softmax": {"axis"}, "LRN": {"alpha", "beta", "bias", "size"},
    "Dropout": {"ratio", "seed", "is_test"}, "Identity": set(), "Constant": None,
}


def safe_name(text: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_.]", "_", text).strip("_.") or "layer"
    return cleaned if not cleaned[0].isdigit() else "n" + cleaned


def _reshape_fold(values, attrs):
    data, shape = values[0], [int(s) for s in values[1]]
    shape = [data.shape[i] if s == 0 and not attrs.get("allowzero", 0) else s
             for i, s in enumerate(shape)]
    return data.reshape(shape)


def _unsqueeze_fold(values, attrs):
    axes = attrs.get("axes", None) if len(values) < 2 or values[1] is None else values[1]
    out = values[0]
    for axis in sorted(int(a) for a in axes):
        out = np.expand_dims(out, axis if axis >= 0 else axis + out.ndim + 1)
    return out


def _squeeze_fold(values, attrs):
    axes = attrs.get("axes", None) if len(values) < 2 or values[1] is None else values[1]
    return np.squeeze(values[0], axis=None if axes is None else tuple(int(a) for a in axes))


def _slice_fold(values, attrs):
    data, starts, ends = values[0], values[1], values[2]
    axes = values[3] if len(values) > 3 and values[3] is not None else range(len(starts))
    steps = values[4] if len(values) > 4 and values[4] is not None else [1] * len(starts)
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        index[int(axis)] = slice(int(start), int(end), int(step))
    return data[tuple(index)]


CAST_TYPES = {1: np.float32, 6: np.int32, 7: np.int64, 10: np.float16, 11: np.float64}

FOLDERS: Dict[str, Callable] = {
    "Identity": lambda v, a: v[0],
    "Reshape": _reshape_fold,
    "Unsqueeze": _unsqueeze_fold,
    "Squeeze": _squeeze_fold,
    "Slice": _slice_fold,
    "Gather": lambda v, a: np.take(v[0], v[1].astype(np.int64), axis=a.get("axis", 0)),
    "Concat": lambda v, a: np.concatenate([np.atleast_1d(x) for x in v], axis=a.get("axis", 0)),
    "Cast": lambda v, a: v[0].astype(CAST_TYPES[a["to"]]),
    "Transpose": lambda v, a: np.transpose(v[0], a.get("perm")),
    "Add": lambda v, a: v[0] + v[1], "Sub": lambda v, a: v[0] - v[1],
    "Mul": lambda v, a: v[0] * v[1], "Div": lambda v, a: v[0] / v[1],
    "Sqrt": lambda v, a: np.sqrt(v[0]),
    "Shape": lambda v, a: np.array(v[0].shape, dtype=np.int64)[a.get("start", 0):a.get("end")],
}


# --- handlers: one per supported op --------------------------------------------------------

def _auto_pad(attrs) -> str:
    value = attrs.get("auto_pad", b"NOTSET")
    return value.decode() if isinstance(value, bytes) else value


def _spatial_pads(imp, node, attrs, in_hw, kernel, stride, dilation):
    """(top, left, bottom, right) from pads or auto_pad (SAME_UPPER puts the odd pixel at the
    end, like TensorFlow; SAME_LOWER at the beginning)."""
    auto_pad = _auto_pad(attrs)
    if auto_pad in ("NOTSET", ""):
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
        if len(pads) != 4 or min(pads) < 0:
            imp.fail(node, f"pads {pads}: expected 4 non-negative values for a 2-D window")
        return tuple(int(p) for p in pads)
    if auto_pad == "VALID":
        return (0, 0, 0, 0)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        imp.fail(node, f"auto_pad {auto_pad} is not supported (NOTSET, VALID, SAME_UPPER, "
                       "SAME_LOWER)")
    begin, end = [], []
    for size, k, s, d in zip(in_hw, kernel, stride, dilation):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, large = total // 2, total - total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else large)
        end.append(large if auto_pad == "SAME_UPPER" else small)
    return (begin[0], begin[1], end[0], end[1])


def _window(imp, node, attrs, weight_kernel=None):
    kernel = list(attrs.get("kernel_shape", weight_kernel or []))
    if len(kernel) != 2:
        imp.fail(node, f"kernel_shape {kernel}: only 2-D windows are supported")
    stride = list(attrs.get("strides", [1, 1]))
    dilation = list(attrs.get("dilations", [1, 1]))
    if len(stride) != 2 or len(dilation) != 2 or min(stride + dilation) < 1:
        imp.fail(node, f"strides {stride} / dilations {dilation}: expected two positive values")
    return kernel, stride, dilation


def _input_chw(imp, node) -> tuple:
    tensor = imp.activation(node)
    shape = imp.shapes[tensor]
    if len(shape) != 3:
        imp.fail(node, f"needs an [N, C, H, W] input, got [N] + {shape}")
    return tensor, shape


def handle_conv(imp, node, attrs):
    tensor, (c, h, w) = _input_chw(imp, node)
    weight = imp.constant(node, 1, "the weight (input 2)")
    bias = imp.optional_constant(node, 2, "the bias (input 3)")
    if weight.ndim != 4:
        imp.fail(node, f"weight of shape {list(weight.shape)}: only 2-D convolutions are supported")
    kernel, stride, dilation = _window(imp, node, attrs, list(weight.shape[2:]))
    if kernel != list(weight.shape[2:]):
        imp.fail(node, f"kernel_shape {kernel} does not match the weight {list(weight.shape)}")
    group = int(attrs.get("group", 1))
    if group < 1 or c % group or weight.shape[0] % group or weight.shape[1] * group != c:
        imp.fail(node, f"group {group} does not fit {c} input channels and weight "
                       f"{list(weight.shape)}")
    top, left, bottom, right = _spatial_pads(imp, node, attrs, (h, w), kernel, stride, dilation)
    # SAME_UPPER is TensorFlow's SAME, which cnnrt resolves itself from the input size.
    same_upper = _auto_pad(attrs) == "SAME_UPPER"
    padding: Any = "same" if same_upper else (
        [top, left] if (top, left) == (bottom, right) else [top, left, bottom, right])
    out_hw = [conv_output_size(size, k, s, b, e, d) for size, k, s, b, e, d in
              zip((h, w), kernel, stride, (top, left), (bottom, right), dilation)]
    if min(out_hw) < 1:
        imp.fail(node, f"output would be empty ({out_hw})")
    layer = safe_name(node.name or node.output[0])
    fields = {"out_channels": int(weight.shape[0]), "kernel": kernel, "stride": stride,
              "padding": padding, "dilation": dilation, "groups": group}
    fields["weight"] = imp.weight_key(node, 1, "weight", layer, weight, False)
    if bias is not None:
        fields["bias"] = imp.weight_key(node, 2, "bias", layer, bias.reshape(-1), False)
    imp.emit(node, "conv", [tensor], [int(weight.shape[0])] + out_hw, **fields)


def handle_relu(imp, node, attrs):
    tensor = imp.activation(node)
    imp.emit(node, "relu", [tensor], imp.shapes[tensor])


def handle_clip(imp, node, attrs):
    tensor = imp.activation(node)
    if imp.opset < 11:
        low, high = attrs.get("min"), attrs.get("max")
    else:
        low_value = imp.optional_constant(node, 1, "min (input 2)")
        high_value = imp.optional_constant(node, 2, "max (input 3)")
        low = None if low_value is None else float(low_value)
        high = None if high_value is None else float(high_value)
    low = None if low is None or low == -np.inf or low < -3.4e38 else float(np.float32(low))
    high = None if high is None or high == np.inf or high > 3.4e38 else float(np.float32(high))
    if low is None and high is None:
        imp.alias(node, tensor)
    elif (low, high) == (0.0, 6.0):
        imp.emit(node, "relu6", [tensor], imp.shapes[tensor])
    elif (low, high) == (0.0, None):
        imp.emit(node, "relu", [tensor], imp.shapes[tensor])
    else:
        if low is not None and high is not None and low > high:
            imp.fail(node, f"min {low} is greater than max {high}")
        fields = {k: v for k, v in (("min", low), ("max", high)) if v is not None}
        imp.emit(node, "clip", [tensor], imp.shapes[tensor], **fields)


def handle_pool(imp, node, attrs):
    tensor, (c, h, w) = _input_chw(imp, node)
    imp.only_first_output_used(node)
    kernel, stride, dilation = _window(imp, node, attrs)
    if dilation != [1, 1]:
        imp.fail(node, f"dilations {dilation}: pools support 1 only")
    if attrs.get("storage_order", 0) != 0:
        imp.fail(node, "storage_order 1 (column-major indices) is not supported")
    top, left, bottom, right = _spatial_pads(imp, node, attrs, (h, w), kernel, stride, dilation)
    if (top, left) != (bottom, right):
        imp.fail(node, f"pads [{top}, {left}, {bottom}, {right}]: pools support symmetric "
                       "padding only")
    if 2 * top > kernel[0] or 2 * left > kernel[1]:
        imp.fail(node, "pads larger than half the kernel are not supported")
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    out_hw = [pool_output_size(size, k, s, p, 1, ceil_mode)
              for size, k, s, p in zip((h, w), kernel, stride, (top, left))]
    fields = {"kernel": kernel, "stride": stride, "padding": [top, left], "ceil_mode": ceil_mode}
    if node.op_type == "AveragePool":
        fields["count_include_pad"] = bool(attrs.get("count_include_pad", 0))
    imp.emit(node, "maxpool" if node.op_type == "MaxPool" else "avgpool", [tensor],
             [c] + out_hw, **fields)


def handle_global_average_pool(imp, node, attrs):
    tensor, (c, _, _) = _input_chw(imp, node)
    imp.emit(node, "adaptive_avgpool", [tensor], [c, 1, 1], output_size=1)


def handle_reduce_mean(imp, node, attrs):
    """A mean over H and W (what newer exporters emit for a global average pool)."""
    tensor, (c, _, _) = _input_chw(imp, node)
    axes = attrs.get("axes")
    if axes is None:
        value = imp.optional_constant(node, 1, "axes (input 2)")
        axes = None if value is None else [int(a) for a in value.reshape(-1)]
    if axes is None or sorted(int(a) % 4 for a in axes) != [2, 3]:
        imp.fail(node, f"axes {axes}: only the mean over H and W (axes 2, 3) is supported")
    if not attrs.get("keepdims", 1):
        pooled = imp.emit(node, "adaptive_avgpool", [tensor], [c, 1, 1], output_size=1)
        imp.emit(node, "flatten", [pooled], [c])
    else:
        imp.emit(node, "adaptive_avgpool", [tensor], [c, 1, 1], output_size=1)


def _linear(imp, node, tensor: str, weight: np.ndarray, bias: Optional[np.ndarray],
            weight_derived: bool, bias_derived: bool):
    shape = imp.shapes[tensor]
    if len(shape) != 1:
        imp.fail(node, f"needs an [N, features] input, got [N] + {shape}: flatten first")
    if weight.shape[1] != shape[0]:
        imp.fail(node, f"weight {list(weight.shape)} does not fit {shape[0]} input features")
    layer = safe_name(node.name or node.output[0])
    fields = {"out_features": int(weight.shape[0]),
              "weight": imp.weight_key(node, 1, "weight", layer, weight, weight_derived)}
    if bias is not None:
        fields["bias"] = imp.weight_key(node, 2, "bias", layer, bias, bias_derived)
    imp.emit(node, "linear", [tensor], [int(weight.shape[0])], **fields)


def handle_gemm(imp, node, attrs):
    tensor = imp.activation(node)
    if attrs.get("transA", 0):
        imp.fail(node, "transA 1 is not supported (the activation must be [N, features])")
    b = imp.constant(node, 1, "B (input 2)").astype(np.float64)
    c = imp.optional_constant(node, 2, "C (input 3)")
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    weight = (b if attrs.get("transB", 0) else b.T) * alpha
    bias = None
    if c is not None:
        out = weight.shape[0]
        if c.size not in (1, out) or (c.ndim == 2 and c.shape[0] != 1):
            imp.fail(node, f"C of shape {list(c.shape)} must broadcast as one row of {out}")
        bias = np.broadcast_to(c.reshape(-1).astype(np.float64) * beta, (out,))
    _linear(imp, node, tensor, weight, bias,
            weight_derived=alpha != 1.0 or not attrs.get("transB", 0),
            bias_derived=c is not None and (beta != 1.0 or c.shape != (weight.shape[0],)))


def handle_matmul(imp, node, attrs):
    tensor = imp.activation(node)
    b = imp.constant(node, 1, "the right operand (input 2)")
    if b.ndim != 2:
        imp.fail(node, f"right operand of shape {list(b.shape)}: only [features, out] matrices")
    bias = None
    # MatMul -> Add(constant) with no other reader of the product: one linear with a bias.
    adds = [n for n in imp.graph.node if n.op_type == "Add" and node.output[0] in n.input]
    if (len(adds) == 1 and imp.consumers.get(node.output[0]) == 1
            and node.output[0] not in imp.graph_outputs):
        other = [name for name in adds[0].input if name != node.output[0]]
        if len(other) == 1 and other[0] in imp.constants:
            value = imp.constants[other[0]]
            if value.size == b.shape[1]:
                bias = value.reshape(-1)
                imp.skip_outputs.add(adds[0].output[0])
    _linear(imp, node, tensor, b.T, bias, weight_derived=True, bias_derived=True)
    if bias is not None:
        imp.tensor[adds[0].output[0]] = imp.tensor[node.output[0]]


def handle_flatten(imp, node, attrs):
    tensor = imp.activation(node)
    shape = imp.shapes[tensor]
    axis = int(attrs.get("axis", 1))
    if axis not in (1, -len(shape)):
        imp.fail(node, f"axis {axis}: only flattening to [N, features] (axis 1) is supported")
    if len(shape) == 1:
        imp.alias(node, tensor)
    else:
        imp.emit(node, "flatten", [tensor], [int(np.prod(shape))])


def handle_reshape(imp, node, attrs):
    tensor = imp.activation(node)
    shape = imp.shapes[tensor]
    target = [int(v) for v in imp.constant(node, 1, "the target shape (input 2)")]
    features = int(np.prod(shape))
    if attrs.get("allowzero", 0):
        imp.fail(node, "allowzero 1 is not supported")
    # [N, features] spelled any usual way: batch as 0 (copy), -1, or the folded batch 1.
    if len(target) != 2 or target[0] not in (0, -1, 1) or target[1] not in (-1, features) or (
            target[0] == -1 and target[1] == -1):
        imp.fail(node, f"reshape of [N] + {shape} to {target}: only flattening to "
                       "[N, features] is supported")
    if len(shape) == 1:
        imp.alias(node, tensor)
    else:
        imp.emit(node, "flatten", [tensor], [features])


def handle_batchnorm(imp, node, attrs):
    tensor = imp.activation(node)
    imp.only_first_output_used(node)
    if attrs.get("training_mode", 0) or attrs.get("spatial", 1) != 1:
        imp.fail(node, "training_mode / spatial 0 are not supported (inference, per channel)")
    channels = imp.shapes[tensor][0]
    layer = safe_name(node.name or node.output[0])
    fields = {"eps": float(np.float32(attrs.get("epsilon", 1e-5)))}
    for index, role in enumerate(("weight", "bias", "running_mean", "running_var"), start=1):
        value = imp.constant(node, index, role).reshape(-1)
        if value.size != channels:
            imp.fail(node, f"{role} has {value.size} values for {channels} channels")
        fields[role] = imp.weight_key(node, index, role, layer, value, False)
    imp.emit(node, "batchnorm", [tensor], imp.shapes[tensor], **fields)


def handle_add(imp, node, attrs):
    if any(name in imp.constants for name in node.input):
        imp.fail(node, "adding a constant is supported only as the bias right after a MatMul")
    a, b = imp.activation(node, 0), imp.activation(node, 1)
    if imp.shapes[a] != imp.shapes[b]:
        imp.fail(node, f"shapes [N] + {imp.shapes[a]} and {imp.shapes[b]}: broadcasting is not "
                       "supported")
    imp.emit(node, "add", [a, b], imp.shapes[a])


def handle_concat(imp, node, attrs):
    tensors = [imp.activation(node, i) for i in range(len(node.input))]
    rank = len(imp.shapes[tensors[0]]) + 1
    if int(attrs.get("axis", 1)) % rank != 1:
        imp.fail(node, f"axis {attrs.get('axis')}: only concatenation along channels (axis 1)")
    shapes = [imp.shapes[t] for t in tensors]
    if any(s[1:] != shapes[0][1:] or len(s) != len(shapes[0]) for s in shapes):
        imp.fail(node, f"inputs [N] + {shapes} differ beyond the channels")
    imp.emit(node, "concat", tensors, [sum(s[0] for s in shapes)] + shapes[0][1:])


def handle_softmax(imp, node, attrs):
    tensor = imp.activation(node)
    shape = imp.shapes[tensor]
    rank = len(shape) + 1
    default_axis = 1 if imp.opset < 13 else -1
    axis = int(attrs.get("axis", default_axis)) % rank
    # Before opset 13 Softmax flattens from `axis` on: over channels only when nothing follows.
    if axis != 1 or (imp.opset < 13 and rank > 2 and int(np.prod(shape[1:])) != 1):
        imp.fail(node, f"softmax over axis {attrs.get('axis', default_axis)} of [N] + {shape}: "
                       "only over the channels/features (axis 1) is supported")
    imp.emit(node, "softmax", [tensor], shape)


def handle_lrn(imp, node, attrs):
    tensor = imp.activation(node)
    size = int(attrs["size"])
    if size % 2 == 0:
        imp.fail(node, f"size {size}: even LRN windows differ between ONNX and cnnrt (PyTorch); "
                       "odd sizes only")
    imp.emit(node, "lrn", [tensor], imp.shapes[tensor], size=size,
             alpha=float(np.float32(attrs.get("alpha", 1e-4))),
             beta=float(np.float32(attrs.get("beta", 0.75))),
             k=float(np.float32(attrs.get("bias", 1.0))))


def handle_dropout(imp, node, attrs):
    imp.only_first_output_used(node)
    mode = imp.optional_constant(node, 2, "training_mode (input 3)")
    if mode is not None and bool(mode):
        imp.fail(node, "training_mode true is not supported")
    imp.alias(node, imp.activation(node))


def handle_identity(imp, node, attrs):
    imp.alias(node, imp.activation(node))


HANDLERS = {"Conv": handle_conv, "Relu": handle_relu, "Clip": handle_clip,
            "MaxPool": handle_pool, "AveragePool": handle_pool,
            "GlobalAveragePool": handle_global_average_pool, "ReduceMean": handle_reduce_mean,
            "Gemm": handle_gemm,
            "MatMul": handle_matmul, "Flatten": handle_flatten, "Reshape": handle_reshape,
            "BatchNormalization": handle_batchnorm, "Add": handle_add, "Concat": handle_concat,
            "Softmax": handle_softmax, "LRN": handle_lrn, "Dropout": handle_dropout,
            "Identity": handle_identity}
