"""`fmm-fast explain`: importance scores for the examples of a dataset split, as JSON Lines (+ HTML)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from fmm_fast.backends.loading import load_model
from fmm_fast.cli.app import app
from fmm_fast.cli.options import (
    MeasureOptionsOption,
    ModelOption,
    OverwriteOption,
    QuietOption,
    SeedOption,
    backend_options,
    data_options,
    engine_options,
    parse_measure_options,
    scale_options,
)
from fmm_fast.core.outputs import check_file, output_lock
from fmm_fast.core.progress import progress_bar
from fmm_fast.core.settings import BackendOptions, EngineOptions, ExplainSettings
from fmm_fast.data.options import DataOptions, open_split
from fmm_fast.distributed.runtime import ScaleOptions, check_scale_out, check_worker_precision
from fmm_fast.report.pages.document import GENERATOR

EXPLANATION_KEYS = {"tokens", "scores", "measure"}  # in every line `fmm-fast explain` writes


def written_by_explain(path: Path) -> bool:
    """Whether `path` is what `fmm-fast explain` writes: JSON Lines whose first line is an explanation,
    or the HTML page of one (whose head carries fmm-fast's generator tag)."""
    try:
        with path.open(encoding="utf-8") as handle:
            head = handle.read(4096) if path.suffix == ".html" else handle.readline()
    except (OSError, UnicodeDecodeError):
        return False
    if path.suffix == ".html":
        return GENERATOR in head
    try:
        first = json.loads(head)
    except ValueError:
        return False
    return isinstance(first, dict) and set(first) >= EXPLANATION_KEYS


@app.command()
@scale_options()
@backend_options()
@engine_options()
@data_options(split_help="Split to explain.", limit=20)
def explain(
    model: ModelOption,
    data: DataOptions,
    measure: list[str] = typer.Option(
        ...,
        "--measure",
        "-m",
        help="e.g. loo-abs, grad-l2, int-grad-sign, beam (= beam-sign-10); repeat for several measures.",
    ),
    out: Path = typer.Option(
        ...,
        "--out",
        help="Output .jsonl file: one line per example and measure (tokens, their character offsets, label, "
        "prediction, its probability, scores), in example order.",
    ),
    measure_option: MeasureOptionsOption = [],  # noqa: B006  (typer copies the default)
    seed: SeedOption = 0,
    html: bool = typer.Option(
        False,
        "--html",
        help="Also write OUT.html: every example once, one row per measure, its words coloured by score "
        "(a switch shows the model's tokens).",
    ),
    overwrite: OverwriteOption = False,
    quiet: QuietOption = False,
    *,
    engine: EngineOptions,
    backend: BackendOptions,
    scale: ScaleOptions | None,
) -> None:
    """Explain the gold-label logit of each example with one or more importance measures."""
    settings = ExplainSettings(
        str(model), data, tuple(measure), seed, parse_measure_options(measure_option), engine, backend
    )
    if scale is not None:
        check_scale_out(scale, model, settings.specs)
    page = out.with_suffix(".html")
    with output_lock(out, file=True):  # before the model and data load: a second process exits at once
        # these load Numba and SciPy: imported on use, so --help starts fast (and after the lock)
        from fmm_fast.api import explain_encoded, save_explanations
        from fmm_fast.distributed.explanation import explain_sharded
        from fmm_fast.distributed.pool import open_pool
        from fmm_fast.report.pages.explain_page import write_explanations_page

        for path in [out, page] if html else [out]:
            check_file(path, overwrite, written_by_explain, "an explanations file")
        loaded = load_model(model, backend)
        check_worker_precision(scale, loaded.precision.used)
        print(f"model {model} on {loaded.backend.name}")
        dataset, encoded = open_split(loaded, data)
        explanations = []
        with open_pool(scale, model, backend.provider, engine.token_budget) as pool:
            for spec in settings.specs:
                with progress_bar(len(encoded), spec.name, quiet=quiet) as bar:
                    arguments = (loaded, encoded, spec, settings.seed)
                    options = {"batch_rows": engine.explain_batch_rows, "on_batch": bar.update}
                    if pool is None:
                        explanations += explain_encoded(
                            *arguments, token_budget=engine.token_budget, **options
                        )
                    else:  # the workers' engines have the token budget
                        explanations += explain_sharded(pool, *arguments, **options)
        save_explanations(out, explanations)
        print(f"wrote {len(explanations)} explanations ({len(encoded)} examples) to {out}")
        if html:
            about = [f"model {model} ({loaded.info.strategy}); {dataset.name}, {data.split} split"]
            write_explanations_page(page, explanations, about)
            print(f"wrote {page}")
