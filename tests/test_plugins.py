"""Plug-in measures (docs/guides/your-measure.md): a measure in a file outside the repository, a Python
function or instance, an installed package's entry point, each run recursively by `evaluate` and named in
its record; a changed source is refused on resume; report shows them; bad plug-ins exit 2 with one line."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import fmm_fast
from fmm_fast.cli import main
from fmm_fast.core.errors import UserError
from fmm_fast.core.records import read_record
from fmm_fast.measures.spec import resolve_measures

MEASURES_FILE = '''
import os
import tempfile
from pathlib import Path

import numpy as np

import fmm_fast


class Ends(fmm_fast.Measure):
    """Later explained tokens first; with `trace`, every call leaves a file there named by its process."""

    name = "ends"
    signed = False

    def __init__(self, power: float = 1.0, trace: str = "") -> None:
        self.power, self.trace = power, trace

    def explain(self, batch, engine):
        if self.trace:
            os.close(tempfile.mkstemp(dir=self.trace, prefix=f"{os.getpid()}-")[0])
        positions = np.arange(batch.input_ids.shape[1], dtype=np.float64) ** self.power
        return np.where(batch.explained, positions[None, :], 0.0)


class Raises(Ends):
    name = "raises"

    def explain(self, batch, engine):
        if (batch.input_ids == engine.info.mask_id).any():  # from the second erasure step on
            raise ValueError("no masked input, please")
        return super().explain(batch, engine)


class WrongShape(Ends):
    name = "wrong-shape"

    def explain(self, batch, engine):
        return super().explain(batch, engine)[:, :1]


class NotFinite(Ends):
    name = "not-finite"

    def explain(self, batch, engine):
        scores = super().explain(batch, engine)
        scores[-1, np.flatnonzero(batch.explained[-1])[0]] = np.nan
        return scores
'''
LIMIT = 4


@fmm_fast.measure(signed=True)
def first_first(batch, engine):
    """Earlier explained tokens first (signed: later ones score below 0)."""
    positions = np.arange(batch.input_ids.shape[1], dtype=np.float64)
    return np.where(batch.explained, -positions[None, :], 0.0)


class Scaled(fmm_fast.Measure):
    name = "scaled"
    signed = False

    def __init__(self, factor: float = 1.0) -> None:
        self.factor = factor

    def explain(self, batch, engine):
        return np.where(batch.explained, self.factor * batch.input_ids, 0.0)


def _measures_file(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "my_measures.py"
    path.write_text(MEASURES_FILE)
    return path


def _evaluate(onnx: Path, data: dict, out: Path, *measures: str, extra: tuple[str, ...] = ()) -> int:
    argv = ["evaluate", "--model", str(onnx), "--dataset", "babi-1", "--limit", str(LIMIT), "--quiet"]
    argv += ["--size", str(data["size"]), "--test-size", str(data["test_size"]), "--out", str(out)]
    for name in measures:
        argv += ["-m", name]
    return main([*argv, *extra])


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("fmm-fast: error: ") and err.count("\n") == 1, err
    return err


def test_a_measure_file_runs_recursively_is_recorded_and_a_changed_one_is_refused(
    tiny_babi, tmp_path, monkeypatch, capsys
):
    _, onnx, data = tiny_babi
    folder = tmp_path / "elsewhere"  # outside the repository, given relative to the working directory
    measures = _measures_file(folder)
    monkeypatch.chdir(folder)
    out = tmp_path / "out"
    trace = tmp_path / "trace"
    trace.mkdir()
    options = ("--measure-option", "power=2", "--measure-option", f"trace={trace}")
    assert _evaluate(onnx, data, out, "./my_measures.py:Ends", "loo-abs", extra=options) == 0
    record = read_record(out / "seed-0" / "result.json")
    digest = hashlib.sha256(measures.read_bytes()).hexdigest()
    assert record["measures"]["ends"]["source"] == {
        "from": "file",
        "locator": f"{measures.resolve()}:Ends",
        "version": None,
        "sha256": digest,
    }
    assert record["measures"]["ends"]["signed"] is False and record["measures"]["ends"]["recursive"]
    assert record["arguments"]["measure_options"] == {"power": 2.0, "trace": str(trace)}  # as annotated
    assert len(record["curves"]["ends"][record["metric"]]) == 11
    assert record["measures"]["loo-abs"]["source"]["from"] == "builtin"
    assert len(os.listdir(trace)) == 9  # recursive: explained again at every step r = 0.1 .. 0.9 (1 batch)

    assert _evaluate(onnx, data, out, "./my_measures.py:Ends", "loo-abs", extra=options) == 0  # resumes
    capsys.readouterr()
    before = (out / "seed-0" / "result.json").read_bytes()
    measures.write_text(MEASURES_FILE.replace("** self.power", "** (self.power + 1)"))  # same name
    assert _evaluate(onnx, data, out, "./my_measures.py:Ends", "loo-abs", extra=options) == 2
    err = _one_line(capsys)
    assert "measure_source_sha256.ends" in err and digest[:11] in err
    assert (out / "seed-0" / "result.json").read_bytes() == before  # nothing overwritten

    # the run's own record; named a movie-snippets run, as report drops a bAbI run that did not converge
    # (the tiny model has not), and report reads what it needs from the record: it never imports `ends`
    shown = tmp_path / "shown" / "result.json"
    shown.parent.mkdir()
    shown.write_text(json.dumps({**read_record(out / "seed-0" / "result.json"), "dataset": "movie-snippets"}))
    report = tmp_path / "report"
    assert main(["report", str(shown.parent), "--out", str(report)]) == 0
    tables = "".join(path.read_text() for path in report.glob("*.md"))
    assert "| ends" in tables and "| loo-abs" in tables  # the plug-in beside the built-in ones


def test_a_python_function_and_an_instance_run_through_evaluate(tiny_babi, tmp_path):
    _, onnx, data = tiny_babi

    @fmm_fast.measure(signed=False, name="nested")
    def nested(batch, engine):  # no import reaches it: kept as an object of this process
        return np.where(batch.explained, 1.0, 0.0)

    evaluation = fmm_fast.evaluate(
        onnx,
        dataset="babi-1",
        **data,
        limit=LIMIT,
        measure=[first_first, Scaled(factor=3.0), nested],
        out=tmp_path / "py",
        quiet=True,
    )
    record = read_record(evaluation.path / "seed-0" / "result.json")
    assert list(record["measures"]) == ["rand", "first_first", "scaled", "nested"]
    first = record["measures"]["first_first"]
    assert first["signed"] is True and first["source"]["from"] == "import"
    assert first["source"]["locator"] == f"{__name__}:first_first"
    assert first["source"]["sha256"] == hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    assert record["measures"]["scaled"]["source"]["locator"] == f"{__name__}:Scaled"
    assert record["arguments"]["measure_options"] == {"factor": 3.0}  # the instance's own option
    assert record["measures"]["nested"]["source"]["from"] == "python"


def test_an_installed_packages_entry_point_is_a_measure_name(tiny_babi, tmp_path, monkeypatch):
    _, onnx, data = tiny_babi
    site = tmp_path / "site"
    (site / "tail_measures").mkdir(parents=True)
    (site / "tail_measures" / "__init__.py").write_text(MEASURES_FILE)
    info = site / "tail_measures-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tail-measures\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text("[fmm_fast.measures]\nends = tail_measures:Ends\n")
    (info / "top_level.txt").write_text("tail_measures\n")
    monkeypatch.syspath_prepend(str(site))
    assert _evaluate(onnx, data, tmp_path / "out", "ends") == 0
    source = read_record(tmp_path / "out" / "seed-0" / "result.json")["measures"]["ends"]["source"]
    assert source["from"] == "entry-point" and source["locator"] == "ends" and source["version"] == "1.2.3"
    assert source["sha256"] == hashlib.sha256(MEASURES_FILE.encode()).hexdigest()


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("Raises", "measure 'raises' failed on example 0 (ValueError: no masked input, please)"),
        ("WrongShape", "measure 'wrong-shape' returned scores of shape (4, 1)"),
        ("NotFinite", "measure 'not-finite' gave example "),
    ],
)
def test_a_bad_measure_exits_2_naming_it_and_the_example_and_keeps_what_was_computed(
    tiny_babi, tmp_path, capsys, name, problem
):
    _, onnx, data = tiny_babi
    measures = _measures_file(tmp_path / "elsewhere")
    out = tmp_path / "out"
    assert _evaluate(onnx, data, out, "loo-abs", f"{measures}:{name}") == 2
    assert problem in _one_line(capsys)
    state = out / "seed-0" / "state"
    assert len(json.loads((state / "loo-abs.json").read_text())["curve"]) == 11  # finished before: kept
    if name == "Raises":  # its first step ran on the unmasked inputs and was saved
        assert len(json.loads((state / "raises.json").read_text())["curve"]) == 2


@pytest.mark.parametrize(
    ("measure", "message"),
    [
        ("./nofile.py:X", "no file"),
        ("json:Missing", "--measure json:Missing: it has no 'Missing'"),
        ("no_such_module_zz:X", "cannot import no_such_module_zz (ModuleNotFoundError"),
        ("json:dumps", "does not say whether its scores are signed"),
        ("no-such-plugin", "unknown measure 'no-such-plugin'"),
    ],
)
def test_an_unimportable_measure_exits_2_with_one_line(tmp_path, capsys, measure, message):
    out = tmp_path / "out"
    assert main(["evaluate", "--model", "no-model.onnx", "-m", measure, "--out", str(out)]) == 2
    assert message in _one_line(capsys)
    assert not out.exists()


def test_plugin_options_are_typed_and_checked_against_the_measures_chosen(tmp_path):
    measures = _measures_file(tmp_path)
    specs = resolve_measures([f"{measures}:Ends"], {"power": "0.5", "ig_steps": "3"})
    assert dict(specs[1].options) == {"power": 0.5}  # the built-in knob is ignored by it, as before
    with pytest.raises(UserError, match=r"power of .*:Ends must be float, got 'high'"):
        resolve_measures([f"{measures}:Ends"], {"power": "high"})
    with pytest.raises(UserError, match=r"unknown measure option\(s\) power: none of the measures chosen"):
        resolve_measures(["loo-abs"], {"power": "2"})
    with pytest.raises(UserError, match="named 'loo-abs', as a built-in measure is"):
        resolve_measures([f"{_renamed(tmp_path, 'loo-abs')}:Ends"])


def _renamed(folder: Path, name: str) -> Path:
    path = folder / "renamed.py"
    path.write_text(MEASURES_FILE.replace('name = "ends"', f'name = "{name}"'))
    return path


def test_aopc_reads_explains_own_jsonl_as_it_is(tiny_babi, tmp_path):
    _, onnx, data = tiny_babi
    common = ["--model", str(onnx), "--dataset", "babi-1", "--limit", str(LIMIT), "--quiet"]
    common += ["--size", str(data["size"]), "--test-size", str(data["test_size"])]
    explained = tmp_path / "mine.jsonl"
    assert main(["explain", *common, "-m", "loo-sign", "--out", str(explained)]) == 0
    out = tmp_path / "aopc"
    assert main(["aopc", *common, "--explanations", str(explained), "--out", str(out)]) == 0
    record = read_record(out / "seed-0" / "result.json")
    assert record["measures"]["mine"]["source"] == str(explained)


def test_curve_colours_stay_distinct_past_ten_measures():
    from fmm_fast.report.plots import curve_colors

    for count in (3, 12, 25):
        assert len(set(curve_colors(count))) == count


def test_a_measure_file_runs_on_two_ray_workers(tiny_babi, tmp_path, monkeypatch):
    pytest.importorskip("ray")
    _, onnx, data = tiny_babi
    measures = _measures_file(tmp_path / "elsewhere")
    trace = tmp_path / "trace"
    trace.mkdir()
    options = ("--measure-option", f"trace={trace}", "--workers", "2")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(fmm_fast.__file__).parent.parent)]))
    assert _evaluate(onnx, data, tmp_path / "out", f"{measures}:Ends", extra=options) == 0
    callers = {name.partition("-")[0] for name in os.listdir(trace)}
    assert callers and str(os.getpid()) not in callers  # the workers explained, rebuilt from the file
    one = tmp_path / "one"
    assert _evaluate(onnx, data, one, f"{measures}:Ends", extra=options[:2]) == 0
    sharded = read_record(tmp_path / "out" / "seed-0" / "result.json")
    assert sharded["curves"] == read_record(one / "seed-0" / "result.json")["curves"]
    assert sharded["measures"]["ends"]["source"]["from"] == "file"


def test_report_reads_signed_from_a_roar_record_without_importing_the_measure(tmp_path):
    from fmm_fast.report.load import load_run

    recorded = Path(__file__).parent.parent / "docs" / "results" / "roar-2026-12-01" / "roar" / "result.json"
    text = recorded.read_text().replace('"loo-abs"', '"pair-loo"')  # a plug-in report cannot import
    record = json.loads(text)
    path = tmp_path / "result.json"
    path.write_text(json.dumps(record))
    with pytest.raises(UserError, match="unknown measure 'pair-loo'"):  # a record of before: no "signed"
        load_run(path)
    record["signed"] = {name: name == "pair-loo" for name in record["measures"]}
    path.write_text(json.dumps(record))
    assert load_run(path).signed["pair-loo"] is True


def test_reproduce_erases_your_measures_beside_the_built_in_ones(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "bench"))
    from reproduce_plan import CURVE_MEASURES, SCALES, Study

    from fmm_fast.measures.plugins import absolute_locator

    measures = _measures_file(tmp_path / "elsewhere")
    monkeypatch.chdir(tmp_path / "elsewhere")
    locator = absolute_locator("./my_measures.py:Ends")  # what reproduce --measure hands every chain
    assert locator == f"{measures}:Ends"
    scale = replace(SCALES["tiny"], measures=(locator,))
    curves = Study(scale, tmp_path / "study").evaluation_steps(scale.datasets[0], 0)[0]
    assert f"-m {locator}" in curves.command
    output = tmp_path / "out"
    output.mkdir()
    for names in ([*CURVE_MEASURES, "rand"], [*CURVE_MEASURES, "rand", "ends"]):
        (output / "result.json").write_text(json.dumps({"measures": {key: {} for key in names}}))
        assert curves.complete(output) == ("ends" in names)  # keyed by the measure's own name


def test_explain_and_aopc_take_your_measure_too(tiny_babi, tmp_path):
    _, onnx, data = tiny_babi
    explanations = fmm_fast.explain(
        onnx, dataset="babi-1", **data, measure=first_first, limit=2, out=tmp_path / "e.jsonl"
    )
    assert {e.measure for e in explanations} == {"first_first"}
    scores = np.asarray(explanations[0].scores)
    explained = np.flatnonzero(explanations[0].explained)
    assert np.all(np.diff(scores[explained]) < 0)  # earlier explained tokens first, as the function says
    sources = read_record(tmp_path / "e.run.json")["sources"]
    assert sources["first_first"]["from"] == "import"
    measures = _measures_file(tmp_path / "elsewhere")
    out = tmp_path / "aopc"
    argv = ["aopc", "--model", str(onnx), "--dataset", "babi-1", "--limit", "2", "--quiet", "--out", str(out)]
    argv += ["--size", str(data["size"]), "--test-size", str(data["test_size"]), "-m", f"{measures}:Ends"]
    assert main(argv) == 0
    assert read_record(out / "seed-0" / "result.json")["measures"]["ends"]["source"]["from"] == "file"
