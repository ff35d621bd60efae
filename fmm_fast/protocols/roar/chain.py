"""The chain of Recursive ROAR steps of one (seed, measure) after step 0, resumable step by step.

Step j (ratio r_j = j/K) explains every split with the step j−1 model on dataset_{j−1} (non-recursive, or a
measure computed once such as beam: the step-0 model on the unmasked data, once), masks the top
floor(r_j·n) explained tokens of each example (already-masked ones first), and fine-tunes a new model from
the pretrained start on the result (or reuses the model of an identical dataset). At r = 1 every explained
token is masked and no measure runs. Each finished step's record is written at once; a rerun skips it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.errors import UserError
from fmm_fast.core.outputs import claim_part
from fmm_fast.core.records import Stopwatch
from fmm_fast.core.settings import RoarSettings
from fmm_fast.data.base import TextDataset
from fmm_fast.measures.path_names import measure_entry
from fmm_fast.measures.spec import MeasureSpec
from fmm_fast.protocols.roar.explaining import Passes, explain_dataset
from fmm_fast.protocols.roar.masking import (
    DATASET_ERRORS,
    MaskedDataset,
    all_masked,
    dataset_digest,
    load_arrays,
    mask_dataset,
    save_arrays,
    unmasked,
)
from fmm_fast.protocols.roar.steps import (
    DATASET,
    RECORD,
    ROAR_KIND,
    TRAIN_DIR,
    claim_step,
    model_for,
    read_step,
    seed_dir,
    step_model,
    step_name,
    step_record,
    write_step,
)

SCORES = "scores.npz"  # a ranking computed once (non-recursive): every split's scores


@dataclass
class SeedData:
    """What every chain of one seed starts from: the data, tokenized by the step-0 model's tokenizer."""

    dataset: TextDataset  # test split limited as the run asks
    encoded: dict[str, EncodedSplit]
    mask_id: int
    step0: Path  # the step-0 checkpoint


# called as each phase starts: (seed, measure, step name, phase)
Report = Callable[[int, str, str, str], None]


