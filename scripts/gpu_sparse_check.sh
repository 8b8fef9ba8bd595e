#!/usr/bin/env bash
# The sparse numbers of issue 11 on a GPU machine (called by scripts/gpu_check.sh sparse, after
# its build): AlexNet with PyTorch-style initial weights (`cnnrt init-weights --seed 0`),
#  * pruned 2:4 on conv2-conv5, fc6, fc7 (`cnnrt prune --pattern 2:4`): per-layer timings of every
#    candidate on those same weights (`cnnrt profile --compare`, batch 1 and 256: the dense
#    fp16 kernels next to conv_fp16_sparse24_tma, _wgmma, _mma, linear_fp16_sparse24 and, where
#    built, the cuSPARSELt baseline), and the whole network with some of those layers sparse
#    (plan files) against all-dense (`cnnrt bench`);
#  * channel-pruned to half the channels (`cnnrt prune --channels 0.5`: compacted at build) against
#    the dense model end to end (`cnnrt bench`).
# Random weights: these are timings, not accuracy (docs/SPARSITY.md has the accuracy on real
# models).  Usage: scripts/gpu_sparse_check.sh BUILD_DIR OUT_DIR; exit 1 when a step failed.
set -uo pipefail
BUILD="$1"
OUT="$2"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cnnrt="$BUILD/bin/cnnrt"
model="$ROOT/models/alexnet.yaml"
images="$ROOT/models/samples"
status=0
run() { echo "+ $*"; "$@" || { echo "FAILED (rc $?): $*"; status=1; }; }

dense="$OUT/alexnet_dense.safetensors"
s24="$OUT/alexnet_24.safetensors"
ch50="$OUT/alexnet_ch50.safetensors"
run "$cnnrt" init-weights "$model" --seed 0 -o "$dense" -q
run timeout 300 "$cnnrt" prune "$model" --weights "$dense" --pattern 2:4 \
  --layers conv2,conv3,conv4,conv5,fc6,fc7 --images "$images" --samples 1 -o "$s24" \
  --json "$OUT/prune_24.json"
run timeout 300 "$cnnrt" prune "$model" --weights "$dense" --channels 0.5 \
  --layers conv1,conv2,conv3,conv4,conv5 --images "$images" \
  --samples 1 -o "$ch50" --json "$OUT/prune_ch50.json"

# Plans: every pruned layer sparse; only the convs where the sparse TMA conv won on an H100 at
# batch 256 (conv3-conv5: docs/PERFORMANCE.md run 37b); only the linears (the weight-streaming
# sparse linear, a batch-1 kernel).
write_plan() {  # FILE LAYER...
  local file="$1"
  shift
  { echo "layers:"; for layer in "$@"; do echo "  $layer: {sparsity: \"2:4\"}"; done; } > "$file"
}
write_plan "$OUT/plan_all.yaml" conv2 conv3 conv4 conv5 fc6 fc7
write_plan "$OUT/plan_conv345.yaml" conv3 conv4 conv5
write_plan "$OUT/plan_fc.yaml" fc6 fc7
[ -f "$s24" ] && for batch in 1 256; do
  run "$cnnrt" profile "$model" --weights "$s24" --device cuda --precision fp16 --batch $batch \
    --compare --json "$OUT/sparse_profile_b$batch.json" > "$OUT/sparse_profile_b$batch.txt" 2>&1
  # The candidates of conv2..fc7 (a layer's rows follow its chosen row, with an empty name).
  sed -n '/every candidate/,$p' "$OUT/sparse_profile_b$batch.txt" |
    awk '/^[^ ]/ {keep = ($1 ~ /^(conv[2-5]|fc[67])$/)} keep'
done
[ -f "$s24" ] && {
  run "$cnnrt" bench "$model" --weights "$s24" --device cuda --precision fp16 --batch 1,64,256 \
    --json "$OUT/bench_dense_on_24.json"
  for plan in all conv345 fc; do
    run "$cnnrt" bench "$model" --weights "$s24" --device cuda --precision fp16 \
      --plan "$OUT/plan_$plan.yaml" --batch 1,64,256 --json "$OUT/bench_sparse_$plan.json"
  done
}
# The automatic per-layer choice (issue 12) on the same 2:4 weights, fp16 candidates only (dense
# and sparse kernels compute the same function on them, so the budget admits either): which
# layers it makes sparse at batch 1 and 256, and the plan's end-to-end time.
PY="$(command -v python3)"
[ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
noise="$OUT/noise.npy"
"$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(0).standard_normal((8, 3, 224, 224)).astype(np.float32))" "$noise"
[ -f "$s24" ] && [ -f "$noise" ] && for batch in 1 256; do
  run timeout 200 "$cnnrt" build "$model" --weights "$s24" --device cuda --precision auto \
    --precisions fp16 --budget rel_l2=0.05 --batch $batch --input "$noise" --timing-runs 5 \
    -o "$OUT/plan_auto_b$batch.yaml" --explain --json "$OUT/auto_b$batch.json" \
    > "$OUT/auto_b$batch.txt" 2>&1
  cat "$OUT/plan_auto_b$batch.yaml" 2>/dev/null
  [ -f "$OUT/plan_auto_b$batch.yaml" ] && run "$cnnrt" bench "$model" --weights "$s24" \
    --device cuda --plan "$OUT/plan_auto_b$batch.yaml" --batch $batch \
    --json "$OUT/bench_auto_b$batch.json"
done
rm -f "$noise"
run "$cnnrt" bench "$model" --weights "$dense" --device cuda --precision fp16 --batch 1,64,256 \
  --json "$OUT/bench_dense.json"
[ -f "$ch50" ] && {
  run "$cnnrt" plan "$model" --weights "$ch50" --device cuda --precision fp16 --batch 256 \
    > "$OUT/plan_ch50.txt" 2>&1
  run "$cnnrt" bench "$model" --weights "$ch50" --device cuda --precision fp16 --batch 1,64,256 \
    --json "$OUT/bench_ch50.json"
  run "$cnnrt" profile "$model" --weights "$ch50" --device cuda --precision fp16 --batch 256 \
    --json "$OUT/profile_ch50_b256.json"
  run "$cnnrt" profile "$model" --weights "$dense" --device cuda --precision fp16 --batch 256 \
    --json "$OUT/profile_dense_b256.json"
}
rm -f "$OUT"/*.safetensors  # hundreds of MB: the results archive must stay small
exit $status
