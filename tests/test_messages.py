"""Messages about damaged or missing files: a damaged record is warned about once however often a run
reads it; repair advice names the folder to act on; an export script with nothing to write says why."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import numpy as np
import pytest
from test_report import EXPORT, write_result
from test_report_roar import write_roar

from fmm_fast.core.datatypes import save_ragged
from fmm_fast.core.errors import UserError
from fmm_fast.core.reading import read_state
from fmm_fast.protocols.curve_stats import RATIOS
from fmm_fast.protocols.masf.run import masked_test_sets

SHAPE = {"curve": [float]}


def test_a_damaged_state_warns_once_however_often_it_is_read(tmp_path, capsys):
    state = tmp_path / "state.json"
    state.write_text('{"curve": "x"}')
    for _ in range(3):  # e.g. a ROAR step's record: read when it runs, searched, summed up
        assert read_state(state, SHAPE) is None
    assert capsys.readouterr().err.count(f"{state} is damaged") == 1
    state.write_text('{"curve": [1, "y"]}')  # rewritten, and damaged again: told again
    assert read_state(state, SHAPE) is None and read_state(state, SHAPE) is None
    assert capsys.readouterr().err.count(f"{state} is damaged") == 1
    state.write_text('{"curve": [1.0]}')
    assert read_state(state, SHAPE) == {"curve": [1.0]} and capsys.readouterr().err == ""


TEST_IDS = [np.array([0, 5, 6, 2]), np.array([0, 7, 2])]


def saved_sets(seed_dir: Path, measure: str) -> Path:
    """The masked sets `fmm-fast evaluate --save-masked` writes for `measure` in a seed folder."""
    folder = seed_dir / "masked" / measure
    folder.mkdir(parents=True)
    for ratio in RATIOS[1:]:
        save_ragged(folder / f"ratio-{ratio:.1f}.npz", TEST_IDS, labels=np.array([0, 1]))
    return folder


def refusal(masked_dir: Path) -> str:
    with pytest.raises(UserError) as refused:
        masked_test_sets(TEST_IDS, None, 4, 0, masked_dir)
    return str(refused.value)


def test_masked_sets_advice_names_the_seed_folder(tmp_path):
    evaluation = tmp_path / "eval"
    for seed in (0, 1):
        saved_sets(evaluation / f"seed-{seed}", "loo-abs")
    sets = masked_test_sets(TEST_IDS, None, 4, 0, evaluation / "seed-0" / "masked" / "loo-abs")
    assert len(sets) == len(RATIOS) and [len(s) for s in sets.values()] == [2] * len(RATIOS)
    # the evaluation's --out given as --evaluation: the sets are one folder down
    message = refusal(evaluation / "masked" / "loo-abs")
    assert f"give --evaluation {evaluation / 'seed-0'} (or {evaluation / 'seed-1'})" in message
    # a seed folder without the measure's sets, or with a damaged one: rerun into the evaluation's --out
    for seed, measure in ((0, "grad-l2"), (1, "loo-abs")):
        broken = evaluation / f"seed-{seed}" / "masked" / measure
        if broken.is_dir():
            (broken / "ratio-0.3.npz").write_bytes(b"not a zip")
        message = refusal(broken)
        assert f"`fmm-fast evaluate --out {evaluation}`" in message
        assert f"--measure {broken.name} --overwrite" in message and str(broken) in message
    assert "is damaged" in message


def test_make_figures_with_nothing_to_draw_says_why(tmp_path, monkeypatch, capsys):
    script = "make_figures.py"
    roar_only = write_roar(tmp_path / "roar", seeds=(0,))
    unconverged = tmp_path / "unconverged"
    write_result(unconverged, "babi-2", "masked", 0, {"rand": (0.0, 0.0)}, unmasked=0.3, metric="micro_f1")
    monkeypatch.syspath_prepend(str(EXPORT))  # as `python export/SCRIPT` puts the script's folder first
    for results, why in ((roar_only, "no `fmm-fast evaluate` result under"), (unconverged, "not converged")):
        out = tmp_path / f"out-{results.name}"
        monkeypatch.setattr(sys, "argv", [script, "--results", str(results), "--out", str(out)])
        with pytest.raises(SystemExit) as exit_:
            runpy.run_path(str(EXPORT / script), run_name="__main__")
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and why in err and str(results) in err and len(err.splitlines()) == 1
        assert not out.exists()  # nothing claimed, nothing written
