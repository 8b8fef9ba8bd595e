#!/usr/bin/env python3
"""Imports an ONNX CNN classifier into cnnrt's format: OUT.yaml plus OUT.safetensors beside it.

  python3 tools/onnx_import.py MODEL.onnx -o OUT.yaml [--input-shape C,H,W] [--name NAME]

What maps (ONNX op -> cnnrt op, docs/FORMAT.md):
  Conv -> conv (pads incl. asymmetric, auto_pad SAME_UPPER -> `padding: same`, SAME_LOWER /
  VALID resolved, strides, dilations, group); Relu -> relu; Clip -> relu6 when [0, 6], relu when
  [0, inf), else clip (bounds from attributes, opset < 11, or constant inputs); MaxPool /
  AveragePool -> maxpool / avgpool (symmetric pads, ceil_mode, count_include_pad);
  GlobalAveragePool and ReduceMean over H, W -> adaptive_avgpool to 1x1 (+ flatten without
  keepdims); Gemm -> linear (transB, alpha and beta folded into the weights); MatMul (+ Add of
  a constant) -> linear; Flatten / Reshape to [N, features] -> flatten; BatchNormalization ->
  batchnorm; Add of two activations -> add; Concat on channels -> concat; Softmax on axis 1 ->
  softmax; LRN (odd size) -> lrn; Dropout and Identity are dropped.  Nodes whose inputs are all
  constants (initialisers, Constant nodes, Shape of a tensor of known shape, and the Gather /
  Unsqueeze / Concat / Cast / Reshape / arithmetic chains exporters build from them) are folded
  here, so `x.view(x.size(0), -1)` imports as a flatten.  Ceil-mode pools follow PyTorch (a
  window that would start in the right padding is dropped), as onnxruntime's kernels do.

The batch dimension is cnnrt's run-time choice: the graph input must be [N, C, H, W] or [N, F]
with every dimension but N fixed (or fixed with --input-shape).  Anything else -- an op or an
attribute value cnnrt cannot express -- is one `error:` line naming the node, its op and what is
supported, exit code 1, and no output file (both files are written to temporaries and renamed
only when the whole import succeeded).  The written YAML is re-read with tools/cnnrt_model.py
(shape inference) before anything is renamed into place.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from typing import Any, Dict, List, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cnnrt_model import ModelError, infer_shapes, parse_model  # noqa: E402
from onnx_handlers import (ATTRIBUTES, FOLDERS, HANDLERS, SUPPORTED,  # noqa: E402
                           OnnxImportError, safe_name)

class Importer:
    def __init__(self, model, input_shape: Optional[List[int]]):
        import onnx
        from onnx import helper, numpy_helper

        self.onnx, self.helper, self.numpy_helper = onnx, helper, numpy_helper
        self.graph = model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                          13)
        self.constants: Dict[str, np.ndarray] = {
            t.name: numpy_helper.to_array(t) for t in self.graph.initializer}
        self.tensor: Dict[str, str] = {}   # ONNX activation name -> cnnrt tensor name
        self.shapes: Dict[str, List[int]] = {}  # cnnrt tensor -> per-sample shape
        self.layers: List[Dict[str, Any]] = []
        self.weights: Dict[str, np.ndarray] = {}
        self.used_names = {"input"}
        self.consumers: Dict[str, int] = {}
        for node in self.graph.node:
            for name in node.input:
                self.consumers[name] = self.consumers.get(name, 0) + 1
        self.skip_outputs: set = set()  # Add nodes already fused into a MatMul
        self._bind_input(input_shape)

    # --- plumbing -------------------------------------------------------------------------

    def fail(self, node, message: str) -> None:
        raise OnnxImportError(f"node '{node.name or node.output[0]}' ({node.op_type}): {message}")

    def attributes(self, node) -> Dict[str, Any]:
        allowed = ATTRIBUTES[node.op_type]
        values = {}
        for attribute in node.attribute:
            if allowed is not None and attribute.name not in allowed:
                self.fail(node, f"attribute '{attribute.name}' is not supported (supported: "
                                f"{', '.join(sorted(allowed)) or 'none'})")
            values[attribute.name] = self.helper.get_attribute_value(attribute)
        return values

    def _bind_input(self, override: Optional[List[int]]) -> None:
        inputs = [i for i in self.graph.input if i.name not in self.constants]
        if len(inputs) != 1:
            raise OnnxImportError(f"the graph has {len(inputs)} non-constant inputs "
                                  f"({', '.join(i.name for i in inputs)}); cnnrt takes one")
        value = inputs[0]
        dims = [d.dim_value if d.HasField("dim_value") else None
                for d in value.type.tensor_type.shape.dim]
        if len(dims) not in (2, 4):
            raise OnnxImportError(f"graph input '{value.name}' has rank {len(dims)}; cnnrt takes "
                                  "[N, C, H, W] or [N, features]")
        sample = dims[1:]
        if override:
            if len(override) != len(sample) or any(
                    d is not None and d != o for d, o in zip(sample, override)):
                raise OnnxImportError(f"--input-shape {override} does not fit graph input "
                                      f"'{value.name}' {dims}")
            sample = override
        if any(d is None or d <= 0 for d in sample):
            raise OnnxImportError(f"graph input '{value.name}' has dynamic dimensions {dims} "
                                  "beyond the batch: fix them with --input-shape C,H,W")
        self.input_name = value.name
        self.tensor[value.name] = "input"
        self.shapes["input"] = [int(d) for d in sample]

    def constant(self, node, index: int, what: str) -> np.ndarray:
        name = node.input[index] if index < len(node.input) else ""
        if name not in self.constants:
            self.fail(node, f"{what} must be a constant (an initialiser or a folded subgraph)")
        return self.constants[name]

    def optional_constant(self, node, index: int, what: str) -> Optional[np.ndarray]:
        if index >= len(node.input) or node.input[index] == "":
            return None
        return self.constant(node, index, what)

    def activation(self, node, index: int = 0) -> str:
        name = node.input[index]
        if name not in self.tensor:
            self.fail(node, f"input '{name}' is neither the graph input nor produced by a "
                            "supported node")
        return self.tensor[name]

    def weight_key(self, node, index: int, role: str, layer: str, value: np.ndarray,
                   derived: bool) -> str:
        """The initialiser's own name when the tensor is used as stored, else layer.role."""
        source = node.input[index] if index < len(node.input) else ""
        key = source if (source and not derived and source in self.constants) else f"{layer}.{role}"
        self.weights[key] = np.ascontiguousarray(value, dtype=np.float32)
        return key

    def emit(self, node, op: str, inputs: List[str], shape: List[int], **fields) -> str:
        base = safe_name(node.name or node.output[0])
        name, suffix = base, 1
        while name in self.used_names:
            suffix += 1
            name = f"{base}_{suffix}"
        self.used_names.add(name)
        layer = {"name": name, "op": op}
        if len(inputs) == 1:
            layer["input"] = inputs[0]
        else:
            layer["inputs"] = inputs
        layer.update(fields)
        self.layers.append(layer)
        self.shapes[name] = shape
        self.tensor[node.output[0]] = name
        return name

    def alias(self, node, tensor: str) -> None:
        self.tensor[node.output[0]] = tensor

    def only_first_output_used(self, node) -> None:
        for extra in node.output[1:]:
            if extra and (self.consumers.get(extra) or extra in self.graph_outputs):
                self.fail(node, f"output '{extra}' is used; cnnrt computes inference outputs only")

    # --- the walk -------------------------------------------------------------------------

    def run(self) -> None:
        self.graph_outputs = [o.name for o in self.graph.output]
        for node in self.graph.node:
            if node.output[0] in self.skip_outputs:
                continue
            if self.fold(node):
                continue
            handler = HANDLERS.get(node.op_type)
            if node.domain not in ("", "ai.onnx") or handler is None:
                self.fail(node, f"op {node.domain + '.' if node.domain else ''}{node.op_type} is "
                                f"not supported (supported: {SUPPORTED})")
            handler(self, node, self.attributes(node))
        if len(self.graph_outputs) != 1:
            raise OnnxImportError(f"the graph has {len(self.graph_outputs)} outputs; cnnrt "
                                  "models have one")
        output = self.graph_outputs[0]
        if self.tensor.get(output, "input") == "input" or not self.layers:
            raise OnnxImportError(f"graph output '{output}' is not computed by any imported layer")
        self.output = self.tensor[output]

    # --- constant folding -----------------------------------------------------------------

    def fold(self, node) -> bool:
        """Evaluates a node whose inputs are all known constants (Shape needs only a known
        shape); returns False when the node must become a layer."""
        op = node.op_type
        if op == "Constant":
            attrs = self.attributes(node)
            if "value" in attrs:
                value = self.numpy_helper.to_array(attrs["value"])
            elif len(attrs) == 1 and next(iter(attrs)) in ("value_float", "value_floats",
                                                           "value_int", "value_ints"):
                value = np.array(next(iter(attrs.values())))
            else:
                self.fail(node, f"only tensor / float / int constants are supported, got "
                                f"{sorted(attrs)}")
            self.constants[node.output[0]] = value
            return True
        if op == "Shape" and node.input[0] in self.tensor:
            # The batch is a run-time choice: fold it as 1 (cnnrt's flatten keeps the batch).
            shape = np.array([1] + self.shapes[self.tensor[node.input[0]]], dtype=np.int64)
            attrs = {a.name: self.helper.get_attribute_value(a) for a in node.attribute}
            self.constants[node.output[0]] = shape[attrs.get("start", 0):attrs.get("end", None)]
            return True
        fold = FOLDERS.get(op)
        inputs = [name for name in node.input if name]
        if fold is None or not inputs or any(name not in self.constants for name in inputs):
            return False
        attrs = {a.name: self.helper.get_attribute_value(a) for a in node.attribute}
        values = [self.constants[name] if name else None for name in node.input]
        try:
            self.constants[node.output[0]] = np.asarray(fold(values, attrs))
        except (ValueError, IndexError, TypeError) as exc:
            self.fail(node, f"cannot fold this constant subgraph ({exc})")
        return True


