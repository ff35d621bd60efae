"""A whole Recursive ROAR run: per seed the step-0 model and the shared fully masked step, then the chain of
every measure (here, or on Ray workers), the no-retraining erasure of the step-0 model, and result.json
(rewritten after every finished step). Everything finished is kept: a rerun resumes step by step."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace
from pathlib import Path

from fmm_fast.backends.loading import load_model
from fmm_fast.core.errors import UserError
from fmm_fast.core.outputs import (
    RUN_MARKER,
    as_recorded,
    claim_directory,
    claim_part,
    differences,
    finish_run,
    read_marker,
    remove_owned,
)
from fmm_fast.core.progress import progress_bar
from fmm_fast.core.reading import read_checked
from fmm_fast.core.records import Stopwatch, read_record, write_record
from fmm_fast.core.settings import EvaluationSettings, RoarSettings
from fmm_fast.core.writing import replacing
from fmm_fast.data.base import SPLIT_NAMES, TextDataset
from fmm_fast.data.tokenization import encode_split
from fmm_fast.measures.base import PassCount
from fmm_fast.measures.path_names import measure_entry
from fmm_fast.measures.spec import MeasureSpec
from fmm_fast.protocols.erasure import evaluate_model
from fmm_fast.protocols.roar.chain import Chain, SeedData
from fmm_fast.protocols.roar.explaining import Passes
from fmm_fast.protocols.roar.masking import all_masked, dataset_digest, unmasked
from fmm_fast.protocols.roar.result import ERASURE_DIR, roar_result
from fmm_fast.protocols.roar.steps import (
    LOGS,
    MODEL_DIR,
    ROAR_KIND,
    TRAINED_RUN,
    model_for,
    not_trained_here,
    read_step,
    seed_dir,
    step_model,
    step_name,
    step_record,
    trained_block,
    training_passes,
    write_step,
)

RESULT = "result.json"
RUN_FILE = "run.json"  # train()'s record

# Runs the chains of (seed, measure) pairs elsewhere (Ray), calling back after each; None: here, in turn.
ChainRunner = Callable[[RoarSettings, Path, list[tuple[int, MeasureSpec]], Callable[[], None]], None]


def load_data(settings: RoarSettings) -> TextDataset:
    """The dataset, its test split cut to the first data.limit examples when a limit is given."""
    dataset = settings.data.load()
    limit = settings.data.limit
    if limit is None:
        return dataset
    test = dataset.splits["test"]
    return replace(dataset, splits={**dataset.splits, "test": test.subset(range(min(limit, len(test))))})


def seed_data(settings: RoarSettings, out: Path, seed: int, dataset: TextDataset) -> SeedData:
    """The splits tokenized by the (finished) step-0 model of `seed` (checked against its step's record
    once that is written)."""
    record = read_step(seed_dir(out, seed) / step_name(0.0))
    step0 = seed_dir(out, seed) / step_name(0.0) / MODEL_DIR if record is None else step_model(out, record)
    loaded = load_model(step0, settings.explaining_backend)
    data = settings.data
    encoded = {
        name: encode_split(loaded.tokenizer, dataset.splits[name], data.unit, data.max_length)
        for name in SPLIT_NAMES
    }
    return SeedData(dataset, encoded, loaded.info.mask_id, step0)


def step_zero_sources(settings: RoarSettings) -> dict[int, Path]:
    """The seed each of settings.step0_trainings is step 0 of; UserError (before any work) for one that is
    not a finished `fmm-fast train` output with a seed's step-0 settings, naming what differs."""
    given = [Path(path) for path in settings.step0_trainings]
    resolved = [path.resolve() for path in given]
    for number, path in enumerate(given):  # a repeat first, as for a repeated single-value option
        if resolved[number] in resolved[:number]:
            raise UserError(f"--step0 {path} was given more than once; give each training once")
    sources: dict[int, Path] = {}
    for path in given:
        marker = read_marker(path) if path.is_dir() else None
        if marker is None or marker["kind"] != "train" or marker.get("finished") is not True:
            raise UserError(
                f"--step0 {path} is not a finished `fmm-fast train` output; give the --out of one that "
                "finished, or leave it out (step 0 is then trained)"
            )
        seed = marker["fields"].get("seed")
        seeds = ", ".join(map(str, settings.seeds))
        if seed in sources:
            raise UserError(
                f"--step0 {sources[seed]} and {path} were both trained with seed {seed}: give one training "
                f"per --seed of this run ({seeds})"
            )
        if seed not in settings.seeds:
            raise UserError(
                f"--step0 {path} was trained with seed {seed}: give one training per --seed of this run "
                f"({seeds})"
            )
        read_checked(path / RUN_FILE, TRAINED_RUN, f"train it again, or leave --step0 {path} out")
        found = differences(marker["fields"], as_recorded(settings.training(seed).fingerprint_fields()))
        if found:
            raise UserError(
                f"--step0 {path} was not trained as this run's step 0 ({', '.join(found[:3])}); train it "
                "with the same data and recipe, or leave it out"
            )
        sources[seed] = path
    return sources


