"""A measure resolved once: what a run carries instead of the name a user typed.

`resolve_measure` turns a name and the options a command was given into a MeasureSpec (the canonical name,
the measure's flags, its checked options) and fails on a typo before any work. A spec knows the measure's
flags without building it, and `build(seed, step)` makes the fresh instance that explains, its random
draws seeded by the one rule below.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fmm_fast.measures.base import Measure
from fmm_fast.measures.captum_methods import check_options_taken
from fmm_fast.measures.registry import check_measure_options, get_measure

BASELINE = "rand"  # the baseline measure every protocol run carries (docs/method.md §4)
# Step j of a protocol run with seed s seeds its measure with s·STEP_SEEDS + j: a resumed run redraws
# identically, and every protocol's first step (j = 1) draws the same first ranking.
STEP_SEEDS = 1000


@dataclass(frozen=True)
class MeasureSpec:
    """name: canonical ("beam" → "beam-sign-10"); signed, recursive, needs_gradients: as the measure class
    declares them (fmm_fast.measures.base.Measure); options: the cost knobs it is built with."""

    name: str
    signed: bool
    recursive: bool
    needs_gradients: bool
    options: Mapping[str, int] = field(default_factory=dict)

    def build(self, seed: int, step: int | None = None) -> Measure:
        """A fresh instance: for step `step` (1..K) of a protocol run seeded `seed`, or with step None (a
        plain explanation) seeded with `seed` itself."""
        drawn = seed if step is None else seed * STEP_SEEDS + step
        return get_measure(self.name, seed=drawn, **self.options)


def resolve_measure(name: str, options: Mapping[str, object] | None = None) -> MeasureSpec:
    """The spec of one measure; UserError for an unknown name or option."""
    checked = check_measure_options(options or {})
    measure = get_measure(name, **checked)
    return MeasureSpec(measure.name, measure.signed, measure.recursive, measure.needs_gradients, checked)


def resolve_measures(
    names: Sequence[str], options: Mapping[str, object] | None = None, baseline: bool = True
) -> tuple[MeasureSpec, ...]:
    """`names` resolved, each canonical name once (one state and one result each), with baseline `rand`
    first."""
    check_options_taken(names, options or {})
    specs = [resolve_measure(name, options) for name in ([BASELINE] if baseline else []) + list(names)]
    return tuple({spec.name: spec for spec in specs}.values())