# --- output --------------------------------------------------------------------------------

def _yaml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    if isinstance(value, float):
        # Shortest text that reads back to the same float32 (ONNX attributes are float32), with
        # a '.' in the mantissa: PyYAML reads "1e-05" as a string.
        text = str(np.float32(value))
        return text.replace("e", ".0e") if "e" in text and "." not in text else text
    if isinstance(value, str):
        return value if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", value) else json.dumps(value)
    return str(value)


def yaml_text(imp: Importer, name: str, source: str, weights_name: str) -> str:
    lines = [f"# Imported from {os.path.basename(source)} by tools/onnx_import.py "
             "(docs/FORMAT.md).",
             "# Inputs are taken as given (no mean/std): normalise them as the ONNX model expects.",
             f"name: {_yaml_value(name)}",
             f"input: {{shape: {_yaml_value(imp.shapes['input'])}}}",
             f"weights: {_yaml_value(weights_name)}",
             f"output: {_yaml_value(imp.output)}",
             "layers:"]
    for layer in imp.layers:
        lines.append("  - {" + ", ".join(f"{k}: {_yaml_value(v)}" for k, v in layer.items()) + "}")
    return "\n".join(lines) + "\n"


def import_onnx(path: str, out_yaml: str, input_shape: Optional[List[int]],
                name: Optional[str]) -> str:
    try:
        import onnx
        from safetensors.numpy import save_file
    except ImportError as exc:
        raise OnnxImportError(f"the 'onnx' and 'safetensors' packages are needed ({exc}): "
                              "pip install onnx safetensors") from None
    if not os.path.isfile(path):
        raise OnnxImportError(f"{path}: no such file")
    try:
        model = onnx.load(path)
    except Exception as exc:  # noqa: BLE001 (protobuf raises its own DecodeError types)
        raise OnnxImportError(f"{path}: not a readable ONNX model ({type(exc).__name__}: "
                              f"{str(exc)[:200]}); corrupt or truncated?") from None
    if not model.graph.node:
        raise OnnxImportError(f"{path}: the model has no nodes (corrupt or not an ONNX model?)")
    importer = Importer(model, input_shape)
    importer.run()
    stem = os.path.splitext(out_yaml)[0]
    weights_path = stem + ".safetensors"
    text = yaml_text(importer, name or safe_name(model.graph.name or os.path.basename(stem)), path,
                     os.path.basename(weights_path))
    try:  # the Python reading of the format must accept what we wrote, shapes included
        check = parse_model(text, out_yaml)
        shapes = infer_shapes(check)
    except (ModelError, ValueError) as exc:
        raise OnnxImportError(f"internal: the written model does not load: {exc}") from None
    if shapes[importer.output] != importer.shapes[importer.output]:
        raise OnnxImportError(f"internal: output shape {shapes[importer.output]} != "
                              f"{importer.shapes[importer.output]}")

    folder = os.path.dirname(os.path.abspath(out_yaml))
    os.makedirs(folder, exist_ok=True)
    temporaries = []
    try:
        for suffix in (".safetensors", ".yaml"):
            handle, temporary = tempfile.mkstemp(dir=folder, prefix=".onnx_import_",
                                                 suffix=suffix + ".tmp")
            os.close(handle)
            temporaries.append(temporary)
        save_file(importer.weights, temporaries[0], metadata={"source": os.path.basename(path)})
        with open(temporaries[1], "w", encoding="utf-8") as handle:
            handle.write(text)
        umask = os.umask(0)
        os.umask(umask)
        for temporary in temporaries:
            os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporaries[0], weights_path)
        os.replace(temporaries[1], out_yaml)
    finally:
        for temporary in temporaries:
            if os.path.exists(temporary):
                os.remove(temporary)
    count = sum(int(v.size) for v in importer.weights.values())
    return (f"{out_yaml}: {len(importer.layers)} layers, input {importer.shapes['input']}, "
            f"output '{importer.output}' {importer.shapes[importer.output]}; {weights_path}: "
            f"{len(importer.weights)} tensors, {count:,} values")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="the .onnx file")
    parser.add_argument("-o", "--out", required=True, help="YAML to write (weights: same stem "
                                                           ".safetensors)")
    parser.add_argument("--input-shape", help="C,H,W (or F) per sample, to fix dynamic dims")
    parser.add_argument("--name", help="model name (default: the ONNX graph name)")
    args = parser.parse_args(argv)
    try:
        shape = None
        if args.input_shape:
            try:
                shape = [int(v) for v in args.input_shape.split(",")]
            except ValueError:
                raise OnnxImportError(f"--input-shape {args.input_shape!r}: expected C,H,W") \
                    from None
        print(import_onnx(args.model, args.out, shape, args.name))
    except (OnnxImportError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
