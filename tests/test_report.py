"""`fmm-fast report` on synthetic evaluation results: table cells, dropped seeds, files written, errors."""

import json
import math
import os
import re
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

from fmm_fast.cli import main
from fmm_fast.core.errors import UserError
from fmm_fast.core.records import read_record
from fmm_fast.protocols.curve_stats import RATIOS, bootstrap_ci, format_ci
from fmm_fast.report.aggregate import aggregate, load_report
from fmm_fast.report.load import load_result
from fmm_fast.report.order import measure_sort_key
from fmm_fast.report.plots import plot_p_values, plot_run_curves
from fmm_fast.report.tables import render_timing_markdown
from fmm_fast.report.write import write_report

EXPORT = Path(__file__).resolve().parent.parent / "export"
SIGNED = {"rand": False, "loo-abs": False, "loo-sign": True, "beam-sign-10": True}


def curve(unmasked: float, fully_masked: float, bend: float = 0.0) -> list[float]:
    """(11,) metric per ratio: a line from the unmasked to the fully masked value, pushed down by `bend`."""
    line = unmasked + (fully_masked - unmasked) * RATIOS - bend * RATIOS * (1 - RATIOS)
    return line.tolist()


def write_result(
    root: Path,
    dataset: str,
    strategy: str,
    seed: int,
    scores: dict[str, tuple[float, float]],
    unmasked: float,
    fully_masked: float = 0.5,
    metric: str = "accuracy",
    split: str = "test",
    subdir: str = "",
    n_examples: int = 100,
    machine: dict | None = None,
) -> Path:
    """A result.json as `fmm-fast evaluate` writes it. scores: measure -> (acu, racu), read as given;
    machine None: a record older than the machine field."""
    curves = {
        name: {metric: curve(unmasked, fully_masked, bend=0.1 * k), "macro_f1": curve(0.3, 0.2)}
        for k, name in enumerate(scores)
    }
    measures = {
        name: {
            "signed": SIGNED.get(name, False),
            "acu": acu,
            "racu": racu,
            "seconds": 10.0 + 2 * seed,
            "forward_passes": 18000,
        }
        for name, (acu, racu) in scores.items()
    }
    data = {
        "kind": "evaluate",
        "fmm_fast_version": "0.1.0",
        "arguments": {},
        "model": {"path": "m.onnx", "strategy": strategy, "source": "", "backend": "onnxruntime:CPU"},
        "dataset": dataset,
        "split": split,
        "seed": seed,
        "n_examples": n_examples,
        "metric": metric,
        "majority_baseline": 0.51,
        "ratios": RATIOS.tolist(),
        "curves": curves,
        "measures": measures,
        "durations": {"total_seconds": 100.0},
        "versions": {},
        **({} if machine is None else {"machine": machine}),
    }
    path = root / f"{dataset}-{strategy}-s{seed}" / subdir / "result.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


SST2_LOO_ABS_RACU = [0.5, 0.6, 0.7]
SST2_LOO_SIGN_ACU = [0.10, 0.20, 0.35]
BABI_LOO_ABS_RACU = [0.9, 0.95, 5.0]  # the last seed does not converge: a 5.0 would show if it were kept


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """3 sst2 seeds (masked), 3 babi-2 seeds of which seed 2 did not converge, 1 plain sst2 seed."""
    root = tmp_path / "runs"
    for seed in range(3):
        scores = {
            "loo-abs": (0.1 + 0.02 * seed, SST2_LOO_ABS_RACU[seed]),
            "zz-custom": (0.01, 0.02),
            "rand": (0.0, 0.0),
            "loo-sign": (SST2_LOO_SIGN_ACU[seed], 0.4),
            "abc-custom": (0.03, 0.04),
        }
        if seed < 2:
            scores["beam-sign-10"] = (0.3 + 0.1 * seed, 1.8)
        write_result(
            root,
            "sst2",
            "masked",
            seed,
            scores,
            unmasked=0.91 + 0.01 * seed,
            fully_masked=0.52 + 0.01 * seed,
            machine={"cpu": "Test CPU 9000", "isa": ["AVX2"], "cores": 2, "threads": 2, "load_average": None},
        )
        write_result(
            root,
            "babi-2",
            "masked",
            seed,
            {"rand": (0.0, 0.0), "loo-abs": (0.2, BABI_LOO_ABS_RACU[seed])},
            unmasked=[0.99, 0.98, 0.40][seed],
            metric="micro_f1",
        )
    write_result(
        root,
        "sst2",
        "plain",
        0,
        {"rand": (0.0, 0.0), "loo-abs": (0.05, 0.3)},
        unmasked=0.93,
        fully_masked=0.40,
    )
    return root


