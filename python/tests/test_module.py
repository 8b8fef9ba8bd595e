"""The cnnrt module on the CPU: results against the numpy reference, the array checks, errors as
exceptions, closing, profiles, threads, image preprocessing, version and stubs."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import cnnrt
from conftest import DIGITS_YAML, SOURCE_DIR, random_digits, rel_l2


def test_version_is_the_projects():
    with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as cmake:
        version = re.search(r"project\(cnnrt VERSION ([0-9.]+)", cmake.read()).group(1)
    assert cnnrt.__version__ == version


def test_run_matches_the_numpy_reference(cpu_digits, digits_reference, seed):
    rng = np.random.default_rng(seed)
    context = cpu_digits.create_context(batch=5)
    assert context.input_shape == (5, 1, 8, 8) and context.output_shape == (5, 10)
    x = random_digits(rng, 5)
    kept = x.copy()
    y = context.run(x)
    assert y.dtype == np.float32 and y.shape == (5, 10) and y.flags.c_contiguous
    assert rel_l2(y, digits_reference(x)) < 1e-5
    assert np.array_equal(x, kept), "run must not write to its input"


def test_each_run_returns_a_new_array(cpu_digits, seed):
    rng = np.random.default_rng(seed)
    context = cpu_digits.create_context(1)
    a, b = random_digits(rng, 1), random_digits(rng, 1)
    ya = context.run(a)
    yb = context.run(b)
    assert not np.shares_memory(ya, yb)
    assert not np.array_equal(ya, yb)
    np.testing.assert_array_equal(ya, context.run(a))


def test_read_only_and_path_like_inputs_work(digits_reference, seed):
    engine = cnnrt.Engine.load(pathlib.Path(DIGITS_YAML), device="cpu", precision="fp32")
    assert (engine.name, engine.device, engine.precision) == ("digits", "cpu", "fp32")
    assert engine.input_shape == (1, 8, 8) and engine.output_shape == (10,)
    assert engine.labels[:2] == ["0", "1"] and engine.weight_bytes > 0
    x = random_digits(np.random.default_rng(seed), 2)
    x.flags.writeable = False
    assert rel_l2(engine.create_context(2).run(x), digits_reference(x)) < 1e-5


@pytest.mark.parametrize("make, message", [
    (lambda x: x.astype(np.float64), "must be float32, got float64"),
    (lambda x: x.astype(np.float16), "must be float32, got float16"),
    (lambda x: (x * 16).astype(np.int32), "must be float32, got int32"),
    (lambda x: x[:1], r"must have shape \(2, 1, 8, 8\) .*got \(1, 1, 8, 8\)"),
    (lambda x: x.reshape(2, 64), r"must have shape \(2, 1, 8, 8\) .*got \(2, 64\)"),
    (lambda x: x[0], r"got \(1, 8, 8\)"),
    (lambda x: np.asfortranarray(x), "C-contiguous"),
    (lambda x: np.repeat(x, 2, axis=3)[..., ::2], "C-contiguous"),
    (lambda x: x.transpose(0, 1, 3, 2), "C-contiguous"),
], ids=["float64", "float16", "int32", "batch", "flat", "no-batch", "fortran", "strided",
        "transposed"])
def test_bad_arrays_raise_value_error(cpu_digits, seed, make, message):
    context = cpu_digits.create_context(2)
    x = random_digits(np.random.default_rng(seed), 2)
    with pytest.raises(ValueError, match=message):
        context.run(make(x))
    assert context.run(x).shape == (2, 10), "a refused call leaves the context usable"


def test_non_arrays_raise_type_error(cpu_digits):
    with pytest.raises(TypeError):
        cpu_digits.create_context(1).run([[0.5] * 8] * 8)


@pytest.mark.parametrize("call, message", [
    (lambda: cnnrt.Engine.load("no/such/model.yaml"), "no/such/model.yaml"),
    (lambda: cnnrt.Engine.load(DIGITS_YAML, weights="no/such.safetensors"), "no/such.safetensors"),
    (lambda: cnnrt.Engine.load(DIGITS_YAML, device="tpu"), "tpu"),
    (lambda: cnnrt.Engine.load(DIGITS_YAML, precision="fp8"), "fp8"),
    (lambda: cnnrt.Engine.load(DIGITS_YAML, plan="no/such/plan.yaml"), "no/such/plan.yaml"),
], ids=["model", "weights", "device", "precision", "plan"])
def test_library_errors_are_cnnrt_errors_with_the_message(call, message):
    with pytest.raises(cnnrt.Error, match=message) as caught:
        call()
    assert isinstance(caught.value, RuntimeError)


def test_a_plan_is_applied_as_the_cli_applies_it(tmp_path):
    # A plan records the model fingerprint it was made for: made for other weights, it is
    # stale and refused (as `cnnrt run --plan` refuses it), not silently used.
    stale = tmp_path / "stale.yaml"
    stale.write_text('model: digits\nmodel_hash: "0123456789abcdef"\ndevice: cpu\n'
                     'layers:\n  conv1: {precision: fp32}\n')
    with pytest.raises(cnnrt.Error, match="stale plan"):
        cnnrt.Engine.load(DIGITS_YAML, device="cpu", plan=stale)
    # A plan made for the CPU is refused on another device.
    with pytest.raises(cnnrt.Error, match="made for device cpu, not cuda"):
        cnnrt.Engine.load(DIGITS_YAML, device="cuda", plan=stale)


def test_a_plan_that_names_its_weights_runs_on_them(tmp_path):
    # A plan that pruned layers (`cnnrt build --allow-prune 2:4`) names the weight file it runs
    # on: weights=None loads that file (missing here, so the error names it), not the YAML's.
    plan = tmp_path / "pruned.yaml"
    plan.write_text("model: digits\ndevice: cpu\nweights: pruned.weights.safetensors\n"
                    "layers:\n  conv1: {precision: fp32}\n")
    with pytest.raises(cnnrt.Error, match="pruned.weights.safetensors"):
        cnnrt.Engine.load(DIGITS_YAML, device="cpu", plan=plan)
    digits_weights = os.path.join(os.path.dirname(DIGITS_YAML), "digits.safetensors")
    shutil.copy(digits_weights, tmp_path / "pruned.weights.safetensors")
    with cnnrt.Engine.load(DIGITS_YAML, device="cpu", plan=plan) as engine:
        assert engine.create_context(1) is not None
    # weights= given wins over the plan's file.
    (tmp_path / "pruned.weights.safetensors").unlink()
    with cnnrt.Engine.load(DIGITS_YAML, weights=digits_weights, device="cpu", plan=plan):
        pass


def test_bad_batch_is_a_library_error(cpu_digits):
    with pytest.raises(cnnrt.Error, match="batch must be at least 1"):
        cpu_digits.create_context(0)


def test_closed_engine_and_context_raise_runtime_error(digits_reference, seed):
    x = random_digits(np.random.default_rng(seed), 1)
    with cnnrt.Engine.load(DIGITS_YAML, device="cpu") as engine:
        context = engine.create_context(1)
    assert engine.closed
    with pytest.raises(RuntimeError, match="engine is closed"):
        engine.create_context(1)
    with pytest.raises(RuntimeError, match="engine is closed"):
        engine.input_shape
    with pytest.raises(RuntimeError, match="engine is closed"):
        cnnrt.preprocess_image(os.path.join(SOURCE_DIR, "models", "samples", "chelsea.png"), engine)
    # A context keeps what it needs of its engine alive.
    assert rel_l2(context.run(x), digits_reference(x)) < 1e-5
    context.close()
    for call in (lambda: context.run(x), context.profile, lambda: context.batch):
        with pytest.raises(RuntimeError, match="context is closed"):
            call()


def test_profile_names_every_layer(cpu_digits, seed):
    context = cpu_digits.create_context(3)
    assert context.describe() == ""  # a CPU context decides nothing beyond the plan
    context.run(random_digits(np.random.default_rng(seed), 3))
    rows = context.profile(iterations=3)
    assert {"name", "sources", "kernel", "variant", "precision", "median_ms", "flops",
            "bytes"} <= set(rows[0])
    sources = [s for row in rows for s in row["sources"]]
    for layer in ("conv1", "relu1", "pool1", "conv2", "relu2", "pool2", "flatten", "fc"):
        assert layer in sources
    assert all(row["median_ms"] >= 0 for row in rows)  # a view (flatten) may take no time
    assert all(row["median_ms"] > 0 for row in rows if "conv1" in row["sources"])
    assert sum(row["flops"] for row in rows) > 0
    with pytest.raises(cnnrt.Error, match="iterations"):
        context.profile(iterations=0)


def test_threads_with_own_or_shared_contexts(cpu_digits, digits_reference, seed):
    rng = np.random.default_rng(seed)
    inputs = [random_digits(rng, 4) for _ in range(8)]
    expected = [digits_reference(x) for x in inputs]
    shared = cpu_digits.create_context(4)
    errors = []

    def worker(index: int, own: bool):
        context = cpu_digits.create_context(4) if own else shared
        for _ in range(20):
            err = rel_l2(context.run(inputs[index]), expected[index])
            if err > 1e-5:
                errors.append((index, own, err))

    threads = [threading.Thread(target=worker, args=(i, i % 2 == 0)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_run_releases_the_gil(cpu_digits, seed):
    """While one thread is inside run (a few tenths of a second here), the main thread keeps
    executing Python.  Were the GIL held, the main thread would stall for the whole call: one
    gap between its steps as long as the run."""
    context = cpu_digits.create_context(1024)
    x = random_digits(np.random.default_rng(seed), 1024)
    window = {}

    def worker():
        window["enter"] = time.perf_counter()
        context.run(x)
        window["exit"] = time.perf_counter()

    thread = threading.Thread(target=worker)
    steps = []
    thread.start()
    while thread.is_alive():
        steps.append(time.perf_counter())
    thread.join()
    enter, leave = window["enter"], window["exit"]
    marks = [enter] + [t for t in steps if enter < t < leave] + [leave]
    longest_stall = max(b - a for a, b in zip(marks, marks[1:]))
    assert longest_stall < 0.5 * (leave - enter), (longest_stall, leave - enter)


def _write_rgb_model(folder: pathlib.Path, size: int) -> pathlib.Path:
    """A one-layer model whose input is [3, size, size] with ImageNet's mean/std."""
    from safetensors.numpy import save_file
    rng = np.random.default_rng(1)
    save_file({"w": rng.standard_normal((2, 3, 1, 1)).astype(np.float32)},
              str(folder / "w.safetensors"))
    model = folder / "rgb.yaml"
    model.write_text(
        "name: rgb\n"
        f"input: {{shape: [3, {size}, {size}], mean: [0.485, 0.456, 0.406], "
        "std: [0.229, 0.224, 0.225]}\n"
        "weights: w.safetensors\n"
        "layers:\n"
        "  - {name: conv, op: conv, out_channels: 2, kernel: 1, weight: w}\n")
    return model


