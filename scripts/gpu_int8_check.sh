#!/usr/bin/env bash
# The int8 checks and timings of issue 10 on a GPU machine (called by scripts/gpu_check.sh int8,
# after its build), in the order a short lease wants them (correctness first):
#  * the int8 GPU gtests, bench/int8_recipe_check.cu (the requantisation's device function on
#    3 x 2^24 values against the host expressions) and every int8 row of the kernel harness (bit
#    for bit the integer reference: the requantisation is every int8 kernel's epilogue);
#  * AlexNet int8 on the GPU against the CPU integer engine, bit for bit (batch 3);
#  * `conv_lab --s8`: every conv_int8_tma tile on AlexNet conv2-conv5 at batch 64 and 256, each
#    checked against the default tile's bytes, the wave model's pick marked; `conv_lab
#    --linear-s8`: every batch tile of linear_int8_tma on fc6-fc8 at 64, 128 and 256, likewise;
#  * `cnnrt profile --compare` at batch 1, 64 and 256 (every int8 candidate per layer) and `cnnrt
#    bench` int8 / fp16 at batch 1, 64 and 256: the default plans, then the timed single-precision
#    plans (`cnnrt build --precisions int8|fp16 --budget none`: each layer's fastest kernel).
# AlexNet with random weights (seed 1, as scripts/ab_bench.py), int8 with an entropy calibration of
# 16 N(0, 1) inputs: timings and bit-exactness, not accuracy (docs/QUANTIZATION.md has that).
# Usage: scripts/gpu_int8_check.sh BUILD_DIR OUT_DIR; exit 1 when a step failed.
# CNNRT_INT8_STEPS (default all but ratio): a comma list of gtests, recipe, harness, engine, lab,
# profile, bench, plans, ratio — the steps to run (a second lease re-runs only what changed);
# ratio: int8 and fp16 `bench` alternated, CNNRT_RATIO_ROUNDS rounds (default 3), at 1, 64, 256 —
# issue 10's int8 / fp16 ratios, each round's pair taken seconds apart.
set -uo pipefail
BUILD="$1"
OUT="$2"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$BUILD/bin"
model="$ROOT/models/alexnet.yaml"
SCRATCH="$(mktemp -d)"  # inputs and outputs too large for the results archive
status=0
step() { echo; echo "--- $* ($(date +%T))"; }
run() { echo "+ $*"; "$@" || { echo "FAILED (rc $?): $*"; status=1; }; }
steps=",${CNNRT_INT8_STEPS:-gtests,recipe,harness,engine,lab,profile,bench,plans},"
want() { [[ "$steps" == *",$1,"* ]]; }

if want gtests; then
step "int8 GPU gtests"
timeout 200 "$bin/cnnrt_gpu_tests" --gtest_brief=1 \
  --gtest_filter='ConvTmaS8*:*Int8*:*S8*:S2dTma*:*Window*:*Mixed*' > "$OUT/int8_gtests.txt" 2>&1 ||
  status=1
grep -E "PASSED|FAILED|SKIPPED \]|tests ran" "$OUT/int8_gtests.txt" | tail -12

fi

if want recipe; then
step "the requantisation recipe and the kernels' s8::requantize on 3 x 2^24 values"
nvcc -O2 -arch=sm_90 -I"$ROOT" -o "$SCRATCH/int8_recipe_check" "$ROOT/bench/int8_recipe_check.cu" &&
  "$SCRATCH/int8_recipe_check" | tee "$OUT/int8_recipe_check.txt" || status=1
grep -qE "mismatches [1-9]" "$OUT/int8_recipe_check.txt" && { echo "FAILED: mismatches"; status=1; }

fi

if want harness; then
step "kernel harness: every int8 row, in 8 shards side by side"
# (one process took over 240 s on an H200 in run 49: the integer references of the AlexNet-sized
#  rows are the CPU's work, so the shards share the cores; the GPU takes them concurrently)
for shard in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$shard timeout 300 "$bin/cnnrt_harness_tests" \
    --gtest_brief=1 --gtest_filter='*int8*:*s8*' > "$OUT/int8_harness_$shard.txt" 2>&1 &
done
shard_status=0
for job in $(jobs -p); do wait "$job" || shard_status=1; done
cat "$OUT"/int8_harness_[0-7].txt > "$OUT/int8_harness.txt" && rm "$OUT"/int8_harness_[0-7].txt
passed=$(grep -c "^\[  PASSED  \]" "$OUT/int8_harness.txt")
echo "harness shards passed: $passed of 8 (each prints its own count)"
grep -E "^\[  PASSED  \]|FAILED" "$OUT/int8_harness.txt" | sort | uniq -c | head -12
[ "$shard_status" -ne 0 ] || [ "$passed" -ne 8 ] && status=1
fi

python3 - "$SCRATCH" <<'EOF'
import sys, numpy as np
rng = np.random.default_rng(0)
np.save(sys.argv[1] + "/x16.npy", rng.standard_normal((16, 3, 224, 224)).astype(np.float32))
EOF
calib="$OUT/alexnet_calib.json"
run "$bin/cnnrt" calibrate "$model" --random-weights 1 --input "$SCRATCH/x16.npy" --method entropy \
  -o "$calib" -q
