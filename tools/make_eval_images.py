#!/usr/bin/env python3
"""Natural-image input sets for int8 calibration and evaluation, built offline and
deterministically from the sample photos at hand: scikit-image's data images, matplotlib's
sample_data images when matplotlib is installed, and the repository's models/samples/.

Two sets, disjoint **by source image** (not just by augmentation): every source photo belongs to
exactly one set, a photo that appears in two places (the repository's chelsea.png is
scikit-image's chelsea) is recognised by the hash of its decoded pixels and counted once, and
near-duplicates (the two views of scikit-image's stereo motorcycle pair) form one group that
goes to one set.  The assignment is the fixed table below; the script checks it (a source in both
sets, or a tabled source that cannot be found, is an error).  Photos the table does not name
(another scikit-image version's data, matplotlib's sample_data where it is installed) are listed
and left out, so every machine with the tabled photos builds the same two sets.

Each input is a crop of a source photo — the whole centred square first, then random crops of
10-100 % of the area with aspect ratios 3/4-4/3 (the scale of the subject changes with the crop),
each flipped left-right with probability 1/2 — resized to the model's input size with an
antialiased bilinear filter (skimage.transform.resize, order 1, anti_aliasing=True), and
normalised exactly as cnnrt's image pipeline does (include/cnnrt/image.h, normalize_to_chw):
fp32 (pixel / 255 - mean[c]) * (1 / std[c]) with the model YAML's mean/std (EfficientNet-Lite0:
mean 127/255, std 128/255, i.e. (pixel - 127) / 128).  Grey photos are replicated to RGB (what
the decoder does for a grey PNG); alpha is dropped.  Values stay float (no rounding to uint8
after the resize).

    python3 tools/make_eval_images.py --model models/efficientnet_lite0.yaml --out DIR \
        [--calib 64] [--heldout 520] [--seed 0]

writes DIR/calib.npy and DIR/heldout.npy ([N, 3, H, W] float32) and DIR/manifest.json (per set:
the source groups, per input its source, crop box and flip, and the sha256 of the array).
Needs numpy and scikit-image.
"""

import argparse
import hashlib
import json
import os
import re
import sys

import numpy as np

# Source groups (a group is one photo, or near-duplicate photos that must stay together) and
# the set each goes to.  Held-out: the photos with an ImageNet-like subject plus a few textures
# and microscopy/document images; calibration: other photos of the same kinds.
HELDOUT_GROUPS = {
    "astronaut": ["astronaut.png"],
    "chelsea": ["chelsea.png"],  # the repository's models/samples/chelsea.png is the same image
    "rocket": ["rocket.jpg"],
    "hubble_deep_field": ["hubble_deep_field.jpg"],
    "retina": ["retina.jpg"],
    "coins": ["coins.png"],
    "brick": ["brick.png"],
    "gravel": ["gravel.png"],
    "cell": ["cell.png"],
    "page": ["page.png"],
}
CALIB_GROUPS = {
    "coffee": ["coffee.png"],
    "motorcycle": ["motorcycle_left.png", "motorcycle_right.png"],  # a stereo pair
    "ihc": ["ihc.png"],
    "camera": ["camera.png"],
    "grass": ["grass.png"],
    "moon": ["moon.png"],
    "clock_motion": ["clock_motion.png"],
    "microaneurysms": ["microaneurysms.png"],
    "text": ["text.png"],
}
# Synthetic or non-photographic images, never used.
EXCLUDED = {"chessboard_GRAY.png", "chessboard_RGB.png", "color.png", "horse.png", "logo.png",
            "phantom.png"}
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg")


def read_rgb(path):
    import skimage.io
    image = skimage.io.imread(path)
    if image.ndim == 2:
        image = np.stack([image] * 3, axis=-1)
    image = image[..., :3]
    if image.dtype != np.uint8:
        raise SystemExit(f"error: {path}: expected 8-bit samples, got {image.dtype}")
    return image


def pixel_hash(image):
    return hashlib.sha256(np.ascontiguousarray(image).tobytes()).hexdigest()


def discover_sources(repo_root):
    """name -> (path, image) for every photo available offline; duplicates by pixels dropped."""
    import skimage.data
    directories = [skimage.data.data_dir, os.path.join(repo_root, "models", "samples")]
    try:
        import matplotlib
        directories.append(os.path.join(matplotlib.get_data_path(), "sample_data"))
    except ImportError:
        pass
    sources, seen = {}, {}
    for directory in directories:
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            if not name.lower().endswith(IMAGE_EXTENSIONS) or name in EXCLUDED:
                continue
            path = os.path.join(directory, name)
            image = read_rgb(path)
            digest = pixel_hash(image)
            if digest in seen:  # the same photo in two places: counted once
                continue
            if name in sources:
                raise SystemExit(f"error: two different photos named {name} "
                                 f"({sources[name][0]}, {path}); extend the group table")
            seen[digest] = name
            sources[name] = (path, image)
    return sources


def check_assignment(sources):
    assigned = {}
    for set_name, groups in (("heldout", HELDOUT_GROUPS), ("calib", CALIB_GROUPS)):
        for group, names in groups.items():
            for name in names:
                if name in assigned:
                    raise SystemExit(f"error: {name} is in both sets")
                assigned[name] = set_name
    missing = [n for n in assigned if n not in sources]
    if missing:
        raise SystemExit("error: source photos not found: " + ", ".join(missing))
    unassigned = sorted(n for n in sources if n not in assigned)
    if unassigned:
        # Not an error: the sets must not depend on which optional packages a machine has
        # (the GPU machine's matplotlib brings photos this machine lacks).
        print("note: photos in no set, left out (name them in a group to use them): "
              + ", ".join(unassigned), file=sys.stderr)


