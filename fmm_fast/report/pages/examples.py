"""Explanations grouped by example, and one example's section: its text, label, prediction and
probability, and one row per measure in the word and the token view."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from fmm_fast.core.errors import UserError
from fmm_fast.protocols.explanations import Explanation
from fmm_fast.report.pages.markup import Html, join, markup
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


def verdict(example: Example) -> Html:
    """Label, prediction (marked right or wrong) and the prediction's probability, as HTML."""
    first = example.first
    probability = Html() if first.probability is None else markup(" (p = {p:.2f})", p=first.probability)
    mark, kind = ("✓", "right") if example.correct else ("✗", "wrong")
    return markup(
        'label <b>{label}</b> · prediction <b class="{kind}">{prediction} {mark}</b>{probability}',
        label=first.label,
        kind=kind,
        prediction=first.prediction,
        mark=mark,
        probability=probability,
    )


NO_OFFSETS = ' <span class="muted">(no word offsets: tokens)</span>'


def example_section(example: Example, scales: dict[str, Scale], heading: str = "h2") -> Html:
    """The example's section (id ex-INDEX): heading, verdict, one row per measure, the second segment."""
    rows = []
    for name, row in example.rows.items():
        scale = scales[name]
        rows.append(
            markup(
                '<tr><th scope="row">{name}{note}</th><td><div class="text words">{words}</div>'
                '<div class="text tokens">{tokens}</div></td></tr>',
                name=name,
                note=Html() if has_offsets(row.explanation) else Html(NO_OFFSETS),
                words=render_units(row.words, scale.signed, scale.words, largest(row.words)),
                tokens=render_units(row.tokens, scale.signed, scale.tokens, largest(row.tokens)),
            )
        )
    pair = example.first.pair
    second = (
        Html()
        if pair is None
        else markup(
            '<p class="pair"><span class="muted">second segment (not explained):</span> {pair}</p>', pair=pair
        )
    )
    return markup(
        '<section class="example" id="ex-{index}"><{heading}>Example {index}</{heading}>'
        '<p class="meta">{verdict}</p><table class="rows">{rows}</table>{second}</section>',
        index=example.index,
        heading=heading,
        verdict=verdict(example),
        rows=join(rows),
        second=second,
    )
