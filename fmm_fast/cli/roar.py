"""`fmm-fast roar`: Recursive ROAR, erasure with retraining at every step, beside the no-retraining curve."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import typer

from fmm_fast.cli.app import app
from fmm_fast.cli.options import (
    TRAINING_PRECISION_HELP,
    MeasureOptionsOption,
    OverwriteOption,
    QuietOption,
    backend_options,
    data_options,
    engine_options,
    parse_measure_options,
    scale_options,
    training_options,
)
from fmm_fast.core.optional_deps import TRAIN
from fmm_fast.core.outputs import output_lock
from fmm_fast.core.settings import ROAR_MAX_STEPS, BackendOptions, EngineOptions, RoarSettings
from fmm_fast.data.masking import STRATEGIES
from fmm_fast.data.options import DataOptions
from fmm_fast.distributed.runtime import ScaleOptions
from fmm_fast.training.base_models import MINILM, TINY_ROBERTA


@app.command()
@scale_options()
@backend_options(provider=False, precision=TRAINING_PRECISION_HELP)
@engine_options()
@training_options()
@data_options(dataset_required=True)
def roar(
    data: DataOptions,
    out: Path = typer.Option(
        ...,
        "--out",
        help="Output directory: OUT/result.json, OUT/seed-S/step-000 (the unmasked model), "
        "OUT/seed-S/MEASURE/step-RRR (each step), OUT/seed-S/erasure (the no-retraining curve).",
    ),
    model: str = typer.Option(
        TINY_ROBERTA,
        "--model",
        help=f"The pretrained start every step's model is fine-tuned from: '{MINILM}' (the pretrained "
        f"all-MiniLM-L6-v2, offline; try --lr 5e-5), '{TINY_ROBERTA}' (from scratch, for trials), a Hugging "
        "Face masked language model name or a local model directory.",
    ),
    measure: list[str] = typer.Option(
        ["grad-l2"], "--measure", "-m", help="Importance measure; repeat for several. `rand` always runs."
    ),
    measure_option: MeasureOptionsOption = [],  # noqa: B006  (typer copies the default)
    recursive: bool = typer.Option(
        True,
        help="Rank with the previous step's model on the previous step's data (Recursive ROAR); "
        "--no-recursive ranks once, with the step-0 model on the unmasked data (ROAR).",
    ),
    strategy: str = typer.Option(
        "plain",
        "--strategy",
        help=f"{' | '.join(STRATEGIES)}: how every model is fine-tuned. plain (no masking) is the "
        "reference's; masked shows whether masked fine-tuning makes the retraining unnecessary.",
    ),
    steps: int = typer.Option(
        ROAR_MAX_STEPS,
        "--steps",
        help=f"K (1..{ROAR_MAX_STEPS}): the curve's ratios are j/K, j = 0..K; each step trains a model per "
        "measure, so fewer steps cost less.",
    ),
    seed: list[int] = typer.Option(
        [0], "--seed", min=0, help="Seed of the models, data order and `rand`; repeat for several."
    ),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Use only the first N test examples."),
    erasure: bool = typer.Option(
        True, help="Also the no-retraining recursive erasure of the step-0 model on the test split."
    ),
    step0: list[Path] = typer.Option(
        [],
        "--step0",
        help="A finished `fmm-fast train` output (its --out) to take as a seed's step-0 model instead of "
        "training it again; it must have been trained with this run's data and recipe and --strategy, for "
        "one of its seeds. Repeat for several seeds.",
    ),
    overwrite: OverwriteOption = False,
    quiet: QuietOption = False,
    *,
    training: dict,
    engine: EngineOptions,
    backend: BackendOptions,
    scale: ScaleOptions | None,
) -> None:
    """Recursive ROAR: at every ratio r = j/K, mask the top floor(r·n) explained tokens of every example of
    all three splits (already-masked tokens first), ranked by the measure with the previous step's model on
    the previous step's data, fine-tune a new model from the pretrained start on the result and score it on
    the masked test split. ACU/RACU against `rand` as for erasure (RACU also clipped to [−1, 1], as the
    Recursive ROAR paper reported it).

    Finished steps are kept: rerun the same command to resume. With --workers/--ray-address the chains of
    (seed, measure) run as Ray tasks (OUT on storage every worker sees). See docs/method.md.
    """
    with output_lock(out):  # before PyTorch, Numba and the data load: a second process exits at once
        TRAIN.require("Recursive ROAR (it fine-tunes a model at every step)")
        settings = RoarSettings(
            replace(data, split="test", limit=limit),
            model=model,
            measures=tuple(measure),
            seeds=tuple(seed),
            strategy=strategy,
            recursive=recursive,
            steps=steps,
            erasure=erasure,
            step0_trainings=tuple(str(path) for path in step0),
            **training,
            measure_options=parse_measure_options(measure_option),
            engine=engine,
            backend=backend,
        )  # every option is checked before any work
        from fmm_fast.distributed.roar_chains import ChainsFailed, check_roar_scale_out, ray_chain_runner
        from fmm_fast.protocols.roar.run import RoarRun  # loads PyTorch, Numba, SciPy: on use

        runner = None
        if scale is not None:
            check_roar_scale_out(scale)
            runner = ray_chain_runner(scale)
        try:
            result = RoarRun(settings, out, progress=not quiet).run(overwrite, runner)
        except ChainsFailed as error:
            print(f"fmm-fast: {error}; rerun the same command to resume", file=sys.stderr)
            raise typer.Exit(1) from None
    print_summary(result, out)


def print_summary(result: dict, out: Path) -> None:
    """The RACU table of every seed (×100), next to the no-retraining erasure's where it ran (read at ROAR's
    ratios, as the report reads it, where those are a subset of the erasure's)."""
    import numpy as np

    from fmm_fast.report.load import load_result

    print(
        f"{result['dataset']}: Recursive ROAR ({'recursive' if result['recursive'] else 'non-recursive'}, "
        f"{result['strategy']} retraining), primary metric {result['metric']} (majority baseline "
        f"{result['majority_baseline']:.3f})"
    )
    for seed, values in result["seeds"].items():
        erasure = load_result(out / values["erasure"]) if values["erasure"] else None
        plain_racu, own_grid = {}, False
        if erasure is not None:
            scored = erasure.at_ratios(np.asarray(result["ratios"]))
            own_grid = scored is None
            plain_racu = {name: run.racu for name, run in (scored or erasure).measures.items()}
        print(
            f"seed {seed}: {'measure':<14}{'r=0':>7}{'r=1':>7}{'ACU':>8}{'RACU':>8}{'clipped':>9}"
            f"{'no-retrain':>12}"
        )
        for name, curve in values["curves"].items():
            first, last = (f"{v:.3f}" if v is not None else "-" for v in (curve[0], curve[-1]))
            acu, racu, clipped = (values[k][name] for k in ("acu", "racu", "racu_clipped"))
            cells = [f"{100 * v:.1f}" if v is not None else "-" for v in (acu, racu, clipped)]
            plain = f"{100 * plain_racu[name]:.1f}" if name in plain_racu else "-"
            print(f"        {name:<14}{first:>7}{last:>7}{cells[0]:>8}{cells[1]:>8}{cells[2]:>9}{plain:>12}")
        if own_grid:
            print("        no-retrain: on the erasure's own ratios, not ROAR's (its ratios are not a subset)")
    cost = result["cost"]
    print(
        f"cost: {cost['trainings']} trainings, {cost['forward_passes']} forward and "
        f"{cost['backward_passes']} backward passes (examples), {cost['seconds']['total']:.0f} s; ×100, read "
        f"RACU for unsigned measures → {out / 'result.json'}"
    )
