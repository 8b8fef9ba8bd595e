"""`pip install .` as a user runs it, CPU-only (-Ccmake.define.CNNRT_WITH_CUDA=OFF keeps CI from
compiling the CUDA code a second time): build the wheel into a private target folder, check
what it holds (the module, its stubs, py.typed; no C++ headers or libraries), then run the
Python test suite (python/tests) against the installed module rather than the build tree's.
Uses the scikit-build-core and nanobind already installed (scripts/test.sh installs them), so
it needs no network; the build time is printed, as CI's budget counts it.
"""
import glob
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import e2e_util  # noqa: E402

args, workdir = e2e_util.setup(__doc__)
if os.environ.get("CNNRT_SKIP_PIP_INSTALL_TEST"):  # for a CI short of time; say so when used
    e2e_util.skip("CNNRT_SKIP_PIP_INSTALL_TEST is set")
for package in ("scikit_build_core", "nanobind", "pytest"):
    try:
        __import__(package)
    except ImportError:
        e2e_util.fail(f"python package {package} missing (scripts/test.sh installs it: "
                      "pip install scikit-build-core nanobind pytest)")

site = os.path.join(workdir, "site")
started = time.time()
command = [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
           "--no-index", "--target", site, "-Ccmake.define.CNNRT_WITH_CUDA=OFF",
           "-Cbuild-dir=" + os.path.join(workdir, "build"), args.source_dir]
if shutil.which("ccache"):  # repeated runs on one machine (CI's, a developer's) compile once
    command.insert(-1, "-Ccmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache")
result = subprocess.run(command, capture_output=True, text=True, timeout=1500)
if result.returncode != 0:
    e2e_util.fail(f"{' '.join(command)} exited {result.returncode}:\n{result.stdout[-3000:]}"
                  f"\n{result.stderr[-3000:]}")
print(f"pip install . (CPU only) took {time.time() - started:.0f} s", flush=True)

package_dir = os.path.join(site, "cnnrt")
for name in ("__init__.py", "py.typed", "_cnnrt.pyi"):
    if not os.path.isfile(os.path.join(package_dir, name)):
        e2e_util.fail(f"the installed package has no {name}")
if not glob.glob(os.path.join(package_dir, "_cnnrt*.so")):
    e2e_util.fail(f"the installed package has no extension module: {os.listdir(package_dir)}")
stray = sorted(n for n in os.listdir(site) if n != "cnnrt" and not n.endswith(".dist-info"))
if stray:
    e2e_util.fail(f"the wheel installs more than the package: {stray}")

# The suite, importing the installed module (from a folder that is not the source tree).
env = dict(os.environ, PYTHONPATH=site, CNNRT_SOURCE_DIR=args.source_dir,
           CNNRT_SEED=str(args.seed))
tests = os.path.join(args.source_dir, "python", "tests")
check = subprocess.run(
    [sys.executable, "-c", "import cnnrt; print(cnnrt.__file__, cnnrt.__version__)"],
    capture_output=True, text=True, env=env, cwd=workdir)
if check.returncode != 0 or not check.stdout.startswith(package_dir):
    e2e_util.fail(f"import cnnrt did not load the installed module: {check.stdout}{check.stderr}")
suite = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", tests],
                       capture_output=True, text=True, env=env, cwd=workdir, timeout=600)
print(suite.stdout[-1500:])
if suite.returncode != 0:
    e2e_util.fail(f"python/tests against the installed module:\n{suite.stderr[-2000:]}")
print(f"PASS: pip install . and python/tests on the installed module ({check.stdout.strip()})")
sys.exit(e2e_util.PASS)