def model_normalisation(model_path):
    """mean, std and [C, H, W] from the model YAML's input block."""
    text = open(model_path).read()
    values = {}
    for key in ("shape", "mean", "std"):
        match = re.search(r"^\s*" + key + r":\s*\[([^\]]*)\]", text, re.MULTILINE)
        if not match:
            raise SystemExit(f"error: {model_path}: no input {key}")
        values[key] = [float(v) for v in match.group(1).split(",")]
    return values["mean"], values["std"], [int(v) for v in values["shape"]]


def crop_boxes(rng, height, width, count):
    """count crop boxes (top, left, h, w): the centred square, then random crops."""
    side = min(height, width)
    boxes = [((height - side) // 2, (width - side) // 2, side, side, False)]
    while len(boxes) < count:
        area = rng.uniform(0.10, 1.0) * side * side
        ratio = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
        h = int(round(np.sqrt(area / ratio)))
        w = int(round(np.sqrt(area * ratio)))
        if h < 16 or w < 16 or h > height or w > width:
            continue
        top = int(rng.integers(0, height - h + 1))
        left = int(rng.integers(0, width - w + 1))
        boxes.append((top, left, h, w, bool(rng.random() < 0.5)))
    return boxes


def make_inputs(image, boxes, mean, std, size):
    import skimage.transform
    mean32 = np.asarray(mean, np.float32).reshape(3, 1, 1)
    inv_std32 = (np.float32(1) / np.asarray(std, np.float32)).reshape(3, 1, 1)
    out = np.empty((len(boxes), 3, size[0], size[1]), np.float32)
    for i, (top, left, h, w, flip) in enumerate(boxes):
        crop = image[top:top + h, left:left + w].astype(np.float64)
        if flip:
            crop = crop[:, ::-1]
        resized = skimage.transform.resize(crop, size, order=1, anti_aliasing=True,
                                           preserve_range=True, mode="reflect")
        chw = resized.astype(np.float32).transpose(2, 0, 1)
        out[i] = (chw / np.float32(255) - mean32) * inv_std32
    return out


def build_set(name, groups, sources, count, seed, set_index, mean, std, size):
    """count inputs spread evenly over the groups' photos (round-robin)."""
    photos = [photo for names in groups.values() for photo in names]
    per_photo = [count // len(photos) + (1 if i < count % len(photos) else 0)
                 for i in range(len(photos))]
    arrays, records = [], []
    for index, (photo, n) in enumerate(zip(photos, per_photo)):
        image = sources[photo][1]
        rng = np.random.default_rng([seed, set_index, index])
        boxes = crop_boxes(rng, image.shape[0], image.shape[1], n)
        arrays.append(make_inputs(image, boxes, mean, std, size))
        group = next(g for g, names in groups.items() if photo in names)
        for top, left, h, w, flip in boxes:
            records.append({"source": photo, "group": group, "box": [top, left, h, w],
                            "flip": flip})
    data = np.concatenate(arrays)
    print(f"{name}: {data.shape[0]} inputs from {len(photos)} photos "
          f"({', '.join(photos)})", file=sys.stderr)
    return data, records


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    repo_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--model", default=os.path.join(repo_root, "models",
                                                        "efficientnet_lite0.yaml"))
    parser.add_argument("--out", required=True)
    parser.add_argument("--calib", type=int, default=64)
    parser.add_argument("--heldout", type=int, default=520)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=("calib", "heldout"), default=None,
                        help="build one set (its manifest is manifest_<set>.json)")
    args = parser.parse_args()
    mean, std, shape = model_normalisation(args.model)
    if shape[0] != 3 or len(mean) != 3 or len(std) != 3:
        raise SystemExit(f"error: {args.model}: expected an RGB input, got shape {shape}")
    sources = discover_sources(repo_root)
    check_assignment(sources)
    os.makedirs(args.out, exist_ok=True)
    manifest = {"model": args.model, "mean": mean, "std": std, "seed": args.seed, "sets": {}}
    for set_index, (name, groups, count) in enumerate(
            (("calib", CALIB_GROUPS, args.calib), ("heldout", HELDOUT_GROUPS, args.heldout))):
        if args.only not in (None, name):
            continue
        data, records = build_set(name, groups, sources, count, args.seed, set_index, mean, std,
                                  (shape[1], shape[2]))
        path = os.path.join(args.out, name + ".npy")
        np.save(path + ".tmp.npy", data)
        os.replace(path + ".tmp.npy", path)
        manifest["sets"][name] = {"file": name + ".npy", "shape": list(data.shape),
                                  "sha256": hashlib.sha256(data.tobytes()).hexdigest(),
                                  "groups": groups, "inputs": records}
        print(f"wrote {path} {list(data.shape)} sha256 "
              f"{manifest['sets'][name]['sha256'][:16]}")
    manifest_path = os.path.join(args.out, "manifest.json" if args.only is None
                                 else f"manifest_{args.only}.json")
    with open(manifest_path + ".tmp", "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(manifest_path + ".tmp", manifest_path)


if __name__ == "__main__":
    main()
