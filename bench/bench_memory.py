"""Peak memory of leave-one-out on long documents, and whether it stays flat in the number of documents.

    .venv/bin/python bench/bench_memory.py [--quick] [--tokens N] [--documents N ...] [--models NAME ...]
        [--cache-mb MB] [--json PATH] [--cache DIR]

Each (model, documents) run is a process of its own, and its peak resident memory (ru_maxrss, which counts the
Python interpreter, PyTorch and the model too) is what it reports, beside the resident memory after loading
the model, before any document. Every run explains each of its documents with `loo-abs` (one forward pass per
token plus the reference, through the mask-batch engine and its cache, as `evaluate` does; --cache-mb is the
engine's budget) on the PyTorch backend, one document at a time. Documents are random word ids of --tokens
tokens, cut to the model's context (MiniLM: 512).

Models: modernbert-tiny (a random 2-layer, width-64 ModernBERT classifier, 8,192-token context, built here)
and minilm (the offline all-MiniLM-L6-v2 of common.prepare_model, with its random head).
Goals (issue 47): under 1.5 GB peak for one 2,000-token document, and flat in the number of documents (the
peak with the most documents within 10% of the peak with one). --quick: modernbert-tiny, 64 tokens, 1 and 3
documents (it only shows that the bench runs).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

GOAL_PEAK_MB = 1500.0
GOAL_FLAT_SHARE = 0.10
MODELS = ("modernbert-tiny", "minilm")
DOCUMENT_SEED = 0
TINY_VOCAB = 1000  # modernbert-tiny's vocabulary: ids 0-4 are its specials
TINY_SPECIALS = {"cls": 0, "pad": 1, "sep": 2, "unk": 3, "mask": 4}


def resident_mb() -> float:
    """This process's peak resident memory so far, in MB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def tiny_modernbert_config(vocab_size: int, *, pad: int, cls: int, sep: int, **labels):
    """The bench's random ModernBERT classifier: 2 layers, width 64, an 8,192-token context, 2 labels;
    `labels`: id2label/label2id where the folder names them."""
    from transformers import ModernBertConfig

    return ModernBertConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=8192,
        pad_token_id=pad,
        cls_token_id=cls,
        sep_token_id=sep,
        bos_token_id=cls,
        eos_token_id=sep,
        num_labels=2,
        **labels,
    )


def tiny_modernbert():
    """A random 2-layer, width-64 ModernBERT classifier with an 8,192-token context: (TorchBackend)."""
    import torch
    from transformers import ModernBertForSequenceClassification

    from fmm_fast.backends.torch_backend import TorchBackend
    from fmm_fast.core.datatypes import ModelInfo
    from fmm_fast.training.models import SequenceClassifier, quiet_transformers

    quiet_transformers()
    specials = TINY_SPECIALS
    config = tiny_modernbert_config(TINY_VOCAB, pad=specials["pad"], cls=specials["cls"], sep=specials["sep"])
    torch.manual_seed(0)
    model = SequenceClassifier(ModernBertForSequenceClassification(config), sep_id=None)
    info = ModelInfo(
        label_names=["neg", "pos"],
        mask_id=TINY_SPECIALS["mask"],
        pad_id=TINY_SPECIALS["pad"],
        special_ids=sorted(TINY_SPECIALS.values()),
        max_length=8192,
        num_hidden_layers=2,
        hidden_size=64,
    )
    return TorchBackend(model, info)


def minilm(cache: Path):
    """The offline MiniLM with its seeded random head (common.prepare_model): (TorchBackend)."""
    from common import prepare_model

    from fmm_fast.backends.torch_backend import TorchBackend

    bench_model = prepare_model(False, cache)
    return TorchBackend(bench_model._torch_models["cpu"], bench_model.info)


def documents(backend, tokens: int, count: int) -> list[np.ndarray]:
    """`count` documents of `tokens` tokens cut to the context: [first special] words [second special]."""
    info = backend.info
    length = min(tokens, info.max_length)
    first_word = max(info.special_ids) + 1
    vocabulary = backend.embedding_matrix().shape[0]
    rng = np.random.default_rng(DOCUMENT_SEED)
    rows = []
    for _ in range(count):
        row = rng.integers(first_word, vocabulary, size=length).astype(np.int64)
        row[0], row[-1] = info.special_ids[0], info.special_ids[-1]
        rows.append(row)
    return rows


