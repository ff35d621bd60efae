"""Run settings (record form, fingerprint), the run-record reader/writer and its NaN policy, and the option
groups the commands share."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, fields, replace

import pytest
import typer

from fmm_fast.backends.options import BackendOptions
from fmm_fast.cli import _register, main
from fmm_fast.cli.app import app
from fmm_fast.core.errors import UserError
from fmm_fast.core.records import read_record, write_record
from fmm_fast.core.settings import (
    AopcSettings,
    EngineOptions,
    EvaluationSettings,
    ExplainSettings,
    MasfSettings,
    RoarSettings,
    TrainSettings,
)
from fmm_fast.data.options import DataOptions
from fmm_fast.measures.registry import parse_measure_options
from fmm_fast.report.load import load_result

DATA = DataOptions("babi-1", "test", limit=5, size=40, test_size=10)


# ---------------------------------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    "settings",
    [
        TrainSettings(DATA, epochs=2, lr=1e-3, max_steps=3, backend=BackendOptions(device="cpu")),
        EvaluationSettings("m.onnx", DATA, ("loo-abs", "beam"), 3, {"ig_steps": 4}, True),
        ExplainSettings("m", DATA, ("int-grad-sign", "loo-abs"), 1, {"ig_steps": 2}, EngineOptions(512, 8)),
        MasfSettings(("a.onnx", "b"), DATA, 2, "loo-abs", "eval/seed-0"),
        AopcSettings("m.onnx", DATA, ("loo-abs", "rand"), 2, {"ig_steps": 3}, ("outside.jsonl",)),
    ],
)
def test_the_record_form_holds_every_field_as_json(settings) -> None:
    arguments = settings.to_dict()
    assert json.loads(json.dumps(arguments)) == arguments  # what a record stores it gives back
    assert set(arguments) == {f.name for f in fields(settings)}
    assert arguments["data"] == json.loads(json.dumps(asdict(settings.data)))  # nested options as objects
    assert arguments["data"]["data_seed"] == 0 and "seed" not in arguments["data"]


def test_evaluation_fingerprint_covers_what_changes_the_numbers_only() -> None:
    base = EvaluationSettings("m", DATA, ("loo-abs",))
    same = [
        replace(base, measures=("loo-abs", "grad-l2")),  # a rerun may add measures
        replace(base, engine=EngineOptions(token_budget=99, explain_batch_rows=3, cache_mb=0)),
        replace(base, backend=BackendOptions(device="cpu")),
        replace(base, save_masked=True),
    ]
    other = [
        replace(base, model="n"),
        replace(base, seed=1),
        replace(base, data=replace(DATA, size=41)),
        replace(base, data=replace(DATA, data_seed=1)),
        replace(base, measure_options={"ig_steps": 5}),
        replace(base, backend=BackendOptions(provider="cpu")),  # precision and provider shape the numbers
        replace(base, data=replace(DATA, label_map=(("a", "negative"),))),
        replace(base, data=replace(DATA, metric="macro-f1")),
    ]
    assert all(s.fingerprint() == base.fingerprint() for s in same)
    assert len({s.fingerprint() for s in [base, *other]}) == 1 + len(other)


def test_measures_are_resolved_once_into_specs() -> None:
    given = ("beam", "loo-abs", "rand", "beam-sign-10", "inp-grad-sign")
    settings = EvaluationSettings("m", DATA, given, measure_options={"ig_steps": 2})
    assert settings.to_dict()["measures"] == list(given)  # the record keeps what the user gave
    rand, beam, loo, gradient = settings.specs  # rand first, canonical names, each once
    assert [s.name for s in settings.specs] == ["rand", "beam-sign-10", "loo-abs", "inp-grad-sign"]
    assert (beam.signed, beam.recursive, loo.signed, gradient.needs_gradients) == (True, False, False, True)
    assert rand.build(seed=3, step=2).seed == 3002 and rand.build(seed=3).seed == 3  # the one seed rule
    assert gradient.build(0, 1).name == "inp-grad-sign" and dict(gradient.options) == {}  # takes none
    assert replace(settings, measures=("loo-abs",)).specs == (rand, loo)
    assert AopcSettings("m", DATA, given).specs == RoarSettings(DATA, measures=given).specs
    explained = ExplainSettings("m", DATA, ("loo-abs", "beam"), measure_options={"beam_size": 3})
    assert [s.name for s in explained.specs] == ["loo-abs", "beam-sign-3"]  # exactly what is asked


def test_training_lr_defaults_to_the_guides_on_a_local_file_and_the_papers_on_a_registry_dataset() -> None:
    """The guides fine-tune a local file 2 epochs at 5e-5 (docs/guides/train.md); the paper's datasets keep
    2e-5, resolved into the settings, so a registry run's fingerprint is what it was (it resumes)."""
    for dataset, lr in (("babi-1", 2e-5), ("mine.csv", 5e-5), ("tr.csv,va.csv,te.csv", 5e-5)):
        data = DataOptions(dataset)
        assert TrainSettings(data).lr == lr and TrainSettings(data).fingerprint_fields()["lr"] == lr
        assert RoarSettings(data, measures=("grad-l2",)).lr == lr
        assert TrainSettings(data, lr=1e-3).lr == 1e-3