def copy_training(source: Path, directory: Path, names: list[str]) -> None:
    """Copy the entries `names` of the finished training `source` (what its marker lists, then the marker:
    a copy cut short has none, so it never passes for a finished training) to `directory`, in place of
    what an interrupted training or copy there left."""
    remove_owned(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        if not (source / name).exists():  # listed but gone once the run finished (train's resume file)
            continue
        target = directory / name  # fmm-fast's own name: a part an earlier copy left goes
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        if (source / name).is_dir():
            shutil.copytree(source / name, target, copy_function=_copy_file)
        else:
            _copy_file(source / name, target)


def _copy_file(source: Path, target: Path) -> None:
    """Copy one file (contents and times) through core.writing."""
    with replacing(target) as staged:
        shutil.copy2(source, staged)


def train_step_zero(
    settings: RoarSettings,
    out: Path,
    seed: int,
    dataset: TextDataset,
    progress: bool,
    source: Path | None = None,
) -> SeedData:
    """Fine-tune the step-0 model on the unmasked data, or copy `source`, a finished training with the same
    settings (step_zero_sources), in its place, unless an earlier run finished it. Returns the seed's data
    tokenized by that model (its tokenizer tokenizes every later step's data)."""
    from fmm_fast.training.train import train  # PyTorch: imported on use

    directory = seed_dir(out, seed) / step_name(0.0)
    if read_step(directory) is not None:
        return seed_data(settings, out, seed, dataset)
    if source is None:
        run = train(settings.training(seed), directory, progress=progress, dataset=dataset)
        model = trained_block(out, run, directory, dataset.metric)
        data = seed_data(settings, out, seed, dataset)
    else:
        names = [*(read_marker(source) or {}).get("files", []), RUN_MARKER]
        try:
            copy_training(source, directory, names)
            run = read_record(directory / RUN_FILE)
            model = {
                **trained_block(out, run, directory, dataset.metric),
                **not_trained_here(str(source.resolve())),
            }
            data = seed_data(settings, out, seed, dataset)
        except BaseException:
            with suppress(OSError):  # a copy that failed is no step 0: a rerun copies again
                remove_owned(directory, names)
            raise
    masked = unmasked(data.encoded)
    digest = dataset_digest(masked, data.encoded)
    nothing = {"explain": 0.0, "mask": 0.0}
    record = step_record(
        seed, None, 0.0, digest, masked, data.encoded, data.mask_id, dataset.metric, model, Passes(), nothing
    )
    write_step(directory, record)
    return data


def train_fully_masked(settings: RoarSettings, out: Path, seed: int, data: SeedData, progress: bool) -> None:
    """The ratio-1 step every measure shares (every explained token masked): trained once per seed."""
    directory = seed_dir(out, seed) / step_name(1.0)
    if read_step(directory) is not None:
        return
    with Stopwatch() as mask_clock:
        masked = all_masked(data.encoded, data.mask_id)
        digest = dataset_digest(masked, data.encoded)
    metric = data.dataset.metric
    model = model_for(settings, out, seed, data.dataset, data.encoded, masked, digest, directory, progress)
    seconds = {"explain": 0.0, "mask": mask_clock.seconds}
    record = step_record(
        seed, None, 1.0, digest, masked, data.encoded, data.mask_id, metric, model, Passes(), seconds
    )
    write_step(directory, record)


def run_erasure(settings: RoarSettings, out: Path, seed: int, data: SeedData, progress: bool) -> None:
    """The no-retraining recursive erasure of the step-0 model on the test split (evaluate's own run)."""
    loaded = load_model(data.step0, settings.explaining_backend)
    evaluation = EvaluationSettings(
        str(data.step0),
        settings.data.select(split="test"),
        settings.measures,
        seed,
        settings.measure_options,
        engine=settings.engine,
        backend=settings.explaining_backend,
    )
    engine = settings.engine.engine_on(loaded.backend)
    directory = seed_dir(out, seed) / ERASURE_DIR
    evaluate_model(
        loaded,
        data.dataset,
        data.encoded["test"],
        evaluation,
        directory,
        engine,
        progress_bar if progress else None,
    )


def announce(settings: RoarSettings, out: Path, data: SeedData) -> str:
    """Print and return the run's cost line (protocols.cost.roar_cost) from the first seed's step 0: its
    model probed, its training's passes and seconds standing for every training's (each runs the same
    epochs on data of the same sizes)."""
    from fmm_fast.protocols.cost import roar_cost  # NumPy and Numba work: on use

    directory = seed_dir(out, settings.seeds[0]) / step_name(0.0)
    run = read_record(directory / RUN_FILE)
    done = training_passes(run)
    durations = run["durations"]
    training = (
        PassCount(forward=done.forward - done.backward, backward=done.backward),
        durations["training"] + durations["validation"] + durations["test"],
        len(settings.seeds) * (2 + len(settings.specs) * (settings.steps - 1)),
    )
    loaded = load_model(data.step0, settings.explaining_backend)
    measures = [spec.build(settings.seeds[0], 1) for spec in settings.specs]
    return roar_cost(
        measures,
        data.encoded,
        settings.ratios(),
        settings.recursive,
        settings.erasure,
        len(settings.seeds),
        training,
        loaded.backend,
        settings.engine.token_budget,
    )


def claim_seed(settings: RoarSettings, out: Path, seed: int) -> None:
    """Claim OUT/seed-S (listed by the run's marker) for its shared steps, its erasure and its chains."""
    shared = [step_name(0.0), step_name(1.0), ERASURE_DIR]
    chains = [measure_entry(seed_dir(out, seed), spec.name).name for spec in settings.specs]
    claim_part(seed_dir(out, seed), ROAR_KIND, {"seed": seed}, [*shared, *chains])


class RoarRun:
    """One `fmm-fast roar` run into `out` (claimed with a run marker; call it under output_lock(out))."""

    def __init__(self, settings: RoarSettings, out: Path, progress: bool = True) -> None:
        self.settings = settings
        self.out = out
        self.progress = progress
        self.bar = None
        self.planned = ""  # the cost line, once the first step 0 is there

    def run(self, overwrite: bool = False, chain_runner: ChainRunner | None = None) -> dict:
        settings, out = self.settings, self.out
        owned = [RESULT, LOGS, *(seed_dir(out, seed).name for seed in settings.seeds)]
        step0_sources = step_zero_sources(settings)
        claim_directory(out, "roar", settings.fingerprint_fields(), overwrite, files=owned)
        dataset = load_data(settings)
        chains = [(seed, spec) for seed in settings.seeds for spec in settings.specs]  # rand first
        total = len(settings.seeds) * 2 + len(chains) * settings.steps
        self.bar = progress_bar(total, "roar", unit="step", quiet=not self.progress)
        data = {}
        for seed in settings.seeds:
            claim_seed(settings, out, seed)
            self.phase(seed, "-", step_name(0.0), "train")
            data[seed] = train_step_zero(settings, out, seed, dataset, self.progress, step0_sources.get(seed))
            if seed == settings.seeds[0]:  # the first trained model: the probe, and a training's time
                self.planned = announce(settings, out, data[seed])
            self.bar.update(1)
            self.phase(seed, "-", step_name(1.0), "train")
            train_fully_masked(settings, out, seed, data[seed], self.progress)
            self.bar.update(1)
        self.write_result()
        if chain_runner is not None:
            self.phase(settings.seeds[0], "all", "chains", "on Ray")
            chain_runner(settings, out, chains, self.write_result)
            self.bar.update(len(chains) * settings.steps)
        else:
            for seed, spec in chains:
                chain = Chain(
                    settings, out, seed, spec, data[seed], self.phase, self.explained, self.progress
                )
                chain.run(on_step=self.finished_step)
                self.bar.update(settings.steps)
        if settings.erasure:
            for seed in settings.seeds:
                self.phase(seed, "all", "erasure", "evaluate")
                run_erasure(settings, out, seed, data[seed], self.progress)
        self.bar.close()
        result = self.write_result()
        finish_run(out)
        return result

    def phase(self, seed: int, measure: str, step: str, phase: str) -> None:
        if self.bar is not None:
            self.bar.set_description(f"seed {seed} {measure} {step}: {phase}")

    def explained(self, count: int) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(f"+{count} examples explained")

    def finished_step(self, record: dict) -> None:
        self.write_result()

    def write_result(self) -> dict:
        seed = self.settings.seeds[0]
        step0 = seed_dir(self.out, seed) / step_name(0.0)
        fix = f"remove {step0} and rerun: its model is trained again"
        run = read_checked(step0 / RUN_FILE, TRAINED_RUN, fix)
        metric = run["dataset"]["metric"]
        result = roar_result(self.settings, self.out, metric, run["majority_metrics"][metric])
        result["truncation"] = run["dataset"]["truncation"]["test"]  # what the cut to the model's length cut
        write_record(self.out / RESULT, result)
        return result
