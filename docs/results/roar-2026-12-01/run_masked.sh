#!/bin/bash
# The FMM side: a masked fine-tuned MiniLM on the same data, erasure WITHOUT retraining (pinned to core 1).
set -e
cd /work/runs/roar/code-snapshot-1
export PYTHONPATH=/work/runs/roar/code-snapshot-1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
DATA="--dataset movie-snippets --size 1000 --test-size 300"
taskset -c 1 /work/main/.venv/bin/python -m fmm_fast train $DATA --model minilm --strategy masked \
  --epochs 2 --lr 5e-5 --seed 0 --device cpu --quiet --out /work/runs/roar/movie-masked/train
taskset -c 1 /work/main/.venv/bin/python -m fmm_fast evaluate $DATA --model /work/runs/roar/movie-masked/train/model \
  --measure grad-l2 --measure inp-grad-abs --measure loo-abs --measure int-grad-abs --seed 0 --device cpu --quiet \
  --out /work/runs/roar/movie-masked/evaluate
