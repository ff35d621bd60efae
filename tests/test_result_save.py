"""result.save(dir) claims `dir` as a command claims its --out: never into a folder holding another run or
a user's files (nothing there overwritten or merged), the same run again is fine, and a saved copy is the
same run as its original (report counts it once)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fmm_fast
from fmm_fast.core.outputs import read_marker


def _result(folder: Path, seed: int, acu: float) -> fmm_fast.Evaluation:
    """An Evaluation of a hand-written record (no model runs: save only copies records)."""
    (folder / f"seed-{seed}").mkdir(parents=True)
    (folder / f"seed-{seed}" / "result.json").write_text(json.dumps({"seed": seed, "acu": acu}))
    return fmm_fast.Evaluation(folder)


def test_save_never_overwrites_a_user_s_file_of_the_same_name(tmp_path: Path) -> None:
    mine = tmp_path / "mine" / "seed-0" / "result.json"
    mine.parent.mkdir(parents=True)
    mine.write_text("my own notes")
    with pytest.raises(fmm_fast.UserError, match="not this run's"):
        _result(tmp_path / "run", 0, 0.5).save(tmp_path / "mine")
    assert mine.read_text() == "my own notes"


def test_save_never_merges_into_another_run(tmp_path: Path) -> None:
    first, second = _result(tmp_path / "a", 0, 0.5), _result(tmp_path / "b", 1, 0.7)
    saved = first.save(tmp_path / "saved")
    assert first.save(saved) == saved  # the same run again: fine
    with pytest.raises(fmm_fast.UserError, match="another evaluate run"):
        second.save(saved)
    assert sorted(fmm_fast.load(saved).records) == ["seed-0/result.json"]


def test_a_saved_copy_is_the_same_run_as_its_original(tmp_path: Path) -> None:
    saved = _result(tmp_path / "a", 0, 0.5).save(tmp_path / "saved")
    again = fmm_fast.load(saved).save(tmp_path / "again")
    assert read_marker(again)["fields"] == read_marker(saved)["fields"]
    with pytest.raises(fmm_fast.UserError, match="another evaluate run"):
        _result(tmp_path / "c", 0, 0.9).save(again)
