#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with ASan+UBSan and runs each in turn at the lowest
# CPU priority, from its committed seed corpus (tests/fuzz/corpus/<name>; new inputs go to a
# working corpus in the build folder, not into the repo).
#   scripts/fuzz.sh [--time SECONDS | --runs N] [--jobs J] [TARGET...]   (default: --time 60,
#   --jobs 1, all targets)
# Targets: safetensors npy image model_loader plan_file calibration timing_cache.  --jobs J runs
# J processes per target at once (seeds 1..J, one shared working corpus, each with the --time
# or --runs limit); the executions printed are their sum.  A crash, sanitizer report, leak,
# timeout (10 s per input) or out-of-memory (2 GiB) stops that process, leaves the input in
# $CNNRT_FUZZ_BUILD/artifacts/ and makes the script exit 1 after the remaining targets.  With
# CNNRT_FUZZ_PREBUILT=1 the binaries in $CNNRT_FUZZ_BUILD/bin are used as they are (no build).
# Prints one line per target: executions, seconds, crashes.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
CNNRT_FUZZ_BUILD="${CNNRT_FUZZ_BUILD:-$CNNRT_ROOT/build-fuzz}"

limit=(-max_total_time=60)
jobs=1
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time) limit=(-max_total_time="$2"); shift 2 ;;
    --runs) limit=(-runs="$2"); shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -eq 0 ] && targets=(safetensors npy image model_loader plan_file calibration timing_cache)

[ "${CNNRT_FUZZ_PREBUILT:-0}" = 1 ] || configure_sanitizer_build "$CNNRT_FUZZ_BUILD"
mkdir -p "$CNNRT_FUZZ_BUILD/artifacts"
status=0
summary=()
for target in "${targets[@]}"; do
  binary="$CNNRT_FUZZ_BUILD/bin/fuzz_$target"
  seeds="$CNNRT_ROOT/tests/fuzz/corpus/$target"
  work="$CNNRT_FUZZ_BUILD/corpus/$target"
  [ -x "$binary" ] || { echo "error: no fuzz target '$target' ($binary)"; exit 1; }
  mkdir -p "$work"
  echo "== fuzz_$target ${limit[*]} x $jobs"
  start=$(date +%s)
  pids=()
  for job in $(seq 1 "$jobs"); do
    log="$CNNRT_FUZZ_BUILD/fuzz_$target.$job.log"
    # Leaks are checked (a leak is reported like a crash); -close_fd_mask keeps the log short.
    nice -n 19 "$binary" "${limit[@]}" -seed="$job" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -close_fd_mask=3 \
      -artifact_prefix="$CNNRT_FUZZ_BUILD/artifacts/${target}-${job}-" "$work" "$seeds" \
      >"$log" 2>&1 &
    pids+=($!)
  done
  crashes=0
  runs=0
  for job in $(seq 1 "$jobs"); do
    log="$CNNRT_FUZZ_BUILD/fuzz_$target.$job.log"
    if ! wait "${pids[$((job - 1))]}"; then
      crashes=$((crashes + 1))
      status=1
      grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$log" | head -20
    fi
    n=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
    runs=$((runs + n))
  done
  summary+=("fuzz_$target: ${runs} executions in $(( $(date +%s) - start )) s (${jobs} processes), ${crashes} crashes")
  echo "${summary[-1]}"
done
echo
printf '%s\n' "${summary[@]}"
exit $status
