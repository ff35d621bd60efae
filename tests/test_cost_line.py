"""The cost line of `explain_texts` (raw texts in Python): it is printed before the run, and its passes
bound the passes the run's engines make; its unit= and max_length= are the commands' --unit and
--max-length, and an example cut short keeps its tokens' character offsets. (The commands' lines:
test_erasure_units.py, test_cli.py; ROAR's: test_roar.py.)"""

from __future__ import annotations

import re

import pytest

from fmm_fast.api import batches
from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import load_model
from fmm_fast.backends.options import BackendOptions
from fmm_fast.core import settings
from fmm_fast.core.errors import UserError

TEXTS = ["Mary went to the kitchen. John moved to the garden.", "Sandra went back to the office."]
PAIRS = ["Where is Mary?", "Where is Sandra?"]
LINE = re.compile(r"^explain_texts: (at most )?([\d,]+) forward passes(?: and ([\d,]+) backward)?", re.M)


def planned(output: str) -> tuple[int, int]:
    """(forward, backward) passes of the cost line in `output`."""
    found = LINE.search(output)
    assert found is not None, output
    return int(found.group(2).replace(",", "")), int((found.group(3) or "0").replace(",", ""))


@pytest.mark.parametrize(
    ("measure", "unit"), [("loo-abs", "token"), ("loo-abs", "word"), ("grad-l2", "word")]
)
def test_explain_texts_prints_a_cost_line_that_bounds_its_passes(
    tiny_babi, capsys, monkeypatch, measure, unit
):
    engines: list[MaskBatchEngine] = []

    class RecordedEngine(MaskBatchEngine):
        def __init__(self, *arguments, **options) -> None:
            super().__init__(*arguments, **options)
            engines.append(self)

    monkeypatch.setattr(settings, "MaskBatchEngine", RecordedEngine)  # EngineOptions.engine_on makes them
    loaded = load_model(tiny_babi[0], BackendOptions())
    explanations = batches.explain_texts(loaded, TEXTS, PAIRS, measure=measure, unit=unit)
    forward, backward = planned(capsys.readouterr().out)
    made = sum(engine.stats.forward_rows for engine in engines)
    assert 0 < made <= forward  # the predictions' pass included
    if measure == "grad-l2":
        assert backward == len(TEXTS)  # one gradient per text
    else:
        words = sum(len(text.split()) for text in TEXTS)
        assert backward == 0 and made >= (words if unit == "word" else words + 2)  # LOO: one row per unit
    assert {e.unit for e in explanations} == {unit}


def test_explain_texts_cuts_to_max_length_and_names_its_arguments(tiny_babi, capsys):
    loaded = load_model(tiny_babi[0], BackendOptions())
    cut = batches.explain_texts(loaded, TEXTS, PAIRS, max_length=12)
    assert all(len(e.tokens) == 12 for e in cut)
    assert all(len(e.offsets) == 12 for e in cut)  # located in the text as cut, not lost
    with pytest.raises(UserError, match=r"^unknown unit= 'words'"):
        batches.explain_texts(loaded, TEXTS, PAIRS, unit="words")
    with pytest.raises(UserError, match=r"^max_length= must be an integer"):
        batches.explain_texts(loaded, TEXTS, PAIRS, max_length=2)


def test_explain_texts_engines_get_the_token_and_cache_budgets_given(tiny_babi, monkeypatch):
    engines: list[MaskBatchEngine] = []

    class RecordedEngine(MaskBatchEngine):
        def __init__(self, *arguments, **options) -> None:
            super().__init__(*arguments, **options)
            engines.append(self)

    monkeypatch.setattr(settings, "MaskBatchEngine", RecordedEngine)
    loaded = load_model(tiny_babi[0], BackendOptions())
    batches.explain_texts(loaded, TEXTS, PAIRS, measure="grad-l2", token_budget=300, cache_mb=3.5)
    assert len(engines) == 2  # the predictions' engine and the gradient one
    assert {(engine.token_budget, engine.cache_mb) for engine in engines} == {(300, 3.5)}
    with pytest.raises(UserError, match="token-budget"):
        batches.explain_texts(loaded, TEXTS, PAIRS, token_budget=0)
