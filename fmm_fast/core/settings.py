"""The settings of each kind of run (train, evaluate, aopc, explain, masf, check), built once and frozen.

The CLI (or the demo, or a Python caller) builds one settings object per run. Its `to_dict()` is what
the run's record stores as "arguments"; `fingerprint()` hashes `fingerprint_fields()`, the fields that
decide the run's numbers, and a resumed run must have the same fingerprint as the run it continues.
Cost knobs (token budget, batch rows, device) are left out of the fingerprint: they change how fast a
run goes, not what it computes. The precision is resolved while a settings object is built (fp32|bf16|auto
→ what runs, backends.loading.resolve_backend), so its record and fingerprint hold what ran.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from fmm_fast.backends.base import Backend
from fmm_fast.backends.engine import DEFAULT_CACHE_MB, DEFAULT_TOKEN_BUDGET, MaskBatchEngine
from fmm_fast.backends.options import BackendOptions, check
from fmm_fast.backends.precision import resolve_training_precision
from fmm_fast.core.digest import content_id
from fmm_fast.core.errors import UserError
from fmm_fast.data.local import LOCAL_LR, is_local_dataset
from fmm_fast.data.masking import DEFAULT_STRATEGY, TRAINING_BATCH_SIZE, check_strategy
from fmm_fast.data.options import DataOptions
from fmm_fast.data.units import DEFAULT_UNIT
from fmm_fast.measures.path_names import measure_entry
from fmm_fast.measures.spec import MeasureSpec, resolve_measure, resolve_measures, typed_options
from fmm_fast.protocols.masf.components import DEFAULT_SPLIT_COMPONENTS, check_components
from fmm_fast.training.base_models import TINY_ROBERTA

DEFAULT_EXPLAIN_BATCH_ROWS = 32
DEFAULT_EXPLAIN_LIMIT = 20  # examples `explain` explains when not told: a page to read, not a dataset
DEFAULT_FIDELITY_SAMPLE = 16  # examples a reduced-precision evaluation erases in fp32 too
DEFAULT_LR = 2e-5  # the paper's, for its datasets; a local file's is LOCAL_LR (_resolve_lr)
WEIGHT_DECAY = 0.01
# Batches are drawn from pools of this many batches sorted by length (less padding); 1 = plain shuffle.
BUCKET_BATCHES = 50


@dataclass(frozen=True)
class EngineOptions:
    """Cost knobs: rows × padded length per forward batch (the engine's), examples per explain call, and
    the MiB the engine's cache of recent rows may hold (0: no cache; results are the same with any)."""

    token_budget: int = DEFAULT_TOKEN_BUDGET
    explain_batch_rows: int = DEFAULT_EXPLAIN_BATCH_ROWS
    cache_mb: float = DEFAULT_CACHE_MB

    def __post_init__(self) -> None:
        check(
            [
                (self.token_budget >= 1, f"--token-budget must be at least 1, got {self.token_budget}"),
                (
                    self.explain_batch_rows >= 1,
                    f"--explain-batch-rows must be at least 1, got {self.explain_batch_rows}",
                ),
                (self.cache_mb >= 0, f"--cache-mb must be 0 (no cache) or positive, got {self.cache_mb}"),
            ]
        )

    def engine_on(self, backend: Backend, **others: Any) -> MaskBatchEngine:
        """A mask-batch engine on `backend` with these budgets; others: the engine's remaining arguments
        (cache_rows=, keep_signals=), which belong to the caller's protocol, not to the user's options."""
        return MaskBatchEngine(backend, token_budget=self.token_budget, cache_mb=self.cache_mb, **others)


def _content(model: str) -> str:
    """A model's sha256 (see fmm_fast.core.digest); its name where no such path exists (a hub model,
    tiny-roberta, a test double)."""
    return content_id(model) if Path(model).exists() else model


class RunSettings:
    """What every settings dataclass shares: its record form."""

    backend: BackendOptions  # every run has one (a field of each subclass)

    def to_dict(self) -> dict[str, Any]:
        """Every field, nested options as objects: the record's "arguments"."""
        return json.loads(json.dumps(asdict(self)))  # type: ignore[call-overload]  # tuples → lists


class ResumableSettings(RunSettings):
    """Settings of a run that claims an output directory and resumes there: its fingerprint too."""

    def fingerprint_fields(self) -> dict[str, Any]:
        """The fields that decide the run's numbers: all but the engine's and the device's cost knobs, with
        the content digest of each model file in place of its path (a model re-exported to the same path
        is another model) and of each local data file beside its path (an edited file is another dataset)."""
        fields = {name: value for name, value in self.to_dict().items() if name not in ("engine", "backend")}
        if "data" in fields:
            fields["data"] = self.data.fingerprint_fields()  # type: ignore[attr-defined]
        if "model" in fields:
            fields["model"] = _content(fields["model"])
        if "models" in fields:
            fields["models"] = [_content(path) for path in fields["models"]]
        return {**fields, "precision": self.backend.precision, "provider": self.backend.provider}

    def fingerprint(self) -> str:
        key = json.dumps(self.fingerprint_fields(), sort_keys=True)
        return hashlib.sha256(key.encode()).hexdigest()[:16]


class ResolvedMeasures:
    """A run's measures resolved once (fmm_fast.measures.spec), carried as `specs`: `rand` first (unless the
    kind of run runs only what it is given), canonical names, each once. The fields keep what the user gave
    (the record's "arguments"; options as the measures that take them converted them); a typo fails before
    any work. Plug-in measures put the sha256 of their source into the fingerprint
    ("measure_source_sha256"), so a changed measure is another run."""

    measures: tuple[str, ...]
    measure_options: dict[str, object]
    WITH_BASELINE = True

    def _resolve_measures(self) -> None:
        object.__setattr__(self, "measures", tuple(self.measures))  # frozen dataclass: settle in place
        specs = resolve_measures(self.measures, self.measure_options, self.WITH_BASELINE)
        object.__setattr__(self, "measure_options", typed_options(specs, self.measure_options))
        object.__setattr__(self, "_specs", specs)

    @property
    def specs(self) -> tuple[MeasureSpec, ...]:
        """The measures to run, resolved once."""
        return self._specs  # type: ignore[attr-defined]  # set by _resolve_measures

    def fingerprint_fields(self) -> dict[str, Any]:
        """The fields of the kind of run, and the source digest of each plug-in measure (none: no key, so
        the fingerprints of runs of built-in measures are what they were)."""
        fields = super().fingerprint_fields()  # type: ignore[misc]  # ResumableSettings' (the kinds that resume)
        code = {spec.name: spec.source.sha256 for spec in self.specs if spec.plugin}
        return {**fields, "measure_source_sha256": code} if code else fields


@dataclass(frozen=True)
class TrainSettings(ResumableSettings):
    """One masked fine-tuning run (docs/method.md §2).

    model: tiny-roberta, a Hugging Face model name or a local model directory (a fine-tuned sequence
    classifier is continued, its head and labels kept; labels renames its generic LABEL_0, ...). epochs
    None: the dataset's default (the paper's; 2 for a local file); lr None: _resolve_lr's (5e-5 on a local
    file, else 2e-5). max_steps caps the optimizer steps. layers/width only apply to tiny-roberta.
    backend.precision: what the training's forward passes run in, resolved here from fp32|bf16|auto
    (backends.precision.resolve_training_precision), so the record and the fingerprint hold what ran.
    """

    data: DataOptions
    model: str = TINY_ROBERTA
    strategy: str = DEFAULT_STRATEGY
    seed: int = 0
    epochs: int | None = None
    batch_size: int = TRAINING_BATCH_SIZE
    lr: float | None = None
    weight_decay: float = WEIGHT_DECAY
    max_steps: int | None = None
    layers: int = 2
    width: int = 64
    bucket_batches: int = BUCKET_BATCHES
    backend: BackendOptions = field(default_factory=BackendOptions)
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", tuple(self.labels))  # from JSON
        _resolve_lr(self)
        check_strategy(self.strategy)
        check(
            [
                (self.seed >= 0, f"--seed must be at least 0, got {self.seed}"),
                (self.epochs is None or self.epochs >= 1, f"--epochs must be at least 1, got {self.epochs}"),
                (self.batch_size >= 1, f"--batch-size must be at least 1, got {self.batch_size}"),
                (self.lr > 0 and math.isfinite(self.lr), f"--lr must be a positive number, got {self.lr}"),
                (
                    self.max_steps is None or self.max_steps >= 1,
                    f"--max-steps must be at least 1, got {self.max_steps}",
                ),
                (self.layers >= 1, f"--layers must be at least 1, got {self.layers}"),
                # tiny-roberta uses width // 32 attention heads, which must divide the width
                (
                    self.width >= 32 and self.width % (self.width // 32) == 0,
                    f"--width {self.width} does not work; use a multiple of 32",
                ),
                (self.bucket_batches >= 1, f"bucket_batches must be at least 1, got {self.bucket_batches}"),
            ]
        )
        if self.backend.precision != "fp32":  # fp32 runs alike everywhere: no device to look at
            used = resolve_training_precision(self.backend.precision, _cuda_runs(self.backend.device)).used
            object.__setattr__(self, "backend", replace(self.backend, precision=used))


def _resolve_lr(settings: TrainSettings | RoarSettings) -> None:
    """Set settings.lr (in __post_init__: frozen) when not given: the paper's DEFAULT_LR on its datasets,
    LOCAL_LR (what the guides use) on the user's own data, which trains LOCAL_EPOCHS epochs. Resolved in the
    settings, so the record and the fingerprint hold the rate that ran (a registry run's is what it was)."""
    if settings.lr is None:
        lr = LOCAL_LR if is_local_dataset(settings.data.dataset) else DEFAULT_LR
        object.__setattr__(settings, "lr", lr)


def _cuda_runs(device: str) -> bool:
    """Whether PyTorch runs on CUDA for --device `device` (cuda without a CUDA device fails at training)."""
    if device == "cpu":
        return False
    import torch  # only for a reduced precision: settings stay cheap to build

    return torch.cuda.is_available()


@dataclass(frozen=True)
class EvaluationSettings(ResolvedMeasures, ResumableSettings):
    """One seed of recursive erasure (docs/method.md §4–5) of `measures` on a model.

    seed: seed of the `rand` baseline. measure_options: cost knobs passed to every measure (e.g. ig_steps),
    see fmm_fast.measures.registry. fidelity_sample: with a reduced precision, the examples also erased in
    fp32 for the fidelity estimate (protocols.fidelity; 0: none). The fingerprint leaves out the measure
    list (a rerun may add measures), the masked sets' saving, the fidelity sample, the engine and the device.
    """

    model: str
    data: DataOptions
    measures: tuple[str, ...] = ("loo-abs",)
    seed: int = 0
    measure_options: dict[str, object] = field(default_factory=dict)
    save_masked: bool = False
    engine: EngineOptions = field(default_factory=EngineOptions)
    backend: BackendOptions = field(default_factory=BackendOptions)
    fidelity_sample: int = DEFAULT_FIDELITY_SAMPLE

    def __post_init__(self) -> None:
        self._resolve_measures()
        _resolve_precision(self, [self.model])
        _check_fidelity_sample(self.fidelity_sample)
        _check_seed(self.seed)

    def fingerprint_fields(self) -> dict[str, Any]:
        fields = super().fingerprint_fields()
        del fields["measures"], fields["save_masked"], fields["fidelity_sample"]
        return fields


@dataclass(frozen=True)
class AopcSettings(ResolvedMeasures, ResumableSettings):
    """One seed of the peer metrics (docs/method.md §8) of `measures` and of explanation files on a model.

    Every explanation is computed (or read) once on the unmasked input. seed: of the `rand` baseline.
    measure_options, fidelity_sample: as for EvaluationSettings. explanations: .jsonl files of explanations
    made elsewhere (fmm_fast.measures.external). The fingerprint leaves out the measure list (a rerun may
    add measures, as with evaluate), the fidelity sample, the engine and the device, and holds each
    explanations file's content digest.
    """

    model: str
    data: DataOptions
    measures: tuple[str, ...] = ("loo-abs",)
    seed: int = 0
    measure_options: dict[str, object] = field(default_factory=dict)
    explanations: tuple[str, ...] = ()
    engine: EngineOptions = field(default_factory=EngineOptions)
    backend: BackendOptions = field(default_factory=BackendOptions)
    fidelity_sample: int = DEFAULT_FIDELITY_SAMPLE

    def __post_init__(self) -> None:
        self._resolve_measures()
        object.__setattr__(self, "explanations", tuple(self.explanations))
        _resolve_precision(self, [self.model])
        _check_fidelity_sample(self.fidelity_sample)
        _check_seed(self.seed)

    def fingerprint_fields(self) -> dict[str, Any]:
        fields = super().fingerprint_fields()
        del fields["measures"], fields["fidelity_sample"]
        fields["explanations"] = [_content(path) for path in self.explanations]
        return fields


def _check_fidelity_sample(size: int) -> None:
    check([(size >= 0, f"--fidelity-sample must be at least 0 (0: no estimate), got {size}")])


def _check_seed(seed: int, option: str = "--seed") -> None:
    check([(seed >= 0, f"{option} must be at least 0, got {seed}")])


def _resolve_precision(settings: RunSettings, models: Sequence[str]) -> None:
    """Set settings.backend (in __post_init__: frozen) to the precision `models` run in, resolved once."""
    if settings.backend.precision != "fp32":  # fp32 runs alike everywhere: no model to look at
        from fmm_fast.backends.loading import resolve_backend  # tokenizers: not at CLI start-up

        object.__setattr__(settings, "backend", resolve_backend(models, settings.backend))


@dataclass(frozen=True)
class ExplainSettings(ResolvedMeasures, RunSettings):
    """Importance scores of one or more measures for the examples of a split (docs/method.md §3); seed drives
    `rand`. fidelity_sample: as EvaluationSettings'."""

    model: str
    data: DataOptions
    measures: tuple[str, ...] = ("loo-abs",)
    seed: int = 0
    measure_options: dict[str, object] = field(default_factory=dict)
    engine: EngineOptions = field(default_factory=EngineOptions)
    backend: BackendOptions = field(default_factory=BackendOptions)
    fidelity_sample: int = DEFAULT_FIDELITY_SAMPLE

    WITH_BASELINE = False  # explains exactly the measures given

    def __post_init__(self) -> None:
        names = [resolve_measure(name, self.measure_options).name for name in self.measures]
        repeated = sorted({name for name in names if names.count(name) > 1})
        check([(not repeated, f"--measure {', '.join(repeated)} is given twice; give each measure once")])
        self._resolve_measures()
        _resolve_precision(self, [self.model])
        _check_fidelity_sample(self.fidelity_sample)
        _check_seed(self.seed)


@dataclass(frozen=True)
class MasfSettings(ResumableSettings):
    """MaSF p-values versus masking ratio (docs/method.md §6) for one or more models.

    seed: of the calibration and random test masking. measure + evaluation: test the masked sets that
    `fmm-fast evaluate --save-masked` saved for `measure` in the seed directory `evaluation`, instead of
    random masking. calibrations: in-sample (the paper's) and/or split, scored on the same signals;
    calibration_seed picks the split calibration's halves; split_components: principal components per layer
    that the split calibration reduces the signals to, fitted on its half A (0: no reduction).
    fidelity_sample: as EvaluationSettings' (the fingerprint leaves it out).
    """

    models: tuple[str, ...]
    data: DataOptions
    seed: int = 0
    measure: str | None = None
    evaluation: str | None = None
    calibrations: tuple[str, ...] = ("in-sample",)
    calibration_seed: int = 0
    split_components: int = DEFAULT_SPLIT_COMPONENTS
    engine: EngineOptions = field(default_factory=EngineOptions)
    backend: BackendOptions = field(default_factory=BackendOptions)
    fidelity_sample: int = DEFAULT_FIDELITY_SAMPLE

    def __post_init__(self) -> None:
        from fmm_fast.protocols.masf.statistic import (
            check_calibration_method,  # imports Numba: not at CLI start-up
        )

        object.__setattr__(self, "models", tuple(self.models))
        object.__setattr__(self, "calibrations", tuple(dict.fromkeys(self.calibrations)))  # each method once
        for method in self.calibrations:
            check_calibration_method(method)
        check_components(self.split_components)
        _check_seed(self.calibration_seed, "--calibration-seed")
        if (self.measure is None) != (self.evaluation is None):
            raise UserError(
                "--measure and --evaluation go together: the masked sets of MEASURE saved in EVALUATION"
            )
        _resolve_precision(self, self.models)
        _check_fidelity_sample(self.fidelity_sample)
        _check_seed(self.seed)

    def masked_dir(self) -> Path | None:
        """Where the evaluation saved the masked sets of `measure`; None for random masking."""
        if self.evaluation is None or self.measure is None:
            return None
        return measure_entry(Path(self.evaluation) / "masked", self.measure)

    def fingerprint_fields(self) -> dict[str, Any]:
        """RunSettings' fields and the content of the saved masked sets it tests (an evaluation rerun with
        --overwrite saves other sets at the same path)."""
        fields = super().fingerprint_fields()
        del fields["fidelity_sample"]
        masked = self.masked_dir()
        if masked is not None and masked.is_dir():
            fields["masked_sets"] = content_id(masked)
        return fields


DEFAULT_CHECK_RATIOS = tuple(round(0.1 * j, 1) for j in range(11))  # the erasure protocol's ratios
DEFAULT_CALIBRATION_SIZE = 500  # validation examples the check calibrates MaSF on
DEFAULT_CHECK_LIMIT = 200  # test examples the check masks
# what MaSF in `fmm-fast check` calibrates on: the validation split as it is, or masked as masked fine-tuning
# masks it; one default for every model, whatever its folder says about its training
CHECK_CALIBRATIONS = ("unmasked", "masked")
DEFAULT_CHECK_CALIBRATION = "unmasked"


@dataclass(frozen=True)
class CheckSettings(ResumableSettings):
    """`fmm-fast check`: the primary metric and the MaSF split-calibration p-value (docs/method.md §6) of
    one model at every masking ratio of `ratios`, random masking as the `rand` erasure curve does it
    (docs/method.md §4), and the verdict.

    ratios: masked shares of the explained tokens, rising; 0 and 1 are always among them. seed: of the rand
    masking and of the calibration's training-like masking. calibration_size: the first N validation
    examples calibrate (split in halves A and B by calibration_seed; split_components principal components
    per layer fitted on A, None: as many as the model's width and half A allow, at most 32), as they are or
    masked as masked fine-tuning masks them (`calibration`, one of CHECK_CALIBRATIONS). data.limit: the first
    N test examples are masked.
    """

    model: str
    data: DataOptions
    ratios: tuple[float, ...] = DEFAULT_CHECK_RATIOS
    seed: int = 0
    calibration_size: int = DEFAULT_CALIBRATION_SIZE
    calibration_seed: int = 0
    split_components: int | None = None
    calibration: str = DEFAULT_CHECK_CALIBRATION
    engine: EngineOptions = field(default_factory=EngineOptions)
    backend: BackendOptions = field(default_factory=BackendOptions)

    def __post_init__(self) -> None:
        from fmm_fast.protocols.masf.statistic import MIN_CALIBRATION_EXAMPLES  # Numba: not at CLI start-up

        bad = [r for r in self.ratios if not (math.isfinite(r) and 0 <= r <= 1)]
        least = 2 * MIN_CALIBRATION_EXAMPLES  # the split calibration's two halves
        check(
            [
                (not bad, f"--ratios must be shares between 0 and 1, got {', '.join(map(str, bad))}"),
                (
                    self.calibration_size >= least,
                    f"--calibration-size must be at least {least} ({least // 2} per half of the split "
                    f"calibration), got {self.calibration_size}",
                ),
                (
                    self.calibration in CHECK_CALIBRATIONS,
                    f"--calibration must be one of {', '.join(CHECK_CALIBRATIONS)}, got {self.calibration!r}",
                ),
            ]
        )
        object.__setattr__(self, "ratios", tuple(sorted({0.0, 1.0, *(float(r) for r in self.ratios)})))
        if self.split_components is not None:
            check_components(self.split_components)
        _check_seed(self.seed)
        _check_seed(self.calibration_seed, "--calibration-seed")
        _resolve_precision(self, [self.model])


ROAR_MAX_STEPS = 10  # the reference's 10% steps


@dataclass(frozen=True)
class RoarSettings(ResolvedMeasures, ResumableSettings):
    """Recursive ROAR (erasure with retraining at every step) of `measures` for `seeds`.

    model: the pretrained start every step's model is fine-tuned from (as TrainSettings.model). steps K:
    the curve's ratios are j/K, j = 0..K. recursive False: every step's ranking comes from the step-0 model
    on the unmasked data. strategy, epochs, batch_size, lr, max_steps, layers, width: every training's (see
    TrainSettings). erasure: also the no-retraining recursive erasure of the step-0 model on the test split.
    step0_trainings: finished `fmm-fast train` outputs, each taken as step 0 of the seed it was trained for
    instead of training that model again (it must have training(seed)'s settings: the model this run would
    train). data.limit keeps the first N test examples. backend.precision: what every training's forward
    passes run in, resolved as TrainSettings resolves it; the explanations and the erasure run in fp32
    (explaining_backend). The fingerprint leaves out the measures, the seeds and `erasure` (a rerun may add
    measures or seeds; each (seed, measure) has its own steps), step0_trainings, the engine and the device.
    """

    data: DataOptions
    model: str = TINY_ROBERTA
    measures: tuple[str, ...] = ("grad-l2",)
    seeds: tuple[int, ...] = (0,)
    strategy: str = "plain"
    recursive: bool = True
    steps: int = ROAR_MAX_STEPS
    epochs: int | None = None
    batch_size: int = TRAINING_BATCH_SIZE
    lr: float | None = None
    max_steps: int | None = None
    layers: int = 2
    width: int = 64
    erasure: bool = True
    step0_trainings: tuple[str, ...] = ()
    measure_options: dict[str, object] = field(default_factory=dict)
    engine: EngineOptions = field(default_factory=EngineOptions)
    backend: BackendOptions = field(default_factory=BackendOptions)

    def __post_init__(self) -> None:
        self._resolve_measures()
        object.__setattr__(self, "seeds", tuple(dict.fromkeys(self.seeds)))
        _resolve_lr(self)
        check(
            [
                (
                    1 <= self.steps <= ROAR_MAX_STEPS,
                    f"--steps must be between 1 and {ROAR_MAX_STEPS}, got {self.steps}",
                ),
                (bool(self.seeds), "give at least one --seed"),
                (all(s >= 0 for s in self.seeds), f"seeds must be at least 0, got {list(self.seeds)}"),
            ]
        )
        gradient = [spec.name for spec in self.specs if spec.needs_gradients]
        if Path(self.model).suffix == ".onnx":
            needs = f"; the gradient measures ({', '.join(gradient)}) need PyTorch too" if gradient else ""
            raise UserError(
                "ROAR fine-tunes a new model from --model at every step, which an .onnx file cannot be"
                f"{needs}; give a base model (minilm, tiny-roberta, a Hugging Face name or a model directory)"
            )
        # the training options' own checks, and the training precision resolved once
        object.__setattr__(self, "backend", self.training(0).backend)

    @property
    def explaining_backend(self) -> BackendOptions:
        """The backend of the step models' explanations and the erasure: fp32 whatever the training ran
        in, so a reduced training precision changes the models, not how they are ranked and scored."""
        return replace(self.backend, precision="fp32")

    def training(self, seed: int) -> TrainSettings:
        """The settings of every model this run fine-tunes for `seed` (the data given to train() directly)."""
        return TrainSettings(
            self.data.select(unit=DEFAULT_UNIT),  # training masks tokens: a step-0 model of any unit
            model=self.model,
            strategy=self.strategy,
            seed=seed,
            epochs=self.epochs,
            batch_size=self.batch_size,
            lr=self.lr,
            max_steps=self.max_steps,
            layers=self.layers,
            width=self.width,
            backend=self.backend,
        )

    def ratios(self) -> list[float]:
        """The curve's ratios j/K, j = 0..K, as fractions."""
        return [j / self.steps for j in range(self.steps + 1)]

    def fingerprint_fields(self) -> dict[str, Any]:
        fields = super().fingerprint_fields()
        del fields["measures"], fields["seeds"], fields["erasure"], fields["step0_trainings"]
        return fields
