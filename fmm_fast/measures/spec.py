"""A measure resolved once: what a run carries instead of the name a user typed.

`resolve_measure` turns a name and the options a command was given into a MeasureSpec (the canonical name,
the measure's flags, its checked options, where its code comes from) and fails on a typo before any work.
A spec knows the measure's flags without building it, and `build(seed, step)` makes the fresh instance
that explains, its random draws seeded by the one rule below; a spec pickles, and a Ray worker rebuilds a
plug-in from its source (fmm_fast.measures.plugins.MeasureSource).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from fmm_fast.core.errors import UserError
from fmm_fast.measures.base import Measure
from fmm_fast.measures.plugins import BUILTIN, MeasureSource
from fmm_fast.measures.registry import (
    OPTION_NAMES,
    build_measure,
    builtin_knob,
    find_measure,
    get_measure,
    option_values,
    takes,
)

BASELINE = "rand"  # the baseline measure every protocol run carries (docs/method.md §4)
# Step j of a protocol run with seed s seeds its measure with s·STEP_SEEDS + j: a resumed run redraws
# identically, and every protocol's first step (j = 1) draws the same first ranking.
STEP_SEEDS = 1000


@dataclass(frozen=True)
class MeasureSpec:
    """name: canonical ("beam" → "beam-sign-10"; a plug-in's own `name`); signed, recursive,
    needs_gradients: as the measure class declares them (fmm_fast.measures.base.Measure); options: those
    it takes, converted to its constructor's annotations; source: where its code comes from."""

    name: str
    signed: bool
    recursive: bool
    needs_gradients: bool
    options: Mapping[str, object] = field(default_factory=dict)
    source: MeasureSource = field(default_factory=lambda: MeasureSource(BUILTIN, ""))

    def build(self, seed: int, step: int | None = None) -> Measure:
        """A fresh instance: for step `step` (1..K) of a protocol run seeded `seed`, or with step None (a
        plain explanation) seeded with `seed` itself."""
        drawn = seed if step is None else seed * STEP_SEEDS + step
        if self.source.origin == BUILTIN:
            return get_measure(self.name, seed=drawn, **self.options)
        return build_measure(self.source.measure_class(), self.source, drawn, self.options)

    @property
    def plugin(self) -> bool:
        """Whether the measure comes from outside fmm-fast."""
        return self.source.origin != BUILTIN

    def record(self) -> dict[str, object]:
        """What a run record keeps of the measure, so that `report` never imports it."""
        return {"signed": self.signed, "recursive": self.recursive, "source": self.source.record()}


def resolve_measure(name: str, options: Mapping[str, object] | None = None) -> MeasureSpec:
    """The spec of one measure with the options of `options` it takes; UserError for an unknown name or a
    bad option value (one instance is built here, so its constructor checks them before any work)."""
    cls, source = find_measure(name)
    taken = option_values(cls, options or {}, source.locator)
    measure = get_measure(name, **taken) if source.origin == BUILTIN else build_measure(cls, source, 0, taken)
    if source.origin == BUILTIN:  # canonical: "beam" → "beam-sign-10"
        source = replace(source, locator=measure.name)
    return MeasureSpec(
        measure.name, measure.signed, measure.recursive, measure.needs_gradients, taken, source
    )


def resolve_measures(
    names: Sequence[str], options: Mapping[str, object] | None = None, baseline: bool = True
) -> tuple[MeasureSpec, ...]:
    """`names` resolved, each canonical name once (one state and one result each), with baseline `rand`
    first. UserError for an option none of them takes, but for the built-in cost knobs (OPTION_NAMES),
    shared by every run as before: each of those must be an integer ≥ 1 whether a measure takes it or not.
    """
    given = dict(options or {})
    chosen = ([BASELINE] if baseline else []) + list(names)
    specs = [resolve_measure(name, given) for name in chosen]
    unique = {spec.name: spec for spec in specs}
    known = {option for name in chosen for option in takes(find_measure(name)[0]) if option != "seed"}
    unknown = sorted(set(given) - known - set(OPTION_NAMES))
    if unknown:
        taken = ", ".join(sorted(known)) or "no options"
        raise UserError(
            f"unknown measure option(s) {', '.join(unknown)}: none of the measures chosen "
            f"({', '.join(unique)}) takes it; they take: {taken}"
        )
    for key in (set(given) & set(OPTION_NAMES)) - known:
        builtin_knob(key, given[key])
    return tuple(unique.values())


def typed_options(specs: Sequence[MeasureSpec], options: Mapping[str, object]) -> dict[str, object]:
    """`options` with each value as the first measure of `specs` that takes it converted it (what a run
    records); a built-in cost knob no measure took as an int."""
    typed = {k: builtin_knob(k, v) if k in OPTION_NAMES else v for k, v in options.items()}
    for spec in reversed(specs):
        typed.update({k: v for k, v in spec.options.items() if k in options})
    return typed
