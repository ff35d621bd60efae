"""The bring-your-own-classifier example runs in its tiny mode: a transformers classifier fine-tuned without
fmm-fast, saved with save_pretrained, checked, masked-fine-tuned by fmm-fast from that folder, checked again,
evaluated and reported."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from fmm_fast.core.records import read_record

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "bring_your_own_classifier.py"


@pytest.fixture
def example(monkeypatch):
    spec = importlib.util.spec_from_file_location("bring_your_own_classifier", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def test_bring_your_own_classifier_tiny(example, tmp_path, capsys, one_torch_thread):
    killed = tmp_path / f"{example.STAGING_PREFIX}my-model-killed"  # what a kill mid-save leaves
    killed.mkdir()
    (killed / "config.json").write_text("{}")
    assert example.main(["--out", str(tmp_path), "--tiny"]) == 0
    assert not killed.exists()  # cleared, never reused
    config = json.loads((tmp_path / "my-model" / "config.json").read_text())  # transformers' own folder
    assert config["id2label"] == {"0": "negative", "1": "positive"}
    assert not (tmp_path / "my-model" / "fmm_info.json").exists()
    plain = read_record(tmp_path / "check-plain" / "check.json")
    assert plain["model"]["trained_by"] == "elsewhere" and plain["model"]["strategy"] == "unknown"
    assert plain["calibration"]["set"] == "unmasked"  # the default for every model
    training = read_record(tmp_path / "masked" / "run.json")  # continued from the folder, head kept
    assert training["model"]["base"] == str(tmp_path / "my-model")
    assert training["model"]["start"] == "classifier"
    masked = read_record(tmp_path / "check-masked" / "check.json")
    assert masked["model"]["strategy"] == "masked" and masked["calibration"]["set"] == "unmasked"  # the same
    assert [p["ratio"] for p in masked["points"]] == [0.0, 0.5, 1.0]
    assert read_record(tmp_path / "evaluate" / "seed-0" / "result.json")["n_examples"] == 3
    table = (tmp_path / "report" / "check.md").read_text()
    rows = [line for line in table.splitlines() if "my-model" in line]
    assert len(rows) == 1 and "| elsewhere |" in rows[0]
    printed = capsys.readouterr().out
    assert f"$ fmm-fast check --model {tmp_path / 'my-model'} --dataset movie-snippets" in printed
    assert f"plain fine-tuning:  {plain['verdict']['text']}" in printed
    assert f"masked fine-tuning: {masked['verdict']['text']}" in printed


def test_a_save_killed_at_any_point_leaves_no_model_folder(example, tmp_path):
    def killed_after_the_config(folder: Path) -> None:
        (folder / "config.json").write_text("{}")
        raise KeyboardInterrupt  # as a kill between save_pretrained's files

    with pytest.raises(KeyboardInterrupt):
        example.save_whole(tmp_path / "my-model", killed_after_the_config)
    assert list(tmp_path.iterdir()) == []  # no my-model for the rerun to reuse, no staging left
    example.save_whole(tmp_path / "my-model", lambda folder: (folder / "config.json").write_text("{}"))
    assert [p.name for p in tmp_path.iterdir()] == ["my-model"]
