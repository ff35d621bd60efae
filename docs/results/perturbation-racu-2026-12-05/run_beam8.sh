#!/usr/bin/env bash
# After run_seed.sh SEED: beam-sign-10 on the same 8 sentences as the other measures (the load had dropped).
set -uo pipefail
cd "$(dirname "$0")"
. ./env.sh
seed=$1 chain=$2
while kill -0 "$chain" 2>/dev/null; do sleep 10; done
echo "$(date -u +%T) seed $seed: beam8"
fmm --threads 1 evaluate --model "onnx/movie-snippets-masked-seed-$seed.onnx" --dataset movie-snippets \
  --size 1500 --test-size 300 --limit 8 --seed "$seed" --quiet --measure beam-sign-10 \
  --out "evaluate/movie-snippets/seed-$seed/beam8"
echo "$(date -u +%T) seed $seed: beam8 done ($?)"
