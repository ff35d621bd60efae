"""The Python API: one function per protocol at the package root, each taking its command's options with
the command's defaults and validation, the command a thin wrapper over it (the same records), results as
objects, inputs as users hold them, and `import fmm_fast` light."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import fmm_fast
from fmm_fast.api.inputs import dataset_fields
from fmm_fast.cli import _register, app, main
from fmm_fast.core.errors import UserError

FUNCTIONS = {  # command -> its function's name at the package root
    "train": "train",
    "export": "export",
    "explain": "explain",
    "evaluate": "evaluate",
    "aopc": "aopc",
    "masf": "masf",
    "roar": "roar",
    "check": "check",
    "report": "report",
}
OUT_NONE = "out"  # a command's required --out is optional in Python: None runs in a temporary folder
# what differs between two runs of the same settings: clocks, the machine's load, versions of nothing else
VOLATILE = ("seconds", "machine", "durations", "duration")


@pytest.fixture(autouse=True)
def temporary_folders_in_tmp_path(tmp_path, monkeypatch):
    """out=None folders (tempfile.mkdtemp) land in the test's own tmp_path, not in the system's."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def _command_params() -> dict[str, list]:
    import typer

    _register()
    group = typer.main.get_command(app)
    return {
        name: [p for p in command.params if not getattr(p, "hidden", False)]
        for name, command in group.commands.items()
    }


