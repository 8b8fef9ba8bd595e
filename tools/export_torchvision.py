#!/usr/bin/env python3
"""Exports a torchvision model's pretrained weights to a cnnrt weight file (safetensors).

The zoo's YAMLs (models/alexnet, resnet18, resnet50, vgg16, squeezenet1_1, mobilenet_v2) name
their weights by torchvision's state_dict keys (features.0.weight, layer1.0.conv1.weight, ...),
so the export is the state_dict written as safetensors, restricted to the keys the YAML
references -- and every one of them is checked to exist with the shape the model expects before
anything is written (to a temporary file, renamed when complete).  Needs torch + torchvision
and, the first time, network access to download the weights (torchvision caches them under
~/.cache/torch); --state-dict FILE.pth takes an already downloaded checkpoint instead, for
machines without network.

  python3 tools/export_torchvision.py [--arch alexnet|resnet18|resnet50|vgg16|squeezenet1_1|
      mobilenet_v2] [--out FILE] [--dtype f32|f16] [--model YAML] [--labels FILE]
      [--state-dict F]
Defaults: --arch alexnet, --model models/ARCH.yaml, --out the weight file the YAML names
(models/ARCH.safetensors).  The weights are torchvision's DEFAULT set for the architecture.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cnnrt_model import ModelError, load_model, param_shapes  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARCHS = ["alexnet", "resnet18", "resnet50", "vgg16", "squeezenet1_1", "mobilenet_v2"]


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)


def load_state_dict(arch: str, state_dict_path: str | None):
    """(state_dict, categories or None, a description of the weights)."""
    try:
        import torch
        import torchvision
    except ImportError as exc:
        fail(f"torch and torchvision are needed ({exc}); pip install torch torchvision")
    if state_dict_path:
        state = torch.load(state_dict_path, map_location="cpu", weights_only=True)
        if isinstance(state, dict) and "state_dict" in state:
            state = state["state_dict"]
        return state, None, os.path.basename(state_dict_path)
    weights = torchvision.models.get_model_weights(arch).DEFAULT
    try:
        model = torchvision.models.get_model(arch, weights=weights)
    except Exception as exc:  # noqa: BLE001 (urllib, SSL, hash errors: all mean "no weights")
        fail(f"could not get the pretrained {arch} weights ({type(exc).__name__}: {exc}).\n"
             f"  They download from {weights.url}; without network, copy that file here and "
             "pass --state-dict FILE.pth")
    return model.state_dict(), list(weights.meta["categories"]), f"torchvision {weights}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", choices=ARCHS, default="alexnet",
                        help="torchvision architecture (default alexnet)")
    parser.add_argument("--out", help="safetensors file to write (default: the file the YAML "
                                      "names, models/ARCH.safetensors)")
    parser.add_argument("--dtype", choices=["f32", "f16"], default="f32")
    parser.add_argument("--model", help="YAML whose weight keys are exported "
                                        "(default models/ARCH.yaml)")
    parser.add_argument("--labels", help="also write the ImageNet categories, one per line")
    parser.add_argument("--state-dict", help="a local torchvision .pth of the architecture "
                                             "instead of the download")
    args = parser.parse_args(argv)
    args.model = args.model or os.path.join(REPO, "models", f"{args.arch}.yaml")

    try:
        model = load_model(args.model)
        expected = param_shapes(model)
    except (ModelError, OSError) as exc:
        fail(str(exc))
    args.out = args.out or model.weights_file
    if not args.out:
        fail(f"{args.model} names no weight file: pass --out")
    try:
        from safetensors.numpy import save_file
    except ImportError:
        fail("the 'safetensors' package is needed: pip install safetensors")

    state, categories, source = load_state_dict(args.arch, args.state_dict)
    import numpy as np

    tensors = {}
    problems = []
    for key, shape in expected.items():
        if key not in state:
            problems.append(f"'{key}' is not in the state_dict")
            continue
        value = state[key].detach().cpu().float().numpy()
        if list(value.shape) != shape:
            problems.append(f"'{key}' has shape {list(value.shape)}, the model needs {shape}")
            continue
        tensors[key] = np.ascontiguousarray(
            value.astype(np.float16 if args.dtype == "f16" else np.float32))
    if problems:
        fail(f"{args.model} does not match the checkpoint:\n  " + "\n  ".join(problems))

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    temporary = args.out + ".tmp"
    try:
        save_file(tensors, temporary, metadata={"source": source,
                                                "model": os.path.basename(args.model)})
        os.replace(temporary, args.out)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    count = sum(int(np.prod(t.shape)) for t in tensors.values())
    print(f"{args.out}: {len(tensors)} tensors, {count / 1e6:.1f} M parameters, {args.dtype}")

    if args.labels:
        if categories is None:
            import torchvision

            categories = list(torchvision.models.get_model_weights(args.arch).DEFAULT
                              .meta["categories"])
        with open(args.labels, "w", encoding="utf-8") as handle:
            handle.write("\n".join(categories) + "\n")
        print(f"{args.labels}: {len(categories)} labels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