class Chain:
    """The steps 1..K of one (seed, measure); report(seed, measure, step, phase) as each phase starts,
    on_batch(examples) as explaining goes."""

    def __init__(
        self,
        settings: RoarSettings,
        out: Path,
        seed: int,
        spec: MeasureSpec,
        data: SeedData,
        report: Report | None = None,
        on_batch: Callable[[int], None] | None = None,
        progress: bool = False,
    ) -> None:
        self.settings = settings
        self.out = out
        self.seed = seed
        self.spec = spec
        self.measure = spec.name
        self.data = data
        self.folder = measure_entry(seed_dir(out, seed), spec.name)
        self.report = report or (lambda *_: None)
        self.on_batch = on_batch
        self.progress = progress  # training's own progress bar
        self.ranks_once = not settings.recursive or not spec.recursive
        self.ratios = settings.ratios()

    def run(self, on_step: Callable[[dict], None] | None = None) -> list[dict]:
        """Every step's record, finished ones read back; on_step(record) after each newly finished step."""
        steps = [step_name(ratio) for ratio in self.ratios[1:]]
        claim_part(self.folder, ROAR_KIND, {"seed": self.seed, "measure": self.measure}, [*steps, SCORES])
        records = []
        current = unmasked(self.data.encoded)
        model = self.data.step0
        for step, ratio in enumerate(self.settings.ratios()[1:], start=1):
            directory = self.folder / step_name(ratio)
            record = read_step(directory)
            if record is None:
                record = self.run_step(step, ratio, current, model, directory)
                if on_step is not None:
                    on_step(record)
            records.append(record)
            if step < self.settings.steps:
                current = self.step_dataset(step, ratio, current, model, directory, record["dataset_digest"])
                model = step_model(self.out, record)
        return records

    def step_dataset(
        self, step: int, ratio: float, current: MaskedDataset, model: Path, directory: Path, digest: str
    ) -> MaskedDataset:
        """The masked dataset finished step `step` wrote (its dataset.npz, which the next step starts from),
        checked against the digest its record holds. A missing, damaged or swapped file is recomputed from
        the step's inputs (`current`, `model`) with a one-line warning; UserError when that gives another
        dataset than the one the step trained on."""
        path = directory / DATASET
        problem = "it is missing"
        if path.is_file():
            try:
                dataset = load_arrays(path)
                if dataset_digest(dataset, self.data.encoded) == digest:
                    return dataset
                problem = f"it is not the dataset {directory / RECORD} names"
            except DATASET_ERRORS as error:
                problem = f"it does not read: {str(error) or type(error).__name__}"
        print(f"fmm-fast: warning: {path}: {problem}; recomputing it", file=sys.stderr)
        scores, _ = self.scores(step, current, model)
        dataset = mask_dataset(self.data.encoded, current, scores, ratio, self.data.mask_id)
        if dataset_digest(dataset, self.data.encoded) != digest:
            raise UserError(
                f"{path} cannot be recomputed as the dataset its step trained on (the inputs of the chain "
                f"changed); move {self.folder} away and rerun to compute the chain of {self.measure} again"
            )
        save_arrays(path, dataset)
        return dataset

    def scores(
        self, step: int, current: MaskedDataset, model: Path
    ) -> tuple[dict[str, list[np.ndarray]], Passes]:
        """The measure's scores on every split: at this step, or the ranking computed once at step 1
        (scores.npz; recomputed with a warning when it does not read, or does not give the dataset step 1
        recorded)."""
        if not self.ranks_once:
            return self.explain(step, current, model)
        path = self.folder / SCORES
        if path.is_file():
            try:
                scores = load_arrays(path)
                if self.gives_first_step(scores):
                    return scores, Passes()
                problem = f"it does not give the dataset {self.folder / step_name(self.ratios[1])} recorded"
            except DATASET_ERRORS as error:
                problem = f"it does not read: {str(error) or type(error).__name__}"
            print(f"fmm-fast: warning: {path}: {problem}; recomputing it", file=sys.stderr)
        scores, passes = self.explain(1, unmasked(self.data.encoded), self.data.step0)
        self.folder.mkdir(parents=True, exist_ok=True)
        save_arrays(path, scores)
        return scores, passes

    def gives_first_step(self, scores: dict[str, list[np.ndarray]]) -> bool:
        """Whether a ranking computed once masks the data as the finished step 1 recorded (True when step 1
        has not finished: it is computed from these scores next)."""
        first = read_step(self.folder / step_name(self.ratios[1]))
        if first is None:
            return True
        encoded = self.data.encoded
        masked = mask_dataset(encoded, unmasked(encoded), scores, self.ratios[1], self.data.mask_id)
        return dataset_digest(masked, encoded) == first["dataset_digest"]

    def explain(
        self, step: int, current: MaskedDataset, model: Path
    ) -> tuple[dict[str, list[np.ndarray]], Passes]:
        return explain_dataset(
            self.settings, self.spec, self.seed, step, model, self.data.encoded, current, self.on_batch
        )

    def run_step(self, step: int, ratio: float, current: MaskedDataset, model: Path, directory: Path) -> dict:
        name, encoded, mask_id = step_name(ratio), self.data.encoded, self.data.mask_id
        claim_step(directory, self.seed, self.measure, ratio, [RECORD, DATASET, TRAIN_DIR])
        passes = Passes()
        with Stopwatch() as explain_clock:
            if step < self.settings.steps:
                self.report(self.seed, self.measure, name, "explain")
                scores, passes = self.scores(step, current, model)
        with Stopwatch() as mask_clock:
            self.report(self.seed, self.measure, name, "mask")
            masked = (
                mask_dataset(encoded, current, scores, ratio, mask_id)
                if step < self.settings.steps
                else all_masked(encoded, mask_id)
            )
            digest = dataset_digest(masked, encoded)
            directory.mkdir(parents=True, exist_ok=True)
            if step < self.settings.steps:  # the next step starts from it
                save_arrays(directory / DATASET, masked)
        self.report(self.seed, self.measure, name, "train")
        trained = model_for(
            self.settings,
            self.out,
            self.seed,
            self.data.dataset,
            encoded,
            masked,
            digest,
            directory / TRAIN_DIR,
            progress=self.progress,
        )
        record = step_record(
            self.seed,
            self.measure,
            ratio,
            digest,
            masked,
            encoded,
            mask_id,
            self.data.dataset.metric,
            trained,
            passes,
            {"explain": explain_clock.seconds, "mask": mask_clock.seconds},
        )
        write_step(directory, record)
        return record
