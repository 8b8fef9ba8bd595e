"""Embedding check: install cnnrt from this build, then build examples/embed against the
installed package four ways: CMake find_package and pkg-config, each with the shared library
(libcnnrt.so, when the build has CNNRT_SHARED) and the static ones, and classify the sample
photo on the CPU with random weights.  This pins the packaging (headers, exported targets,
dependency targets, .pc files, installed CLIs), not the numbers: each program must build, link
the flavour it asked for, run, and print a class index in range.  Also: the installed headers
include no CUDA header, a shared consumer is compiled without CUDA include folders, and
libcnnrt.so exports only the public API (runtime/libcnnrt.map).
"""
import fnmatch
import glob
import json
import os
import re
import shlex
import shutil
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
libdir = os.path.dirname(glob.glob(os.path.join(prefix, "lib*", "libcnnrt.a"))[0])
shared_libs = glob.glob(os.path.join(libdir, "libcnnrt.so"))

# --- installed files -----------------------------------------------------------------------
for cli in ("cnnrt", "alexnet_infer"):
    if not os.access(os.path.join(prefix, "bin", cli), os.X_OK):
        e2e_util.fail(f"{cli} is not installed in {prefix}/bin")
for header in glob.glob(os.path.join(prefix, "include", "cnnrt", "*.h")):
    with open(header) as text:
        included = re.findall(r'#\s*include\s*[<"]([^>"]+)', text.read())
    cuda = [name for name in included if re.match(r"(cuda|cublas|cudnn|nv)", name)]
    if cuda:
        e2e_util.fail(f"installed header {header} includes CUDA headers: {cuda}")

if shared_libs:
    exported = run(["nm", "-D", "--defined-only", "--demangle", shared_libs[0]]).stdout.splitlines()
    with open(os.path.join(args.source_dir, "runtime", "libcnnrt.map")) as map_file:
        patterns = [p.strip().strip(";").strip('"') for p in map_file.read().split("\n")
                    if p.strip().startswith(("cnnrt::", '"'))]
    symbols = [line.split(" ", 2)[2] for line in exported if len(line.split(" ", 2)) == 3]
    stray = [s for s in symbols if not s.startswith(("_init", "_fini")) and
             not any(fnmatch.fnmatchcase(s, p) for p in patterns)]
    if stray or not any(s.startswith("cnnrt::Engine::load(") for s in symbols):
        e2e_util.fail(f"libcnnrt.so exports {len(stray)} symbols outside the public API, e.g. "
                      f"{stray[:5]} (or misses Engine::load)")
    print(f"libcnnrt.so exports {len(symbols)} symbols, all of the public API")

# --- the example, built each way ----------------------------------------------------------
# Dependencies were found through the build's own CMAKE_PREFIX_PATH (e.g. a private prefix on a
# machine without -dev packages): the embedding project needs the same search path.
prefix_path = [prefix]
with open(os.path.join(build_dir, "CMakeCache.txt")) as cache:
    for line in cache:
        if line.startswith("CMAKE_PREFIX_PATH:") and line.strip().split("=", 1)[1]:
            prefix_path.append(line.strip().split("=", 1)[1])
example = os.path.join(args.source_dir, "examples", "embed")
programs = {}  # flavour -> (path, shared?)


def build_with_cmake(flavour, shared):
    folder = os.path.join(workdir, f"embed-{flavour}")
    run(["cmake", "-S", example, "-B", folder, "-DCMAKE_PREFIX_PATH=" + ";".join(prefix_path),
         "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
         f"-DCNNRT_USE_STATIC={'OFF' if shared else 'ON'}"])
    run(["cmake", "--build", folder, "-j", "2"])
    if shared:  # a CPU-only consumer of the shared library sees no CUDA include folder
        with open(os.path.join(folder, "compile_commands.json")) as commands:
            command = json.load(commands)[0]["command"]
        if "cuda" in command.lower():
            e2e_util.fail(f"the shared-library consumer is compiled with CUDA flags: {command}")
    programs[flavour] = (os.path.join(folder, "classify"), shared)


def build_with_pkg_config(flavour, package, shared):
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
    flags = shlex.split(run(["pkg-config", "--cflags", "--libs", package], env=env).stdout)
    output = os.path.join(workdir, f"classify-{flavour}")
    compiler = os.environ.get("CXX", "c++")
    run([compiler, "-std=c++17", "-O2", os.path.join(example, "classify.cpp"), "-o", output] +
        flags + ([f"-Wl,-rpath,{libdir}"] if shared else []))
    programs[flavour] = (output, shared)


build_with_cmake("cmake-static", shared=False)
if shared_libs:
    build_with_cmake("cmake-shared", shared=True)
if shutil.which("pkg-config"):
    build_with_pkg_config("pkgconfig-static", "cnnrt-static", shared=False)
    if shared_libs:
        build_with_pkg_config("pkgconfig-shared", "cnnrt", shared=True)
else:
    print("pkg-config not installed: the pkg-config builds are not checked here")

# --- each program runs --------------------------------------------------------------------
model = os.path.join(args.source_dir, "models", "alexnet.yaml")
weights = os.path.join(workdir, "w.safetensors")
run([os.path.join(prefix, "bin", "cnnrt"), "init-weights", model, "--seed", str(args.seed), "-o",
     weights])
image = os.path.join(args.source_dir, "models", "samples", "chelsea.png")
env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # the CPU path: deterministic and GPU-free
answers = set()
for flavour, (program, shared) in programs.items():
    linked = run(["ldd", program]).stdout
    if ("libcnnrt.so" in linked) != shared:
        e2e_util.fail(f"{flavour}: expected {'a' if shared else 'no'} libcnnrt.so in ldd:\n"
                      f"{linked}")
    out = run([program, model, weights, image], env=env).stdout
    match = re.search(r"class (\d+) .*\(on (cpu|cuda)\)", out)
    if not match or not 0 <= int(match.group(1)) < 1000:
        e2e_util.fail(f"{flavour}: unexpected output from the embedded program: {out!r}")
    answers.add(match.group(1))
    print(f"{flavour}: {os.path.getsize(program) / 1e3:.0f} kB, printed {out.strip()!r}")
if len(answers) != 1:
    e2e_util.fail(f"the flavours disagree on the class: {answers}")
print(f"PASS: {len(programs)} builds of the embedded program agree")
sys.exit(e2e_util.PASS)
