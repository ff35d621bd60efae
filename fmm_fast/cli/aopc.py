"""`fmm-fast aopc`: the peer metrics (AOPC comprehensiveness, AOPC sufficiency, τ-LOO) of built-in measures
and of explanations made elsewhere, with the ranking computed once (resumable)."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

import typer

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import load_model
from fmm_fast.cli.app import app
from fmm_fast.cli.options import (
    FidelitySampleOption,
    MeasureOptionsOption,
    MeasuresOption,
    ModelOption,
    OverwriteOption,
    QuietOption,
    SeedsOption,
    backend_options,
    data_options,
    engine_options,
    parse_measure_options,
)
from fmm_fast.cli.seed_runs import (
    check_outputs,
    claim_container,
    fidelity_sides,
    print_header,
    seed_directory,
    shared_fields,
)
from fmm_fast.core.digest import content_id
from fmm_fast.core.errors import UserError
from fmm_fast.core.outputs import finish_run, output_lock
from fmm_fast.core.progress import progress_bar
from fmm_fast.core.settings import DEFAULT_FIDELITY_SAMPLE, AopcSettings, BackendOptions, EngineOptions
from fmm_fast.data.options import DataOptions, open_split
from fmm_fast.measures.external import load_explanations


@app.command()
@backend_options()
@engine_options()
@data_options(split_help="Split to score.")
def aopc(
    model: ModelOption,
    data: DataOptions,
    out: Path = typer.Option(..., "--out", help="Output directory (seed-S/result.json, seed-S/peer.jsonl)."),
    measure: MeasuresOption = ["loo-abs"],  # noqa: B006  (typer copies the default)
    measure_option: MeasureOptionsOption = [],  # noqa: B006
    seed: SeedsOption = [0],  # noqa: B006
    explanations: list[Path] = typer.Option(
        [],
        "--explanations",
        help='A .jsonl of explanations made elsewhere, one line per example: {"index": i, "token_scores": '
        '[...]} or {"index": i, "word_scores": [...]}; repeat for several.',
    ),
    fidelity_sample: FidelitySampleOption = DEFAULT_FIDELITY_SAMPLE,
    overwrite: OverwriteOption = False,
    quiet: QuietOption = False,
    *,
    engine: EngineOptions,
    backend: BackendOptions,
) -> None:
    """Peer metrics of each explanation, its ranking computed once on the unmasked input (docs/method.md §8).

    Per example: AOPC comprehensiveness, AOPC sufficiency and τ-LOO; per dataset their means with 95%
    bootstrap CIs, and the erasure curve of the fixed ranking with its ACU/RACU against `rand`. Explanations
    made elsewhere (another library, a person, a language model) are scored like the built-in measures.
    Finished measures are saved as they complete: rerun the same command to resume an interrupted run.
    Writes OUT/seed-S/peer.jsonl (per example) and OUT/seed-S/result.json (one per seed).
    """
    # these load SciPy and Numba: imported on use, so --help starts fast
    from fmm_fast.protocols.aopc import RUN_KIND, render_peer_table, run_peer_evaluation
    from fmm_fast.protocols.fidelity import FidelitySample, fidelity_lines, peer_fidelity

    settings = AopcSettings(
        str(model),
        data,
        tuple(measure),
        seed[0],
        parse_measure_options(measure_option),
        tuple(str(path) for path in explanations),
        engine,
        backend,
        fidelity_sample,
    )  # a typo in a measure or option fails before any work
    runs = {s: replace(settings, seed=s) for s in seed}
    with output_lock(out):  # before the model and data load: a second process on this --out exits at once
        contents = {str(p): content_id(p) if p.is_file() else None for p in explanations}
        shared = shared_fields(settings, explanation_contents=contents)
        check_outputs(out, RUN_KIND, shared, runs, overwrite)  # before any work
        loaded = load_model(model, settings.backend)
        text_dataset, encoded = open_split(loaded, data)
        external = [load_explanations(path, encoded, loaded.tokenizer) for path in explanations]
        if len({e.name for e in external}) < len(external):
            raise UserError("two --explanations files share a name; give each file its own name")
        claim_container(out, RUN_KIND, shared, seed, (), overwrite)
        mask_engine = MaskBatchEngine(loaded.backend, token_budget=engine.token_budget)
        print_header(model, loaded, text_dataset.name, data.split, len(encoded), measure)
        sides = fidelity_sides(model, loaded, settings)
        progress = None if quiet else progress_bar
        for s, run in runs.items():
            run_dir = seed_directory(out, s)
            estimate = None
            if sides is not None:
                sample = FidelitySample.draw(encoded, run.fidelity_sample, s)
                arguments = (run.specs, external, s, sample, sides, text_dataset.metric)
                estimate = partial(peer_fidelity, *arguments, engine.explain_batch_rows)
            record = run_peer_evaluation(
                loaded, text_dataset, encoded, run, run_dir, mask_engine, external, progress, estimate
            )
            print(
                f"\nseed {s}: {record['dataset']}/{record['split']}, {record['n_examples']} examples, "
                f"peer metrics (ranking computed once), curve metric {record['metric']}"
            )
            print(render_peer_table(record))
            if "fidelity" in record:
                print("\n".join(fidelity_lines(record["fidelity"])))
            print(f"→ {run_dir / 'result.json'}, per example {run_dir / 'peer.jsonl'}")
        finish_run(out)
