#!/bin/bash
# The decision path (train checks its precision against fp32), before/after interleaved, a busy neighbour throughout.
cd /work/wt/t-slow
python3 -c "while True: pass" &
BUSY=$!
for p in bf16 fp16; do
  for side in before after; do
    if [ $side = before ]; then SRC=/work/main/src; else SRC=/work/wt/t-slow/src; fi
    CACHE=/tmp/t-slow/dcache-$side-$p; rm -rf $CACHE /tmp/t-slow/run-$side-$p
    echo "=== $side train --precision $p $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    /usr/bin/time -f "  (wall %e s)" env AMPGAN_CACHE_DIR=$CACHE PYTHONPATH=$SRC timeout 300 /work/main/.venv/bin/python -m ampgan train \
      --dataset synthetic --width 16 --batch-size 64 --precision $p --steps 2 --no-channels-last --out /tmp/t-slow/run-$side-$p 2>&1 \
      | grep -E "bf16|fp16|cached|wall" | grep -v "^  batch" | cut -c1-400
  done
done
kill $BUSY
