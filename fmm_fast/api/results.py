"""Results as objects: what a run's record files hold, read from the folder the run wrote, with a table (the
report's own), a figure, a pandas frame and their notebook display.

Every result keeps its folder (`path`: OUT, or the temporary folder of a run given out=None), so the
report's loaders read it as `fmm-fast report` would; `save(dir)` writes its records to another folder
and `load(dir)` reads them back, both through core.records. pandas and matplotlib are imported on use.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from fmm_fast.api.arguments import checked_arguments
from fmm_fast.core.errors import UserError
from fmm_fast.core.outputs import claim_directory, finish_run, output_lock, read_marker
from fmm_fast.core.reading import read_checked
from fmm_fast.core.records import write_record

MODEL_DIR = "model"  # training.train.MODEL_DIR, the checkpoint folder (that module imports PyTorch)

if TYPE_CHECKING:
    import pandas
    from matplotlib.figure import Figure

    from fmm_fast.report.pages.markup import Html


class RunResult(ABC):
    """The records of one run: `records` maps each record file's path under `path` to what it holds.

    Subclasses name their files (RECORDS, a glob under the folder) and give the table (Markdown, as the
    report writes it), the figure and the rows of the pandas frame.
    """

    RECORDS: ClassVar[str]
    COMMAND: ClassVar[str]

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        files = sorted(self.path.glob(self.RECORDS))
        if not files and not self._holds_tables():
            raise UserError(
                f"{self.path} holds no {self.RECORDS}; pass a folder that `fmm-fast {self.COMMAND}` (or "
                f"fmm_fast.{self.COMMAND}) wrote, or a result's save() folder"
            )
        self.records: dict[str, dict[str, Any]] = {
            str(file.relative_to(self.path)): read_result_file(file) for file in files
        }

    def _holds_tables(self) -> bool:
        """Whether the folder holds this result without a record file (a report of peer metrics only)."""
        return False

    @classmethod
    @checked_arguments
    def load(cls, directory: str | Path) -> RunResult:
        """The result saved in (or written by its command to) `directory`."""
        return cls(directory)

    @checked_arguments
    def save(self, directory: str | Path) -> Path:
        """Write every record to `directory` (created), where load() and `fmm-fast report` read them.

        `directory` is claimed as the commands claim their --out (core.outputs): it must be new, empty, or
        hold this same run (saved before, or written by its command); UserError when it holds another run
        or files fmm-fast did not write, so nothing of either is overwritten or merged into this one."""
        directory = Path(directory)
        kind, fields = self.identity()
        entries = sorted({Path(name).parts[0] for name in self.records})
        with output_lock(directory):
            claim_directory(directory, kind, fields, files=entries)
            for name, record in self.records.items():
                (directory / name).parent.mkdir(parents=True, exist_ok=True)
                write_record(directory / name, record)
            finish_run(directory)
        return directory

    def identity(self) -> tuple[str, dict[str, Any]]:
        """(kind, fingerprint fields) of the run these records are: its folder's run marker's, so a saved
        copy is the same run (resumed, and counted once by report); a folder without a marker (a copy made
        by hand): the command's name and the digest of the records."""
        marker = read_marker(self.path)
        if marker is not None:
            return marker["kind"], marker["fields"]
        content = json.dumps(self.records, sort_keys=True, default=str).encode()
        return self.COMMAND, {"records": hashlib.sha256(content).hexdigest()}

    @property
    def record(self) -> dict[str, Any]:
        """The record of a one-file result (masf.json, result.json, run.json); the first seed's otherwise."""
        return next(iter(self.records.values()))

    @abstractmethod
    def table(self) -> str:
        """The result as the report's Markdown table."""

    @abstractmethod
    def plot(self) -> Figure | None:
        """The result's figure (a matplotlib Figure, no pyplot), or None where it has none."""

    @abstractmethod
    def rows(self) -> Iterator[dict[str, Any]]:
        """One flat dict per row of to_pandas()."""

    def to_pandas(self) -> pandas.DataFrame:
        """The rows as a pandas DataFrame (imported here: the evaluation install need not have pandas)."""
        import pandas

        return pandas.DataFrame(list(self.rows()))

    def _repr_html_(self) -> str:
        from fmm_fast.report.pages.markdown import markdown_html
        from fmm_fast.report.pages.markup import Html, markup

        figure = self.plot()
        shown = Html("") if figure is None else figure_html(figure)
        return markup("{table}{figure}", table=markdown_html(self.table()), figure=shown)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"


