#!/usr/bin/env bash
# The trainings of seeds 0 and 1 ran by hand; this waits for one (its PID), exports it, then becomes a
# queue worker. Usage: after_training.sh SEED PID WORKER
set -uo pipefail
cd "$(dirname "$0")"
. ./env.sh
seed=$1 pid=$2 worker=$3
while kill -0 "$pid" 2>/dev/null; do sleep 10; done
echo "$(date -u +%T) seed $seed: trained; export"
mkdir -p onnx
fmm --threads 1 export --model "movie-snippets/masked-seed-$seed/model" \
  --out "onnx/movie-snippets-masked-seed-$seed.onnx" && touch "onnx/seed-$seed.ready"
echo "$(date -u +%T) seed $seed: exported ($?)"
exec ./run_queue.sh "$worker"
