"""The plan of the reproduction study: its scales (datasets, seeds, sizes) and the steps each one runs."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from reproduce_steps import Step, fmm_fast_command

from fmm_fast.backends.options import BackendOptions
from fmm_fast.core.records import read_record
from fmm_fast.core.settings import (
    ROAR_MAX_STEPS,
    EvaluationSettings,
    MasfSettings,
    RoarSettings,
    TrainSettings,
)
from fmm_fast.data.options import DataOptions
from fmm_fast.measures.registry import PAPER_BEAM, measure_names
from fmm_fast.protocols.erasure import saved_unmasked_scores
from fmm_fast.protocols.masf.components import DEFAULT_SPLIT_COMPONENTS
from fmm_fast.protocols.masf.statistic import CALIBRATION_METHODS, calibration_variant
from fmm_fast.protocols.supporting_facts import run_supporting_overlap
from fmm_fast.report.order import CANONICAL_STRATEGIES
from fmm_fast.training.base_models import MINILM, TINY_ROBERTA, pretrained_minilm

CURVE_MEASURES = [m for m in measure_names() if m not in ("rand", PAPER_BEAM)]  # rand always runs
MASF_STRATEGIES = ("plain", "masked")
MASF_CALIBRATIONS = CALIBRATION_METHODS  # both, side by side: the paper's in-sample and the valid split


@dataclass(frozen=True)
class DatasetPlan:
    """One dataset of the study. None for a size or limit means the whole split (or its default size)."""

    dataset: str
    model: str  # MINILM or TINY_ROBERTA
    epochs: int
    lr: float
    size: int | None  # train + validation examples
    test_size: int | None  # test examples (bAbI: generated; others: a seeded subset)
    eval_limit: int | None  # first test examples of the nine recursive curves
    beam_limit: int | None  # first test examples for beam search
    masf_limit: int | None  # test examples MaSF scores at every ratio
    layers: int = 2  # tiny-roberta only
    width: int = 64  # tiny-roberta only

    @property
    def split_components(self) -> int:
        """MaSF's split reduction per layer: the default, at most half a tiny-roberta's width (it must stay
        below the hidden size)."""
        if self.model == TINY_ROBERTA:
            return min(DEFAULT_SPLIT_COMPONENTS, self.width // 2)
        return DEFAULT_SPLIT_COMPONENTS

    @property
    def has_supporting_facts(self) -> bool:
        return self.dataset.startswith("babi-")

    def data_arguments(self, whole_validation: bool = False) -> list[str]:
        """--dataset/--size/--test-size, shared by every command so all of them see the same splits.

        whole_validation drops --size (MaSF): the calibration takes the whole validation split, still
        disjoint from train (cap_splits subsets train and validation separately); a capped one of a few
        hundred examples saturates the in-sample calibration (its p-value floor exceeds 0.05)."""
        arguments = ["--dataset", self.dataset]
        if self.size is not None and not whole_validation:
            arguments += ["--size", str(self.size)]
        if self.test_size is not None:
            arguments += ["--test-size", str(self.test_size)]
        return arguments

    def data(self, limit: int | None = None, whole_validation: bool = False) -> DataOptions:
        """The data options the commands build from data_arguments() (and --limit)."""
        size = None if whole_validation else self.size
        return DataOptions(self.dataset, "test", limit, size, self.test_size)


@dataclass(frozen=True)
class RoarPlan:
    """What the chains' Recursive ROAR step runs (`fmm-fast roar`, plain retraining as the reference does).

    measures: besides `rand`, which roar always runs as the baseline. steps K: ratios j/K. epochs: of every
    retraining; None: the dataset's own."""

    measures: tuple[str, ...] = ("grad-l2",)  # the paper's comparison figure is Grad-L2's
    steps: int = ROAR_MAX_STEPS
    epochs: int | None = None

    def epochs_for(self, plan: DatasetPlan) -> int:
        return plan.epochs if self.epochs is None else self.epochs