def read_result_file(path: Path) -> dict[str, Any]:
    """A record file of a result; UserError naming the file when it is damaged (not a JSON object)."""
    fix = "rerun the command that wrote it, or save() the result again"
    return read_checked(path, dict, fix)


def figure_html(figure: Figure) -> Html:
    """The figure as an inline PNG <img> (no file, no outside resource)."""
    from fmm_fast.report.pages.markup import markup

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return markup('<img src="data:image/png;base64,{data}" alt="figure">', data=data)


class Evaluation(RunResult):
    """`fmm_fast.evaluate`'s result: one result.json per seed (records["seed-S/result.json"]), shown as
    the report's ACU/RACU table (mean over seeds, 95% BCa CI) and the erasure curves.

    Example: `fmm_fast.evaluate(model, measure=["loo-abs", "grad-l2"]).to_pandas()` has a row per (seed,
    measure): signed, acu, racu, seconds and the primary metric at r=0, 0.1, ..., 1.
    """

    RECORDS = "seed-*/result.json"
    COMMAND = "evaluate"

    def _report(self) -> Any:
        from fmm_fast.report.aggregate import aggregate
        from fmm_fast.report.load import load_result

        results = [load_result(self.path / name) for name in self.records]
        return aggregate([r for r in results if r is not None], drop_unconverged=False)

    def table(self) -> str:
        from fmm_fast.report.tables import render_table_markdown

        return render_table_markdown(self._report())

    def plot(self) -> Figure:
        from fmm_fast.report.plots import curves_figure

        return curves_figure(self._report().groups[0])

    def rows(self) -> Iterator[dict[str, Any]]:
        """(seed, measure, signed, acu, racu, seconds) and the primary metric at each ratio (r=0.0, ...)."""
        for record in self.records.values():
            metric = record["metric"]
            for name, measure in record["measures"].items():
                curve = record["curves"][name][metric]
                yield {
                    "seed": record["seed"],
                    "measure": name,
                    "signed": measure["signed"],
                    "acu": measure["acu"],
                    "racu": measure["racu"],
                    "seconds": measure["seconds"],
                    **{f"r={ratio:g}": value for ratio, value in zip(record["ratios"], curve, strict=True)},
                }


class PeerMetrics(RunResult):
    """`fmm_fast.aopc`'s result: one result.json per seed, shown as the report's peer-metrics table.

    Example: `fmm_fast.aopc(model, measure="loo-abs").to_pandas()` has a row per (seed, measure) with
    each peer metric's mean and CI (aopc_comprehensiveness_mean, ..._ci_low, ...).
    """

    RECORDS = "seed-*/result.json"
    COMMAND = "aopc"

    def table(self) -> str:
        from fmm_fast.report.peer import render_peer_markdown

        return render_peer_markdown([{**r, "path": str(self.path / n)} for n, r in self.records.items()])

    def plot(self) -> None:
        """None: the peer metrics are the table's (its last column scores the ranking-once curve)."""
        return None

    def rows(self) -> Iterator[dict[str, Any]]:
        """(seed, measure, signed, acu, racu) and each summary's mean and CI (aopc_comprehensiveness, ...)."""
        for record in self.records.values():
            for name, measure in record["measures"].items():
                row = {"seed": record["seed"], "measure": name}
                for key, value in measure.items():
                    if isinstance(value, dict):
                        row |= {f"{key}_{part}": number for part, number in value.items()}
                    else:
                        row[key] = value
                yield row


class Masf(RunResult):
    """`fmm_fast.masf`'s result: masf.json, shown as the report's verdicts (Simes p-value per masking
    ratio, ✓ in distribution) and the p-value curves.

    Example: `fmm_fast.masf([plain, masked]).to_pandas()` has a row per (model, ratio): simes,
    in_distribution, share_below_0.05.
    """

    RECORDS = "masf.json"
    COMMAND = "masf"

    def _curves(self) -> dict[str, dict]:
        from fmm_fast.report.masf import load_masf_curves

        return load_masf_curves([self.path / "masf.json"])

    def table(self) -> str:
        from fmm_fast.report.masf import render_masf_markdown

        return render_masf_markdown(self._curves())

    def plot(self) -> Figure:
        from fmm_fast.report.plots import p_values_figure

        return p_values_figure(
            {
                label: ([s["ratio"] for s in run["per_ratio"]], [s["simes"] for s in run["per_ratio"]])
                for label, run in self._curves().items()
            }
        )

    def rows(self) -> Iterator[dict[str, Any]]:
        """(model, ratio, simes, in_distribution, share below 0.05)."""
        for label, run in self.record["models"].items():
            for entry in run["per_ratio"]:
                yield {
                    "model": label,
                    "ratio": entry["ratio"],
                    "simes": entry["simes"],
                    "in_distribution": entry["in_distribution"],
                    "share_below_0.05": entry["share_below"]["0.05"],
                }


