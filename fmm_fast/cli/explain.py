"""`fmm-fast explain`: importance scores for the examples of a dataset split, as JSON Lines (+ HTML)."""

from __future__ import annotations

from pathlib import Path

import typer

from fmm_fast.api import explain_encoded, save_explanations, write_html
from fmm_fast.cli.app import app
from fmm_fast.cli.options import (
    DatasetOption,
    DeviceOption,
    LabelFieldOption,
    LimitOption,
    ModelOption,
    PairFieldOption,
    PrecisionOption,
    SizeOption,
    TestSizeOption,
    TextFieldOption,
)
from fmm_fast.loading import load_model
from fmm_fast.measures import get_measure
from fmm_fast.pipeline import DataOptions, open_split
from fmm_fast.precision import DEFAULT_PRECISION
from fmm_fast.progress import progress_bar
from fmm_fast.runrecord import ensure_writable


@app.command()
def explain(
    model: ModelOption,
    measure: str = typer.Option(
        ..., "--measure", "-m", help="e.g. loo-abs, grad-l2, int-grad-sign, beam (= beam-sign-10)."
    ),
    out: Path = typer.Option(
        ..., "--out", help="Output .jsonl file: tokens, label, prediction, scores per example."
    ),
    dataset: DatasetOption = "movie-snippets",
    split: str = typer.Option("test", help="Split to explain."),
    limit: LimitOption = 20,
    seed: int = typer.Option(0, help="Seed of `rand`."),
    html: bool = typer.Option(
        False, "--html", help="Also write OUT.html with tokens coloured by importance."
    ),
    device: DeviceOption = "auto",
    precision: PrecisionOption = DEFAULT_PRECISION,
    size: SizeOption = None,
    test_size: TestSizeOption = None,
    text_field: TextFieldOption = None,
    pair_field: PairFieldOption = None,
    label_field: LabelFieldOption = None,
) -> None:
    """Explain the gold-label logit of each example with one importance measure (SPEC §3)."""
    get_measure(measure)
    ensure_writable(out.parent if str(out.parent) else Path("."))
    loaded = load_model(model, device=device, provider=device, precision=precision)
    print(f"model {model} on {loaded.backend.name}")
    data = DataOptions(dataset, split, limit, size, test_size, text_field, pair_field, label_field)
    _, encoded = open_split(loaded, data)
    with progress_bar(len(encoded), measure) as bar:
        explanations = explain_encoded(loaded, encoded, measure, seed, on_batch=bar.update)
    extra = [{"index": i, "text": t, "pair": p} for i, (t, p) in enumerate(encoded.texts)]
    save_explanations(out, explanations, extra)
    print(f"wrote {len(explanations)} explanations to {out}")
    if html:
        page = out.with_suffix(".html")
        write_html(page, explanations)
        print(f"wrote {page}")