def test_masf_fingerprint_holds_the_split_reduction() -> None:
    base = MasfSettings(("m",), DATA, calibrations=("split",))
    assert base.split_components == 32 and base.to_dict()["split_components"] == 32
    assert replace(base, split_components=0).fingerprint() != base.fingerprint()
    assert replace(base, split_components=16).fingerprint() != base.fingerprint()


def test_aopc_fingerprint_holds_the_content_of_each_explanations_file(tmp_path) -> None:
    explanations = tmp_path / "outside.jsonl"
    explanations.write_text('{"index": 0, "token_scores": [1]}\n')
    base = AopcSettings("m", DATA, ("loo-abs",), explanations=(str(explanations),))
    assert replace(base, measures=("grad-l2",)).fingerprint() == base.fingerprint()  # measures may be added
    assert replace(base, engine=EngineOptions(explain_batch_rows=3)).fingerprint() == base.fingerprint()
    before = base.fingerprint()
    explanations.write_text('{"index": 0, "token_scores": [2]}\n')  # other scores under the same name
    assert base.fingerprint() != before
    assert replace(base, explanations=()).fingerprint() != base.fingerprint()


FP8 = BackendOptions(precision="fp8")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: EvaluationSettings("m", DATA, ("lo-abs",)), "unknown measure 'lo-abs'"),
        (lambda: EvaluationSettings("m", DATA, measure_options={"ig_step": 2}), "unknown measure option"),
        (lambda: ExplainSettings("m", DATA, measure_options={"ig_steps": 0}), "ig_steps must be an integer"),
        (lambda: ExplainSettings("m", DATA, ("beam", "beam-sign-10")), "beam-sign-10 is given twice"),
        (lambda: MasfSettings(("m",), DATA, measure="loo-abs"), "go together"),
        (lambda: MasfSettings(("m",), DATA, split_components=-1), "--split-components must be 0 .* got -1"),
        (lambda: TrainSettings(DATA, width=100), "--width 100 does not work"),
        (lambda: EngineOptions(token_budget=0), "--token-budget must be at least 1"),
        (lambda: EngineOptions(cache_mb=-1), "--cache-mb must be 0 .* got -1"),
        (lambda: BackendOptions(provider="tpu"), "unknown ONNX Runtime provider 'tpu'"),
        # the precision's one check, where the settings resolve it
        (lambda: EvaluationSettings("m.onnx", DATA, backend=FP8), "unknown precision 'fp8'"),
        (lambda: TrainSettings(DATA, backend=FP8), "unknown precision 'fp8'"),
    ],
)
def test_settings_refuse_bad_values(build, message) -> None:
    with pytest.raises(UserError, match=message):
        build()


def test_measure_option_pairs_parse_and_validate() -> None:
    # text until the measures chosen convert it to their constructors' annotations
    assert parse_measure_options(["ig_steps=7", "beam_size=2"]) == {"ig_steps": "7", "beam_size": "2"}
    with pytest.raises(UserError, match="is not KEY=VALUE"):
        parse_measure_options(["ig_steps"])
    settings = EvaluationSettings("m", DATA, ("int-grad-sign",), measure_options={"ig_steps": "7"})
    assert settings.measure_options == {"ig_steps": 7} and dict(settings.specs[1].options) == {"ig_steps": 7}
    for pair, message in [
        ("ig_steps=seven", "ig_steps of int-grad-sign must be an integer, got 'seven'"),
        ("ig_steps=0", "ig_steps must be an integer >= 1"),
        ("igsteps=3", "unknown measure option(s) igsteps: none of the measures chosen (rand, int-grad-sign)"),
    ]:
        with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
            EvaluationSettings("m", DATA, ("int-grad-sign",), measure_options=parse_measure_options([pair]))


