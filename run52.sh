#!/usr/bin/env bash
# Run 52a driver (untracked): build, int8 gtests, AlexNet int8 GPU == CPU at batch 7 (pooled
# conv1), profile --compare at 1/64/256, ratio 2 rounds; then the s2d harness rows and an ncu
# breakdown of conv1's kernels at 256.
set -u
R=$OUT
CNNRT_TIME_BUDGET=420 CNNRT_INT8_STEPS=gtests,engine,profile,ratio CNNRT_INT8_ENGINE_BATCH=7 \
  CNNRT_RATIO_ROUNDS=2 OUT=$R/a bash scripts/gpu_check.sh int8 > $R/a.log 2>&1
grep -E "^=== |^--- |PASSED|FAILED|bit for bit|tests ran|error" $R/a.log | head -60
export LD_LIBRARY_PATH=/opt/cnnrt-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
B=build-gpu/bin
timeout 100 $B/cnnrt_harness_tests --gtest_brief=1 --gtest_filter='conv/*int8_s2d*' > $R/harness_s2d.txt 2>&1
tail -3 $R/harness_s2d.txt
tar xzf $R/a/results.tgz -C $R/a
for b in 1 64 256; do grep -E "conv1|total" $R/a/results/int8_profile_b$b.txt | head -12; done
python3 - $R/a/results <<'PY'
import json, glob, sys
for f in sorted(glob.glob(sys.argv[1] + "/ratio_*.json")):
    d = json.load(open(f)); print(f.split("/")[-1], [(r.get("batch"), r.get("median_ms")) for r in d.get("results", d if isinstance(d, list) else [])])
PY
python3 -c "import numpy as np; np.save('/tmp/x256.npy', np.random.default_rng(0).standard_normal((256,3,224,224)).astype(np.float32))"
timeout 90 ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
  -k regex:"s2d|window|maxpool" -c 12 $B/cnnrt run models/alexnet.yaml --random-weights 1 --precision int8 \
  --calib $R/a/results/alexnet_calib.json --device cuda --input /tmp/x256.npy --output /tmp/y.npy -q > $R/ncu.txt 2>&1
grep -E "^\s+[a-z_]+.*\(|gpu__time|dram__" $R/ncu.txt | head -40
