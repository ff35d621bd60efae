"""Every importance measure by name (SPEC §3): get_measure("loo-abs"), get_measure("beam-sign-5"), ...

Options are cost knobs shared across measures (captum style); a measure ignores those it has no use for:
gradient_batch_size (rows per backward pass), ig_steps (int-grad K), vocab_chunk (grad-l1/-l2 vocabulary
chunk), beam_size (for the name "beam").
"""

from __future__ import annotations

import re

import numpy as np

from fmm_fast.errors import UserError
from fmm_fast.measures.base import Measure

OPTION_NAMES = ("gradient_batch_size", "ig_steps", "vocab_chunk", "beam_size")
BEAM_PATTERN = re.compile(r"beam-sign-(.+)")
PAPER_BEAM = "beam-sign-10"


def check_positive(option: str, value: int) -> int:
    """value as an int; UserError unless it is an integer ≥ 1."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise UserError(f"{option} must be an integer >= 1, got {value!r}; pass e.g. {option}=1")
    return int(value)


def _catalogue() -> dict[str, tuple[type[Measure], tuple[str, ...]]]:
    """name -> (class, the options it takes). Imported here: the measure modules import check_positive."""
    from fmm_fast.measures.gradient import (
        GradL1,
        GradL2,
        InputGradAbs,
        InputGradSign,
        IntGradAbs,
        IntGradSign,
    )
    from fmm_fast.measures.occlusion import LeaveOneOutAbs, LeaveOneOutSign
    from fmm_fast.measures.random import RandomMeasure

    return {
        RandomMeasure.name: (RandomMeasure, ("seed",)),
        GradL1.name: (GradL1, ("gradient_batch_size", "vocab_chunk")),
        GradL2.name: (GradL2, ("gradient_batch_size", "vocab_chunk")),
        InputGradSign.name: (InputGradSign, ("gradient_batch_size",)),
        InputGradAbs.name: (InputGradAbs, ("gradient_batch_size",)),
        IntGradSign.name: (IntGradSign, ("gradient_batch_size", "ig_steps")),
        IntGradAbs.name: (IntGradAbs, ("gradient_batch_size", "ig_steps")),
        LeaveOneOutSign.name: (LeaveOneOutSign, ()),
        LeaveOneOutAbs.name: (LeaveOneOutAbs, ()),
    }


def measure_names() -> list[str]:
    """The fixed measure names plus the paper's beam (any beam-sign-B with integer B >= 1 is valid too)."""
    return [*_catalogue(), PAPER_BEAM]


def get_measure(name: str, *, seed: int = 0, **options: int) -> Measure:
    """A fresh measure instance. seed drives `rand`; options: see the module docstring."""
    unknown = sorted(set(options) - set(OPTION_NAMES))
    if unknown:
        raise UserError(f"unknown measure option(s) {', '.join(unknown)}; valid: {', '.join(OPTION_NAMES)}")
    if "beam_size" in options:
        check_positive("beam_size", options["beam_size"])
    if name == "beam":
        name = f"beam-sign-{options['beam_size']}" if "beam_size" in options else PAPER_BEAM
    beam = BEAM_PATTERN.fullmatch(name)
    if beam:
        from fmm_fast.measures.beam import BeamSearch

        size = beam.group(1)
        if not size.isdecimal() or int(size) < 1:
            raise UserError(f"beam size in '{name}' must be an integer >= 1; write e.g. beam-sign-10")
        if options.get("beam_size", int(size)) != int(size):
            raise UserError(f"'{name}' conflicts with beam_size={options['beam_size']}; give the size once")
        return BeamSearch(beam_size=int(size))
    catalogue = _catalogue()
    if name not in catalogue:
        valid = ", ".join([*catalogue, "beam-sign-B (integer B >= 1)", "beam (= beam-sign-10)"])
        raise UserError(f"unknown measure '{name}'; valid names: {valid}")
    cls, takes = catalogue[name]
    given = {**options, "seed": seed}
    return cls(**{option: given[option] for option in takes if option in given})