def test_import_is_light_and_every_public_name_resolves() -> None:
    probe = (
        "import sys, fmm_fast; heavy = [m for m in ('torch', 'pandas', 'numpy', 'matplotlib', 'scipy') "
        "if m in sys.modules]; print(heavy)"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"
    for name in fmm_fast.__all__:
        assert getattr(fmm_fast, name) is not None


def test_the_subpackages_export_and_report_leave_the_functions_at_the_root() -> None:
    import fmm_fast.export.onnx_format
    import fmm_fast.report.load

    assert inspect.isfunction(fmm_fast.export) and inspect.isfunction(fmm_fast.report)
    assert fmm_fast.report.__module__ == "fmm_fast.api.reporting"


@pytest.mark.parametrize("name", [n for n in fmm_fast.__all__ if n != "__version__"])
def test_every_public_name_has_a_docstring_with_an_example(name: str) -> None:
    doc = inspect.getdoc(getattr(fmm_fast, name)) or ""
    assert len(doc) > 80, f"fmm_fast.{name} has no docstring"
    assert "Example" in doc, f"fmm_fast.{name}'s docstring has no example"


@pytest.mark.parametrize("command", list(FUNCTIONS))
def test_a_command_and_its_function_take_the_same_options_with_the_same_defaults(command: str) -> None:
    function = getattr(fmm_fast, FUNCTIONS[command])
    parameters = inspect.signature(function).parameters
    options = _command_params()[command]
    assert {p.name for p in options} == set(parameters), f"{command}: options and arguments differ"
    for option in options:
        default = parameters[option.name].default
        if option.required:
            assert default is inspect.Parameter.empty or option.name == OUT_NONE, option.name
            continue
        given = list(default) if isinstance(default, tuple) else default
        assert given == option.default, f"{command} --{option.name}: {option.default!r} vs {default!r}"


@pytest.mark.parametrize(
    ("flags", "arguments", "message", "argument_message"),
    [
        (["--seed", "-1"], {"seed": -1}, "seed", "seed=-1"),
        (["--limit", "0"], {"limit": 0}, "limit", "limit=0"),
        (["--token-budget", "0"], {"token_budget": 0}, "token-budget", "token_budget=0"),
        (["--cache-mb", "-1"], {"cache_mb": -1}, "cache-mb", "cache_mb=-1"),
        (["--fidelity-sample", "-1"], {"fidelity_sample": -1}, "fidelity-sample", "fidelity_sample=-1"),
        (["--measure", "no-such-measure"], {"measure": "no-such-measure"}, *["no-such-measure"] * 2),
        (["--precision", "fp8"], {"precision": "fp8"}, "fp8", "fp8"),
    ],
)
def test_a_function_refuses_what_its_command_refuses_before_any_work(
    flags, arguments, message, argument_message, tmp_path, capsys
) -> None:
    """The command names the flag; the function names its argument (argument_message)."""
    model = tmp_path / "no-model.onnx"
    command_out, function_out = tmp_path / "command", tmp_path / "function"
    assert main(["evaluate", "--model", str(model), "--out", str(command_out), *flags]) == 2
    assert message in capsys.readouterr().err
    with pytest.raises(UserError, match=argument_message):
        fmm_fast.evaluate(model, out=function_out, **arguments)
    assert not command_out.exists() and not function_out.exists()


def _scrubbed(record: object) -> object:
    """The record less what differs between two runs of the same settings (clocks, the machine)."""
    if isinstance(record, dict):
        return {k: _scrubbed(v) for k, v in record.items() if not any(word in k for word in VOLATILE)}
    if isinstance(record, list):
        return [_scrubbed(v) for v in record]
    return record


def _records(folder: Path, pattern: str) -> dict[str, object]:
    from fmm_fast.core.records import read_record

    files = sorted(folder.glob(pattern))
    assert files, f"{folder} has no {pattern}"
    return {str(f.relative_to(folder)): _scrubbed(read_record(f)) for f in files}


def test_a_command_and_its_function_write_the_same_records(tiny_babi, tmp_path, one_torch_thread) -> None:
    _checkpoint, onnx_path, data = tiny_babi
    flags = ["--dataset", "babi-1", "--size", str(data["size"]), "--test-size", str(data["test_size"])]
    python = {"dataset": "babi-1", **data, "quiet": True}
    runs = {
        "evaluate": (
            ["--model", str(onnx_path), "--measure", "loo-abs", "--limit", "4", "--seed", "0", "--seed", "1"],
            lambda out: fmm_fast.evaluate(
                onnx_path, measure="loo-abs", limit=4, seed=[0, 1], out=out, **python
            ),
            "seed-*/result.json",
        ),
        "aopc": (
            ["--model", str(onnx_path), "--measure", "loo-abs", "--limit", "4"],
            lambda out: fmm_fast.aopc(onnx_path, measure=["loo-abs"], limit=4, out=out, **python),
            "seed-*/result.json",
        ),
        "masf": (
            ["--model", str(onnx_path), "--limit", "4", "--seed", "3"],
            lambda out: fmm_fast.masf(onnx_path, limit=4, seed=3, out=out, **python),
            "masf.json",
        ),
        "roar": (
            [
                "--measure",
                "loo-abs",
                "--steps",
                "1",
                "--max-steps",
                "2",
                "--epochs",
                "1",
                "--limit",
                "4",
                "--no-erasure",
                "--lr",
                "1e-3",
            ],
            lambda out: fmm_fast.roar(
                measure="loo-abs",
                steps=1,
                max_steps=2,
                epochs=1,
                limit=4,
                erasure=False,
                lr=1e-3,
                out=out,
                **python,
            ),
            "result.json",
        ),
    }
    for command, (command_flags, function, pattern) in runs.items():
        by_command, by_function = tmp_path / f"{command}-command", tmp_path / f"{command}-function"
        assert main([command, *command_flags, *flags, "--quiet", "--out", str(by_command)]) == 0
        result = function(by_function)
        assert result.path == by_function
        assert _records(by_command, pattern) == _records(by_function, pattern), command
        assert result.records.keys() == _records(by_function, pattern).keys()


def test_results_show_save_load_and_become_frames(tiny_babi, tmp_path) -> None:
    _, onnx_path, data = tiny_babi
    evaluation = fmm_fast.evaluate(
        onnx_path, dataset="babi-1", **data, measure=["loo-abs"], limit=4, quiet=True
    )  # out=None: a temporary folder, kept
    assert evaluation.path.is_dir() and (evaluation.path / "curves.png").is_file()
    page = evaluation._repr_html_()
    assert "<td>loo-abs</td>" in page and "<td>rand</td>" in page and "data:image/png;base64," in page
    frame = evaluation.to_pandas()
    assert sorted(frame["measure"]) == ["loo-abs", "rand"] and "r=0.5" in frame
    saved = evaluation.save(tmp_path / "saved")
    loaded = fmm_fast.load(saved)
    assert type(loaded) is fmm_fast.Evaluation and loaded.records == evaluation.records

    masf = fmm_fast.masf(onnx_path, dataset="babi-1", **data, limit=4, quiet=True)
    assert type(fmm_fast.load(masf.path)) is fmm_fast.Masf
    assert "Simes" in masf._repr_html_() and set(masf.to_pandas()["ratio"]) == {r / 10 for r in range(11)}
    with pytest.raises(UserError, match="holds no"):
        fmm_fast.Masf.load(evaluation.path)

    report = fmm_fast.report([evaluation, masf], html=True)
    assert type(fmm_fast.load(report.path)) is fmm_fast.Report and (report.path / "report.html").is_file()
    shown = report._repr_html_()
    assert "Simes" in shown  # the MaSF verdicts
    # the tiny bAbI model does not converge: the report drops its seed, and says so
    assert "Dropped seeds" in shown and str(evaluation.path / "seed-0" / "result.json") in str(report.record)


def test_progress_bars_fit_the_place() -> None:
    from fmm_fast.core.progress import IN_NOTEBOOK, progress_bar

    assert not IN_NOTEBOOK  # pytest is no Jupyter kernel (tests/test_notebook.py checks one)
    assert progress_bar(3, "x", quiet=True).disable
    assert progress_bar(3, "x").disable  # stderr is captured here, not a terminal: no bar in logs


def test_explanations_show_the_word_viewer_inline_and_round_trip(tiny_babi, tmp_path) -> None:
    _, onnx_path, data = tiny_babi
    explanations = fmm_fast.explain(
        onnx_path, dataset="babi-1", **data, measure=["loo-abs", "loo-sign"], limit=2, quiet=True
    )
    assert len(explanations) == 4 and [e.index for e in explanations] == [0, 0, 1, 1]
    shown = explanations._repr_html_()
    assert shown.startswith("<iframe srcdoc=") and "<script" not in shown.split('srcdoc="')[1].split('"')[0]
    import html

    page = html.unescape(shown.split('srcdoc="')[1].split('" sandbox')[0])
    first_word = explanations[0].text.split()[0]
    assert first_word in page and "http://" not in page and "https://" not in page
    again = fmm_fast.Explanations.load(explanations.save(tmp_path / "again.jsonl"))
    assert [e.scores for e in again] == [e.scores for e in explanations]
    assert len(again.to_pandas()) == sum(len(e.tokens) for e in explanations)


def test_data_held_in_python_becomes_one_file_per_content(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    texts = [f"review number {i} is {'good' if i % 2 else 'bad'}" for i in range(30)]
    labels = ["good" if i % 2 else "bad" for i in range(30)]
    columns = dataset_fields({"text": texts, "label": labels}, None, None, None)
    rows = dataset_fields(
        [{"text": t, "label": y} for t, y in zip(texts, labels, strict=True)], None, None, None
    )
    assert columns == rows and columns[1:] == ("text", None, "label")
    lines = [json.loads(line) for line in Path(columns[0]).read_text().splitlines()]
    assert [line["text"] for line in lines] == texts and [line["label"] for line in lines] == labels
    other = dataset_fields({"words": texts, "y": labels[::-1]}, "words", None, "y")
    assert other[0] != columns[0]
    with pytest.raises(UserError, match="no column 'label'"):
        dataset_fields({"text": texts}, None, None, None)
    with pytest.raises(UserError, match="differ in length"):
        dataset_fields({"text": texts, "label": labels[:-1]}, None, None, None)
    from fmm_fast.data.options import DataOptions

    dataset = DataOptions(columns[0], text_field="text", label_field="label").load()
    assert sorted(dataset.label_names) == ["bad", "good"]
    assert sum(len(split) for split in dataset.splits.values()) == 30
