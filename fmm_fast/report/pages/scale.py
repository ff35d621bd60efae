"""Colour scales: a diverging palette for signed measures, a sequential one for unsigned ones.

Measures differ in units (a probability drop, a gradient norm), so each measure has its own scale, shared
by every example on the page: the 99th percentile of that measure's |scores| on the page maps to the
strongest colour, and larger scores keep it (a single outlier would otherwise wash out every other
example). Words and tokens have separate scales (a word's score sums its tokens'). The page can switch to
per-example scaling, where each example's own largest |score| sets the strongest colour. The colours
themselves are CSS (document.STYLE): a span carries its share of both scales, `--g` (page) and `--x`
(example), in [0, 1], and its palette as a class: `u` unsigned, `p` positive, `n` negative.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from fmm_fast.report.pages.markup import Html, join, markup
from fmm_fast.report.pages.units import Unit

TOP_PERCENTILE = 99


@dataclass(frozen=True)
class Scale:
    """One measure's page scale: the TOP_PERCENTILE-th percentile of its |scores| over word units and over
    token units (0: all 0)."""

    measure: str
    signed: bool
    words: float
    tokens: float


def scores(units: Iterable[Unit]) -> list[float]:
    """The |score| of every scored unit."""
    return [abs(u.score) for u in units if u.score is not None]


def largest(units: Iterable[Unit]) -> float:
    """The largest |score| among scored units (0 when none is): one example's own scale."""
    return max(scores(units), default=0.0)


def page_top(values: list[float]) -> float:
    """The page scale's top over |scores| `values`: their TOP_PERCENTILE-th percentile (0 when empty)."""
    return float(np.percentile(values, TOP_PERCENTILE)) if values else 0.0


def share(score: float, top: float) -> float:
    """|score| as a share of the scale's top, in [0, 1] (0 on an all-zero scale)."""
    return min(1.0, abs(score) / top) if top > 0 else 0.0


def render_units(units: list[Unit], signed: bool, page_top: float, example_top: float) -> Html:
    """The units as HTML: scored ones as coloured spans with their hover detail, the rest as text."""
    parts = []
    for unit in units:
        if unit.score is None:
            parts.append(
                markup('<span class="x" title="{detail}">{text}</span>', detail=unit.detail, text=unit.text)
                if unit.detail
                else markup("{text}", text=unit.text)
            )
            continue
        parts.append(
            markup(
                '<span class="s {palette}" style="--g:{page:.3f};--x:{own:.3f}" title="{detail}">'
                "{text}</span>",
                palette=("p" if unit.score >= 0 else "n") if signed else "u",
                page=share(unit.score, page_top),
                own=share(unit.score, example_top),
                detail=unit.detail,
                text=unit.text,
            )
        )
    return join(parts)


def _ends(top: float, signed: bool) -> str:
    """The scale's ends; scores beyond them get the full colour too."""
    return f"≤−{top:.3g} · 0 · ≥+{top:.3g}" if signed else f"0 · ≥{top:.3g}"


_TOP_NOTE = f"the strongest colour: the {TOP_PERCENTILE}th percentile of |score| on this page, and beyond"


def legend(scale: Scale) -> Html:
    """One measure's legend: its palette as a bar and the scores at its ends, for the view and scaling
    the page shows (CSS picks which)."""
    return markup(
        '<div class="legend" data-measure="{measure}" title="{note}"><b>{measure}</b> '
        '<span class="muted">{meaning}</span><span class="bar {palette}"></span>'
        '<span class="ends page words">{words} (per word)</span>'
        '<span class="ends page tokens">{tokens} (per token)</span><span class="ends own">{own}</span></div>',
        measure=scale.measure,
        note=_TOP_NOTE,
        meaning="negative ← → positive" if scale.signed else "more important →",
        palette="diverging" if scale.signed else "sequential",
        words=_ends(scale.words, scale.signed),
        tokens=_ends(scale.tokens, scale.signed),
        own="−max · 0 · +max of each example" if scale.signed else "0 · max of each example",
    )
