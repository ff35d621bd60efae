"""bench/reproduce's Recursive ROAR step: last in every chain with the chain's data, recipe and precision,
left out by --no-roar and --masf-only, redone when its result lacks a planned measure, and its section of
README-tables.md where it has not run.

The tiny end-to-end chain with ROAR (its table, and the same on Ray workers) is in test_reproduce_ray.py.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from fmm_fast.core import machine as machine_module
from fmm_fast.core.records import read_record
from fmm_fast.training.base_models import TINY_ROBERTA

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))


def roar_lines(output: str) -> list[str]:
    return [
        line.removeprefix("  $ ") for line in output.splitlines() if line.startswith("  $ fmm-fast roar ")
    ]


def test_every_chain_ends_with_roar_on_its_data_recipe_and_precision(bench, tmp_path, monkeypatch) -> None:
    from reproduce_plan import SCALES, Study

    tiny = SCALES["tiny"]
    for study in (Study(tiny, tmp_path), Study(replace(tiny, train_precision="bf16"), tmp_path)):
        monkeypatch.setattr(machine_module, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
        chains = study.chains()
        assert len(chains) == len(tiny.datasets) * len(tiny.seeds)
        for chain in chains:
            assert [step.name.startswith("recursive roar") for step in chain.steps].count(True) == 1
            assert chain.steps[-1].name == f"recursive roar {chain.plan.dataset} seed {chain.seed}: grad-l2"
        babi = next(c for c in chains if c.plan.dataset == "babi-2" and c.seed == 1)
        expected = (
            "fmm-fast roar --dataset babi-2 --size 300 --test-size 40 --model tiny-roberta --strategy plain "
            f"--seed 1 --epochs 1 --lr 0.001 --steps 2 -m grad-l2 --out {tmp_path}/roar/babi-2/seed-1"
        )
        precision = "" if study.scale.train_precision == "fp32" else " --precision bf16"
        assert babi.steps[-1].command == f"{expected}{precision} --layers 1 --width 32"
        # the same precision and tiny-roberta size as the chain's trainings
        training = next(step for step in babi.steps if step.name == "train babi-2 masked seed 1")
        assert training.command.endswith(f"{precision} --layers 1 --width 32")

    # the other scales: the reference's 10% steps (medium: 20%, half the cost), each dataset's own epochs,
    # so the chain's plain model is ROAR's step 0
    for name, steps in (("small", 10), ("medium", 5), ("paper", 10)):
        study = Study(SCALES[name], tmp_path)
        for chain in study.chains():
            command = chain.steps[-1].command
            assert f" --steps {steps} -m grad-l2 " in command
            assert f" --epochs {chain.plan.epochs} " in command and " --strategy plain " in command
            assert f" --step0 {study.train_dir(chain.plan.dataset, 'plain', chain.seed)} " in command
    medium = Study(SCALES["medium"], tmp_path).chains()
    assert {c.plan.dataset: c.steps[-1].command.split(" --epochs ")[1].split()[0] for c in medium} == {
        "babi-1": "2",
        "babi-2": "20",
    }


@pytest.mark.parametrize(
    ("flags", "roar_steps"),
    [([], 6), (["--no-roar"], 0), (["--masf-only"], 0), (["--masf-only", "--no-roar"], 0)],
)
def test_no_roar_and_masf_only_leave_the_roar_steps_out(bench, tmp_path, capsys, flags, roar_steps) -> None:
    from reproduce import main

    out = tmp_path / "study"
    assert main(["--scale", "tiny", "--out", str(out), "--dry-run", *flags]) == 0
    printed = capsys.readouterr().out
    assert len(roar_lines(printed)) == roar_steps
    report = [line for line in printed.splitlines() if line.startswith("  $ fmm-fast report ")]
    if "--masf-only" in flags:
        assert report == []
    else:  # the report reads the ROAR runs where the chains make them
        assert (f"{out}/roar " in report[0]) == (roar_steps > 0)


def test_a_study_written_before_the_roar_step_resumes_and_appends_it(bench, tmp_path, capsys) -> None:
    """settings.json as every study wrote it before (no ROAR plan): the same study, not another one."""
    from reproduce import main
    from reproduce_plan import SCALES

    out = tmp_path / "study"
    out.mkdir()
    fields = asdict(SCALES["tiny"])
    del fields["roar"], fields["train_precision"], fields["measures"]  # as written before these fields
    (out / "settings.json").write_text(json.dumps(fields, indent=2) + "\n")
    assert main(["--scale", "tiny", "--out", str(out), "--dry-run"]) == 0
    assert len(roar_lines(capsys.readouterr().out)) == 6
    fields["seeds"] = [0]  # a real difference is still refused
    (out / "settings.json").write_text(json.dumps(fields, indent=2) + "\n")
    assert main(["--scale", "tiny", "--out", str(out), "--dry-run"]) == 2


@pytest.mark.usefixtures("one_torch_thread")
def test_a_roar_result_missing_a_planned_measure_is_redone_by_resuming(bench, tmp_path) -> None:
    from reproduce_plan import DatasetPlan, RoarPlan, Scale, Study
    from reproduce_steps import Timings, run_steps

    # ROAR's 1 epoch, not the plan's 2: it trains its own step 0 (no chain training runs before it here)
    plan = DatasetPlan(
        "babi-1", TINY_ROBERTA, epochs=2, lr=1e-3, size=120, test_size=20, eval_limit=2, beam_limit=1,
        masf_limit=4, layers=1, width=32,
    )  # fmt: skip

    def roar_step(*measures: str):
        study = Study(Scale("test", (0,), (plan,), roar=RoarPlan(measures, steps=2, epochs=1)), tmp_path)
        return study.roar_step(plan, 0)

    first = roar_step("grad-l2")
    assert not first.done()
    run_steps([first], Timings(None))
    assert first.done()
    out = first.output
    grad = out / "seed-0" / "grad-l2" / "step-050" / "record.json"
    before = grad.read_text()

    more = roar_step("grad-l2", "loo-abs")  # the plan gained a measure: the finished run lacks it
    assert not more.done()
    timings = Timings(None)
    run_steps([more], timings)
    assert timings.steps[more.name]["status"] == "ran" and more.done() and first.done()
    result = read_record(out / "result.json")
    assert result["measures"] == ["rand", "grad-l2", "loo-abs"] and result["complete"]
    assert grad.read_text() == before  # resumed: grad-l2's steps were kept, not retrained

    # a result that says a step is missing is not done either, whatever the marker says
    result["complete"] = False
    (out / "result.json").write_text(json.dumps(result))
    assert not more.done()


def test_the_report_step_replaces_a_report_of_other_inputs(bench, tmp_path) -> None:
    """A study reported without ROAR, which then ran it: the report's inputs changed, and `fmm-fast
    report` refuses a directory claimed with other inputs, so the step clears its own report first."""
    from reproduce_plan import SCALES, Study

    from fmm_fast.core.outputs import claim_directory, read_marker
    from fmm_fast.report.write import report_fields

    study = Study(SCALES["tiny"], tmp_path)
    earlier = study.report_dir
    earlier.mkdir(parents=True)
    claim_directory(earlier, "report", report_fields([tmp_path / "evaluate"]), files=["report.json"])
    (earlier / "report.json").write_text("{}")
    (earlier / "notes.txt").write_text("mine")  # not the report's: kept
    step = study.report_step(roar=True)
    assert str(tmp_path / "roar") in step.command and not step.done()
    step.prepare()
    assert read_marker(earlier) is None and not (earlier / "report.json").exists()
    assert (earlier / "notes.txt").read_text() == "mine"


def test_the_tables_say_how_to_run_roar_where_it_did_not_run(bench, tmp_path) -> None:
    from reproduce_plan import SCALES, Study
    from reproduce_tables import roar_section

    study = Study(SCALES["tiny"], tmp_path)
    [line] = roar_section(study, "bench/reproduce --scale tiny --no-roar --seeds 0")
    assert "Recursive ROAR has not run in this study" in line
    assert "`bench/reproduce --scale tiny --seeds 0` runs it" in line
