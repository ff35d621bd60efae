"""The canonical order of measures and strategies in every table, figure and JSON of the report."""

from __future__ import annotations

import re

BASELINE_MEASURE = "rand"
# Table row order; beam-sign-B follows by B, unknown measures come last, alphabetically.
CANONICAL_MEASURES = (
    "rand",
    "grad-l1",
    "grad-l2",
    "inp-grad-sign",
    "inp-grad-abs",
    "int-grad-sign",
    "int-grad-abs",
    "loo-sign",
    "loo-abs",
)
CANONICAL_STRATEGIES = ("plain", "masked", "only-masked")


def measure_sort_key(name: str) -> tuple[int, int, str]:
    """Canonical measure order: CANONICAL_MEASURES, then beam-sign-B by B, then the rest by name."""
    if name in CANONICAL_MEASURES:
        return 0, CANONICAL_MEASURES.index(name), ""
    beam = re.fullmatch(r"beam-sign-(\d+)", name)
    if beam:
        return 1, int(beam[1]), ""
    return 2, 0, name


def strategy_sort_key(name: str) -> tuple[int, str]:
    """Canonical strategy order: CANONICAL_STRATEGIES, then the rest by name."""
    known = name in CANONICAL_STRATEGIES
    return (CANONICAL_STRATEGIES.index(name), "") if known else (len(CANONICAL_STRATEGIES), name)