def cell(values: list[float]) -> str:
    return format_ci(*bootstrap_ci(np.array(values)))


def table_rows(markdown: str, strategy: str) -> dict[str, list[str]]:
    """measure -> cells of one strategy's table in table.md."""
    section = markdown.split(f"### Strategy: {strategy}")[1].split("###")[0]
    rows = [line.strip("|").split(" | ") for line in section.splitlines() if line.startswith("| ")]
    return {row[0].strip(): [c.strip() for c in row[1:]] for row in rows}


def test_table_cells_dropped_seeds_and_files(results: Path, tmp_path: Path):
    out = tmp_path / "report"
    report = write_report([results], out).report
    table = (out / "table.md").read_text()

    masked = table_rows(table, "masked")
    assert masked["Measure"] == ["Score", "babi-2 (2 seeds × 100 examples)", "sst2 (3 seeds × 100 examples)"]
    # Canonical order, unknown measures last alphabetically.
    assert list(masked)[1:] == ["rand", "loo-sign", "loo-abs", "beam-sign-10", "abc-custom", "zz-custom"]
    # RACU [0.5, 0.6, 0.7]: mean 60.0, scipy's BCa interval is exactly [0.5, 0.7].
    assert masked["loo-abs"] == ["RACU", cell(BABI_LOO_ABS_RACU[:2]), "60.0 (−10.0/+10.0)"]
    assert masked["loo-sign"] == ["ACU", "", cell(SST2_LOO_SIGN_ACU)]
    assert masked["beam-sign-10"] == ["ACU", "", cell([0.3, 0.4]) + " [2 seeds]"]
    assert masked["rand"] == ["RACU", "0.0 (−0.0/+0.0)", "0.0 (−0.0/+0.0)"]
    plain = table_rows(table, "plain")
    assert plain["loo-abs"] == ["RACU", "30.0"]  # one seed: no interval
    assert table.index("### Strategy: plain") < table.index("### Strategy: masked")

    # 40% of 100 examples: the 95% interval (31–50%) stays below the threshold, so no "cannot tell" hint
    assert "babi-2 / masked seed 2: unmasked micro_f1 40.0 ≤ 50.0 on 100 examples (" in table
    assert [(d.dataset, d.seed) for d in report.dropped] == [("babi-2", 2)]

    tex = (out / "table.tex").read_text()
    assert r"loo-abs & RACU & " in tex and r"60.0 ($-$10.0/+10.0) \\" in tex
    assert tex.count(r"\begin{tabular}") == 2

    performance = (out / "performance.md").read_text()
    sst2_masked = next(line for line in performance.splitlines() if line.startswith("| masked | sst2"))
    assert cell([0.91, 0.92, 0.93]) in sst2_masked and cell([0.52, 0.53, 0.54]) in sst2_masked
    assert sst2_masked.endswith("| 51.0 | yes |")
    assert "| plain | sst2 | accuracy | 1 | 93.0 | 40.0 | 51.0 | no |" in performance

    timing = (out / "timing.md").read_text()
    assert "| masked | sst2 | loo-abs | 3 | 12.0 | 18,000 |" in timing
    assert "| masked | babi-2 | loo-abs | 2 | 11.0 | 18,000 |" in timing  # dropped seed's run left out
    where = timing.split("Measured on: ")[1]  # the kept runs' machines: the dropped seed's is not counted
    assert "Test CPU 9000, 2 threads (3 runs)" in where
    assert "not recorded (a record older than the machine field) (3 runs)" in where

    for name in ("curves-sst2-masked.png", "curves-babi-2-masked.png", "curves-sst2-plain.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    data = json.loads((out / "report.json").read_text())
    assert data["dropped_seeds"][0]["seed"] == 2 and data["dropped_seeds"][0]["unmasked"] == 0.4
    assert data["dropped_seeds"][0]["n_examples"] == 100 and data["dropped_seeds"][0]["undecided"] is False
    sst2_masked_group = next(g for g in data["groups"] if (g["dataset"], g["strategy"]) == ("sst2", "masked"))
    assert sst2_masked_group["machines"] == {"Test CPU 9000, 2 threads": 3}
    groups = {(g["dataset"], g["strategy"]): g for g in data["groups"]}
    babi_loo = groups[("babi-2", "masked")]["measures"]["loo-abs"]
    assert babi_loo["seeds"] == [0, 1] and babi_loo["racu"]["values"] == BABI_LOO_ABS_RACU[:2]
    assert babi_loo["reported"] == "racu"
    plain_loo = groups[("sst2", "plain")]["measures"]["loo-abs"]
    assert plain_loo["racu"]["ci_low"] is None and plain_loo["curve"]["percentile_2.5"] is None
    sst2_rand = groups[("sst2", "masked")]["measures"]["rand"]
    per_seed = np.array(sst2_rand["curve"]["per_seed"])
    assert sst2_rand["curve"]["percentile_97.5"] == pytest.approx(np.percentile(per_seed, 97.5, axis=0))
    assert per_seed[:, 0] == pytest.approx([0.91, 0.92, 0.93])


def test_cli_prints_the_table(results: Path, tmp_path: Path, capsys):
    assert main(["report", str(results), "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    assert "60.0 (−10.0/+10.0)" in captured.out and "babi-2 / masked seed 2" in captured.out
    assert (tmp_path / "out" / "report.json").exists()


def test_measures_split_over_files_of_one_seed(tmp_path: Path):
    # A slow measure evaluated on its own: each file carries its own rand; the first one (by path) counts.
    write_result(tmp_path, "sst2", "masked", 0, {"rand": (0.0, 0.0), "loo-abs": (0.1, 0.5)}, 0.9, subdir="a")
    write_result(
        tmp_path, "sst2", "masked", 0, {"rand": (0.0, 0.0), "beam-sign-10": (0.4, 1.0)}, 0.9, subdir="b"
    )
    (group,) = load_report([tmp_path]).groups
    assert list(group.measures) == ["rand", "loo-abs", "beam-sign-10"]
    assert group.seeds == [0] and all(m.seeds == [0] for m in group.measures.values())


def test_other_kinds_are_ignored(results: Path):
    other = results / "masf" / "result.json"
    other.parent.mkdir()
    other.write_text(json.dumps({"kind": "masf", "summary": {}}))
    report = load_report([results])
    assert report.ignored == [other] and other not in report.files
    with pytest.raises(
        UserError, match=r"no evaluation or ROAR result\.json found under .*\(1 result\.json of other"
    ):
        load_report([other.parent])


def test_no_results_names_the_directories(tmp_path: Path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert (
        f"no evaluation or ROAR result.json found under {empty}" in error
        and len(error.strip().splitlines()) == 1
    )
    with pytest.raises(UserError, match="does not exist"):
        load_report([tmp_path / "missing"])


@pytest.mark.parametrize(
    ("corrupt", "problem"),
    [
        (lambda text, data: "{not json", "Expecting property name"),
        (
            lambda text, data: json.dumps({k: v for k, v in data.items() if k != "dataset"}),
            "missing field dataset",
        ),
        (lambda text, data: json.dumps({**data, "ratios": [0.0, 1.0]}), "has 11 values for 2 ratios"),
        (lambda text, data: json.dumps({**data, "seed": "zero"}), "seed must be an integer"),
        (lambda text, data: json.dumps({**data, "n_examples": 0}), "n_examples must be a positive integer"),
        (
            lambda text, data: text.replace('"signed": false', '"signed": "no"', 1),
            "signed must be true or false",
        ),
        (
            lambda text, data: json.dumps({**data, "curves": {**data["curves"], "rand": {"f1": [0.5] * 11}}}),
            "missing field curves.rand.micro_f1",
        ),
    ],
)
def test_malformed_result_names_the_file(results: Path, tmp_path: Path, capsys, corrupt, problem):
    path = results / "babi-2-masked-s1" / "result.json"
    text = path.read_text()
    path.write_text(corrupt(text, json.loads(text)))
    assert main(["report", str(results), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"fmm-fast: error: malformed result file {path}: ")
    assert problem in error and len(error.splitlines()) == 1
    assert not (tmp_path / "out" / "report.json").exists()


def test_runs_on_different_example_sets_are_kept_apart(tmp_path: Path, capsys):
    """A beam run on two examples beside curves on 100: never averaged, never scored against the other's
    rand; two columns whose headers say what n counts, a warning that says why."""
    for seed in (0, 1):
        beam = {"rand": (0.0, 0.0), "beam-sign-10": (0.3, 1.8)}
        write_result(tmp_path, "sst2", "masked", seed, beam, 0.5, 0.1, subdir="a-beam", n_examples=2)
        curves = {"rand": (0.0, 0.0), "loo-abs": (0.2, 0.9)}
        write_result(tmp_path, "sst2", "masked", seed, curves, 0.9, 0.3, subdir="b-curves")
    out = tmp_path / "report"
    report = write_report([tmp_path], out).report
    few, many = report.groups
    assert (few.n_examples, list(few.measures)) == (2, ["rand", "beam-sign-10"])
    assert (many.n_examples, list(many.measures)) == (100, ["rand", "loo-abs"])
    assert few.unmasked.values.tolist() == [0.5, 0.5] and many.unmasked.values.tolist() == [0.9, 0.9]
    assert "kept apart (2 examples; 100 examples)" in capsys.readouterr().err
    header = table_rows((out / "table.md").read_text(), "masked")["Measure"]
    assert header == [
        "Score",
        "sst2 · 2 examples (2 seeds × 2 examples)",
        "sst2 · 100 examples (2 seeds × 100 examples)",
    ]
    assert {p.name for p in out.glob("curves-*.png")} == {
        "curves-sst2-masked-2_examples.png",
        "curves-sst2-masked-100_examples.png",
    }


def test_classifiers_trained_elsewhere_are_models_not_seeds(tmp_path: Path, capsys):
    """Two imported classifiers (strategy unknown) are two columns, never two seeds of one model."""
    for seed, folder in ((0, "/models/first"), (1, "/models/second")):
        path = write_result(
            tmp_path, "sst2", "unknown", seed, {"rand": (0.0, 0.0), "loo-abs": (0.2, 0.5)}, 0.9
        )
        record = json.loads(path.read_text())
        record["model"] |= {"trained_by": "elsewhere", "source": folder}
        path.write_text(json.dumps(record))
    groups = load_report([tmp_path]).groups
    assert [(g.variant, g.seeds) for g in groups] == [("first", [0]), ("second", [1])]
    assert "different models or example sets are kept apart (first; second)" in capsys.readouterr().err


def test_two_rand_curves_of_one_seed_that_differ_are_refused(tmp_path: Path):
    write_result(tmp_path, "sst2", "masked", 0, {"rand": (0.0, 0.0), "loo-abs": (0.1, 0.5)}, 0.9, subdir="a")
    write_result(tmp_path, "sst2", "masked", 0, {"rand": (0.0, 0.0), "grad-l2": (0.1, 0.5)}, 0.8, subdir="b")
    with pytest.raises(UserError, match=r"rand curves of seed 0 in .* differ"):
        load_report([tmp_path])


def test_dropped_seed_on_few_examples_says_it_cannot_tell(tmp_path: Path):
    write_result(tmp_path, "babi-2", "masked", 0, {"rand": (0.0, 0.0)}, 0.99, metric="micro_f1")
    write_result(tmp_path, "babi-2", "masked", 1, {"rand": (0.0, 0.0)}, 0.5, metric="micro_f1", n_examples=40)
    [dropped] = load_report([tmp_path]).dropped
    assert dropped.undecided
    expected = "50.0 ≤ 50.0 on 40 examples; 40 examples cannot tell (95% interval 35–65): evaluate more"
    assert expected in dropped.describe()


def test_conflicting_results_are_user_errors(tmp_path: Path):
    write_result(tmp_path, "sst2", "masked", 0, {"rand": (0.0, 0.0), "loo-abs": (0.1, 0.5)}, 0.9, subdir="a")
    write_result(tmp_path, "sst2", "masked", 0, {"rand": (0.0, 0.0), "loo-abs": (0.1, 0.6)}, 0.9, subdir="b")
    with pytest.raises(UserError, match="measure loo-abs of seed 0 appears in both"):
        load_report([tmp_path])
    other = tmp_path / "other"
    write_result(other, "sst2", "masked", 0, {"rand": (0.0, 0.0)}, 0.9)
    write_result(other, "sst2", "masked", 1, {"rand": (0.0, 0.0)}, 0.9, split="validation")
    with pytest.raises(UserError, match="differ in split"):
        load_report([other])


def test_measure_order():
    names = ["zeta", "beam-sign-20", "loo-abs", "beam-sign-5", "rand", "alpha", "grad-l2", "grad-l1"]
    assert sorted(names, key=measure_sort_key) == [
        "rand",
        "grad-l1",
        "grad-l2",
        "loo-abs",
        "beam-sign-5",
        "beam-sign-20",
        "alpha",
        "zeta",
    ]


@pytest.mark.parametrize(
    ("script", "expected"), [("make_tables.py", "table.tex"), ("make_figures.py", "curves-sst2-masked.png")]
)
def test_export_scripts(results: Path, tmp_path: Path, monkeypatch, capsys, script, expected):
    out = tmp_path / "docs"
    monkeypatch.syspath_prepend(str(EXPORT))  # as `python export/SCRIPT` puts the script's folder first
    monkeypatch.setattr(sys, "argv", [script, "--results", str(results), "--out", str(out)])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(EXPORT / script), run_name="__main__")
    assert exit_.value.code == 0
    assert (out / expected).exists() and str(out / expected) in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", [script, "--results", str(tmp_path / "none"), "--out", str(out)])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(EXPORT / script), run_name="__main__")
    assert exit_.value.code == 2 and "does not exist" in capsys.readouterr().err


def test_nan_racu_of_a_flat_baseline_prints_na(tmp_path: Path):
    # evaluate writes a nan RACU (flat rand curve) as the JSON literal NaN.
    path = write_result(tmp_path, "sst2", "masked", 0, {"rand": (0.0, 0.0), "loo-abs": (0.0, 0.0)}, 0.9)
    path.write_text(path.read_text().replace('"racu": 0.0', '"racu": NaN'))
    out = tmp_path / "out"
    report = write_report([tmp_path], out).report
    assert table_rows((out / "table.md").read_text(), "masked")["loo-abs"] == ["RACU", "n/a"]
    assert math.isnan(report.groups[0].measures["loo-abs"].racu.mean)
    written = json.loads((out / "report.json").read_text())
    loo = written["groups"][0]["measures"]["loo-abs"]
    assert loo["racu"]["mean"] is None and loo["acu"]["mean"] == 0.0
    # the null is a nan under the records' rule, and reads back as one
    assert written["non_finite"]["/groups/0/measures/loo-abs/racu/mean"] == "nan"
    assert math.isnan(read_record(out / "report.json")["groups"][0]["measures"]["loo-abs"]["racu"]["mean"])


def test_an_undefined_racu_says_why(tmp_path: Path):
    path = write_result(tmp_path, "sst2", "masked", 0, {"rand": (0.0, 0.0), "loo-abs": (0.0, 0.0)}, 0.9)
    reason = "the model predicts one class ('negative' for all 100 examples)"
    path.write_text(path.read_text().replace('"racu": 0.0', f'"racu": NaN, "racu_undefined": "{reason}"'))
    out = tmp_path / "out"
    write_report([tmp_path], out)
    assert table_rows((out / "table.md").read_text(), "masked")["loo-abs"] == ["RACU", f"undefined: {reason}"]
    loo = json.loads((out / "report.json").read_text())["groups"][0]["measures"]["loo-abs"]
    assert loo["racu_undefined"] == [reason]


def test_plot_run_curves_keeps_every_seed(results: Path, tmp_path: Path):
    # The figure `fmm-fast evaluate` draws for its own seeds shows the non-converged one too.
    paths = sorted(results.glob("babi-2-masked-s*/result.json"))
    png = tmp_path / "curves.png"
    plot_run_curves(paths, png)
    every_seed = aggregate([load_result(path) for path in paths], drop_unconverged=False)
    assert every_seed.groups[0].seeds == [0, 1, 2] and every_seed.dropped == []
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="one dataset and strategy"):
        plot_run_curves([*paths, results / "sst2-masked-s0" / "result.json"], png)


def test_p_value_plot_writes_png(tmp_path: Path):
    from matplotlib.image import imread

    path = tmp_path / "masf.png"
    plot_p_values(
        {"plain": ([0.0, 0.5, 1.0], [0.4, 1e-3, 0.0]), "masked": ([0.0, 0.5, 1.0], [0.6, 0.3, 0.2])}, path
    )
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width, _ = imread(path).shape
    assert height > 100 and width > 100
    with pytest.raises(ValueError, match="2 ratios but 3 p-values"):
        plot_p_values({"plain": ([0.0, 0.5], [0.1, 0.2, 0.3])}, tmp_path / "bad.png")


def test_a_local_file_is_shown_by_its_stem(tmp_path: Path):
    # Records written before datasets were named by stem hold the file's absolute path.
    path = write_result(
        tmp_path / "runs", "sms", "masked", 0, {"rand": (0.0, 0.0), "loo-abs": (0.1, 0.3)}, 0.9
    )
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "dataset": "/home/someone/data/sms.csv"}))
    out = tmp_path / "report"
    write_report([tmp_path / "runs"], out)
    written = "".join(p.read_text() for p in out.glob("*.md"))
    assert "sms (1 seed × 100 examples)" in written and "/home/someone" not in written
    assert [p.name for p in out.glob("*.png")] == ["curves-sms-masked.png"]