int8=(--random-weights 1 --precision int8 --calib "$calib")

if want engine; then
# CNNRT_INT8_ENGINE_BATCH (default 3): the batch compared (conv1's window conv takes three
# consumer warpgroups from batch 6 on AlexNet, two below)
eb=${CNNRT_INT8_ENGINE_BATCH:-3}
step "AlexNet int8: the GPU against the CPU integer engine (batch $eb)"
python3 -c "import numpy as np, sys; np.save('$SCRATCH/xe.npy', np.random.default_rng(3).standard_normal(($eb, 3, 224, 224)).astype(np.float32))"
run "$bin/cnnrt" run "$model" "${int8[@]}" --device cuda --input "$SCRATCH/xe.npy" \
  --output "$SCRATCH/y_gpu.npy" -q
run timeout 300 "$bin/cnnrt" run "$model" "${int8[@]}" --device cpu --input "$SCRATCH/xe.npy" \
  --output "$SCRATCH/y_cpu.npy" -q
python3 - "$SCRATCH" <<'EOF' || status=1
import sys, numpy as np
a, b = np.load(sys.argv[1] + "/y_gpu.npy"), np.load(sys.argv[1] + "/y_cpu.npy")
same = a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))
print("int8 GPU == CPU integer engine, bit for bit:", same, a.shape)
sys.exit(0 if same else 1)
EOF

fi

if want lab; then
step "conv_lab --s8 (every conv_int8_tma tile; '*' = the default)"
[ -x "$bin/conv_lab" ] && { timeout 200 "$bin/conv_lab" --s8 > "$OUT/conv_lab_s8.txt" 2>&1 ||
  status=1; grep -vE '^\s*$' "$OUT/conv_lab_s8.txt" | head -150; }
step "conv_lab --linear-s8 (every batch tile of linear_int8_tma on fc6-fc8; '*' = the model's pick)"
[ -x "$bin/conv_lab" ] && { timeout 120 "$bin/conv_lab" --linear-s8 > "$OUT/conv_lab_linear_s8.txt" \
  2>&1 || status=1; cat "$OUT/conv_lab_linear_s8.txt"; }
grep -q "BYTES DIFFER" "$OUT/conv_lab_linear_s8.txt" 2>/dev/null && { echo "FAILED: bytes differ"; status=1; }

fi

if want profile; then
# CNNRT_INT8_PROFILE_BATCHES (default "1 64 256"): the batches profiled
step "profile --compare, int8, batch ${CNNRT_INT8_PROFILE_BATCHES:-1 64 256}"
for batch in ${CNNRT_INT8_PROFILE_BATCHES:-1 64 256}; do
  "$bin/cnnrt" profile "$model" "${int8[@]}" --device cuda --batch $batch --compare \
    --json "$OUT/int8_profile_b$batch.json" > "$OUT/int8_profile_b$batch.txt" 2>&1 || status=1
done
for batch in ${CNNRT_INT8_PROFILE_BATCHES:-1 64 256}; do head -16 "$OUT/int8_profile_b$batch.txt"; done

fi

if want bench; then
step "bench int8 and fp16, batch 1, 64, 256"
run "$bin/cnnrt" bench "$model" "${int8[@]}" --device cuda --batch 1,64,256 --iterations 300 -q
run "$bin/cnnrt" bench "$model" --random-weights 1 --precision fp16 --device cuda \
  --batch 1,64,256 --iterations 300 -q

fi

if want ratio; then
step "int8 and fp16 bench alternated, ${CNNRT_RATIO_ROUNDS:-3} rounds, batch 1, 64, 256"
for round in $(seq "${CNNRT_RATIO_ROUNDS:-3}"); do
  for precision in int8 fp16; do
    flags=(--random-weights 1 --precision fp16)
    [ $precision = int8 ] && flags=("${int8[@]}")
    run "$bin/cnnrt" bench "$model" "${flags[@]}" --device cuda --batch 1,64,256 --iterations 300 \
      -q --json "$OUT/ratio_${precision}_r$round.json"
  done
done

fi

if want plans; then
step "timed single-precision plans: the fastest int8 kernel of every layer against the fastest fp16"
# cnnrt build --precisions P --budget none: every candidate of P timed in place, the fastest
# kept (the int8 engine cnnrt can build at its best, against the fp16 one built the same way).
for batch in 1 64 256; do
  for precision in int8 fp16; do
    plan="$OUT/plan_${precision}_b$batch.yaml"
    calib_flag=(); [ $precision = int8 ] && calib_flag=(--calib "$calib")
    run timeout 120 "$bin/cnnrt" build "$model" --random-weights 1 --device cuda --precision auto \
      --precisions $precision --budget none --batch $batch --input "$SCRATCH/x16.npy" \
      "${calib_flag[@]}" -o "$plan" -q
    [ -f "$plan" ] && run "$bin/cnnrt" bench "$model" --random-weights 1 --device cuda \
      --plan "$plan" "${calib_flag[@]}" --batch $batch --iterations 300 -q
  done
done
fi
exit $status
