"""Every public function's arguments are checked at the boundary: each function × each argument × a wrong
type (and, where the argument has a range, a value outside it) raises fmm_fast.UserError naming the
argument, before any work (no output folder appears). The tables name every argument of every function:
a new argument without a row fails `test_the_tables_cover_every_argument`."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import fmm_fast
from fmm_fast.api.explanations import Explanations
from fmm_fast.api.results import Evaluation

FUNCTIONS = ("train", "export", "explain", "evaluate", "aopc", "masf", "roar", "check", "report", "load")

WRONG_TYPE: dict[str, Any] = {  # argument -> a value of a type it does not take
    "model": 123,
    "dataset": 123,
    "dirs": 123,
    "directory": 123,
    "path": 123,
    "out": 123,
    "split": 1,
    "limit": "3",
    "size": "200",
    "test_size": 1.5,
    "text_field": 1,
    "pair_field": 1,
    "label_field": 1,
    "metric": 1,
    "label_map": 123,
    "labels": 1,
    "measure": 1,
    "measure_option": 1,
    "seed": True,
    "calibration_seed": "0",
    "save_masked": "yes",
    "html": 1,
    "recursive": "no",
    "erasure": None,
    "fidelity_sample": 1.0,
    "overwrite": "yes",
    "quiet": 0,
    "token_budget": "8192",
    "explain_batch_rows": 2.5,
    "device": 0,
    "provider": 0,
    "precision": 32,
    "workers": "2",
    "ray_address": 6379,
    "worker_cpus": None,
    "worker_gpus": "1",
    "epochs": 1.5,
    "batch_size": "8",
    "lr": "1e-3",
    "max_steps": 2.0,
    "layers": "2",
    "width": 64.0,
    "strategy": 0,
    "steps": "5",
    "step0": 0,
    "opset": "17",
    "quantize": True,
    "fp16": "yes",
    "evaluation": 1,
    "calibration": 1,
    "calibration_size": "100",
    "split_components": 3.5,
    "ratios": 0.5,
    "explanations": 1,
    "unit": 1,
    "max_length": "512",
    "cache_mb": "256",
}

WRONG_RANGE: dict[str, Any] = {  # argument -> a value of its type outside its range
    "model": [],  # masf's list of models (a one-model function refuses a list as a type)
    "dirs": [],
    "limit": 0,
    "max_length": 3,
    "cache_mb": -1,
    "size": 1,
    "test_size": 0,
    "measure": [],
    "seed": -1,
    "calibration_seed": -1,
    "fidelity_sample": -1,
    "token_budget": 0,
    "explain_batch_rows": 0,
    "workers": 0,
    "worker_cpus": 0,
    "worker_gpus": -1.0,
    "epochs": 0,
    "batch_size": 0,
    "lr": 0.0,
    "max_steps": 0,
    "layers": 0,
    "width": 16,
    "steps": 0,
    "opset": 1,
    "calibration": [],
    "calibration_size": 0,
    "split_components": 0,
    "ratios": [0, 1.5],
}
RANGED_IN_A_STRING = {"measure_option", "ratios"}  # "k=v" / "0,0.5": their parsers check the values

REQUIRED: dict[str, Any] = {  # valid values of required arguments (no such data or model: no work runs)
    "model": "no-such-model.onnx",
    "dataset": "no-such-dataset",
    "measure": "loo-abs",
}


def _methods(tmp_path: Path) -> dict[str, Callable[..., Any]]:
    """The result objects' save and load, beside the functions."""
    seed = tmp_path / "result" / "seed-0"
    seed.mkdir(parents=True)
    (seed / "result.json").write_text("{}")
    return {
        "Evaluation.save": Evaluation(tmp_path / "result").save,
        "Evaluation.load": Evaluation.load,
        "Explanations.save": Explanations().save,
        "Explanations.load": Explanations.load,
    }


def _cases() -> list[tuple[str, str, str]]:
    """(function, argument, "type" or "range") for every argument of every public function."""
    cases = []
    for name in FUNCTIONS:
        for argument in inspect.signature(getattr(fmm_fast, name)).parameters:
            cases.append((name, argument, "type"))
            if argument in WRONG_RANGE and not (argument == "model" and name != "masf"):
                cases.append((name, argument, "range"))
    return cases


def _call(function: Callable[..., Any], argument: str, value: Any, tmp_path: Path) -> None:
    parameters = inspect.signature(function).parameters
    given = {
        p: REQUIRED.get(p, tmp_path / "in") for p, spec in parameters.items() if spec.default is spec.empty
    }
    given |= {"out": tmp_path / "out"} if "out" in parameters else {}
    function(**{**given, argument: value})