def write_masf(root: Path, p_values: dict[str, list[float]], floor: float = 0.01) -> Path:
    """A masf.json as `fmm-fast masf` writes it: per model, the Simes p-value at each ratio, and the
    calibration's p-value floor."""
    models = {
        label: {
            "per_ratio": [
                {"ratio": r, "simes": p, "in_distribution": p > 0.05, "n": 30}
                for r, p in zip(RATIOS.tolist(), simes, strict=True)
            ],
            "calibration": {"method": "split", "p_value_floor": floor},
        }
        for label, simes in p_values.items()
    }
    path = root / "masf" / "masf.json"
    path.parent.mkdir(parents=True)
    record = {
        "kind": "masf",
        "arguments": {"data": {"dataset": "/data/sms.csv"}, "seed": 0},
        "models": models,
    }
    path.write_text(json.dumps({**record, "versions": {"numpy": "2.0"}}))
    return path


def test_html_report_is_one_self_contained_file(results: Path, tmp_path: Path, capsys):
    from doubles import explanation

    from fmm_fast.api import save_explanations

    write_masf(results, {"plain (m.onnx)": [0.5] + [0.001] * 10, "masked (m.onnx)": [0.5] * 11})
    explained = tmp_path / "explained.jsonl"
    save_explanations(explained, [explanation([0.1, 0.2, 0.05, -0.3, 0.0, 0.4], index=i) for i in range(5)])
    out = tmp_path / "report"
    assert main(["report", str(results), "--out", str(out)]) == 0  # an earlier report of these results
    (out / "stale.png").write_bytes(b"an earlier run's figure")  # beside it: not this run's
    os.utime(out / "stale.png", ns=(0, 0))
    argv = ["report", str(results), "--out", str(out), "--html", "--explanations", str(explained)]
    assert main(argv) == 0
    page = (out / "report.html").read_text()
    for heading in ("Faithfulness: RACU and ACU", "MaSF: are masked inputs in distribution?", "Figures"):
        assert f">{heading}</h2>" in page
    assert (
        "<td>0.001 ✗</td>" in page and "sst2 (3 seeds × 100 examples)" in page
    )  # MaSF verdicts; the scores table
    assert "<td>split (p-value floor 0.01)</td>" in page and "saturates" not in page
    figures = sorted(p.name for p in out.glob("*.png") if p.name != "stale.png")
    assert "masf.png" in figures and page.count('<img src="data:image/png;base64,') == len(figures)
    assert "stale.png" not in page
    assert not re.search(r"""(src|href)=["'](https?:|//)""", page)  # nothing is fetched
    assert page.count('<section class="example"') == 3  # the first few examples of the one measure
    assert "<td>runs/masf/masf.json</td>" in page and "<td>numpy</td><td>2.0</td>" in page
    write_masf(tmp_path / "small", {"masked": [0.5] * 11}, floor=0.37)
    assert main(["report", str(tmp_path / "small"), "--out", str(tmp_path / "small-report")]) == 0
    assert "masked: the calibration saturates, no p-value can fall below 0.37" in capsys.readouterr().out
    assert main(["report", str(results), "--out", str(out), "--explanations", str(explained)]) == 2
    assert "add --html" in capsys.readouterr().err


