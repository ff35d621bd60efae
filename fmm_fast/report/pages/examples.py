"""Explanations grouped by example, and one example's section: its text, label, prediction and
probability, and one row per measure in the word and the token view."""

from __future__ import annotations

import html
from collections import defaultdict
from dataclasses import dataclass, field

from fmm_fast.api import Explanation
from fmm_fast.core.errors import UserError
from fmm_fast.report.pages.scale import Scale, largest, page_top, render_units, scores
from fmm_fast.report.pages.units import Unit, has_offsets, token_units, word_units


@dataclass
class Row:
    """One measure on one example: its explanation and its word and token units."""

    explanation: Explanation
    words: list[Unit]
    tokens: list[Unit]


@dataclass
class Example:
    """One example with a row per measure, in the order the measures were first given."""

    index: int
    first: Explanation  # text, pair, label, prediction and probability of the example
    rows: dict[str, Row] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        return self.first.label == self.first.prediction


def group_examples(explanations: list[Explanation]) -> list[Example]:
    """Explanations (of one or several explain runs) as examples in index order.

    UserError when two explanations of one measure share an example, or when one index holds different
    texts (explanations of different splits cannot share a page).
    """
    examples: dict[int, Example] = {}
    for explanation in explanations:
        example = examples.setdefault(explanation.index, Example(explanation.index, explanation))
        if (explanation.text, explanation.pair) != (example.first.text, example.first.pair):
            raise UserError(
                f"example {explanation.index} has different texts in the explanations given; show "
                "explanations of one dataset split (same --dataset, --split and --limit) on one page"
            )
        if explanation.measure in example.rows:
            raise UserError(
                f"measure {explanation.measure} explains example {explanation.index} twice; pass each "
                "measure's explanations once"
            )
        example.rows[explanation.measure] = Row(
            explanation, word_units(explanation), token_units(explanation)
        )
    return [examples[index] for index in sorted(examples)]


def measure_scales(examples: list[Example]) -> dict[str, Scale]:
    """Each measure's page scale over every example shown (measures in first-seen order)."""
    words: dict[str, list[float]] = defaultdict(list)
    tokens: dict[str, list[float]] = defaultdict(list)
    signed: dict[str, bool] = {}
    for example in examples:
        for name, row in example.rows.items():
            words[name] += scores(row.words)
            tokens[name] += scores(row.tokens)
            signed.setdefault(name, row.explanation.signed)
    return {name: Scale(name, signed[name], page_top(words[name]), page_top(tokens[name])) for name in signed}


def verdict(example: Example) -> str:
    """Label, prediction (marked right or wrong) and the prediction's probability, as HTML."""
    first = example.first
    probability = "" if first.probability is None else f" (p = {first.probability:.2f})"
    mark, kind = ("✓", "right") if example.correct else ("✗", "wrong")
    return (
        f"label <b>{html.escape(first.label)}</b> · prediction "
        f'<b class="{kind}">{html.escape(first.prediction)} {mark}</b>{probability}'
    )


def example_section(example: Example, scales: dict[str, Scale], heading: str = "h2") -> str:
    """The example's section (id ex-INDEX): heading, verdict, one row per measure, the second segment."""
    rows = []
    for name, row in example.rows.items():
        scale = scales[name]
        words = render_units(row.words, scale.signed, scale.words, largest(row.words))
        tokens = render_units(row.tokens, scale.signed, scale.tokens, largest(row.tokens))
        note = "" if has_offsets(row.explanation) else ' <span class="muted">(no word offsets: tokens)</span>'
        rows.append(
            f'<tr><th scope="row">{html.escape(name)}{note}</th>'
            f'<td><div class="text words">{words}</div><div class="text tokens">{tokens}</div></td></tr>'
        )
    pair = example.first.pair
    second = (
        ""
        if pair is None
        else f'<p class="pair"><span class="muted">second segment (not explained):</span> {html.escape(pair)}'
        "</p>"
    )
    return (
        f'<section class="example" id="ex-{example.index}"><{heading}>Example {example.index}</{heading}>'
        f'<p class="meta">{verdict(example)}</p><table class="rows">{"".join(rows)}</table>{second}</section>'
    )
