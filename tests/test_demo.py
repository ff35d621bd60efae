"""The demo's pipeline end to end on a tiny model (the real demo trains MiniLM for minutes)."""

from __future__ import annotations

import json
from dataclasses import fields, replace

from fmm_fast.core.records import dumps_record, read_record
from fmm_fast.core.settings import EvaluationSettings, MasfSettings, TrainSettings
from fmm_fast.demo import BEAM_MEASURE, DemoConfig, run_demo
from fmm_fast.training.base_models import TINY_ROBERTA


def test_demo_pipeline_writes_every_step_and_calibrates_on_the_whole_validation_split(tmp_path) -> None:
    config = DemoConfig(model=TINY_ROBERTA, lr=1e-3, train_size=300, eval_limit=3, beam_limit=1)
    summary = run_demo(tmp_path, config)
    assert set(summary["steps_seconds"]) == {"train", "export", "evaluate-curves", "evaluate-beam", "masf"}
    assert summary["machine"]["cpu"] and summary["machine"]["threads"] >= 1  # the times' machine, printed too
    assert {"rand", "grad-l2", "inp-grad-abs", "int-grad-abs", "loo-abs", "loo-sign", BEAM_MEASURE} <= set(
        summary["measures"]
    )
    # the 917-sentence validation split, not the 33 of the 300-sentence training run; split: half of it
    calibrations = summary["masf_calibration"]
    assert calibrations["in-sample"]["n"] == 917 and 0 < calibrations["in-sample"]["p_value_floor"] < 0.05
    assert calibrations["split"]["n_level_1"] == 458 and calibrations["split"]["n"] == 459
    assert 1 / 460 <= calibrations["split"]["p_value_floor"] <= 1
    assert {method: len(simes) for method, simes in summary["masf"].items()} == {"in-sample": 11, "split": 11}
    assert json.loads((tmp_path / "demo.json").read_text())["masf_calibration"] == summary["masf_calibration"]
    for name in ("model.onnx", "curves.png", "masf.png", "masf.json", "curves/result.json"):
        assert (tmp_path / name).is_file()
    # the demo's records have the shape the commands' have: the same settings objects in "arguments"
    for name, settings in [
        ("train/run.json", TrainSettings),
        ("curves/result.json", EvaluationSettings),
        ("beam/result.json", EvaluationSettings),
        ("masf.json", MasfSettings),
    ]:
        record = read_record(tmp_path / name)
        assert set(record["arguments"]) == {f.name for f in fields(settings)}
    assert read_record(tmp_path / "masf.json")["kind"] == "masf"


def test_a_rerun_skips_the_steps_whose_markers_say_they_finished_alike_and_redoes_changed_ones(
    tmp_path, monkeypatch
) -> None:
    import fmm_fast.demo

    ran: list[str] = []
    for name in ("train", "export_onnx", "evaluate_model"):
        real = getattr(fmm_fast.demo, name)
        monkeypatch.setattr(
            fmm_fast.demo,
            name,
            lambda *args, _real=real, _name=name, **kw: ran.append(_name) or _real(*args, **kw),
        )
    config = DemoConfig(model=TINY_ROBERTA, lr=1e-3, train_size=300, eval_limit=2, beam_limit=1)
    first = run_demo(tmp_path, config)
    assert ran == ["train", "export_onnx", "evaluate_model", "evaluate_model"]
    ran.clear()
    again = run_demo(tmp_path, config)  # nothing changed: every marked step is reused
    assert ran == [] and dumps_record(again["measures"]) == dumps_record(first["measures"])  # NaN-safe
    more = run_demo(tmp_path, replace(config, eval_limit=3))  # only the curves' step sees another limit
    assert ran == ["evaluate_model"]
    assert read_record(tmp_path / "curves" / "result.json")["n_examples"] == 3
    assert dumps_record(more["measures"]["beam"]) == dumps_record(first["measures"]["beam"])
    ran.clear()
    run_demo(tmp_path, replace(config, eval_limit=3, lr=2e-3))  # another model: every step after training
    assert ran == ["train", "export_onnx", "evaluate_model", "evaluate_model"]
