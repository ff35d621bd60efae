export PYTHONPATH=/work/wt/racu HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
fmm() { nice -n 10 /work/main/.venv/bin/python -m fmm_fast "$@"; }
