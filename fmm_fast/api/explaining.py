"""`fmm_fast.explain` (the body of `fmm-fast explain`): importance scores for the examples of a dataset
split, as JSON Lines (+ HTML), and the run record beside them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fmm_fast.api.arguments import checked_arguments
from fmm_fast.api.explanations import Explanations
from fmm_fast.api.inputs import (
    measure_arguments,
    model_source,
    run_folder,
)
from fmm_fast.api.options import backend_arguments, data_arguments, engine_arguments, scale_arguments
from fmm_fast.api.seed_runs import fidelity_sides, plan_run
from fmm_fast.backends.loading import LoadedModel, load_model
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.errors import UserError
from fmm_fast.core.machine import machine_record
from fmm_fast.core.outputs import check_file, output_lock
from fmm_fast.core.progress import progress_bar
from fmm_fast.core.records import Stopwatch, read_record, split_run_header, versions, write_record
from fmm_fast.core.settings import (
    DEFAULT_EXPLAIN_LIMIT,
    DEFAULT_FIDELITY_SAMPLE,
    BackendOptions,
    EngineOptions,
    ExplainSettings,
)
from fmm_fast.data.base import TextDataset
from fmm_fast.data.options import DataOptions, open_split
from fmm_fast.distributed.runtime import ScaleOptions, check_scale_out, check_worker_precision
from fmm_fast.report.pages.document import GENERATOR

EXPLANATION_KEYS = {"tokens", "scores", "measure"}  # in every line `fmm-fast explain` writes
RECORD_KIND = "explain"
RECORD_SUFFIX = ".run.json"  # OUT's run record: OUT with this suffix


def written_by_explain(path: Path) -> bool:
    """Whether `path` is what `fmm-fast explain` writes: JSON Lines whose first line is an explanation,
    the HTML page of one (whose head carries fmm-fast's generator tag), or its run record."""
    try:
        if path.name.endswith(RECORD_SUFFIX):
            return read_record(path).get("kind") == RECORD_KIND
        with path.open(encoding="utf-8") as handle:
            if path.suffix == ".html":
                return GENERATOR in handle.read(4096)
            first = json.loads(handle.readline())
    except (OSError, ValueError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return False
    return isinstance(first, dict) and set(first) >= EXPLANATION_KEYS


def explain_record(
    settings: ExplainSettings,
    loaded: LoadedModel,
    dataset: TextDataset,
    encoded: EncodedSplit,
    files: list[Path],
    seconds: dict[str, float],
    total_seconds: float,
    workers: dict | None,
) -> dict:
    """OUT's run record: what ran on what (the arguments as given, the measures resolved), the files it
    wrote, the seconds of each measure and in all, and with Ray the workers' account."""
    record = {
        **split_run_header(RECORD_KIND, settings, loaded, dataset, encoded),
        "measures": [spec.name for spec in settings.specs],
        "sources": {spec.name: spec.source.record() for spec in settings.specs},
        "n_examples": len(encoded),
        "files": [path.name for path in files],
        "durations": {"measures_seconds": seconds, "total_seconds": total_seconds},
        "versions": versions(),
        "machine": machine_record(),
    }
    return record if workers is None else {**record, "workers": workers}


@checked_arguments
@scale_arguments()
@backend_arguments()
@engine_arguments()
@data_arguments(limit=DEFAULT_EXPLAIN_LIMIT)
def explain(
    model: Any,
    data: DataOptions,
    measure: Any,
    out: str | Path | None = None,
    measure_option: Mapping[str, Any] | Sequence[str] = (),
    seed: int = 0,
    html: bool = False,
    fidelity_sample: int = DEFAULT_FIDELITY_SAMPLE,
    overwrite: bool = False,
    quiet: bool = False,
    *,
    engine: EngineOptions,
    backend: BackendOptions,
    scale: ScaleOptions | None,
) -> Explanations:
    """Explain the gold-label logit of each example with one or more importance measures: what `fmm-fast
    explain` does, with its options.

    model, dataset: as for fmm_fast.evaluate; limit: the first N examples of `split` (20 unless told).
    measure: one or a list (loo-abs, grad-l2, int-grad-sign, beam, ...). out: the .jsonl to write (its
    run record goes beside it, OUT with the suffix .run.json; html=True writes OUT.html too); None: in a
    new temporary folder. Returns Explanations, one per example and measure (tokens, character offsets,
    scores, label, prediction); a notebook shows them as words coloured by score.

    Example: `fmm_fast.explain("model.onnx", measure=["loo-abs", "grad-l2"], limit=5)`
    """
    measures, options = measure_arguments(measure, measure_option)
    out = run_folder(None, "explain") / "explanations.jsonl" if out is None else Path(out)
    page, record_path = out.with_suffix(".html"), out.with_suffix(RECORD_SUFFIX)
    if out in (page, record_path):
        raise UserError(f"--out {out} is where its page or run record goes; give it the suffix .jsonl")
    model = model_source(model)
    settings = ExplainSettings(
        str(model), data, tuple(measures), seed, options, engine, backend, fidelity_sample
    )
    if scale is not None:
        check_scale_out(scale, model, settings.specs)
    clock = Stopwatch()
    with output_lock(out, file=True):  # before the model and data load: a second process exits at once
        # these load Numba and SciPy: imported on use, so --help starts fast (and after the lock)
        from fmm_fast.distributed.explanation import explain_sharded
        from fmm_fast.distributed.pool import open_pool
        from fmm_fast.protocols.explanations import explain_encoded, save_explanations
        from fmm_fast.report.pages.explain_page import write_explanations_page

        for path in [out, record_path, page] if html else [out, record_path]:
            check_file(path, overwrite, written_by_explain, "an explanations file")
        check_worker_precision(scale, settings.backend.precision)
        loaded = load_model(model, settings.backend)
        print(f"model {model} on {loaded.backend.name}")
        text_dataset, encoded = open_split(loaded, data)
        plan_run("explain", settings, encoded, loaded)
        explanations, seconds = [], {}
        with open_pool(scale, model, settings.backend.provider, engine) as pool:
            for spec in settings.specs:
                measure_clock = Stopwatch()
                with progress_bar(len(encoded), spec.name, quiet=quiet) as bar:
                    arguments = (loaded, encoded, spec, settings.seed)
                    if pool is None:
                        explanations += explain_encoded(*arguments, engine=engine, on_batch=bar.update)
                    else:  # the workers' engines have the token and cache budgets
                        explanations += explain_sharded(
                            pool, *arguments, batch_rows=engine.explain_batch_rows, on_batch=bar.update
                        )
                seconds[spec.name] = measure_clock.seconds
            workers_record = None if pool is None else pool.record()
        save_explanations(out, explanations)
        print(f"wrote {len(explanations)} explanations ({len(encoded)} examples) to {out}")
        about = [
            f"model {model} ({loaded.info.strategy}); {text_dataset.name}, {data.split} split; "
            f"scores per {data.unit}"
        ]
        if html:
            write_explanations_page(page, explanations, about)
            print(f"wrote {page}")
        files = [out, page] if html else [out]
        record = explain_record(
            settings, loaded, text_dataset, encoded, files, seconds, clock.seconds, workers_record
        )
        if (sides := fidelity_sides(model, loaded, settings)) is not None:  # Ray workers run fp32 only
            from fmm_fast.protocols.fidelity import FidelitySample, fidelity_lines, ranking_fidelity

            sample = FidelitySample.draw(encoded, settings.fidelity_sample, settings.seed)
            rows = engine.explain_batch_rows
            record["fidelity"] = ranking_fidelity(settings.specs, settings.seed, sample, sides, rows)
            print("\n".join(fidelity_lines(record["fidelity"])))
        write_record(record_path, record)  # last: a record says the run finished
        print(f"wrote its run record {record_path}")
    return Explanations(sorted(explanations, key=lambda e: e.index), about)
