"""examples/quickstart.ipynb runs top to bottom in a real Jupyter kernel (nbclient + ipykernel), offline,
and shows what it says: the evaluation's table names its measures, the explanations' viewer the words."""

from __future__ import annotations

import html
import os
import resource
from pathlib import Path

import pytest

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "quickstart.ipynb"
CELL_TIMEOUT_S = 1800  # a guard against a hung kernel on a busy machine, not a speed check


def _html(cell: dict) -> str:
    return "".join(o.get("data", {}).get("text/html", "") for o in cell["outputs"])


def _has_png(cell: dict) -> bool:
    return any("image/png" in o.get("data", {}) for o in cell["outputs"])


def test_quickstart_runs_in_a_kernel_and_shows_the_measures_and_the_words(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(NOTEBOOK.parent.parent), os.environ.get("PYTHONPATH", "")])
    )
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    bar_check = "import tqdm.notebook\nfrom fmm_fast.core.progress import progress_bar\n"
    bar_check += (
        "isinstance(progress_bar(2, 'bar'), tqdm.notebook.tqdm), progress_bar(2, 'bar', quiet=True).disable"
    )
    notebook.cells.append(nbformat.v4.new_code_cell(bar_check))  # the kernel's bar: a notebook one
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    client = nbclient.NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError, with the cell and its traceback, when a cell fails
    print(f"kernel CPU time {resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before:.0f} s")

    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    errors = [o for cell in code for o in cell["outputs"] if o.get("output_type") == "error"]
    assert not errors

    evaluation = next(cell for cell in code if cell.source.rstrip().endswith("\nevaluation"))
    table = _html(evaluation)
    for measure in ("rand", "loo-abs", "grad-l2", "inp-grad-abs"):
        assert f"<td>{measure}</td>" in table, measure
    assert "data:image/png;base64," in table  # the curves, inline

    frame = next(cell for cell in code if cell.source == "evaluation.to_pandas()")
    assert "inp-grad-abs" in _html(frame) and "racu" in _html(frame)
    assert _has_png(next(cell for cell in code if cell.source == "evaluation.plot()"))

    viewer = _html(next(cell for cell in code if cell.source.rstrip().endswith("\nexplanations")))
    page = html.unescape(viewer[viewer.index('srcdoc="') + len('srcdoc="') : viewer.index('" sandbox')])
    assert "fmm-fast explanations" in page and "loo-abs" in page and "grad-l2" in page
    assert "http://" not in page and "https://" not in page  # self-contained: no outside resources

    from fmm_fast.data import load_dataset

    split = load_dataset("movie-snippets", size=200, test_size=20).splits["test"]
    words = [word.strip(".,!?;:'\"()") for word in split.first[0].split()]
    assert sum(word in page for word in words if len(word) > 3) >= 3  # the first example's words are shown

    (bar,) = [o["data"]["text/plain"] for o in code[-1]["outputs"] if o["output_type"] == "execute_result"]
    assert bar == "(True, True)"  # a notebook bar in Jupyter, none when quiet
    masf = _html(code[-2])
    assert "in-sample" in masf and "Simes" in masf and "<td>" in masf