# ---------------------------------------------------------------------------------------------- records


def test_non_finite_numbers_are_null_with_a_reason_and_read_back(tmp_path) -> None:
    record = {
        "kind": "evaluate",
        "racu": math.nan,
        "curve": [0.5, math.inf, -math.inf],
        "measures": {"a/b~c": {"acu": math.nan, "limit": None}},
    }
    path = tmp_path / "r.json"
    write_record(path, record)

    def refuse(constant: str) -> None:
        raise AssertionError(f"bare {constant} in a record")

    on_disk = json.loads(path.read_text(), parse_constant=refuse)  # strict JSON: no NaN literal
    assert on_disk["racu"] is None and on_disk["curve"] == [0.5, None, None]
    assert on_disk["non_finite"] == {
        "/racu": "nan",
        "/curve/1": "inf",
        "/curve/2": "-inf",
        "/measures/a~1b~0c/acu": "nan",
    }
    back = read_record(path)
    assert "non_finite" not in back and back["measures"]["a/b~c"]["limit"] is None
    assert math.isnan(back["racu"]) and math.isnan(back["measures"]["a/b~c"]["acu"])
    assert back["curve"] == [0.5, math.inf, -math.inf]
    write_record(path, back)  # a record read back writes the same text again
    assert json.loads(path.read_text()) == on_disk
    finite = tmp_path / "f.json"
    write_record(finite, {"a": 1.0})
    assert json.loads(finite.read_text()) == {"a": 1.0}  # no "non_finite" key when nothing needs it


def test_the_report_reads_a_nan_racu_that_evaluate_wrote(tmp_path) -> None:
    curve = [1.0, 0.5, 0.0]
    record = {
        "kind": "evaluate",
        "model": {"strategy": "masked"},
        "dataset": "babi-1",
        "split": "test",
        "seed": 0,
        "metric": "accuracy",
        "majority_baseline": 0.5,
        "ratios": [0.0, 0.5, 1.0],
        "n_examples": 4,
        "curves": {"rand": {"accuracy": curve}, "loo-abs": {"accuracy": curve}},
        "measures": {
            name: {"signed": False, "acu": 0.0, "racu": math.nan, "seconds": 1.0, "forward_passes": 3}
            for name in ("rand", "loo-abs")
        },
    }
    write_record(tmp_path / "result.json", record)
    result = load_result(tmp_path / "result.json")
    assert result is not None and math.isnan(result.measures["loo-abs"].racu)


# ---------------------------------------------------------------------------------------------- CLI groups


def _commands() -> dict:
    _register()
    return {command.name: command for command in typer.main.get_command(app).commands.values()}


def test_every_command_that_opens_a_dataset_has_the_same_data_options() -> None:
    def data_flags(command) -> dict[str, tuple]:
        fields = set(DataOptions.__dataclass_fields__) - {"split", "limit", "data_seed", "unit"}
        return {p.name: (tuple(p.opts), p.help) for p in command.params if p.name in fields}

    commands = _commands()
    flags = {name: data_flags(commands[name]) for name in ("train", "evaluate", "explain", "masf")}
    assert len(flags["evaluate"]) == 9  # dataset, size, test_size, 3 fields, metric, label_map, max_length
    assert all(f == flags["evaluate"] for f in flags.values())
    # --unit: every command that masks at a ratio; training masks tokens
    with_unit = {name for name, command in commands.items() if any(p.name == "unit" for p in command.params)}
    assert {"evaluate", "explain", "aopc", "roar", "check", "masf"} <= with_unit and "train" not in with_unit
    for name in ("evaluate", "explain", "masf"):
        assert {"split", "limit", "device", "provider", "token_budget"} <= {
            p.name for p in commands[name].params
        }
    assert not {"split", "limit", "provider"} & {p.name for p in commands["train"].params}


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("ig_stepz=3", "unknown measure option(s) ig_stepz"),
        ("ig_steps=0", "ig_steps must be an integer >= 1"),
    ],
)
def test_a_bad_measure_option_exits_2_before_any_work(capsys, tmp_path, pair, message) -> None:
    out = tmp_path / "out"
    for command in ("evaluate", "explain"):
        target = out if command == "evaluate" else out / "e.jsonl"
        code = main(
            [
                command,
                "--model",
                "no-model",
                "-m",
                "int-grad-sign",
                "--measure-option",
                pair,
                "--out",
                str(target),
            ]
        )
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("fmm-fast: error: ") and message in err and err.count("\n") == 1
    assert not out.exists()