def child(model: str, tokens: int, count: int, cache_mb: float, cache: Path) -> dict:
    """One run, in this process: load `model`, explain `count` documents with loo-abs, report the peaks."""
    import torch

    from fmm_fast.backends.engine import MaskBatchEngine
    from fmm_fast.measures.base import ExplainBatch
    from fmm_fast.measures.occlusion import LeaveOneOutAbs

    torch.set_num_threads(1)
    backend = tiny_modernbert() if model == "modernbert-tiny" else minilm(cache)
    engine = MaskBatchEngine(backend, cache_mb=cache_mb)
    rows = documents(backend, tokens, count)
    loaded_mb = resident_mb()
    started = time.perf_counter()
    for row in rows:
        explained = np.ones(len(row), dtype=bool)
        explained[[0, -1]] = False
        batch = ExplainBatch(
            row[None], np.ones((1, len(row)), dtype=np.int64), np.zeros(1, dtype=np.int64), explained[None]
        )
        LeaveOneOutAbs().explain(batch, engine)
    return {
        "model": model,
        "tokens": len(rows[0]),
        "documents": count,
        "cache_mb": cache_mb,
        "loaded_mb": loaded_mb,
        "peak_mb": resident_mb(),
        "cache_bytes": engine.cache_bytes,
        "forward_rows": engine.stats.forward_rows,
        "seconds": time.perf_counter() - started,
    }


def run_child(model: str, tokens: int, count: int, cache_mb: float, cache: Path) -> dict:
    """child() in a fresh process (its own ru_maxrss), pinned to nothing: the caller pins with taskset."""
    command = [sys.executable, __file__, "--child", model, str(tokens), str(count), str(cache_mb), str(cache)]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        sys.exit(f"bench_memory: {model} with {count} documents failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        model, tokens, count, cache_mb, cache = sys.argv[2:7]
        print(json.dumps(child(model, int(tokens), int(count), float(cache_mb), Path(cache))))
        return
    from common import CACHE_DIR

    from fmm_fast.backends.engine import DEFAULT_CACHE_MB

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="modernbert-tiny, 64 tokens, 1 and 3 documents")
    parser.add_argument("--tokens", type=int, default=2000, help="tokens per document (default 2000)")
    parser.add_argument(
        "--documents",
        type=int,
        nargs="+",
        default=[1, 100],
        help="document counts to compare (default 1 100)",
    )
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--cache-mb", type=float, default=DEFAULT_CACHE_MB, help="the engine's cache budget")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this path")
    parser.add_argument("--cache", type=Path, default=CACHE_DIR, help="where minilm's checkpoint is kept")
    args = parser.parse_args()
    if args.quick:
        args.tokens, args.documents, args.models = 64, [1, 3], ["modernbert-tiny"]
    if args.tokens < 3 or min(args.documents) < 1:
        parser.error("--tokens must be at least 3 and every --documents count at least 1")

    runs = [
        run_child(model, args.tokens, count, args.cache_mb, args.cache)
        for model in args.models
        for count in sorted(set(args.documents))
    ]
    print(
        f"loo-abs, one document at a time, PyTorch backend (1 thread), --cache-mb {args.cache_mb:g}; "
        "peak = ru_maxrss of the run's own process"
    )
    header = (
        f"{'model':<16} {'tokens':>6} {'documents':>9} {'loaded MB':>9} {'peak MB':>8} {'rows':>8} "
        f"{'seconds':>8}"
    )
    print(header)
    print("-" * len(header))
    for run in runs:
        print(
            f"{run['model']:<16} {run['tokens']:>6} {run['documents']:>9} {run['loaded_mb']:>9.0f} "
            f"{run['peak_mb']:>8.0f} {run['forward_rows']:>8} {run['seconds']:>8.1f}"
        )
    summary = {}
    for model in args.models:
        own = [run for run in runs if run["model"] == model]
        fewest, most = own[0], own[-1]
        growth = most["peak_mb"] / fewest["peak_mb"] - 1
        summary[model] = {
            "peak_mb": max(run["peak_mb"] for run in own),
            "under_goal": max(run["peak_mb"] for run in own) < GOAL_PEAK_MB,
            "growth": growth,
            "flat": growth <= GOAL_FLAT_SHARE,
        }
        print(
            f"{model}: peak {summary[model]['peak_mb']:.0f} MB (goal < {GOAL_PEAK_MB:.0f}: "
            f"{'met' if summary[model]['under_goal'] else 'NOT met'}); {most['documents']} vs "
            f"{fewest['documents']} documents: {growth:+.1%} (goal within {GOAL_FLAT_SHARE:.0%}: "
            f"{'met' if summary[model]['flat'] else 'NOT met'})"
        )
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "summary": summary}, indent=2) + "\n")


if __name__ == "__main__":
    main()