@pytest.mark.parametrize(("name", "argument", "wrong"), _cases())
def test_every_function_names_a_wrong_argument(name: str, argument: str, wrong: str, tmp_path: Path) -> None:
    value = (WRONG_TYPE if wrong == "type" else WRONG_RANGE)[argument]
    with pytest.raises(fmm_fast.UserError, match=rf"\b{argument}="):
        _call(getattr(fmm_fast, name), argument, value, tmp_path)
    assert not (tmp_path / "out").exists(), "a refused call wrote its output"


@pytest.mark.parametrize(
    "method", ["Evaluation.save", "Evaluation.load", "Explanations.save", "Explanations.load"]
)
def test_results_save_and_load_name_a_wrong_argument(method: str, tmp_path: Path) -> None:
    function = _methods(tmp_path)[method]
    (argument,) = inspect.signature(function).parameters
    with pytest.raises(fmm_fast.UserError, match=rf"\b{argument}=123"):
        function(WRONG_TYPE[argument])


def test_the_tables_cover_every_argument() -> None:
    arguments = {a for name in FUNCTIONS for a in inspect.signature(getattr(fmm_fast, name)).parameters}
    assert arguments <= set(WRONG_TYPE), f"no wrong type for {sorted(arguments - set(WRONG_TYPE))}"
    from fmm_fast.api.arguments import RANGES

    assert set(RANGES) <= set(WRONG_RANGE), f"no wrong range for {sorted(set(RANGES) - set(WRONG_RANGE))}"


def test_a_flag_and_its_python_argument_take_the_same_numbers() -> None:
    """The CLI's bounds (typer's min=/max=) and the API's (RANGES) are declared apart: they must agree."""
    import typer

    import fmm_fast.cli
    from fmm_fast.api.arguments import RANGES
    from fmm_fast.cli.app import app

    fmm_fast.cli._register()
    bounded = [
        (command, option)
        for command, click_command in typer.main.get_command(app).commands.items()
        for option in click_command.params
        if option.name in RANGES and getattr(option, "min", None) is not None
    ]
    assert len(bounded) >= 20  # the check reads the commands' options (and would fail reading none)
    for command, option in bounded:
        declared = RANGES[option.name]
        assert (option.min, option.max) == (declared.low, declared.high), f"{command} --{option.name}"


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: fmm_fast.evaluate(["model", "tokenizer"]), "model"),  # a list in place of a pair
        (lambda: fmm_fast.evaluate(("a", "b", "c")), "model"),  # a 3-tuple
        (lambda: fmm_fast.masf([]), "model"),
        (lambda: fmm_fast.evaluate("m", measure=[]), "measure"),
        (lambda: fmm_fast.aopc("m", measure=()), "measure"),
        (lambda: fmm_fast.evaluate("m", seed=[0, True]), "seed"),
        (lambda: fmm_fast.evaluate("m", no_such_argument=1), "no_such_argument"),
    ],
)
def test_the_battery_s_classes_are_refused_by_name(call: Callable[[], Any], argument: str) -> None:
    with pytest.raises(fmm_fast.UserError, match=argument):
        call()


class _Part:
    """A stand-in for a transformers model or tokenizer: save_pretrained, an embedding of `rows`, `size`
    tokens (what the pair's check reads; nothing is saved: the check refuses first)."""

    def __init__(self, rows: int = 0, size: int = 0) -> None:
        self.rows, self.size = rows, size

    def save_pretrained(self, folder: Path) -> None:
        raise AssertionError("a pair that does not fit was saved")

    def get_input_embeddings(self) -> Any:
        return type("Embedding", (), {"num_embeddings": self.rows})()

    def __len__(self) -> int:
        return self.size


def test_a_pair_whose_tokenizer_does_not_fit_its_model_is_refused() -> None:
    with pytest.raises(fmm_fast.UserError, match=r"model=: the pair's tokenizer has 200 tokens.*only 100"):
        fmm_fast.evaluate((_Part(rows=100), _Part(size=200)), out=None)


def test_user_error_is_a_value_error_and_a_type_error() -> None:
    assert issubclass(fmm_fast.UserError, ValueError) and issubclass(fmm_fast.UserError, TypeError)
    with pytest.raises(TypeError):
        fmm_fast.evaluate(123)


def test_a_custom_scorer_is_sent_to_the_batch_functions() -> None:
    """The guide's promise holds where it is made (fmm_fast.api); the protocol functions say where."""
    scorer = type("Scorer", (), {"info": None, "name": "mine", "forward": lambda self, *a: None})()
    with pytest.raises(
        fmm_fast.UserError, match=r"model=.*custom scorer is explained by fmm_fast\.api\.explain"
    ):
        fmm_fast.evaluate(scorer)
