#!/bin/bash
# Recursive ROAR, movie-snippets, pretrained MiniLM, plain retraining, 10% steps (pinned to core 1).
cd /work/runs/roar/code-snapshot-1
export PYTHONPATH=/work/runs/roar/code-snapshot-1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec taskset -c 1 /work/main/.venv/bin/python -m fmm_fast roar --dataset movie-snippets --model minilm \
  --size 1000 --test-size 300 --epochs 2 --lr 5e-5 --measure grad-l2 --measure inp-grad-abs --measure loo-abs \
  --steps 10 --seed 0 --strategy plain --device cpu --out /work/runs/roar/movie-plain "$@"
