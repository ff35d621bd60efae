export PYTHONPATH=/work/wt/racu2 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
fmm() { nice -n 19 /work/main/.venv/bin/python -m fmm_fast "$@"; }
