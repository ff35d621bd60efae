"""The Python functions' arguments checked at the boundary, before any work: each argument against its
annotation (the type) and the range its command's flag takes (`RANGES`, the `min=` of cli/options.py),
and model= against what the functions load. A mistake raises `UserError` naming the argument, what it got
and what to give, so no caller meets pathlib's "expected str", a SystemExit or an IndexError from deep
inside (and seed=True never names a folder seed-True).

`@checked_arguments` wraps each public function (outermost: it reads the signature the option groups
rewrote, so dataset=, limit=, epochs=, ... are checked too)."""

from __future__ import annotations

import functools
import inspect
import numbers
import os
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from fmm_fast.api.inputs import is_loaded_pair
from fmm_fast.core.errors import ArgumentError, UserError

Function = TypeVar("Function", bound=Callable[..., Any])


@dataclass(frozen=True)
class Range:
    """The values a number may take, each number of a list included: `low` ≤ value (or < with `open`),
    value ≤ `high`."""

    low: float
    high: float | None = None
    open: bool = False

    def holds(self, value: float) -> bool:
        above = value > self.low if self.open else value >= self.low
        return above and (self.high is None or value <= self.high)

    def __str__(self) -> str:
        low = f"{'>' if self.open else '≥'} {self.low:g}"
        return low if self.high is None else f"from {self.low:g} to {self.high:g}"


NATURAL = Range(0)
POSITIVE = Range(1)
RANGES: dict[str, Range] = {
    "seed": NATURAL,
    "calibration_seed": NATURAL,
    "fidelity_sample": NATURAL,
    "limit": POSITIVE,
    "size": Range(2),
    "test_size": POSITIVE,
    "epochs": POSITIVE,
    "batch_size": POSITIVE,
    "max_steps": POSITIVE,
    "layers": POSITIVE,
    "width": Range(32),
    "lr": Range(0, open=True),
    "token_budget": POSITIVE,
    "explain_batch_rows": POSITIVE,
    "workers": POSITIVE,
    "worker_cpus": POSITIVE,
    "worker_gpus": NATURAL,
    "calibration_size": POSITIVE,
    "split_components": POSITIVE,
    "steps": POSITIVE,
    "opset": Range(7),
    "ratios": Range(0, 1),
    "max_length": Range(4),
    "cache_mb": NATURAL,
}
"""The range of each numeric argument (of every function that has it), as its command's flag takes it."""

NOT_EMPTY = ("measure", "seed", "calibration", "model", "dirs")
"""Arguments given as a list that must hold at least one value (an empty measure list would evaluate
`rand` alone, an empty model list would write a result of no model)."""

_NOUNS: dict[Any, tuple[str, str]] = {
    bool: ("True or False", "booleans"),
    int: ("an integer", "integers"),
    float: ("a number", "numbers"),
    str: ("a string", "strings"),
    os.PathLike: ("a path", "paths"),
    type(None): ("None", "None"),
}


def checked_arguments(function: Function) -> Function:
    """Decorator: every call's arguments are checked (types, ranges, model=) before `function` runs."""
    name = function.__qualname__  # "evaluate", or a result's "RunResult.save"

    @functools.cache
    def parameters() -> inspect.Signature:  # on first call: a method's return annotation names its class
        return inspect.signature(function, eval_str=True)

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        signature = parameters()
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as error:
            raise UserError(f"fmm_fast.{name}: {error}; see help(fmm_fast.{name})") from None
        for argument, value in bound.arguments.items():
            check_argument(name, argument, value, signature.parameters[argument].annotation)
        return function(*args, **kwargs)

    return typing.cast(Function, wrapper)


def check_argument(function: str, argument: str, value: Any, annotation: Any) -> None:
    """UserError naming `argument` of fmm_fast.`function` when `value` is not of `annotation`'s types,
    lies outside the argument's range, or is an empty list where one value is needed."""
    special = _SPECIAL.get(argument)
    if special is not None:
        special(function, value)
    elif not fits(value, annotation):
        refuse(function, argument, value, describe(annotation))
    if argument in NOT_EMPTY and _is_list(value) and not value:
        refuse(function, argument, value, "at least one value")
    limits = RANGES.get(argument)
    if limits is not None:
        several = _is_list(value)
        for number in value if several else [value]:
            if isinstance(number, numbers.Real) and not limits.holds(number):
                noun = "numbers" if fits(0.5, annotation) or fits([0.5], annotation) else "integers"
                one = _NOUNS[float if noun == "numbers" else int][0]
                refuse(function, argument, value, f"{noun if several else one} {limits}")


def refuse(function: str, argument: str, value: Any, wanted: str) -> typing.NoReturn:
    """The UserError of a wrong argument: its name, what it got, what to give."""
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    message = f"fmm_fast.{function}: {argument}={shown} ({type(value).__name__}); give {wanted}"
    raise ArgumentError(message, argument, value, wanted)


