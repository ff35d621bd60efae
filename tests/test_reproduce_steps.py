"""bench/reproduce's steps resume through the commands' run markers: a step whose marker says it finished
with the same fingerprint is reused, a changed setting (or a retrained model) runs the steps it changes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fmm_fast.core.records import read_record
from fmm_fast.training.base_models import TINY_ROBERTA

BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_a_changed_setting_reruns_its_steps_and_an_unchanged_one_is_reused(tmp_path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    from reproduce_plan import DatasetPlan, Scale, Study
    from reproduce_steps import Timings, run_steps

    timings = Timings(None)

    def statuses(plan: DatasetPlan) -> list[str]:
        study = Study(Scale("test", (0,), (plan,)), tmp_path)
        steps = [*study.training_steps(plan, ["masked"], 0), study.evaluation_steps(plan, 0)[1]]  # beam
        run_steps(steps, timings)
        assert all(step.done() for step in steps)
        return [timings.steps[step.name]["status"] for step in steps]  # train, export, evaluate beam

    plan = DatasetPlan(
        "babi-1", TINY_ROBERTA, epochs=1, lr=1e-3, size=300, test_size=40, eval_limit=2, beam_limit=1,
        masf_limit=4, layers=1, width=32,
    )  # fmt: skip
    assert statuses(plan) == ["ran", "ran", "ran"]
    assert statuses(plan) == ["reused", "reused", "reused"]  # every marker: finished, same fingerprint
    beam = tmp_path / "evaluate" / "babi-1" / "seed-0" / "curves_beam" / "seed-0" / "result.json"
    assert statuses(replace(plan, beam_limit=2)) == ["reused", "reused", "ran"]  # another --limit
    assert read_record(beam)["n_examples"] == 2
    # another learning rate: another model, so its export and the evaluation of it run again too
    assert statuses(replace(plan, beam_limit=2, lr=2e-3)) == ["ran", "ran", "ran"]
    trained = read_record(tmp_path / "train" / "babi-1" / "masked" / "seed-0" / "run.json")
    assert trained["arguments"]["lr"] == 2e-3


@pytest.mark.parametrize("kind", ["train", "evaluate"])
def test_a_killed_step_is_not_done(tmp_path, monkeypatch, kind) -> None:
    """A claimed output whose run did not finish (killed) is run again, resuming where it can."""
    monkeypatch.syspath_prepend(str(BENCH))
    from reproduce_plan import DatasetPlan, Scale, Study

    from fmm_fast.core.outputs import claim_directory

    plan = DatasetPlan("babi-1", TINY_ROBERTA, 1, 1e-3, 300, 40, 2, 1, 4)
    study = Study(Scale("test", (0,), (plan,)), tmp_path)
    steps = study.training_steps(plan, ["masked"], 0) if kind == "train" else study.evaluation_steps(plan, 0)
    step = steps[0]
    assert step.state() == "todo"
    claim_directory(step.output, *step.claim())  # what the command does first
    assert not step.done() and step.state() == "started"
    (step.output / "run.json").write_text("{}")  # what the killed run wrote: kept for it to resume
    step.prepare()
    assert (step.output / "run.json").is_file()