@dataclass(frozen=True)
class Scale:
    """train_precision: what every training's forward passes run in (`fmm-fast train --precision`),
    resolved (fp32, bf16 or fp16); the ROAR step's trainings run in it too. roar: what that step runs.
    measures: your own measures (`--measure` locators: package.module:Name, /absolute/file.py:Name or an
    entry point's name), erased beside the built-in ones in each chain's "curves" evaluation."""

    name: str
    seeds: tuple[int, ...]
    datasets: tuple[DatasetPlan, ...]
    supporting_ks: tuple[int, ...] = (1, 5, 10)
    train_precision: str = "fp32"
    roar: RoarPlan = RoarPlan()
    measures: tuple[str, ...] = ()


def _babi(dataset: str, **settings) -> DatasetPlan:
    return DatasetPlan(dataset, TINY_ROBERTA, lr=1e-3, **settings)


# Recursive ROAR, the last step of every chain, costs per dataset × seed at K = 10 steps: 20 trainings (step
# 0, the fully masked step, 9 per measure for rand and grad-l2) of the chain's recipe, 9 grad-l2 explanations
# of all three splits in fp32, and the step-0 model's erasure on the test split. The cost lines below are
# ESTIMATES, not measurements of ROAR: training time from the same scale's own training steps (steps.json),
# grad-l2 at 13 ms per movie sentence (`fmm-fast roar` on movie-snippets: 17.5 s per step on 1,300), 67 ms per
# bAbI-1 question (`fmm-fast explain -m grad-l2` of the medium plain model on 200 test questions, fp32, one
# busy core) and, guessed, twice that per longer bAbI-2 question; one core, one chain at a time (--workers N
# runs N chains at once).
SCALES = {
    "tiny": Scale(
        "tiny",
        seeds=(0, 1),
        datasets=(
            DatasetPlan(
                "movie-snippets", MINILM, epochs=1, lr=5e-5, size=200, test_size=40,
                eval_limit=4, beam_limit=2, masf_limit=16,
            ),
            # the one the tests and `bench/run --quick` run (test_reproduce_ray.py three times): the fewest
            # examples that run every step (200: a validation split of 40 for model selection)
            _babi("babi-1", epochs=2, size=200, test_size=20, eval_limit=4, beam_limit=2, masf_limit=8,
                  layers=1, width=32),
            _babi("babi-2", epochs=2, size=300, test_size=40, eval_limit=8, beam_limit=2, masf_limit=16,
                  layers=1, width=32),
        ),
        roar=RoarPlan(steps=2, epochs=1),  # 4 one-epoch trainings per chain: checks the step, seconds
    ),
    # Sized from one quiet 2-core run of every step (MiniLM 0.33 s per step, tiny-roberta 0.016 s per step
    # on babi-1 and 0.036 s on babi-2; MiniLM curves 3.5 s and beam 2.9 s per example): about 46 minutes,
    # of which training 28. babi-1 reaches about 0.55 accuracy in 5 epochs (majority 0.18); babi-2 needs
    # 8+ epochs (another ~12 minutes) to pass the 0.5 convergence threshold, so here it stays below it and
    # the report drops its seeds from the RACU and overlap tables.
    # ROAR (ESTIMATE; trainings of 60-100 s on movie-snippets, 130-180 s on bAbI-1, 225-240 s on bAbI-2):
    # per seed 25-40 min on movie-snippets, 70-90 min on bAbI-1, about 2 h on bAbI-2; all 9 chains about 12 h.
    "small": Scale(
        "small",
        seeds=(0, 1, 2),
        datasets=(
            DatasetPlan(
                "movie-snippets", MINILM, epochs=2, lr=5e-5, size=1500, test_size=300,
                eval_limit=30, beam_limit=8, masf_limit=150,
            ),
            # MiniLM, not the from-scratch RoBERTa: that one plateaus near 55% on bAbI-1 at this budget.
            # bAbI passages are ~3× longer than snippets: beam (≈ B·n²/2 passes) runs on 3 examples.
            DatasetPlan(
                "babi-1", MINILM, epochs=3, lr=5e-5, size=2000, test_size=300,
                eval_limit=40, beam_limit=3, masf_limit=200,
            ),
            DatasetPlan(
                "babi-2", MINILM, epochs=3, lr=5e-5, size=2000, test_size=300,
                eval_limit=40, beam_limit=2, masf_limit=200,
            ),
        ),
    ),
    # bAbI at the paper's data size (10,000 generated questions: 8,000 train, 2,000 validation), where
    # MiniLM learns bAbI-1: masked fine-tuning at lr 1e-4 reached 98.1% unmasked validation accuracy after one
    # epoch and 100% after two (seed 0, one core, fp32, 6.3 min per epoch). bAbI-2 did not converge in 6
    # epochs (bf16, 5.9 min per epoch: validation 71.0% after six, still rising), so it takes the paper's 20
    # epochs: the masked seed-0 model passed 90% validation at epoch 17 and ended at 95.8% (test 95.3%), 133
    # min on one core in bf16; its 9 models are a job for a GPU or a cluster. Curves on 100 test questions,
    # beam on 20, MaSF on 300 calibrated on the whole validation split (2,000).
    # ROAR at 20% steps (half the 10% steps' cost). MEASURED on bAbI-1 seed 0 (one core, the other busy): 89
    # min, of which 10 trainings of 2 epochs in bf16 65 min, grad-l2 on 11,000 questions 3.8-4.0 min per step,
    # the no-retraining erasure 6.6 min; with the chain's plain model as step 0 (--step0) one training less.
    # bAbI-2 (ESTIMATE): 9 trainings of about 2 h at 20 epochs, about 18 h per seed: a GPU job (or --no-roar).
    "medium": Scale(
        "medium",
        seeds=(0, 1, 2),
        datasets=tuple(
            DatasetPlan(
                babi, MINILM, epochs=epochs, lr=1e-4, size=10_000, test_size=1_000,
                eval_limit=100, beam_limit=20, masf_limit=300,
            )
            for babi, epochs in (("babi-1", 2), ("babi-2", 20))
        ),
        roar=RoarPlan(steps=5),  # 20% steps: half the 10% steps' cost (see above)
    ),
    # The paper's data sizes and epochs (method.md §2; movie-snippets takes the registry's 10), its learning
    # rate for the pretrained model, the whole test split everywhere.
    # ROAR (ESTIMATE): 20 trainings of 10-20 epochs per seed, each hours on a CPU: days per chain, GPU only.
    "paper": Scale(
        "paper",
        seeds=(0, 1, 2),
        datasets=(
            DatasetPlan(
                "movie-snippets", MINILM, epochs=10, lr=2e-5, size=None, test_size=None,
                eval_limit=None, beam_limit=None, masf_limit=None,
            ),
            *(
                DatasetPlan(
                    babi, MINILM, epochs=20, lr=2e-5, size=None, test_size=None,
                    eval_limit=None, beam_limit=None, masf_limit=None,
                )
                for babi in ("babi-1", "babi-2")
            ),
        ),
    ),
}  # fmt: skip


