#!/bin/bash
# Interleaved before (main's src) / after (this branch's src) runs of the same bench, a busy neighbour throughout.
cd /work/wt/t-slow
python3 -c "while True: pass" &
BUSY=$!
echo "busy neighbour pid $BUSY"
for i in 1 2 3; do
  for side in before after; do
    if [ $side = before ]; then SRC=/work/main/src; else SRC=/work/wt/t-slow/src; fi
    CACHE=/tmp/t-slow/cache-$side-$i; rm -rf $CACHE /tmp/t-slow/out-$side-$i
    echo "=== $side run $i $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    AMPGAN_CACHE_DIR=$CACHE PYTHONPATH=$SRC timeout 300 /work/main/.venv/bin/python -m ampgan bench --width 16 \
      --batch-sizes 64 --max-seconds 10 --no-channels-last --no-trace --out /tmp/t-slow/out-$side-$i 2>&1 \
      | grep -E "bf16|fp16|left out|hopeless|slower" | cut -c1-400
  done
done
kill $BUSY
