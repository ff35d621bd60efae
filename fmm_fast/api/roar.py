"""`fmm_fast.roar` (the body of `fmm-fast roar`): Recursive ROAR, erasure with retraining at every step,
beside the no-retraining curve."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from fmm_fast.api.arguments import checked_arguments
from fmm_fast.api.inputs import as_list, measure_arguments, model_source, run_folder
from fmm_fast.api.options import (
    backend_arguments,
    data_arguments,
    engine_arguments,
    scale_arguments,
    training_arguments,
)
from fmm_fast.api.results import Roar
from fmm_fast.backends.options import BackendOptions
from fmm_fast.core.optional_deps import TRAIN
from fmm_fast.core.outputs import output_lock
from fmm_fast.core.settings import (
    ROAR_MAX_STEPS,
    EngineOptions,
    RoarSettings,
)
from fmm_fast.data.options import DataOptions
from fmm_fast.distributed.runtime import ScaleOptions
from fmm_fast.training.base_models import TINY_ROBERTA


@checked_arguments
@scale_arguments()
@backend_arguments(provider=False)
@engine_arguments()
@training_arguments()
@data_arguments(split=False, dataset_required=True)
def roar(
    data: DataOptions,
    out: str | Path | None = None,
    model: Any = TINY_ROBERTA,
    measure: Any = ("grad-l2",),
    measure_option: Mapping[str, Any] | Sequence[str] = (),
    recursive: bool = True,
    strategy: str = "plain",
    steps: int = ROAR_MAX_STEPS,
    seed: int | Sequence[int] = (0,),
    limit: int | None = None,
    erasure: bool = True,
    step0: str | Path | Sequence[str | Path] = (),
    overwrite: bool = False,
    quiet: bool = False,
    *,
    training: dict,
    engine: EngineOptions,
    backend: BackendOptions,
    scale: ScaleOptions | None,
) -> Roar:
    """Recursive ROAR: at every ratio r = j/K mask the top floor(r·n) explained tokens of every example of
    all three splits, ranked by the measure with the previous step's model on the previous step's data,
    fine-tune a new model from `model` on the result and score it on the masked test split; ACU/RACU
    against `rand` as for erasure. What `fmm-fast roar` does, with its options.

    dataset: as for fmm_fast.train. model, strategy, epochs, lr, ...: every step's training (as for
    fmm_fast.train). steps K: the ratios j/K. recursive False: rank once, with the step-0 model (ROAR).
    erasure: also the no-retraining erasure of the step-0 model. step0: `fmm-fast train` folders to take as
    a seed's step-0 model. out: the folder the command writes (rerun: resumes); None: a new temporary one.
    Returns Roar (result.json); a notebook shows the ROAR table and a measure's curves. A chain that fails
    on a Ray worker raises fmm_fast.distributed.roar_chains.ChainsFailed (rerun to resume).

    Example: `fmm_fast.roar(dataset="movie-snippets", size=200, measure="loo-abs", steps=2, epochs=1)`
    """
    out = run_folder(out, "roar")
    with output_lock(out):  # before PyTorch, Numba and the data load: a second process exits at once
        TRAIN.require("Recursive ROAR (it fine-tunes a model at every step)")
        measures, options = measure_arguments(measure, measure_option)
        settings = RoarSettings(
            replace(data, split="test", limit=limit),
            model=str(model_source(model)),  # a train result or a (model, tokenizer) pair too
            measures=tuple(measures),
            seeds=tuple(as_list(seed, "seed")),
            strategy=strategy,
            recursive=recursive,
            steps=steps,
            erasure=erasure,
            step0_trainings=tuple(str(path) for path in as_list(step0, "step0")),
            **training,
            measure_options=options,
            engine=engine,
            backend=backend,
        )  # every option is checked before any work
        from fmm_fast.distributed.roar_chains import check_roar_scale_out, ray_chain_runner
        from fmm_fast.protocols.roar.run import RoarRun  # loads PyTorch, Numba, SciPy: on use

        runner = None
        if scale is not None:
            check_roar_scale_out(scale)
            runner = ray_chain_runner(scale)
        result = RoarRun(settings, out, progress=not quiet).run(overwrite, runner)
    print_summary(result, out)
    return Roar(out)


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
