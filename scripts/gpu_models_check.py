#!/usr/bin/env python3
"""GPU-machine checks of the real models (run by scripts/gpu_check.sh models):

1. The torch-free checkpoint reader against torch itself: every tensor of the EfficientNet-Lite0
   .pth, as tools/torch_pickle.py reads it, equals torch.load's (bit for bit), and the converted
   safetensors file holds exactly those values.
2. EfficientNet-Lite0 on the GPU (fp16) against the CPU engine (fp32) on the sample photographs:
   rel L2 of the logits and the same top-1, plus the top-5 of each.

  python3 scripts/gpu_models_check.py --bin BUILD/bin --pth X.pth --weights W.safetensors
      --images a.png,b.png
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools"))


def check_reader(pth, weights):
    import torch
    from safetensors.numpy import load_file
    from torch_pickle import load_torch_checkpoint
    ours = load_torch_checkpoint(pth)
    theirs = torch.load(pth, map_location="cpu", weights_only=True)
    converted = load_file(weights)
    bad = [k for k in theirs if k not in ours or
           not np.array_equal(ours[k], theirs[k].numpy())]
    missing = [k for k in converted if k not in theirs or
               not np.array_equal(converted[k], theirs[k].float().numpy())]
    print(f"reader vs torch.load: {len(theirs)} tensors, {len(bad)} differ; "
          f"converted file: {len(converted)} tensors, {len(missing)} differ from torch")
    return not bad and not missing


def logits(binary, model, weights, x, device):
    with tempfile.TemporaryDirectory() as tmp:
        np.save(os.path.join(tmp, "x.npy"), x)
        subprocess.run([binary, "run", model, "--weights", weights, "--input",
                        os.path.join(tmp, "x.npy"), "--output", os.path.join(tmp, "y.npy"),
                        "--device", device], check=True, stdout=subprocess.DEVNULL)
        return np.load(os.path.join(tmp, "y.npy"))


def check_gpu(bin_dir, weights, images):
    model = os.path.join(REPO, "models", "efficientnet_lite0.yaml")
    labels = open(os.path.join(REPO, "models", "imagenet_classes.txt")).read().splitlines()
    from cnnrt_model import load_model  # noqa: F401  (the YAML's preprocessing below)
    import yaml
    spec = yaml.safe_load(open(model))["input"]
    from PIL import Image
    ok = True
    for path in images:
        img = Image.open(path).convert("RGB")
        w, h = img.size
        scale = 256 / min(w, h)  # resize the short side to 256, centre crop 224 (as alexnet_infer)
        img = img.resize((round(w * scale), round(h * scale)), Image.BILINEAR)
        w, h = img.size
        left, top = (w - 224) // 2, (h - 224) // 2
        img = img.crop((left, top, left + 224, top + 224))
        x = np.asarray(img, np.float32).transpose(2, 0, 1) / 255.0
        x = (x - np.array(spec["mean"], np.float32)[:, None, None]) / \
            np.array(spec["std"], np.float32)[:, None, None]
        x = x[None].astype(np.float32)
        cpu = logits(os.path.join(bin_dir, "cnnrt"), model, weights, x, "cpu")
        gpu = logits(os.path.join(bin_dir, "cnnrt"), model, weights, x, "cuda")
        rel = float(np.linalg.norm(gpu - cpu) / np.linalg.norm(cpu))
        top_cpu = np.argsort(-cpu[0])[:5]
        top_gpu = np.argsort(-gpu[0])[:5]
        same = top_cpu[0] == top_gpu[0]
        ok &= same and rel <= 1e-2
        print(f"{os.path.basename(path)}: rel L2 gpu fp16 vs cpu fp32 {rel:.2e}, same top-1 {same}")
        print("  cpu top-5:", ", ".join(labels[i] for i in top_cpu))
        print("  gpu top-5:", ", ".join(labels[i] for i in top_gpu))
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--pth", required=True)
    parser.add_argument("--weights", required=True)
    parser.add_argument("--images", required=True)
    args = parser.parse_args()
    ok = check_reader(args.pth, args.weights)
    ok &= check_gpu(args.bin, args.weights, args.images.split(","))
    print("models check:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