class Check(RunResult):
    """`fmm_fast.check`'s result: check.json, shown as the report's verdict table and the metric and MaSF
    p-value per masking ratio.

    Example: `result = fmm_fast.check("model.onnx", dataset="sst2")`; `result.verdict` is "handles masks",
    "does not handle masks" or "cannot tell on this data"; `result.to_pandas()` has the printed table, a row
    per ratio: ratio, the primary metric, majority, excess_nll, simes, simes_holm and in_distribution;
    `.record["verdict"]["text"]` says what it means.
    """

    RECORDS = "check.json"
    COMMAND = "check"

    def table(self) -> str:
        from fmm_fast.report.check import load_checks, render_check_markdown

        return render_check_markdown(load_checks([self.path / self.RECORDS]))

    def plot(self) -> Figure:
        from fmm_fast.report.plots import check_figure

        return check_figure(self.record)

    @property
    def verdict(self) -> str:
        """ "handles masks", "does not handle masks" or "cannot tell on this data"."""
        return self.record["verdict"]["verdict"]

    @property
    def first_out_ratio(self) -> float | None:
        """The smallest masking ratio MaSF finds out of distribution (Holm-corrected), None when none is."""
        return self.record["verdict"]["first_out_ratio"]

    @property
    def calibration(self) -> str:
        """What MaSF calibrated on: "unmasked" or "masked" validation examples."""
        return self.record["calibration"]["set"]

    def rows(self) -> Iterator[dict[str, Any]]:
        """The printed table's rows (report.check.table_rows)."""
        from fmm_fast.report.check import table_rows

        yield from table_rows(self.record)


class Roar(RunResult):
    """`fmm_fast.roar`'s result: result.json, shown as the report's ROAR table and a measure's curves.

    Example: `fmm_fast.roar(dataset="babi-1", measure="grad-l2", steps=5).to_pandas()` has a row per
    (seed, measure): acu, racu, racu_clipped and the retrained model's metric at each ratio.
    """

    RECORDS = "result.json"
    COMMAND = "roar"

    def _roar(self) -> Any:
        from fmm_fast.report.load import read_results
        from fmm_fast.report.roar import aggregate_roar

        results = read_results([self.path / "result.json"])
        return aggregate_roar(results.roar, results.evaluations)

    def table(self) -> str:
        from fmm_fast.report.roar_tables import render_roar_markdown

        return render_roar_markdown(self._roar())

    def plot(self) -> Figure:
        from fmm_fast.report.order import BASELINE_MEASURE
        from fmm_fast.report.plots import roar_measure_figure

        group = self._roar().groups[0]
        name = next((n for n in group.measures if n != BASELINE_MEASURE), BASELINE_MEASURE)
        return roar_measure_figure(group, name)

    def rows(self) -> Iterator[dict[str, Any]]:
        """(seed, measure, acu, racu, racu_clipped) and the primary metric at each ratio."""
        record = self.record
        for seed, values in record["seeds"].items():
            for name, curve in values["curves"].items():
                yield {
                    "seed": int(seed),
                    "measure": name,
                    **{key: values[key][name] for key in ("acu", "racu", "racu_clipped")},
                    **{f"r={ratio:g}": value for ratio, value in zip(record["ratios"], curve, strict=True)},
                }


