#!/usr/bin/env python3
"""tools/torch_pickle.py and tools/convert_efficientnet_lite0.py on checkpoints written here
without torch (tests/e2e/torch_save_writer.py), good and bad.

Reader: legacy and zip formats round-trip exactly (fp32, fp16, an int64 buffer, a transposed
view with a storage offset); a truncated file, a wrong magic number, a pickle that names a
code-running global, and a non-file are each one CheckpointError.

Converter: a state dict shaped like EfficientNet-Lite0 (from the YAML, random values) converts
and the safetensors file holds exactly those values; a missing key, a wrong shape, extra
(squeeze-and-excitation) tensors, a truncated file, a hash-named file whose sha256 does not
match, and a missing file each give exit code 1, one `error:` line, and no output file, and an
existing output file is left as it was.  Needs numpy, pyyaml and safetensors only.
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as util  # noqa: E402
import torch_save_writer as writer  # noqa: E402


def main() -> int:
    args, work = util.setup(__doc__.split("\n")[0])
    import numpy as np
    from safetensors.numpy import load_file
    from cnnrt_model import load_model, param_shapes
    from torch_pickle import CheckpointError, load_torch_checkpoint

    rng = np.random.default_rng(args.seed)
    failures = []

    def expect(condition: bool, what: str) -> None:
        print(f"  {'ok  ' if condition else 'FAIL'} {what}", flush=True)
        if not condition:
            failures.append(what)

    # --- reader round trips -------------------------------------------------------------
    base = rng.standard_normal((4, 6)).astype(np.float32)
    state = {"conv.weight": rng.standard_normal((3, 2, 3, 3)).astype(np.float32),
             "half": rng.standard_normal(5).astype(np.float16),
             "bn.num_batches_tracked": np.array(7, dtype=np.int64),
             "base": base,
             # base.T[1:, :] as a strided view: offset 1 element, shape [5, 4], strides [1, 6]
             "view": ("view", "base", 1, (5, 4), (1, 6))}
    expected_view = base.T[1:, :]
    for fmt, save in (("legacy", writer.save_legacy), ("zip", writer.save_zip)):
        path = os.path.join(work, f"round_trip_{fmt}.pth")
        save(state, path)
        try:
            loaded = load_torch_checkpoint(path)
        except CheckpointError as exc:
            expect(False, f"{fmt}: loads ({exc})")
            continue
        same = all(np.array_equal(loaded[k], v) and loaded[k].dtype == v.dtype
                   for k, v in state.items() if not isinstance(v, tuple))
        expect(same, f"{fmt}: every tensor round-trips with its dtype and shape")
        expect(np.array_equal(loaded["view"], expected_view),
               f"{fmt}: a strided view with a storage offset is rebuilt")

    legacy = os.path.join(work, "round_trip_legacy.pth")
    with open(legacy, "rb") as handle:
        whole = handle.read()
    bad_inputs = {
        "truncated inside the data": whole[:-10],
        "truncated inside the pickle": whole[:200],
        "wrong magic number": whole.replace(b"\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19",
                                            b"\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x18", 1),
        "empty": b"",
    }
    for what, content in bad_inputs.items():
        path = os.path.join(work, "bad.pth")
        with open(path, "wb") as handle:
            handle.write(content)
        try:
            load_torch_checkpoint(path)
            expect(False, f"reader rejects a file {what}")
        except CheckpointError as exc:
            expect(str(exc).startswith(path), f"reader rejects a file {what}: {exc}")

    class Hostile:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    hostile = os.path.join(work, "hostile.pth")
    writer.save_legacy({"w": base}, hostile, extra_object={"w": Hostile()})
    try:
        load_torch_checkpoint(hostile)
        expect(False, "reader refuses a pickle naming os.system")
    except CheckpointError as exc:
        expect("refused" in str(exc), f"reader refuses a pickle naming os.system: {exc}")

    # --- the converter ------------------------------------------------------------------
    model_path = os.path.join(args.source_dir, "models", "efficientnet_lite0.yaml")
    shapes = param_shapes(load_model(model_path))
    good = {key: rng.standard_normal(shape).astype(np.float32) for key, shape in shapes.items()}
    for key in list(good):
        if key.endswith("running_var"):
            good[key] = np.abs(good[key]) + 0.1
    good["_bn0.num_batches_tracked"] = np.array(0, dtype=np.int64)
    tool = os.path.join(args.source_dir, "tools", "convert_efficientnet_lite0.py")

    def convert(pth: str, out: str):
        return subprocess.run([sys.executable, tool, "--pth", pth, "--out", out],
                              capture_output=True, text=True, timeout=300)

    good_path = os.path.join(work, "lite0.pth")
    writer.save_legacy(good, good_path)
    out = os.path.join(work, "out", "lite0.safetensors")
    result = convert(good_path, out)
    expect(result.returncode == 0, f"converter accepts a Lite0-shaped state dict "
                                   f"({result.stderr.strip()})")
    if result.returncode == 0:
        converted = load_file(out)
        expect(set(converted) == set(shapes) and all(np.array_equal(converted[k], good[k])
                                                     for k in shapes),
               "converted file holds exactly the YAML's tensors with their values")
        leftovers = [n for n in os.listdir(os.path.dirname(out)) if n != "lite0.safetensors"]
        expect(not leftovers, f"no temporary files left ({leftovers})")

    missing = dict(good)
    del missing["_blocks.3._depthwise_conv.weight"]
    wrong_shape = dict(good)
    wrong_shape["_fc.weight"] = np.zeros((10, 1280), np.float32)
    extra = dict(good)
    extra["_blocks.0._se_reduce.weight"] = np.zeros((8, 32, 1, 1), np.float32)
    cases = {"a missing key": (missing, "'_blocks.3._depthwise_conv.weight' is missing"),
             "a wrong shape": (wrong_shape, "'_fc.weight' has shape [10, 1280]"),
             "extra SE tensors": (extra, "_blocks.0._se_reduce.weight")}
    for what, (bad_state, message) in cases.items():
        path = os.path.join(work, "bad_model.pth")
        writer.save_legacy(bad_state, path)
        target = os.path.join(work, "absent", "x.safetensors")
        result = convert(path, target)
        lines = result.stderr.strip().splitlines()
        expect(result.returncode == 1 and len(lines) == 1 and lines[0].startswith("error:")
               and message in lines[0] and not os.path.exists(target),
               f"converter rejects {what}: {lines}")

    with open(good_path, "rb") as handle:
        content = handle.read()
    truncated = os.path.join(work, "truncated.pth")
    with open(truncated, "wb") as handle:
        handle.write(content[: len(content) // 2])
    hash_named = os.path.join(work, "efficientnet-lite0-57934424.pth")  # the wheel's name
    with open(hash_named, "wb") as handle:
        handle.write(content)
    existing = os.path.join(work, "existing.safetensors")
    with open(existing, "wb") as handle:
        handle.write(b"keep me")
    for what, pth, message in (("truncated file", truncated, "truncated"),
                               ("file whose sha256 does not match its name", hash_named,
                                "does not start with 57934424"),
                               ("missing file", os.path.join(work, "nope.pth"), "no such file")):
        result = convert(pth, existing)
        lines = result.stderr.strip().splitlines()
        with open(existing, "rb") as handle:
            untouched = handle.read() == b"keep me"
        expect(result.returncode == 1 and len(lines) == 1 and lines[0].startswith("error:")
               and message in lines[0] and untouched,
               f"converter rejects a {what}, existing output untouched: {lines}")
    leftovers = [n for n in os.listdir(work) if n.endswith(".tmp")]
    expect(not leftovers, f"no temporary files left in the output folder ({leftovers})")

    if failures:
        util.fail(f"{len(failures)} check(s) failed: " + "; ".join(failures))
    print("PASS")
    return util.PASS


if __name__ == "__main__":
    sys.exit(main())