def _has_measures(measures: Sequence[str], record: str = "") -> Callable[[Path], bool]:
    """Whether the record at output/record (the output itself for "") holds every measure."""
    return lambda output: set(measures) <= set(read_record(output / record if record else output)["measures"])


def _has_calibrations(split_components: int) -> Callable[[Path], bool]:
    """A masf.json with every calibration of MASF_CALIBRATIONS in its current variant with this reduction
    (an older one, e.g. from before exact ties or the reduction, is redone)."""

    def complete(path: Path) -> bool:
        if not path.is_file():
            return False
        calibrations = {
            (model["calibration"].get("method"), model["calibration"].get("variant"))
            for model in read_record(path)["models"].values()
        }
        wanted = {(method, calibration_variant(method, split_components)) for method in MASF_CALIBRATIONS}
        return wanted <= calibrations

    return complete


def _roar_complete(measures: Sequence[str], steps: int) -> Callable[[Path], bool]:
    """A ROAR output whose result.json says every step ran (the erasure too) for `rand` and every measure
    of `measures`, at K = `steps` (a result lacking a planned measure is resumed: roar adds it)."""

    def complete(output: Path) -> bool:
        path = output / "result.json"
        if not path.is_file():
            return False
        result = read_record(path)
        planned = {"rand", *measures} <= set(result["measures"])
        return planned and result["complete"] and len(result["ratios"]) == steps + 1

    return complete


def _limited(limit: int | None) -> list[str]:
    return [] if limit is None else ["--limit", str(limit)]


