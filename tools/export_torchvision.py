#!/usr/bin/env python3
"""Exports torchvision's pretrained AlexNet to a cnnrt weight file (safetensors).

The YAML names its weights by PyTorch state_dict keys (features.0.weight, ...), so the export
is the state_dict written as safetensors, restricted to the keys the YAML references — and
every one of them is checked to exist with the shape the model expects before anything is
written.  Needs torch + torchvision and, the first time, network access to download the
weights (torchvision caches them under ~/.cache/torch); --state-dict FILE.pth takes an already
downloaded checkpoint instead, for machines without network.

  python3 tools/export_torchvision.py --out models/alexnet.safetensors [--dtype f32|f16]
      [--model models/alexnet.yaml] [--labels models/imagenet_classes.txt] [--state-dict F]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cnnrt_model import ModelError, load_model, param_shapes  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)


def load_state_dict(state_dict_path: str | None):
    """(state_dict, categories or None)."""
    try:
        import torch
        import torchvision
    except ImportError as exc:
        fail(f"torch and torchvision are needed ({exc}); pip install torch torchvision")
    if state_dict_path:
        state = torch.load(state_dict_path, map_location="cpu", weights_only=True)
        if isinstance(state, dict) and "state_dict" in state:
            state = state["state_dict"]
        return state, None
    weights = torchvision.models.AlexNet_Weights.IMAGENET1K_V1
    try:
        model = torchvision.models.alexnet(weights=weights)
    except Exception as exc:  # noqa: BLE001 (urllib, SSL, hash errors: all mean "no weights")
        fail(f"could not get the pretrained AlexNet weights ({type(exc).__name__}: {exc}).\n"
             f"  They download from {weights.url}; without network, copy that file here and "
             "pass --state-dict FILE.pth")
    return model.state_dict(), list(weights.meta["categories"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="safetensors file to write")
    parser.add_argument("--dtype", choices=["f32", "f16"], default="f32")
    parser.add_argument("--model", default=os.path.join(REPO, "models", "alexnet.yaml"),
                        help="YAML whose weight keys are exported (default models/alexnet.yaml)")
    parser.add_argument("--labels", help="also write the ImageNet categories, one per line")
    parser.add_argument("--state-dict", help="a local torchvision AlexNet .pth instead of the "
                                             "download")
    args = parser.parse_args(argv)

    try:
        model = load_model(args.model)
        expected = param_shapes(model)
    except (ModelError, OSError) as exc:
        fail(str(exc))
    try:
        from safetensors.numpy import save_file
    except ImportError:
        fail("the 'safetensors' package is needed: pip install safetensors")

    state, categories = load_state_dict(args.state_dict)
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
    save_file(tensors, temporary, metadata={"source": "torchvision AlexNet_Weights.IMAGENET1K_V1",
                                            "model": os.path.basename(args.model)})
    os.replace(temporary, args.out)
    count = sum(int(np.prod(t.shape)) for t in tensors.values())
    print(f"{args.out}: {len(tensors)} tensors, {count / 1e6:.1f} M parameters, {args.dtype}")

    if args.labels:
        if categories is None:
            import torchvision

            categories = list(torchvision.models.AlexNet_Weights.IMAGENET1K_V1.meta["categories"])
        with open(args.labels, "w", encoding="utf-8") as handle:
            handle.write("\n".join(categories) + "\n")
        print(f"{args.labels}: {len(categories)} labels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
