#!/usr/bin/env bash
# Every built-in family on the embedded digits: `compare` in the default budget (40 s per run, 3 seeds,
# fp32 against bf16, named: on a CPU without bf16 instructions the study would otherwise stop at "no
# faster mode"), then `bench` fp32 vs bf16 at batch 64 and 256. Run alone on the machine.
#   benchmarks/families_on_digits.sh OUT_DIR [MODEL ...]     (default: dcgan wgan-gp r1)
set -euo pipefail
out=${1:?give the output folder}; shift
models=("${@:-dcgan}")
[ $# -eq 0 ] && models=(dcgan wgan-gp r1)
ampgan=${AMPGAN:-.venv/bin/ampgan}
mkdir -p "$out"
lscpu > "$out/lscpu.txt"
for model in "${models[@]}"; do
  "$ampgan" compare --model "$model" --precisions fp32,bf16 --quiet --out "$out/compare-$model" --overwrite \
    2>&1 | grep -v 'step/s' > "$out/compare-$model.log"
  "$ampgan" bench --model "$model" --dataset digits --batch-sizes 64,256 --precisions fp32,bf16 \
    --out "$out/bench-$model" --overwrite > "$out/bench-$model.log" 2>&1
done
