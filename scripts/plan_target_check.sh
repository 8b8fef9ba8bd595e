#!/usr/bin/env bash
# On a GPU machine: does `cnnrt plan --device cuda --target T` (the device described, nothing
# touched) print the plan the GPU itself gives?  For AlexNet, EfficientNet-Lite0 and ResNet-50
# at batch 1 and 64 (and AlexNet int8 with a calibration from random weights), diffs the plan
# on the present GPU with the one for TARGET (default h100; h200 on an H200 — both are 132-SM
# sm_90 parts, so either matches either), all but the first line (the device header, which
# names them differently).  Every diff goes to OUTDIR; exit 1 when any plan differs.
#   scripts/plan_target_check.sh CNNRT_BINARY [OUTDIR] [TARGET]
# (scripts/gpu_check.sh plantarget runs it on the build it made.)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CNNRT="${1:?usage: plan_target_check.sh CNNRT_BINARY [OUTDIR] [TARGET]}"
OUTDIR="${2:-$(mktemp -d)}"
TARGET="${3:-h100}"
mkdir -p "$OUTDIR"
status=0

compare() {  # NAME FLAGS...
  local name="$1"; shift
  if ! "$CNNRT" plan "$@" --device cuda > "$OUTDIR/$name.gpu.txt" 2>&1 ||
     ! "$CNNRT" plan "$@" --device cuda --target "$TARGET" > "$OUTDIR/$name.target.txt" 2>&1; then
    echo "FAIL $name: a plan command failed (see $OUTDIR/$name.*.txt)"; status=1; return
  fi
  if grep -q "planned without a device" "$OUTDIR/$name.gpu.txt"; then
    echo "FAIL $name: no usable GPU here, so both plans are a target's: nothing compared"
    status=1; return
  fi
  if diff <(tail -n +2 "$OUTDIR/$name.gpu.txt") <(tail -n +2 "$OUTDIR/$name.target.txt") \
       > "$OUTDIR/$name.diff"; then
    echo "same $name   ($(head -1 "$OUTDIR/$name.gpu.txt" | cut -c1-60))"
    rm "$OUTDIR/$name.diff"
  else
    echo "DIFF $name: $(grep -c '^[<>]' "$OUTDIR/$name.diff") lines differ ($OUTDIR/$name.diff)"
    head -20 "$OUTDIR/$name.diff"
    status=1
  fi
}

for model in alexnet efficientnet_lite0 resnet50; do
  for batch in 1 64; do compare "$model.b$batch" "$ROOT/models/$model.yaml" --batch "$batch"; done
done
python3 -c "import numpy as np; np.save('$OUTDIR/x.npy', np.random.default_rng(1).standard_normal((2, 3, 224, 224)).astype(np.float32))" &&
  "$CNNRT" calibrate "$ROOT/models/alexnet.yaml" --random-weights --input "$OUTDIR/x.npy" \
    --method minmax -o "$OUTDIR/alexnet.calib.json" > /dev/null 2>&1 ||
  { echo "FAIL: calibrating AlexNet for the int8 plans"; status=1; }
for batch in 1 64; do
  compare "alexnet.int8.b$batch" "$ROOT/models/alexnet.yaml" --batch "$batch" \
    --precision int8 --calib "$OUTDIR/alexnet.calib.json"
done
[ $status -eq 0 ] && echo "all plans for target $TARGET match the GPU's" || echo "some plans differ"
exit $status
