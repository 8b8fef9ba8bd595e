#!/usr/bin/env bash
# One command for a GPU machine with nvcc, CMake and PyTorch but no network and none of the
# Debian -dev packages: unpack the carried .deb files (scripts/fetch_gpu_deps.sh makes them)
# into a private prefix, build for the local GPU, run the whole test suite, then optionally the
# memory checkers and the benchmarks.
#   scripts/gpu_check.sh [test|gtest] [plantarget] [sanitize] [bench] [int8] [ab] [sparse] [models] [zoo] [soak] [compare] [python] [auto]
#   (default: test; models needs .carry/ with the EfficientNet-Lite0 .pth, its converted
#    safetensors and coffee.png — see scripts/gpu_models_check.py)
# (ab: builds the tree carried in .baseline/ too and times both AlexNet engines interleaved, fp16
#  and int8 — the before/after check of a change; scripts/ab_bench.py)
# (int8: the int8 gtests and harness rows, GPU == CPU integer engine, conv_lab --s8, per-layer and
#  end-to-end int8 timings; scripts/gpu_int8_check.sh)
# (auto: cnnrt build --precision auto for AlexNet and EfficientNet-Lite0 at batch 1, 64, 256, each
#  plan benched against all-fp16; needs .carry/ for EfficientNet-Lite0; scripts/gpu_auto_check.py)
# (plantarget: scripts/plan_target_check.sh — `plan --target h100` diffed with the GPU's plan)
# (gtest: only the GPU gtest binary; CNNRT_SKIP_LAB=1 leaves bench/conv_lab out of bench)
# (python: the Python module's tests and the packaging check (e2e.test_find_package), then
#  tools/bench_python.py — the Python round trip against the C++ run; docs/PYTHON.md)
# Logs and results go to $OUT/results.tgz (default OUT: ./gpu_out) — one file, so that
# fetching tools with a file-count limit get everything.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RESULTS="${OUT:-$ROOT/gpu_out}"
OUT="$(mktemp -d)/results"
DEPS=/opt/cnnrt-deps
BUILD="$ROOT/build-gpu"
mkdir -p "$OUT" "$RESULTS"
pack_results() {
  tar czf "$RESULTS/results.tgz" -C "$(dirname "$OUT")" results && echo "results in $RESULTS/results.tgz"
}
trap pack_results EXIT
modes=("$@")
[ ${#modes[@]} -eq 0 ] && modes=(test)
status=0
# Whole-run budget (the GPU machine's per-command limit is 600 s): racecheck suites that would
# run past it are cut short or skipped, and say so, so that the results always come back.
DEADLINE=$(( $(date +%s) + ${CNNRT_TIME_BUDGET:-570} ))

step() { echo; echo "=== $* ($(date +%T))"; }
export PYTHONFAULTHANDLER=1  # any Python that crashes prints its stack

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/device.txt"
# A tree copied without .git names its commit in the COMMIT file (see the README's GPU notes).
# The COMMIT file wins: a copy inside another checkout would otherwise report that checkout's HEAD.
export CNNRT_COMMIT="${CNNRT_COMMIT:-$(cat "$ROOT/COMMIT" 2>/dev/null || git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
echo "commit $CNNRT_COMMIT" | tee -a "$OUT/device.txt"

step "unpack dependencies"
if ! ls "$ROOT"/.deps/*.deb >/dev/null 2>&1; then
  echo "error: no .deb files in $ROOT/.deps (run scripts/fetch_gpu_deps.sh where there is network)"
  exit 1
fi
mkdir -p "$DEPS"
for deb in "$ROOT"/.deps/*.deb; do dpkg -x "$deb" "$DEPS"; done
# A -dev package's libX.so may be an absolute link to Debian's runtime file (zlib1g-dev's points
# at /lib/x86_64-linux-gnu/libz.so.1.2.13).  Where the system has another version, the link
# dangles, CMake takes the non-PIC libX.a beside it, and the shared objects (libcnnrt.so, the
# Python module) fail to link: point such links at the system's library of the same name.
for link in "$DEPS"/usr/lib/x86_64-linux-gnu/*.so; do
  if [ -L "$link" ] && [ ! -e "$link" ]; then
    name="$(basename "$link")"
    system_lib="$(ls /lib/x86_64-linux-gnu/"$name".[0-9]* /usr/lib/x86_64-linux-gnu/"$name".[0-9]* \
                  2>/dev/null | head -1)"
    if [ -n "$system_lib" ]; then ln -sfn "$system_lib" "$link" && echo "$name -> $system_lib"; fi
  fi
done
export LD_LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"

step "configure + build"
arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')"
# cuSPARSELt (the 2:4 baseline, docs/SPARSITY.md) is the pip wheel in PyTorch's venv here, not a
# system library: CMake asks the python3 on PATH, and this names the venv's wheel outright in
# case that is another python (nvidia/cusparselt/ or nvidia/cu13/, by wheel version).
cusparselt_root=""
for py in python3 /opt/torch/.venv/bin/python3; do
  command -v "$py" >/dev/null 2>&1 || continue
  for site_dir in $("$py" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    for dir in "$site_dir"/nvidia/*/; do
      if [ -f "$dir/include/cusparseLt.h" ]; then cusparselt_root="${dir%/}"; break 3; fi
    done
  done
done
echo "cuSPARSELt: ${cusparselt_root:-not found (no cuSPARSELt baseline)}"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$DEPS/usr" -DCMAKE_CUDA_ARCHITECTURES="${CNNRT_CUDA_ARCH:-$arch}" \
  ${cusparselt_root:+-DCNNRT_CUSPARSELT_ROOT="$cusparselt_root"} \
  > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
grep -E "cnnrt: cuSPARSELt" "$OUT/configure.log"
start=$(date +%s)
cmake --build "$BUILD" -j "$(nproc)" > "$OUT/build.log" 2>&1 || { grep -E "error|Error" -A3 "$OUT/build.log" | head -60; exit 1; }
echo "build took $(( $(date +%s) - start )) s"

for mode in "${modes[@]}"; do
  case "$mode" in
    test)
      step "test suite (ctest)"
      (cd "$BUILD" && ctest --output-on-failure -j 8 --timeout 600) > "$OUT/ctest.log" 2>&1 || status=1
      # (ctest runs every GPU gtest too: cnnrt_gpu_tests is discovered test by test)
      grep -E "tests passed|tests failed|\(Failed\)|\(SEGFAULT\)|\(Timeout\)|Not Run" "$OUT/ctest.log" | tail -25
      ;;
    plantarget)
      step "plan --target h100 against the GPU's own plans"
      timeout 200 bash "$ROOT/scripts/plan_target_check.sh" "$BUILD/bin/cnnrt" "$OUT/plan_target" \
        h100 2>&1 | tee "$OUT/plan_target.log" || status=1
      ;;
    gtest)
      # Four shards side by side (the suite is ctest-parallel safe; one process ran past 100 s on
      # an H200 in run 49), each log kept, then the counts.
      step "GPU gtests only, 4 shards"
      for shard in 0 1 2 3; do
        GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$shard timeout 300 "$BUILD/bin/cnnrt_gpu_tests" \
          --gtest_brief=1 > "$OUT/gpu_tests_$shard.log" 2>&1 &
      done
      for job in $(jobs -p); do wait "$job" || status=1; done
      cat "$OUT"/gpu_tests_[0-3].log > "$OUT/gpu_tests.log" && rm "$OUT"/gpu_tests_[0-3].log
      [ "$(grep -c "^\[  PASSED  \]" "$OUT/gpu_tests.log")" -eq 4 ] || status=1
      grep -E "^\[  PASSED  \]|^\[  FAILED  \]|^\[  SKIPPED \]" "$OUT/gpu_tests.log" | tail -20
      ;;
    sanitize)
      # memcheck over the whole GPU suite in one process.  racecheck is far slower, so it runs
      # one process per test suite, each under its own limit, and says per suite whether it
      # finished.  racecheck does not model the mbarrier/TMA ordering inside cuBLASLt's Hopper
      # GEMM kernels (nvjet_*) and reports hazards there; excluding those kernels from the tool
      # makes it fail on a hardware exception instead, so every kernel is checked and the
      # reports are split into cnnrt's kernels (the verdict) and library kernels (listed).
      step "compute-sanitizer memcheck"
      timeout "${CNNRT_MEMCHECK_TIMEOUT:-240}" compute-sanitizer --tool memcheck --error-exitcode 3 \
        "$BUILD/bin/cnnrt_gpu_tests" --gtest_brief=1 \
        ${CNNRT_SANITIZE_FILTER:+--gtest_filter=$CNNRT_SANITIZE_FILTER} \
        > "$OUT/sanitize_memcheck.log" 2>&1
      rc=$?
      [ $rc -eq 124 ] && echo "memcheck: stopped at the time limit (incomplete)"
      [ $rc -ne 0 ] && status=1
      tail -4 "$OUT/sanitize_memcheck.log"
      step "compute-sanitizer racecheck, one process per suite"
      suites=$("$BUILD/bin/cnnrt_gpu_tests" --gtest_list_tests \
        ${CNNRT_SANITIZE_FILTER:+--gtest_filter=$CNNRT_SANITIZE_FILTER} | grep -E '^[A-Za-z]' | tr -d '.')
      for suite in $suites; do
        start=$(date +%s)
        limit=$(( DEADLINE - start - 15 ))
        [ "$limit" -gt "${CNNRT_RACECHECK_TIMEOUT:-200}" ] && limit=${CNNRT_RACECHECK_TIMEOUT:-200}
        if [ "$limit" -lt 10 ]; then echo "racecheck $suite: NOT RUN (out of time)"; continue; fi
        log="$OUT/racecheck_${suite//\//_}.log"
        timeout "$limit" compute-sanitizer --tool racecheck \
          "$BUILD/bin/cnnrt_gpu_tests" --gtest_brief=1 --gtest_filter="$suite.*" > "$log" 2>&1
        rc=$?
        own=$(grep "Race reported" "$log" | grep -c "cnnrt")
        lib=$(grep "Race reported" "$log" | grep -vc "cnnrt")
        libnames=$(grep -oE "access at [A-Za-z0-9_]+" "$log" | grep -v cnnrt | awk '{print $3}' | sort -u | tr '\n' ' ')
        if [ $rc -eq 124 ]; then verdict="STOPPED AT THE TIME LIMIT (incomplete)"
        elif grep -q "terminated before first instrumented API call" "$log"; then verdict="complete, clean (launches no kernel)"
        elif grep -qE "Internal Sanitizer Error|\[  FAILED  \]" "$log" || ! grep -q "PASSED" "$log"; then verdict="FAILED (rc $rc)"
        elif [ "$own" -gt 0 ]; then verdict="complete, $own HAZARD REPORTS IN CNNRT KERNELS"
        else verdict="complete, clean"
        fi
        echo "racecheck $suite: $verdict, $(( $(date +%s) - start )) s;" \
          "library-kernel reports: $lib${libnames:+ ($libnames)}"
      done | tee "$OUT/racecheck_summary.txt"  # (a pipeline's loop runs in a subshell)
      grep -v "complete, clean" "$OUT/racecheck_summary.txt" | grep -q . && status=1
      ;;
    bench)
      step "bench + profile"
      "$BUILD/bin/cnnrt" bench "$ROOT/models/alexnet.yaml" --random-weights 1 --device cuda \
        --precision fp16 --batch 1,16,64,256 --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.txt" || status=1
      for batch in 1 64 256; do
        "$BUILD/bin/cnnrt" profile "$ROOT/models/alexnet.yaml" --random-weights 1 --device cuda \
          --precision fp16 --batch $batch --compare --json "$OUT/profile_b$batch.json" \
          > "$OUT/profile_b$batch.txt" 2>&1 || status=1
      done
      cat "$OUT/profile_b64.txt"
      # cuSPARSELt 2:4 vs dense cuBLASLt on AlexNet's GEMM shapes (built only with cuSPARSELt).
      # --no-search: with cuSPARSELt 0.8.0 on an H100 the search / configuration sweep hit "an
      # illegal instruction" on the first shape, which ends the process's CUDA context.
      [ -x "$BUILD/bin/cusparselt_gemm" ] && { timeout 180 "$BUILD/bin/cusparselt_gemm" --no-search \
        --json "$OUT/cusparselt_gemm.json" > "$OUT/cusparselt_gemm.txt" 2>&1 || status=1; cat "$OUT/cusparselt_gemm.txt"; }
      [ -x "$BUILD/bin/conv_lab" ] && { "$BUILD/bin/conv_lab" --wgmma > "$OUT/conv_lab_wgmma.txt" 2>&1 || status=1; cat "$OUT/conv_lab_wgmma.txt"; }
      [ -x "$BUILD/bin/conv_lab" ] && [ -z "${CNNRT_SKIP_LAB:-}" ] && { "$BUILD/bin/conv_lab" > "$OUT/conv_lab.txt" 2>&1 || status=1; tail -40 "$OUT/conv_lab.txt"; }
      ;;
    sparse)
      step "sparse: 2:4 and channel-pruned AlexNet (scripts/gpu_sparse_check.sh)"
      bash "$ROOT/scripts/gpu_sparse_check.sh" "$BUILD" "$OUT" 2>&1 | tee "$OUT/sparse.log" || status=1
      ;;
    ab)
      step "A/B: the baseline tree in .baseline/ against this one"
      if [ ! -f "$ROOT/.baseline/CMakeLists.txt" ]; then echo "no .baseline/ tree carried"; status=1; continue; fi
      cmake -S "$ROOT/.baseline" -B "$ROOT/build-baseline" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$DEPS/usr" -DCMAKE_CUDA_ARCHITECTURES="${CNNRT_CUDA_ARCH:-$arch}" \
        -DCNNRT_BUILD_TESTS=OFF > "$OUT/configure_baseline.log" 2>&1 &&
        cmake --build "$ROOT/build-baseline" -j "$(nproc)" --target cnnrt_cli > "$OUT/build_baseline.log" 2>&1 ||
        { echo "baseline build failed"; tail -20 "$OUT/build_baseline.log"; status=1; continue; }
      echo "baseline commit $(cat "$ROOT/.baseline/COMMIT" 2>/dev/null)"
      # CNNRT_AB_PRECISIONS (default "fp16 int8"): the engines to compare; CNNRT_AB_BATCHES
      # (default 1,64,256) the batches
      ab_precisions=" ${CNNRT_AB_PRECISIONS:-fp16 int8} "
      [[ "$ab_precisions" == *" fp16 "* ]] &&
        { python3 "$ROOT/scripts/ab_bench.py" --a "$ROOT/build-baseline/bin/cnnrt" --b "$BUILD/bin/cnnrt" \
          --model "$ROOT/models/alexnet.yaml" --batch "${CNNRT_AB_BATCHES:-1,64,256}" \
          --rounds "${CNNRT_AB_ROUNDS:-3}" \
          --json "$OUT/ab.json" 2>&1 | tee "$OUT/ab.txt" || status=1; }
      [[ "$ab_precisions" == *" int8 "* ]] || continue
      # int8 too, both builds on one calibration (this build's, 16 N(0, 1) inputs, the weights of
      # ab_bench.py's --random-weights 1)
      python3 -c "import numpy as np; np.save('/tmp/cnnrt_ab_x16.npy', np.random.default_rng(0).standard_normal((16, 3, 224, 224)).astype(np.float32))" &&
        "$BUILD/bin/cnnrt" calibrate "$ROOT/models/alexnet.yaml" --random-weights 1 \
          --input /tmp/cnnrt_ab_x16.npy --method entropy -o "$OUT/ab_calib.json" -q &&
        python3 "$ROOT/scripts/ab_bench.py" --a "$ROOT/build-baseline/bin/cnnrt" --b "$BUILD/bin/cnnrt" \
          --model "$ROOT/models/alexnet.yaml" --batch "${CNNRT_AB_BATCHES:-1,64,256}" \
          --rounds "${CNNRT_AB_ROUNDS:-3}" \
          --precision int8 --calib "$OUT/ab_calib.json" --json "$OUT/ab_int8.json" 2>&1 |
        tee "$OUT/ab_int8.txt" || status=1
      ;;
    int8)
      step "int8: checks and timings (scripts/gpu_int8_check.sh)"
      bash "$ROOT/scripts/gpu_int8_check.sh" "$BUILD" "$OUT" 2>&1 | tee "$OUT/int8.log" || status=1
      ;;
    models)
      step "real models: the torch-free reader vs torch, EfficientNet-Lite0 GPU vs CPU, ONNX"
      C="$ROOT/.carry"
      python3 "$ROOT/scripts/gpu_models_check.py" --bin "$BUILD/bin" \
        --pth "$C/efficientnet-lite0-57934424.pth" --weights "$C/efficientnet_lite0.safetensors" \
        --images "$ROOT/models/samples/chelsea.png,$C/coffee.png" 2>&1 | tee "$OUT/models.txt" || status=1
      timeout 240 python3 "$ROOT/tools/onnx_check_torchvision.py" --bin "$BUILD/bin" --cuda 2>&1 \
        | tee "$OUT/onnx_torchvision.txt" | tail -12 || status=1
      ;;
    zoo)
      step "model zoo: CUDA fp16 / fp32 vs the CPU engine (random weights)"
      timeout 240 python3 "$ROOT/scripts/gpu_zoo_check.py" --bin "$BUILD/bin" 2>&1 | tee "$OUT/zoo.txt" || status=1
      ;;
    soak)
      step "soak: 10,000 runs of one context, 1,000 context creations (docs/RELIABILITY.md)"
      CNNRT_SOAK=1 timeout 300 "$BUILD/bin/cnnrt_gpu_tests" --gtest_filter='Gpu*' 2>&1 \
        | tee "$OUT/soak.txt" | grep -vE "^\[ +(RUN|OK) " | tail -15 || status=1
      ;;
    compare)
      step "side by side with PyTorch"
      python3 "$ROOT/tools/compare_torch.py" --selftest > "$OUT/compare_selftest.log" 2>&1 || status=1
      tail -3 "$OUT/compare_selftest.log"
      PYTHONUNBUFFERED=1 python3 "$ROOT/tools/compare_torch.py" --model "$ROOT/models/alexnet.yaml" \
        --bin "$BUILD/bin" --batch 1,64,256 --compile --json "$OUT/compare.json" \
        --markdown "$OUT/compare.md" > "$OUT/compare.log" 2>&1 || status=1
      tail -60 "$OUT/compare.log"
      ;;
    python)
      step "Python module: pytest on this build, the packaging check, the binding's overhead"
      (cd "$BUILD" && ctest -V -R 'python\.pytest|e2e\.test_find_package' \
        --timeout 300) > "$OUT/python_ctest.log" 2>&1 || status=1
      grep -E "tests passed|tests failed|\(Failed\)|Passed|passed|skipped|took|exports|kB" \
        "$OUT/python_ctest.log" | tail -20
      # A crash inside the module: faulthandler (PYTHONFAULTHANDLER, set above) names the Python
      # frame; cuda-gdb (the GPU image has no plain gdb) gives the native stack.
      if grep -qE "SEGFAULT|Fatal Python error|Segmentation" "$OUT/python_ctest.log"; then
        grep -B2 -A30 "Fatal Python error" "$OUT/python_ctest.log" | head -60
        PYTHONPATH="$BUILD/python" CNNRT_SOURCE_DIR="$ROOT" timeout 180 cuda-gdb -q -batch \
          -ex run -ex bt -ex "info sharedlibrary" --args python3 -m pytest -x -q -p no:cacheprovider \
          "$ROOT/python/tests" > "$OUT/python_gdb.log" 2>&1
        grep -E "^#[0-9]+|signal|SIG" "$OUT/python_gdb.log" | head -40
      fi
      PYTHONPATH="$BUILD/python:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 timeout 240 python3 \
        "$ROOT/tools/bench_python.py" --device cuda --iterations 1000 --json "$OUT/python_bench.json" \
        2>&1 | tee "$OUT/python_bench.txt" || status=1
      ;;
    auto)
      step "automatic plans: cnnrt build --precision auto (AlexNet, EfficientNet-Lite0) vs all-fp16"
      PYTHONUNBUFFERED=1 timeout 240 python3 "$ROOT/scripts/gpu_auto_check.py" --bin "$BUILD/bin" \
        --out "$OUT/auto" 2>&1 | tee "$OUT/auto.txt" | tail -40 || status=1
      ;;
    *) echo "unknown mode $mode"; status=1 ;;
  esac
done
exit $status