@dataclass(frozen=True)
class Chain:
    """The steps of one dataset × seed in order (train, export, evaluate, MaSF, overlap, Recursive ROAR):
    they depend on one another but on no other chain's, so chains can run at once (bench/reproduce
    --workers)."""

    plan: DatasetPlan
    seed: int
    steps: list[Step]

    @property
    def name(self) -> str:
        return f"{self.plan.dataset} seed {self.seed}"


@dataclass
class Study:
    """The steps of one scale and where they write. Every path is absolute: ONNX files record their
    checkpoint's path, which gradient measures load."""

    scale: Scale
    root: Path

    def __post_init__(self) -> None:
        self.root = self.root.resolve()
        if any(plan.model == MINILM for plan in self.scale.datasets):
            pretrained_minilm()  # missing package: fail before the first step, not in it

    # -- paths -------------------------------------------------------------------------------------
    def train_dir(self, dataset: str, strategy: str, seed: int) -> Path:
        return self.root / "train" / dataset / strategy / f"seed-{seed}"

    def onnx(self, dataset: str, strategy: str, seed: int) -> Path:
        return self.root / "onnx" / f"{dataset}-{strategy}-seed-{seed}.onnx"

    def evaluation(self, dataset: str, seed: int, part: str) -> Path:
        """part "curves" (nine measures) or "curves_beam"; `fmm-fast evaluate` adds seed-S/result.json.

        The report takes a seed's unmasked score from the part on the most examples, "curves".
        """
        return self.root / "evaluate" / dataset / f"seed-{seed}" / part

    def masf_dir(self, dataset: str, seed: int) -> Path:
        return self.root / "masf" / dataset / f"seed-{seed}"

    def supporting_file(self, dataset: str, seed: int) -> Path:
        return self.root / "supporting" / f"{dataset}-seed-{seed}.json"

    @property
    def roar_root(self) -> Path:
        return self.root / "roar"

    def roar_dir(self, dataset: str, seed: int) -> Path:
        """`fmm-fast roar --out` of one dataset × seed (it adds seed-S/ and result.json)."""
        return self.roar_root / dataset / f"seed-{seed}"

    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    # -- the plan ----------------------------------------------------------------------------------
    def steps(self, masf_only: bool = False, roar: bool = True) -> list[Step]:
        """Every step, chain by chain; masf_only: only training, export and MaSF of the plain and masked
        models; roar False: without the Recursive ROAR steps."""
        return [step for chain in self.chains(masf_only, roar) for step in chain.steps]

    def chains(self, masf_only: bool = False, roar: bool = True) -> list[Chain]:
        """One chain per dataset × seed, datasets in the scale's order."""
        return [
            self.chain(plan, seed, masf_only, roar)
            for plan in self.scale.datasets
            for seed in self.scale.seeds
        ]

    def chain(self, plan: DatasetPlan, seed: int, masf_only: bool = False, roar: bool = True) -> Chain:
        steps = self.training_steps(plan, MASF_STRATEGIES if masf_only else CANONICAL_STRATEGIES, seed)
        if not masf_only:
            steps += self.evaluation_steps(plan, seed)
        steps.append(self.masf_step(plan, seed))
        if plan.has_supporting_facts and not masf_only:
            steps.append(self.supporting_step(plan, seed))
        if roar and not masf_only:  # last: a study run before it existed resumes and only appends it
            steps.append(self.roar_step(plan, seed))
        return Chain(plan, seed, steps)

    def recipe_arguments(self, plan: DatasetPlan) -> list[str]:
        """The training options every fine-tuning of the chain shares beyond the data, epochs and lr: the
        scale's precision and tiny-roberta's size."""
        argv = []
        if self.scale.train_precision != "fp32":
            argv += ["--precision", self.scale.train_precision]
        if plan.model == TINY_ROBERTA:
            argv += ["--layers", str(plan.layers), "--width", str(plan.width)]
        return argv

    def training_steps(self, plan: DatasetPlan, strategies: Sequence[str], seed: int) -> list[Step]:
        steps, exports = [], []
        for strategy in strategies:
            out = self.train_dir(plan.dataset, strategy, seed)
            argv = ["train", *plan.data_arguments(), "--model", plan.model]
            argv += ["--strategy", strategy, "--seed", str(seed), "--epochs", str(plan.epochs)]
            argv += ["--lr", str(plan.lr), "--out", str(out), *self.recipe_arguments(plan)]
            settings = TrainSettings(
                plan.data(), plan.model, strategy, seed, plan.epochs, lr=plan.lr, layers=plan.layers,
                width=plan.width, backend=BackendOptions(precision=self.scale.train_precision),
            )  # fmt: skip
            onnx = self.onnx(plan.dataset, strategy, seed)
            steps.append(
                Step(
                    f"train {plan.dataset} {strategy} seed {seed}",
                    self.shown(argv),
                    fmm_fast_command(argv),
                    out,
                    claim=lambda settings=settings: ("train", settings.fingerprint_fields()),
                    clear=(out, onnx),  # the export of the model it replaces
                    resumable=True,  # a killed training resumes after its last finished epoch
                )
            )
            if strategy in MASF_STRATEGIES:
                argv = ["export", "--model", str(out / "model"), "--out", str(onnx)]
                derived = [self.supporting_file(plan.dataset, seed)] if strategy == "masked" else []
                exports.append(
                    Step(
                        f"export {plan.dataset} {strategy} seed {seed}",
                        self.shown(argv),
                        fmm_fast_command(argv),
                        onnx,
                        clear=tuple(derived),  # the overlap record of the model it replaces
                    )
                )
        return steps + exports

    def evaluation_steps(self, plan: DatasetPlan, seed: int) -> list[Step]:
        onnx = self.onnx(plan.dataset, "masked", seed)
        steps = []
        for part, measures, limit in (
            ("curves", [*CURVE_MEASURES, *self.scale.measures], plan.eval_limit),
            ("curves_beam", [PAPER_BEAM], plan.beam_limit),
        ):
            out = self.evaluation(plan.dataset, seed, part)
            argv = ["evaluate", "--model", str(onnx), *plan.data_arguments(), *_limited(limit)]
            argv += ["--seed", str(seed), "--out", str(out)]
            for measure in measures:
                argv += ["-m", measure]
            settings = EvaluationSettings(str(onnx), plan.data(limit), tuple(measures), seed)
            steps.append(
                Step(
                    f"evaluate {plan.dataset} masked seed {seed}: {', '.join(measures)}",
                    self.shown(argv),
                    fmm_fast_command(argv),
                    out / f"seed-{seed}",
                    claim=lambda settings=settings: ("evaluate", settings.fingerprint_fields()),
                    # the fingerprint leaves the measures out; the record keys them by their own names
                    complete=_has_measures([spec.name for spec in settings.specs], "result.json"),
                    clear=(out,),
                    resumable=True,
                )
            )
        return steps

    def masf_step(self, plan: DatasetPlan, seed: int) -> Step:
        models = [self.onnx(plan.dataset, strategy, seed) for strategy in MASF_STRATEGIES]
        out = self.masf_dir(plan.dataset, seed)
        argv = ["masf", *[a for m in models for a in ("--model", str(m))], *plan.data_arguments(True)]
        argv += [*_limited(plan.masf_limit), "--seed", str(seed), "--out", str(out)]
        argv += [a for method in MASF_CALIBRATIONS for a in ("--calibration", method)]
        argv += ["--split-components", str(plan.split_components)]
        data = plan.data(plan.masf_limit, whole_validation=True)
        settings = MasfSettings(
            tuple(map(str, models)),
            data,
            seed,
            calibrations=MASF_CALIBRATIONS,
            split_components=plan.split_components,
        )
        complete = _has_calibrations(plan.split_components)
        return Step(
            f"masf {plan.dataset} seed {seed}",
            self.shown(argv),
            fmm_fast_command(argv),
            out,
            claim=lambda: ("masf", settings.fingerprint_fields()),
            complete=lambda output: complete(output / "masf.json"),
            clear=(out,),
        )

    def supporting_plan(self, plan: DatasetPlan) -> list[tuple[str, int | None]]:
        return [(m, plan.beam_limit if m == PAPER_BEAM else plan.eval_limit) for m in measure_names()]

    def supporting_step(self, plan: DatasetPlan, seed: int) -> Step:
        onnx = self.onnx(plan.dataset, "masked", seed)
        out = self.supporting_file(plan.dataset, seed)
        data = DataOptions(plan.dataset, size=plan.size, test_size=plan.test_size)
        measure_plan = [(m, sys.maxsize if n is None else n) for m, n in self.supporting_plan(plan)]
        ks = list(self.scale.supporting_ks)
        # beam's ranking of the unmasked questions is the evaluation's (same model, questions, seed and gold
        # label): reused, not searched again (beam is most of this step's cost)
        beam_evaluation = self.evaluation(plan.dataset, seed, "curves_beam") / f"seed-{seed}"

        def run() -> None:
            known = {PAPER_BEAM: saved_unmasked_scores(beam_evaluation, PAPER_BEAM)}
            run_supporting_overlap(onnx, data, measure_plan, ks, out, seed=seed, known_scores=known)

        command = (
            "python -c 'from fmm_fast.data.options import DataOptions; "
            "from fmm_fast.protocols.erasure import saved_unmasked_scores; "
            "from fmm_fast.protocols.supporting_facts import run_supporting_overlap; "
            f'known = {{"{PAPER_BEAM}": saved_unmasked_scores("{beam_evaluation}", "{PAPER_BEAM}")}}; '
            f'run_supporting_overlap("{onnx}", {data!r}, {self.supporting_plan(plan)!r}, {ks}, '
            f'"{out}", seed={seed}, known_scores=known)\''
        )
        names = [m for m, _ in measure_plan]
        return Step(
            f"supporting-fact overlap {plan.dataset} seed {seed}",
            command,
            run,
            out,
            complete=_has_measures(names),
            resumable=True,
        )

    def roar_step(self, plan: DatasetPlan, seed: int) -> Step:
        """Recursive ROAR of the scale's RoarPlan with plain retraining (the reference's) on the chain's
        data, recipe and precision. Its step-0 model is the chain's plain model when ROAR trains for the
        chain's epochs (the same training: taken, not trained again). Without --workers: the chain may
        itself be a Ray task. It resumes step by step, and adds measures the plan gained."""
        roar = self.scale.roar
        out = self.roar_dir(plan.dataset, seed)
        epochs = roar.epochs_for(plan)
        step0 = [self.train_dir(plan.dataset, "plain", seed)] if epochs == plan.epochs else []
        argv = ["roar", *plan.data_arguments(), "--model", plan.model, "--strategy", "plain"]
        argv += ["--seed", str(seed), "--epochs", str(epochs), "--lr", str(plan.lr)]
        argv += ["--steps", str(roar.steps), *(a for measure in roar.measures for a in ("-m", measure))]
        argv += [*(a for path in step0 for a in ("--step0", str(path)))]
        argv += ["--out", str(out), *self.recipe_arguments(plan)]
        settings = RoarSettings(
            plan.data(), plan.model, roar.measures, (seed,), "plain", steps=roar.steps, epochs=epochs,
            lr=plan.lr, layers=plan.layers, width=plan.width, step0_trainings=tuple(map(str, step0)),
            backend=BackendOptions(precision=self.scale.train_precision),
        )  # fmt: skip
        return Step(
            f"recursive roar {plan.dataset} seed {seed}: {', '.join(roar.measures)}",
            self.shown(argv),
            fmm_fast_command(argv),
            out,
            claim=lambda: ("roar", settings.fingerprint_fields()),
            complete=_roar_complete(roar.measures, roar.steps),
            clear=(out,),
            resumable=True,
        )

    def report_step(self, roar: bool = True) -> Step:
        """`fmm-fast report` of every evaluation and, when the chains run ROAR or ran it before, of the ROAR
        runs (beside the masked model's erasure)."""
        inputs = [self.root / "evaluate"]
        if roar or self.roar_root.is_dir():
            inputs.append(self.roar_root)
        argv = ["report", *map(str, inputs), "--out", str(self.report_dir)]
        # Always rerun, afresh: it is cheap and must see every evaluation (and the ROAR runs, once a study
        # reported without them has run them: another report's inputs, which `fmm-fast report` refuses).
        return Step("report", self.shown(argv), fmm_fast_command(argv), self.report_dir,
                    complete=lambda _: False, clear=(self.report_dir,))  # fmt: skip

    def shown(self, argv: list[str]) -> str:
        return "fmm-fast " + " ".join(argv)
