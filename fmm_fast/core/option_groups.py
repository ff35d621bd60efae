"""Groups of flat arguments handed to a function as one object, declared once per group: the commands'
option groups (cli/options.py: --dataset, --split, ... → DataOptions) and the Python functions' argument
groups (api/options.py: dataset=, split=, ... → DataOptions) are both made by `option_group`."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any


def keyword(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> inspect.Parameter:
    """One keyword-only parameter of a group."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def option_group(
    target: str, build: Callable[..., Any], parameters: Sequence[inspect.Parameter], flags: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: the function's `target` parameter is replaced, where it stands, by the keyword-only
    `parameters` (the ones after it become keyword-only too), and the function is called with
    target=build(**their values), or with their values as a dict (flags). inspect.signature, and so typer
    and a Python caller's help, read the rewritten signature."""

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(function, eval_str=True)
        combined: list[inspect.Parameter] = []
        extra_name = None  # a **kwargs parameter stays last and collects what no parameter names
        for parameter in signature.parameters.values():
            if parameter.kind == inspect.Parameter.VAR_KEYWORD:
                extra_name = parameter.name
                combined.append(parameter)
            elif parameter.name == target:
                combined += parameters
            elif combined and combined[-1].kind == inspect.Parameter.KEYWORD_ONLY:
                combined.append(parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY))
            else:
                combined.append(parameter)
        rewritten = signature.replace(parameters=combined)
        names = [p.name for p in parameters]

        @functools.wraps(function)
        def wrapper(*args: Any, **values: Any) -> Any:
            bound = rewritten.bind(*args, **values)
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            group = {name: arguments.pop(name) for name in names}
            extra = arguments.pop(extra_name, {}) if extra_name else {}
            return function(**arguments, **extra, **{target: group if flags else build(**group)})

        wrapper.__signature__ = rewritten  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in combined}
        return wrapper

    return decorate