def test_preprocess_image_matches_pil(tmp_path):
    Image = pytest.importorskip("PIL.Image")
    engine = cnnrt.Engine.load(_write_rgb_model(tmp_path, 224), device="cpu")
    path = os.path.join(SOURCE_DIR, "models", "samples", "chelsea.png")
    x = cnnrt.preprocess_image(path, engine)
    assert x.shape == (1, 3, 224, 224) and x.dtype == np.float32
    # torchvision's preset: shorter side to 256 (bilinear, antialiased), centre crop 224.
    image = Image.open(path).convert("RGB")
    w, h = image.size
    short = min(w, h)
    image = image.resize((w * 256 // short, h * 256 // short), Image.BILINEAR)
    left, top = round((image.size[0] - 224) / 2), round((image.size[1] - 224) / 2)
    crop = np.asarray(image.crop((left, top, left + 224, top + 224)), dtype=np.float32) / 255
    mean, std = np.array(engine.mean), np.array(engine.std)
    reference = ((crop - mean) / std).transpose(2, 0, 1)
    # PIL resizes uint8 images in fixed point and rounds to uint8; cnnrt stays in float
    # (include/cnnrt/image.h): they differ by at most about one grey level, half a level on average.
    levels = np.abs(x[0] - reference) * std[:, None, None] * 255
    assert levels.max() <= 1.5 and levels.mean() <= 0.5, (levels.max(), levels.mean())
    assert engine.create_context(1).run(x).shape == (1, 2, 224, 224)


def test_preprocess_image_errors_name_the_file(tmp_path, cpu_digits):
    bad = tmp_path / "not_an_image.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    with pytest.raises(cnnrt.Error, match="not_an_image.png"):
        cnnrt.preprocess_image(bad, cpu_digits)


def test_stubs_ship_with_the_module():
    stub = pathlib.Path(cnnrt._cnnrt.__file__).parent / "_cnnrt.pyi"
    text = stub.read_text()
    for name in ("class Engine", "class Context", "def run(", "def profile(",
                 "def preprocess_image(", "def load("):
        assert name in text, f"{name} missing from {stub}"
    assert (stub.parent / "py.typed").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("nm") is None,
                    reason="reads the ELF dynamic symbol table with nm (Linux, binutils)")
def test_module_exports_only_its_entry_point():
    # Anything else exported (libcnnrt's symbols, or a statically linked libstdc++'s) would be
    # interposed by the process's own copies; python/module.map keeps them local.
    listing = subprocess.run(["nm", "-D", "--defined-only", cnnrt._cnnrt.__file__],
                             capture_output=True, text=True, check=True).stdout
    exported = sorted(line.split()[-1] for line in listing.splitlines() if line.strip())
    assert exported == ["PyInit__cnnrt"], f"unexpected exports: {exported[:20]}"
