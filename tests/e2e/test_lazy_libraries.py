#!/usr/bin/env python3
"""cuBLASLt is loaded on first use (kernels/cuda/cublaslt_loader.cpp), not at start-up: a cnnrt
process that runs no cuBLASLt kernel never maps it, which spares it the library's 110-130 ms of
static constructors (docs/PERFORMANCE.md, run 34).  Checked with the dynamic loader's own trace
(LD_DEBUG=files lists every object it maps, at start or by dlopen); the same trace of the GPU test
binary's loader tests shows the library mapped once they call it, so the check can fail.

Run by CTest as: python3 test_lazy_libraries.py --bin-dir BIN --source-dir SRC (exit 0 = pass).
"""
import os
import subprocess

import e2e_util


def mapped(command: list[str]) -> str:
    """The loader's trace of `command` (stderr), after checking it succeeded."""
    environment = dict(os.environ, LD_DEBUG="files")
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=environment)
    if result.returncode != 0:
        e2e_util.fail(f"exit {result.returncode}: {' '.join(command)}\n{result.stdout[-2000:]}"
                      f"\n{result.stderr[-2000:]}")
    return result.stderr


def main() -> None:
    args, workdir = e2e_util.setup(__doc__)
    cli = os.path.join(args.bin_dir, "cnnrt")
    gpu_tests = os.path.join(args.bin_dir, "cnnrt_gpu_tests")
    if not os.path.exists(gpu_tests):
        e2e_util.skip("no CUDA build (cnnrt_gpu_tests absent): cnnrt links no cuBLASLt at all")
    model = os.path.join(args.source_dir, "models", "digits.yaml")
    inputs = os.path.join(workdir, "digits_input.npy")
    numpy = __import__("numpy")
    numpy.save(inputs, numpy.random.default_rng(1).random((3, 1, 8, 8), dtype=numpy.float32))
    commands = [[cli, "--version"], [cli, "info", model],
                [cli, "run", model, "--random-weights=3", "--input", inputs, "--output",
                 os.path.join(workdir, "y.npy"), "--device", "cpu", "-q"]]
    for command in commands:
        trace = mapped(command)
        if "libcudart" not in trace and "--version" in command:
            e2e_util.fail(f"the loader trace of {' '.join(command[1:])} lists no libcudart: "
                          f"LD_DEBUG=files does not work here\n{trace[-1000:]}")
        if "libcublasLt" in trace:
            e2e_util.fail(f"cnnrt {' '.join(command[1:3])} mapped libcublasLt without using it")
        print(f"ok   cnnrt {' '.join(command[1:3])}: libcublasLt not mapped")
    trace = mapped([gpu_tests, "--gtest_filter=CublasLtLoader.*"])
    if "libcublasLt" not in trace:
        e2e_util.fail("the loader tests called cuBLASLt but the trace shows no libcublasLt: "
                      "this check could not see a load")
    print("ok   the loader tests map libcublasLt when they call it")


if __name__ == "__main__":
    main()
