"""Embedding check: install cnnrt from this build, build examples/embed against the installed
package with find_package(cnnrt), and classify the sample photo on the CPU with random weights.
This pins the packaging (headers, exported targets, dependency targets), not the numbers: the
program must build, run, and print a class index in range.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import e2e_util  # noqa: E402

args, workdir = e2e_util.setup(__doc__)
build_dir = os.path.dirname(os.path.abspath(args.bin_dir))
prefix = os.path.join(workdir, "prefix")


def run(cmd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        e2e_util.fail(f"{' '.join(cmd)} exited {result.returncode}:\n{result.stdout[-2000:]}"
                      f"\n{result.stderr[-2000:]}")
    return result


run(["cmake", "--install", build_dir, "--prefix", prefix])
# Dependencies were found through the build's own CMAKE_PREFIX_PATH (e.g. a private prefix on a
# machine without -dev packages): the embedding project needs the same search path.
prefix_path = [prefix]
with open(os.path.join(build_dir, "CMakeCache.txt")) as cache:
    for line in cache:
        if line.startswith("CMAKE_PREFIX_PATH:") and line.strip().split("=", 1)[1]:
            prefix_path.append(line.strip().split("=", 1)[1])
example_build = os.path.join(workdir, "embed-build")
run(["cmake", "-S", os.path.join(args.source_dir, "examples", "embed"), "-B", example_build,
     "-DCMAKE_PREFIX_PATH=" + ";".join(prefix_path), "-DCMAKE_BUILD_TYPE=Release"])
run(["cmake", "--build", example_build, "-j", "2"])

model = os.path.join(args.source_dir, "models", "alexnet.yaml")
weights = os.path.join(workdir, "w.safetensors")
run([args.cli, "init-weights", model, "--seed", str(args.seed), "-o", weights])
image = os.path.join(args.source_dir, "models", "samples", "chelsea.png")
env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # the CPU path: deterministic and GPU-free
out = run([os.path.join(example_build, "classify"), model, weights, image], env=env).stdout
match = re.search(r"class (\d+) .*\(on (cpu|cuda)\)", out)
if not match or not 0 <= int(match.group(1)) < 1000:
    e2e_util.fail(f"unexpected output from the embedded program: {out!r}")
print(f"PASS: embedded program printed {out.strip()!r}")
sys.exit(e2e_util.PASS)
