"""`fmm-fast evaluate`: recursive erasure curves with ACU/RACU for one model (resumable), or with
`--protocol aopc` the peer metrics (AOPC, τ-LOO) of built-in measures and external explanations."""

from __future__ import annotations

import csv
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import LoadedModel, load_model
from fmm_fast.cli.app import app
from fmm_fast.cli.options import (
    MeasureOptionsOption,
    ModelOption,
    OverwriteOption,
    QuietOption,
    backend_options,
    data_options,
    engine_options,
    parse_measure_options,
    scale_options,
)
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.errors import UserError
from fmm_fast.core.outputs import check_container, check_directory, output_lock
from fmm_fast.core.progress import progress_bar
from fmm_fast.core.settings import BackendOptions, EngineOptions, EvaluationSettings
from fmm_fast.data.base import TextDataset
from fmm_fast.data.options import DataOptions, open_split
from fmm_fast.distributed.runtime import ScaleOptions, check_scale_out, check_worker_precision
from fmm_fast.measures.external import ExternalExplanation, load_explanations

if TYPE_CHECKING:
    from fmm_fast.distributed.pool import WorkerPool

CURVE_FILES = ("curves.csv", "curves.png")


@app.command()
@scale_options()
@backend_options()
@engine_options()
@data_options(split_help="Split to erase.")
def evaluate(
    model: ModelOption,
    data: DataOptions,
    out: Path = typer.Option(..., "--out", help="Output directory (result.json, curves.csv, curves.png)."),
    measure: list[str] = typer.Option(
        ["loo-abs"], "--measure", "-m", help="Importance measure; repeat for several. `rand` always runs."
    ),
    measure_option: MeasureOptionsOption = [],  # noqa: B006  (typer copies the default)
    seed: list[int] = typer.Option(
        [0], "--seed", min=0, help="Seed of the `rand` baseline; repeat for several."
    ),
    save_masked: bool = typer.Option(
        False, help="Save every masked test set (for `fmm-fast masf --measure`)."
    ),
    overwrite: OverwriteOption = False,
    quiet: QuietOption = False,
    protocol: str = typer.Option(
        "recursive",
        help="recursive: recursive erasure curves (docs/method.md §4). aopc: AOPC comprehensiveness, AOPC "
        "sufficiency and "
        "τ-LOO per example, plus a non-recursive erasure curve (ranking computed once; docs/method.md §8).",
    ),
    explanations: list[Path] = typer.Option(
        [],
        "--explanations",
        help='A .jsonl of explanations made elsewhere, one line per example: {"index": i, "token_scores": '
        '[...]} or {"index": i, "word_scores": [...]}; repeat for several. Needs --protocol aopc.',
    ),
    *,
    engine: EngineOptions,
    backend: BackendOptions,
    scale: ScaleOptions | None,
) -> None:
    """Recursive erasure at r = 0, 0.1, ..., 1 and ACU/RACU against `rand` (docs/method.md §4, §5).

    Finished steps are saved as they complete: rerun the same command to resume an interrupted run (only
    the same model file content, data options and precision resume). Writes OUT/seed-S/result.json (one per
    seed), OUT/curves.csv and OUT/curves.png. With --workers/--ray-address each Ray worker runs whole
    erasures of a shard of the examples; finished shards are saved, so a rerun resumes too (with the same
    worker count).

    With --protocol aopc every explanation is computed once on the unmasked input and scored with the peer
    metrics of docs/method.md §8 (dataset means with 95% bootstrap CIs) and a non-recursive erasure curve;
    writes OUT/seed-S/peer.jsonl (per example) and OUT/seed-S/result.json.
    """
    # these load Numba and SciPy: imported on use, so --help starts fast
    from fmm_fast.distributed.pool import open_pool
    from fmm_fast.protocols.aopc import check_fresh
    from fmm_fast.protocols.erasure import BASELINE

    settings = EvaluationSettings(
        str(model),
        data,
        tuple(measure),
        seed[0],
        parse_measure_options(measure_option),
        save_masked,
        engine,
        backend,
    )  # a typo in a measure or option fails before any work
    if protocol not in ("recursive", "aopc"):
        raise UserError(f"unknown --protocol '{protocol}'; choose recursive or aopc")
    if protocol == "recursive" and explanations:
        raise UserError(
            "the recursive protocol recomputes the measure on every masked input, which a file of fixed "
            "scores cannot do; evaluate --explanations with --protocol aopc"
        )
    if protocol == "aopc" and measure_option:
        raise UserError("--measure-option is not passed to the aopc protocol yet; drop it or use recursive")
    if protocol == "aopc" and save_masked:
        raise UserError(
            "--save-masked belongs to the recursive protocol; drop it or use --protocol recursive"
        )
    if scale is not None:
        if protocol != "recursive":
            raise UserError(
                "--workers/--ray-address run the recursive protocol; drop them for --protocol aopc"
            )
        check_scale_out(scale, model, measure)
    check_container(out, _own_entry)
    runs = {s: replace(settings, seed=s) for s in seed}
    if protocol == "aopc" and not overwrite:
        for s in seed:
            check_fresh(out / f"seed-{s}")  # before any work: a finished run is never overwritten
    loaded = load_model(model, backend)
    check_worker_precision(scale, loaded.precision.used)
    if protocol == "recursive":
        for s, run in runs.items():  # before any work: each seed directory is new or resumes this run
            fields = run.ran_in(loaded.precision.used).fingerprint_fields()
            check_directory(out / f"seed-{s}", "evaluate", fields, overwrite)
    text_dataset, encoded = open_split(loaded, data)
    external = [load_explanations(path, encoded, loaded.tokenizer) for path in explanations]
    if len({e.name for e in external}) < len(external):
        raise UserError("two --explanations files share a name; give each file its own name")
    with output_lock(out):
        check_container(out, _own_entry, overwrite)
        mask_engine = MaskBatchEngine(loaded.backend, token_budget=engine.token_budget)
        print(
            f"model {model} on {loaded.backend.name}; {text_dataset.name}/{data.split}: {len(encoded)} "
            f"examples; measures: {', '.join([BASELINE, *[m for m in measure if m != BASELINE]])}"
        )
        if protocol == "aopc":
            _evaluate_aopc(
                loaded, encoded, text_dataset, data, model, out, measure, seed,
                external, backend, mask_engine, quiet,
            )  # fmt: skip
        else:
            with open_pool(scale, model, backend.provider, engine.token_budget) as pool:
                _evaluate_seeds(out, runs, loaded, text_dataset, encoded, mask_engine, pool, quiet)


