#!/bin/bash
# bench fp32 vs bf16 at load ~6 (four busy loops on 2 cores), before/after interleaved: is bf16 ever left out?
cd /work/wt/t-slow
PIDS=""
for k in 1 2 3 4; do python3 -c "while True: pass" & PIDS="$PIDS $!"; done
for i in 1 2 3 4 5; do
  for side in before after; do
    if [ $side = before ]; then SRC=/work/main/src; else SRC=/work/wt/t-slow/src; fi
    CACHE=/tmp/t-slow/c3-$side-$i; rm -rf $CACHE /tmp/t-slow/o3-$side-$i
    echo "=== $side $i $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    AMPGAN_CACHE_DIR=$CACHE PYTHONPATH=$SRC timeout 200 /work/main/.venv/bin/python -m ampgan bench --width 16 \
      --precisions fp32,bf16 --batch-sizes 64 --max-seconds 5 --no-channels-last --no-trace --out /tmp/t-slow/o3-$side-$i 2>&1 \
      | grep -E "^ +64 +bf16" | cut -c1-300
  done
done
kill $PIDS
