"""The embedded demo: the whole method, offline, on a laptop CPU, in minutes.

masked fine-tuning of a pretrained MiniLM on movie-review sentences → ONNX export → recursive erasure of
seven measures (beam on a smaller subset) → MaSF → one table. Every step writes its usual files, and a
rerun skips a step whose run marker says it finished with the same fingerprint (fmm_fast.core.outputs): a
changed setting redoes the steps it changes, and those after them whose inputs changed.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import LoadedModel, load_model
from fmm_fast.core.machine import machine_record
from fmm_fast.core.outputs import claim_directory, finish_run, finished_run
from fmm_fast.core.progress import progress_bar
from fmm_fast.core.records import read_record, versions, write_record
from fmm_fast.core.settings import EvaluationSettings, MasfSettings, TrainSettings
from fmm_fast.data.options import DataOptions, open_split
from fmm_fast.export.onnx_export import export_onnx
from fmm_fast.measures.spec import resolve_measure
from fmm_fast.protocols.curve_stats import RATIOS
from fmm_fast.protocols.erasure import RUN_FILES, RUN_KIND, evaluate_model
from fmm_fast.protocols.masf.run import masf_record, run_masf
from fmm_fast.protocols.masf.statistic import CALIBRATION_METHODS
from fmm_fast.report.plots import plot_p_values, plot_run_curves
from fmm_fast.training.base_models import MINILM
from fmm_fast.training.train import train

DEMO_MEASURES = ["grad-l2", "inp-grad-abs", "int-grad-abs", "loo-abs", "loo-sign"]
BEAM_MEASURE = "beam"


@dataclass
class DemoConfig:
    """Sizes of the demo; `full()` scales it to the whole split."""

    dataset: str = "movie-snippets"
    model: str = MINILM
    lr: float = 5e-5
    epochs: int = 1
    train_size: int | None = 3000  # train + validation sentences (of 8,254)
    test_size: int | None = None
    eval_limit: int = 100  # test sentences for the six recursive curves
    beam_limit: int = 20  # test sentences for beam search (about 2,000 forward passes each)
    seed: int = 0

    def data(self, limit: int | None = None) -> DataOptions:
        """The test split as training saw the dataset (same sizes, data seed 0)."""
        return DataOptions(self.dataset, "test", limit, size=self.train_size, test_size=self.test_size)

    def train_settings(self) -> TrainSettings:
        return TrainSettings(
            self.data(),
            model=self.model,
            seed=self.seed,
            epochs=self.epochs,
            lr=self.lr,
        )

    @classmethod
    def full(cls) -> DemoConfig:
        return cls(epochs=3, train_size=None, eval_limit=917, beam_limit=100)


DEMO_FILES = ("train", "model.onnx", "curves", "beam", "masf.json", "masf.png", "curves.png", "demo.json")


def run_demo(out: Path, config: DemoConfig) -> dict:
    """Run every step into `out` (claimed as a demo's: a rerun reuses the steps that finished with the same
    settings and redoes the others); returns the summary record (also out/demo.json)."""
    claim_directory(out, "demo", {}, files=DEMO_FILES)  # its steps' markers hold their settings
    steps: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        steps[name] = round(time.perf_counter() - clock, 1)
        print(f"demo: {name} done in {steps[name]} s", file=sys.stderr)
        clock = time.perf_counter()

    train_settings, onnx_path = config.train_settings(), out / "model.onnx"
    if not finished_run(out / "train", "train", train_settings.fingerprint_fields()):
        onnx_path.unlink(missing_ok=True)  # exported from the model this step replaces
        train(train_settings, out / "train", overwrite=True)
    lap("train")
    if not onnx_path.is_file():  # a file output: its marker is the training step's, which removes it
        export_onnx(out / "train" / "model", onnx_path)
    lap("export")
    loaded = load_model(onnx_path)
    engine = MaskBatchEngine(loaded.backend)
    curves = {}
    for name, measures, limit in [
        ("curves", DEMO_MEASURES, config.eval_limit),
        ("beam", [BEAM_MEASURE], config.beam_limit),
    ]:
        settings = EvaluationSettings(str(onnx_path), config.data(limit), tuple(measures), config.seed)
        curves[name] = _evaluation(loaded, engine, settings, out / name)
        lap(f"evaluate-{name}")
    # Calibrate on the whole validation split (disjoint from train whatever the size): a capped one of a
    # few hundred sentences saturates MaSF's in-sample calibration (MaSFCalibration.p_value_floor). Both
    # calibrations score the same signals: the paper's in-sample one and the valid split one (method.md §6).
    masf_settings = MasfSettings(
        (str(onnx_path),),
        replace(config.data(config.eval_limit), size=None),
        config.seed,
        calibrations=CALIBRATION_METHODS,
    )
    masf_clock = time.perf_counter()
    masf = run_masf(loaded, masf_settings)
    labelled = {f"masked, {m}": r for m, r in masf.items()}
    write_record(out / "masf.json", masf_record(masf_settings, labelled, time.perf_counter() - masf_clock))
    plot_p_values(
        {label: (RATIOS.tolist(), [s["simes"] for s in r["per_ratio"]]) for label, r in labelled.items()},
        out / "masf.png",
    )
    plot_run_curves([out / "curves" / "result.json"], out / "curves.png")
    lap("masf")
    summary = {
        "config": config.__dict__,
        "steps_seconds": steps,
        "backend": loaded.backend.name,
        "measures": {
            **curves["curves"]["measures"],
            BEAM_MEASURE: curves["beam"]["measures"][resolve_measure(BEAM_MEASURE).name],
        },
        "beam_rand": curves["beam"]["measures"]["rand"],
        "masf": {m: {s["ratio"]: s["simes"] for s in r["per_ratio"]} for m, r in masf.items()},
        "masf_calibration": {m: r["calibration"] for m, r in masf.items()},
        "versions": versions(),
        "machine": machine_record(),
    }
    write_record(out / "demo.json", summary)
    finish_run(out)
    return summary


def _evaluation(
    loaded: LoadedModel, engine: MaskBatchEngine, settings: EvaluationSettings, out: Path
) -> dict:
    """The result record of an evaluation step: read back when `out` holds it finished with these settings
    (its fingerprint leaves out the measures, so they are checked too), else run (resuming a run of these
    same settings, replacing one of others)."""
    if finished_run(out, RUN_KIND, settings.fingerprint_fields()):
        record = read_record(out / "result.json")
        if {spec.name for spec in settings.specs} <= set(record["measures"]):
            return record
    claim_directory(out, RUN_KIND, settings.fingerprint_fields(), overwrite=True, files=RUN_FILES)
    dataset, encoded = open_split(loaded, settings.data)
    return evaluate_model(loaded, dataset, encoded, settings, out, engine, progress_factory=progress_bar)
