#!/usr/bin/env bash
# One seed's chain: wait for its trained model, export it, then evaluate the measures piece by piece (each
# piece its own `fmm-fast evaluate`, so every finished piece has its result.json when time runs out).
# Usage: run_seed.sh SEED LIMIT SAMPLES PERMUTATIONS BEAM_LIMIT
set -uo pipefail
cd "$(dirname "$0")"
. ./env.sh
seed=$1 limit=$2 samples=$3 permutations=$4 beam_limit=$5
data=(--dataset movie-snippets --size 1500 --test-size 300)
model=movie-snippets/masked-seed-$seed
onnx=onnx/movie-snippets-masked-seed-$seed.onnx
finished() {  # run.json is rewritten after every epoch; "finished": true only at the end
  /work/main/.venv/bin/python -c 'import json, sys; sys.exit(not json.load(open(sys.argv[1]))["finished"])' "$1"
}
until [ -f "$model/run.json" ] && finished "$model/run.json"; do sleep 20; done
mkdir -p onnx
fmm --threads 1 export --model "$model/model" --out "$onnx" || exit 1
evaluate() {  # PIECE LIMIT ARGS...
  local piece=$1 n=$2; shift 2
  echo "$(date -u +%T) seed $seed: $piece"
  fmm --threads 1 evaluate --model "$onnx" "${data[@]}" --limit "$n" --seed "$seed" --quiet \
    --out "evaluate/movie-snippets/seed-$seed/$piece" "$@"
  echo "$(date -u +%T) seed $seed: $piece done ($?)"
}
# the question first (LOO against SHAP, LIME and Shapley sampling), then the rest of the paper's measures and
# occlusion, beam on fewer examples, the -abs variants last
evaluate loo-kernel-shap "$limit" --measure loo-sign --measure loo-abs --measure kernel-shap \
  --measure-option "samples=$samples"
evaluate lime-shapley "$limit" --measure lime --measure shapley-sampling --measure-option "samples=$samples" \
  --measure-option "permutations=$permutations"
evaluate others "$limit" --measure occlusion-3 --measure occlusion-3-abs --measure grad-l1 --measure grad-l2 \
  --measure inp-grad-sign --measure inp-grad-abs --measure int-grad-sign --measure int-grad-abs
evaluate beam "$beam_limit" --measure beam-sign-10
evaluate abs "$limit" --measure kernel-shap-abs --measure lime-abs --measure shapley-sampling-abs \
  --measure-option "samples=$samples" --measure-option "permutations=$permutations"
