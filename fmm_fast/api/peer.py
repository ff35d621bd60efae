"""`fmm_fast.aopc` (the body of `fmm-fast aopc`): the peer metrics (AOPC comprehensiveness, AOPC
sufficiency, τ-LOO) of built-in measures and of explanations made elsewhere, the ranking computed once
(resumable)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from fmm_fast.api.arguments import checked_arguments
from fmm_fast.api.inputs import (
    as_list,
    measure_arguments,
    model_source,
    run_folder,
)
from fmm_fast.api.options import backend_arguments, data_arguments, engine_arguments
from fmm_fast.api.results import PeerMetrics
from fmm_fast.api.seed_runs import (
    check_outputs,
    claim_container,
    fidelity_sides,
    plan_run,
    print_header,
    seed_directory,
    shared_fields,
)
from fmm_fast.backends.loading import load_model
from fmm_fast.core.digest import content_id
from fmm_fast.core.errors import UserError
from fmm_fast.core.outputs import finish_run, output_lock
from fmm_fast.core.progress import progress_bar
from fmm_fast.core.settings import (
    DEFAULT_FIDELITY_SAMPLE,
    AopcSettings,
    BackendOptions,
    EngineOptions,
)
from fmm_fast.data.options import DataOptions, open_split
from fmm_fast.measures.external import load_explanations


@checked_arguments
@backend_arguments()
@engine_arguments()
@data_arguments()
def aopc(
    model: Any,
    data: DataOptions,
    out: str | Path | None = None,
    measure: Any = ("loo-abs",),
    measure_option: Mapping[str, Any] | Sequence[str] = (),
    seed: int | Sequence[int] = (0,),
    explanations: str | Path | Sequence[str | Path] = (),
    fidelity_sample: int = DEFAULT_FIDELITY_SAMPLE,
    overwrite: bool = False,
    quiet: bool = False,
    *,
    engine: EngineOptions,
    backend: BackendOptions,
) -> PeerMetrics:
    """Peer metrics of each explanation, its ranking computed once on the unmasked input (docs/method.md
    §8): what `fmm-fast aopc` does, with its options.

    Per example AOPC comprehensiveness, AOPC sufficiency and τ-LOO; per dataset their means with 95%
    bootstrap CIs, and the erasure curve of the fixed ranking with its ACU/RACU against `rand`.
    model, dataset, measure, measure_option, seed, out: as for fmm_fast.evaluate. explanations: .jsonl
    files of explanations made elsewhere ({"index": i, "token_scores": [...]} or "word_scores" per line).
    Returns PeerMetrics: one result.json per seed; a notebook shows the peer-metrics table.

    Example: `fmm_fast.aopc("model.onnx", dataset="babi-1", measure=["loo-abs", "grad-l2"], limit=50)`
    """
    (measures, options), seeds = measure_arguments(measure, measure_option), as_list(seed, "seed")
    files = [Path(path) for path in as_list(explanations, "explanations")]
    if not seeds:
        raise UserError("give at least one --seed")
    model = model_source(model)
    # these load SciPy and Numba: imported on use, so --help starts fast
    from fmm_fast.protocols.aopc import RUN_KIND, render_peer_table, run_peer_evaluation
    from fmm_fast.protocols.fidelity import FidelitySample, fidelity_lines, peer_fidelity

    settings = AopcSettings(
        str(model),
        data,
        tuple(measures),
        seeds[0],
        options,
        tuple(str(path) for path in files),
        engine,
        backend,
        fidelity_sample,
    )  # a typo in a measure or option fails before any work
    runs = {s: replace(settings, seed=s) for s in seeds}
    out = run_folder(out, "aopc")
    with output_lock(out):  # before the model and data load: a second process on this --out exits at once
        contents = {str(p): content_id(p) if p.is_file() else None for p in files}
        shared = shared_fields(settings, explanation_contents=contents)
        check_outputs(out, RUN_KIND, shared, runs, overwrite)  # before any work
        loaded = load_model(model, settings.backend)
        text_dataset, encoded = open_split(loaded, data)
        external = [load_explanations(path, encoded, loaded.tokenizer) for path in files]
        if len({e.name for e in external}) < len(external):
            raise UserError("two --explanations files share a name; give each file its own name")
        claim_container(out, RUN_KIND, shared, seeds, (), overwrite)
        mask_engine = engine.engine_on(loaded.backend)
        print_header(
            model, loaded, text_dataset.name, data.split, len(encoded), [s.name for s in settings.specs]
        )
        plan_run("aopc", settings, encoded, loaded, len(seeds))
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
    return PeerMetrics(out)