def test_runs_of_other_erasure_units_are_other_groups_named_by_their_unit(tmp_path: Path):
    scores = {"rand": (0.0, 0.0), "loo-abs": (0.1, 0.5)}
    write_result(tmp_path, "sst2", "masked", 0, scores, 0.9, subdir="tokens")
    words = write_result(tmp_path, "sst2", "masked", 0, scores, 0.9, subdir="words")
    record = json.loads(words.read_text())
    words.write_text(json.dumps({**record, "arguments": {"data": {"dataset": "sst2", "unit": "word"}}}))
    report = load_report([tmp_path])
    assert [(g.unit, g.label) for g in report.groups] == [("token", "sst2"), ("word", "sst2, word units")]
    out = tmp_path / "report"
    write_report([tmp_path], out)
    header = "| sst2 (1 seed × 100 examples) | sst2, word units (1 seed × 100 examples) |"
    assert header in (out / "table.md").read_text()
    assert (out / "curves-sst2-masked-word.png").is_file() and (out / "curves-sst2-masked.png").is_file()


def test_a_measure_s_passes_are_its_own_and_shared_rows_are_said(tiny_babi, tmp_path: Path):
    """loo-sign beside loo-abs runs fewer rows than alone: exactly the rows it took from loo-abs's passes,
    which the record and timing.md give as its shared rows (counted once, under the measure that ran them)."""
    import fmm_fast

    _, onnx_path, data = tiny_babi
    common = {"dataset": "babi-1", **data, "limit": 4, "quiet": True}
    beside = fmm_fast.evaluate(onnx_path, out=tmp_path / "beside", measure=["loo-abs", "loo-sign"], **common)
    alone = fmm_fast.evaluate(onnx_path, out=tmp_path / "alone", measure=["loo-sign"], **common)
    sign_beside = beside.record["measures"]["loo-sign"]
    sign_alone = alone.record["measures"]["loo-sign"]
    assert sign_beside["shared_rows"] > sign_alone["shared_rows"]  # alone it shares only rand's rows
    needed = [m["forward_passes"] + m["shared_rows"] for m in (sign_beside, sign_alone)]
    assert needed[0] == needed[1]  # the rows it needs, whoever ran them
    assert beside.record["measures"]["rand"]["shared_rows"] == 0  # it runs first: every row is its own
    timing = render_timing_markdown(load_report([tmp_path / "beside"]))
    assert (
        "Rows from other measures' passes" in timing
        and "counted under the measure that ran it first" in timing
    )


def test_aopc_results_shown_in_their_table_are_not_listed_as_ignored(tiny_babi, tmp_path: Path):
    import fmm_fast

    _, onnx_path, data = tiny_babi
    common = {"dataset": "babi-1", **data, "limit": 4, "quiet": True}
    fmm_fast.evaluate(onnx_path, out=tmp_path / "runs" / "evaluate", **common)
    fmm_fast.aopc(onnx_path, out=tmp_path / "runs" / "aopc", **common)
    report = fmm_fast.report(tmp_path / "runs", out=tmp_path / "report")
    assert (report.path / "peer-metrics.md").is_file()
    assert report.record["ignored_files"] == []
