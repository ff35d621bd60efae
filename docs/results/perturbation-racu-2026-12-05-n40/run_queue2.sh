#!/usr/bin/env bash
# run_queue.sh with its queue named (queue2.txt took over from queue.txt once that had run dry), lime and
# shapley-sampling as two pieces (`lime`, `shapley`: smaller pieces, so that one cut off at the deadline
# loses less), and the beam piece with loo-sign beside beam-sign-10 (the two compared on the same sentences
# when the beam piece runs on fewer sentences than the others). One worker of the job queue: pops the first line
# "SEED PIECE LIMIT" of QUEUE.txt (under a lock) and runs it, until QUEUE.txt is empty and QUEUE.closed
# exists. Two workers ran side by side (two seeds' jobs at a time at most). An evaluation waits for its
# seed's ONNX file; a piece interrupted is resumed by running the same line again.
# Usage: run_queue2.sh WORKER QUEUE
set -uo pipefail
cd "$(dirname "$0")"
. ./env.sh
worker=$1 queue=$2
data=(--dataset movie-snippets --size 1500 --test-size 300)
samples=100 permutations=4
pop() {  # the first line of QUEUE.txt, removed from it
  flock "$queue.lock" bash -c 'head -n 1 "$1"; sed -i 1d "$1"' pop "$queue.txt"
}
train() {  # SEED: train, then export to ONNX (an evaluation waits for onnx/seed-SEED.ready)
  local seed=$1 model=movie-snippets/masked-seed-$1
  fmm --threads 1 train --dataset movie-snippets --size 1500 --test-size 300 --model minilm --lr 5e-5 \
    --epochs 2 --strategy masked --seed "$seed" --quiet --out "$model" || return 1
  export_onnx "$seed"
}
export_onnx() {  # SEED
  local seed=$1 model=movie-snippets/masked-seed-$1
  mkdir -p onnx
  fmm --threads 1 export --model "$model/model" --out "onnx/movie-snippets-masked-seed-$seed.onnx" &&
    touch "onnx/seed-$seed.ready"
}
measures() {  # PIECE: its measure arguments
  case $1 in
    loo-kernel-shap) echo --measure loo-sign --measure loo-abs --measure kernel-shap \
      --measure-option "samples=$samples" ;;
    lime-shapley) echo --measure lime --measure shapley-sampling --measure-option "samples=$samples" \
      --measure-option "permutations=$permutations" ;;
    lime) echo --measure lime --measure-option "samples=$samples" ;;
    shapley) echo --measure shapley-sampling --measure-option "permutations=$permutations" ;;
    beam) echo --measure loo-sign --measure beam-sign-10 ;;
    others) echo --measure occlusion-3 --measure occlusion-3-abs --measure grad-l1 --measure grad-l2 \
      --measure inp-grad-sign --measure inp-grad-abs --measure int-grad-sign --measure int-grad-abs ;;
    abs) echo --measure kernel-shap-abs --measure lime-abs --measure shapley-sampling-abs \
      --measure-option "samples=$samples" --measure-option "permutations=$permutations" ;;
  esac
}
while true; do
  line=$(pop)
  if [ -z "$line" ]; then  # QUEUE.txt empty: wait for more lines unless it is closed
    [ -f "$queue.closed" ] && break
    sleep 20
    continue
  fi
  read -r seed piece limit <<< "$line"
  echo "$(date -u +%T) worker $worker: seed $seed $piece $limit"
  if [ "$piece" = train ]; then
    train "$seed"
  elif [ "$piece" = export ]; then
    export_onnx "$seed"
  else
    onnx=onnx/movie-snippets-masked-seed-$seed.onnx
    until [ -f "onnx/seed-$seed.ready" ]; do sleep 20; done
    # shellcheck disable=SC2046  # measures' words are meant to split
    fmm --threads 1 evaluate --model "$onnx" "${data[@]}" --limit "$limit" --seed "$seed" --quiet \
      --out "evaluate/movie-snippets/seed-$seed/$piece-$limit" $(measures "$piece")
  fi
  echo "$(date -u +%T) worker $worker: seed $seed $piece $limit done ($?)"
done