class Training(RunResult):
    """`fmm_fast.train`'s result: run.json and the model it kept (`model_dir`, what model= takes; save()
    copies run.json only, the model stays where it was trained).

    Example: `trained = fmm_fast.train(dataset="movie-snippets", epochs=1)`; then
    `fmm_fast.evaluate(trained)`; `trained.to_pandas()` has a row per epoch.
    """

    RECORDS = "run.json"
    COMMAND = "train"

    @property
    def model_dir(self) -> Path:
        """The best epoch's checkpoint: give it (or this result) as model= to every other function."""
        return self.path / MODEL_DIR

    def table(self) -> str:
        from fmm_fast.report.tables import markdown_table

        record = self.record
        metric = record["dataset"]["metric"]
        best = record["best_epoch"]
        rows = [
            [
                str(e["epoch"]),
                f"{e['train_loss']:.4f}",
                f"{e['selection_metric']:.4f}",
                "best" * (e["epoch"] == best),
            ]
            for e in record["epochs"]
        ]
        test = ", ".join(f"{100 * float(r):.0f}% masked {v[metric]:.4f}" for r, v in record["test"].items())
        table = markdown_table(["Epoch", "Train loss", f"Validation {metric}", ""], rows)
        return f"{table}\n\nTest {metric}: {test}; majority baseline {record['majority_baseline']:.4f}\n"

    def plot(self) -> Figure:
        from matplotlib.figure import Figure

        epochs = self.record["epochs"]
        figure = Figure(figsize=(5, 3), layout="constrained")
        axes = figure.subplots()
        axes.plot([e["epoch"] for e in epochs], [e["selection_metric"] for e in epochs], marker="o")
        axes.set_xlabel("epoch")
        axes.set_ylabel(f"validation {self.record['dataset']['metric']}")
        return figure

    def rows(self) -> Iterator[dict[str, Any]]:
        """(epoch, steps, train_loss, selection_metric, seconds)."""
        for epoch in self.record["epochs"]:
            yield {key: value for key, value in epoch.items() if not isinstance(value, dict)}


class Report(RunResult):
    """`fmm_fast.report`'s result: report.json and the tables and figures beside it.

    Example: `fmm_fast.report([evaluation, masf_result], html=True).to_pandas()` has a row per (dataset,
    strategy, measure) with the aggregated ACU/RACU.
    """

    RECORDS = "report.json"
    COMMAND = "report"

    def _holds_tables(self) -> bool:
        return any(self.path.glob("*.md"))  # peer metrics, MaSF or checks only: tables, no report.json

    def table(self) -> str:
        tables = sorted(self.path.glob("*.md"))
        return "\n\n".join(path.read_text(encoding="utf-8") for path in tables) or "(no tables)\n"

    def plot(self) -> Figure | None:
        from fmm_fast.report.plots import curves_figure

        return None if not (groups := self._groups()) else curves_figure(groups[0])

    def _groups(self) -> list:
        from fmm_fast.report.aggregate import load_report

        files = [Path(f) for r in self.records.values() for f in r["files"] if Path(f).is_file()]
        return load_report(files).groups if files else []

    def rows(self) -> Iterator[dict[str, Any]]:
        """(dataset, strategy, measure) and each aggregated number (racu_mean, racu_low, ...)."""
        for group in (g for record in self.records.values() for g in record["groups"]):
            for name, measure in group["measures"].items():
                row = {"dataset": group["dataset"], "strategy": group["strategy"], "measure": name}
                for key, value in measure.items():
                    if isinstance(value, dict):
                        row |= {f"{key}_{part}": number for part, number in value.items()}
                    elif not isinstance(value, list):
                        row[key] = value
                yield row


RESULTS: tuple[type[RunResult], ...] = (Masf, Check, Roar, Training, Report)


@checked_arguments
def load(directory: str | Path) -> RunResult:
    """The result a function or command wrote to (or a result saved to) `directory`: Evaluation,
    PeerMetrics, Masf, Check, Roar, Training or Report, told apart by the files there.

    Example: `fmm_fast.load("runs/evaluate")` after `fmm-fast evaluate --out runs/evaluate`.
    """
    directory = Path(directory)
    for kind in RESULTS:
        if (directory / kind.RECORDS).is_file():
            return kind(directory)
    seeds = sorted(directory.glob(Evaluation.RECORDS))
    if seeds:
        from fmm_fast.protocols.aopc import RECORD_KIND

        peer = read_result_file(seeds[0]).get("kind") == RECORD_KIND
        return (PeerMetrics if peer else Evaluation)(directory)
    raise UserError(
        f"{directory} holds no result of fmm-fast (seed-S/result.json, masf.json, check.json, result.json, "
        "run.json or report.json); pass a folder a function or command wrote"
    )
