"""core.option_groups: a group's flat keywords become one object, and a function's **kwargs still collect
what no parameter names (explain_texts: the measure's options beside the engine's budgets)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from fmm_fast.core.option_groups import keyword, option_group


@dataclass(frozen=True)
class Budget:
    rows: int = 1
    megabytes: float = 2.0


group = option_group("budget", Budget, [keyword("rows", int, 1), keyword("megabytes", float, 2.0)])


def test_the_group_is_built_from_its_keywords_and_the_rest_pass_through():
    @group
    def run(model: str, budget: Budget, seed: int = 0, **options) -> tuple:
        return model, budget, seed, options

    assert run("m") == ("m", Budget(), 0, {})
    assert run("m", rows=4, seed=3, steps=7) == ("m", Budget(rows=4), 3, {"steps": 7})
    parameters = inspect.signature(run).parameters
    assert list(parameters) == ["model", "rows", "megabytes", "seed", "options"]
    assert parameters["options"].kind is inspect.Parameter.VAR_KEYWORD
    assert parameters["seed"].kind is inspect.Parameter.KEYWORD_ONLY


def test_without_kwargs_an_unknown_keyword_is_refused():
    @group
    def run(model: str, budget: Budget) -> Budget:
        return budget

    try:
        run("m", steps=7)
    except TypeError as error:
        assert "steps" in str(error)
    else:
        raise AssertionError("an unknown keyword was accepted")