def fits(value: Any, annotation: Any) -> bool:
    """Whether `value` is of `annotation`: a type, a union, Sequence[X] (a list or tuple, not a string),
    Mapping[K, V], None or Any. int takes any integer but not a bool (seed=True is a mistake); float takes
    any real number but a bool."""
    if annotation is Any or annotation is inspect.Parameter.empty:
        return True
    if annotation is None or annotation is type(None):
        return value is None
    origin, parts = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, part) for part in parts)
    if origin is not None and issubclass(origin, Mapping):
        key, item = parts or (Any, Any)
        return isinstance(value, Mapping) and all(fits(k, key) and fits(v, item) for k, v in value.items())
    if origin is not None and issubclass(origin, Sequence):
        (item,) = parts or (Any,)
        return _is_list(value) and all(fits(v, item) for v in value)
    if annotation is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    return isinstance(value, os.PathLike if _is_path(annotation) else annotation)


def describe(annotation: Any, plural: bool = False) -> str:
    """What `annotation` takes, in words: "an integer or a list of integers"."""
    origin, parts = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(describe(part, plural) for part in parts))
    if origin is not None and issubclass(origin, Mapping):
        key, item = parts or (Any, Any)
        return f"{'mappings' if plural else 'a mapping'} of {describe(key, True)} to {describe(item, True)}"
    if origin is not None and issubclass(origin, Sequence):
        (item,) = parts or (Any,)
        return f"{'lists' if plural else 'a list'} of {describe(item, True)}"
    if annotation is Any:
        return "values" if plural else "a value"
    key = os.PathLike if _is_path(annotation) else annotation
    singular, many = _NOUNS.get(key, (f"a {getattr(key, '__name__', key)}", f"{key}s"))
    return many if plural else singular


def check_model(function: str, model: Any) -> None:
    """model=: a path or name, a `fmm_fast.train` result, a loaded (model, tokenizer) pair, or (masf) a
    list of those. A custom scorer (an object with the backend protocol) is explained by fmm_fast.api's
    batch functions; the commands' functions take a model they can save to a fingerprint and reload."""
    if _is_list(model) and not is_loaded_pair(model):
        if function != "masf":
            refuse(function, "model", model, _MODEL + "; a (model, tokenizer) pair is a tuple of two")
        for one in model:
            check_model(function, one)
        return
    if isinstance(model, str | os.PathLike) or is_loaded_pair(model) or hasattr(model, "model_dir"):
        return
    wanted = _MODEL
    if hasattr(model, "forward") and hasattr(model, "info"):
        wanted += " (a custom scorer is explained by fmm_fast.api.explain and explain_texts)"
    refuse(function, "model", model, wanted)


_MODEL = (
    "a model folder or .onnx path, a cached Hub name, a fmm_fast.train result, or a loaded transformers "
    "(model, tokenizer) pair"
)


def check_dataset(function: str, dataset: Any) -> None:
    """dataset=: a name or path, columns (a mapping), rows (a list of mappings), a datasets.Dataset or a
    pandas DataFrame (both have to_dict), or your own splits (a mapping: a DatasetDict, a dict of splits)."""
    if isinstance(dataset, str | os.PathLike | Mapping) or hasattr(dataset, "to_dict"):
        return
    if _is_list(dataset) and dataset and all(isinstance(row, Mapping) for row in dataset):
        return
    refuse(
        function,
        "dataset",
        dataset,
        "a registry name, a data file, columns {'text': [...], 'label': [...]}, a non-empty list of rows "
        "{'text': ..., 'label': ...}, a datasets.Dataset, a pandas DataFrame, or your own splits "
        "(a DatasetDict or {'train': ..., 'validation': ..., 'test': ...})",
    )


def check_dirs(function: str, dirs: Any) -> None:
    """dirs= of report: a folder, a result (its `path`), or a list of them."""
    for one in dirs if _is_list(dirs) else [dirs]:
        if not isinstance(one, str | os.PathLike) and not isinstance(getattr(one, "path", None), os.PathLike):
            refuse(
                function, "dirs", dirs, "a folder, a result of fmm_fast.evaluate, aopc, ... or a list of them"
            )


def check_measure(function: str, measure: Any) -> None:
    """measure=: a name (built-in or a plug-in's "module:Name", "./file.py:Name"), a Measure class or
    instance, a function marked with @fmm_fast.measure, or a list of them (the registry then loads each)."""
    if measure is None:  # masf: no erasure run's masked inputs
        return
    for one in measure if _is_list(measure) else [measure]:
        if not (isinstance(one, str | type) or callable(one) or hasattr(one, "explain")):
            refuse(
                function,
                "measure",
                measure,
                "a measure name, a Measure class or instance, a function marked with @fmm_fast.measure, "
                "or a list of them",
            )


_SPECIAL: dict[str, Callable[[str, Any], None]] = {
    "model": check_model,
    "measure": check_measure,
    "dataset": check_dataset,
    "dirs": check_dirs,
}
"""Arguments whose annotation says less than what they take (Any; a DataFrame is no Mapping)."""


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _is_path(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, os.PathLike)