def _own_entry(name: str) -> bool:
    """The entries `evaluate` writes to OUT: seed directories and the curve files."""
    return name.startswith("seed-") or name in CURVE_FILES


def _evaluate_seeds(
    out: Path,
    runs: dict[int, EvaluationSettings],
    loaded: LoadedModel,
    text_dataset: TextDataset,
    encoded: EncodedSplit,
    engine: MaskBatchEngine,
    pool: WorkerPool | None,
    quiet: bool,
) -> None:
    """Every seed's recursive curves into OUT/seed-S (in this process, or on `pool`'s Ray workers), then
    the curves of all seeds as CSV and PNG."""
    from fmm_fast.distributed.evaluation import evaluate_sharded
    from fmm_fast.protocols.erasure import evaluate_model
    from fmm_fast.report.plots import plot_run_curves

    rows = []
    progress = None if quiet else progress_bar
    for s, settings in runs.items():
        run_dir = out / f"seed-{s}"
        if pool is None:
            record = evaluate_model(loaded, text_dataset, encoded, settings, run_dir, engine, progress)
        else:
            record = evaluate_sharded(pool, loaded, text_dataset, encoded, settings, run_dir, progress)
        rows += _curve_rows(record)
        _print_summary(record, run_dir)
    _write_csv(out / "curves.csv", rows)
    plot_run_curves([out / f"seed-{s}" / "result.json" for s in runs], out / "curves.png")
    print(f"wrote {out / 'curves.csv'}, {out / 'curves.png'}")


def _evaluate_aopc(
    loaded: LoadedModel,
    encoded: EncodedSplit,
    dataset: TextDataset,
    data: DataOptions,
    model: Path,
    out: Path,
    measures: list[str],
    seeds: list[int],
    external: list[ExternalExplanation],
    backend: BackendOptions,
    engine: MaskBatchEngine,
    quiet: bool,
) -> None:
    """--protocol aopc: the peer metrics of every measure and explanations file, per seed."""
    from fmm_fast.protocols.aopc import PeerRunSettings, render_peer_table, run_peer_evaluation

    for s in seeds:
        settings = PeerRunSettings(str(model), dataset.name, data.split, s, list(measures))
        arguments = {
            **vars(settings),
            "dataset_file": dataset.file,
            "protocol": "aopc",
            "explanations": [str(e.path) for e in external],
            "limit": data.limit,
            "backend": asdict(backend),
            "token_budget": engine.token_budget,
        }
        record = run_peer_evaluation(
            loaded,
            encoded,
            settings,
            dataset.metric,
            out / f"seed-{s}",
            engine,
            external,
            backend,
            arguments,
            None if quiet else progress_bar,
        )
        print(
            f"\nseed {s}: {record['dataset']}/{record['split']}, {record['n_examples']} examples, "
            f"protocol aopc (peer metrics, ranking computed once), curve metric {record['metric']}"
        )
        print(render_peer_table(record))
        print(f"→ {out / f'seed-{s}' / 'result.json'}, per example {out / f'seed-{s}' / 'peer.jsonl'}")


def _curve_rows(record: dict) -> list[dict]:
    rows = []
    for name, curve in record["curves"].items():
        for j, ratio in enumerate(record["ratios"]):
            rows.append(
                {
                    "seed": record["seed"],
                    "measure": name,
                    "ratio": ratio,
                    **{metric: values[j] for metric, values in curve.items()},
                }
            )
    return rows


def _write_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        raise UserError("no curves were computed")
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _print_summary(record: dict, run_dir: Path) -> None:
    metric = record["metric"]
    print(
        f"\nseed {record['seed']}: {record['dataset']}/{record['split']}, {record['n_examples']} examples, "
        f"primary metric {metric} (majority baseline {record['majority_baseline']:.3f})"
    )
    print(f"{'measure':<16}{'signed':>7}{'r=0':>8}{'r=0.5':>8}{'r=1':>8}{'ACU':>9}{'RACU':>9}{'seconds':>9}")
    undefined = set()
    for name, m in record["measures"].items():
        curve = record["curves"][name][metric]
        racu = "undef.*" if "racu_undefined" in m else f"{100 * m['racu']:.1f}"
        undefined.update([m["racu_undefined"]] if "racu_undefined" in m else [])
        print(
            f"{name:<16}{'yes' if m['signed'] else 'no':>7}{curve[0]:>8.3f}{curve[5]:>8.3f}{curve[-1]:>8.3f}"
            f"{100 * m['acu']:>9.1f}{racu:>9}{m['seconds']:>9.1f}"
        )
    for reason in sorted(undefined):
        print(f"* RACU undefined: {reason}")
    print(
        f"(ACU/RACU ×100; read RACU for unsigned measures, ACU for signed ones) → {run_dir / 'result.json'}"
    )
