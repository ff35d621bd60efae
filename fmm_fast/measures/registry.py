"""Every importance measure by name (method.md §3): get_measure("loo-abs"), get_measure("beam-sign-5"), ...

Options are cost knobs shared across measures (captum style); each measure declares those it takes as
keyword parameters of its constructor and ignores the others: gradient_batch_size (rows per backward
pass), vocab_chunk (grad-l1/-l2 vocabulary chunk), ig_steps (int-grad K), beam_size (for the name "beam").
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping, Sequence

from fmm_fast.core.errors import UserError
from fmm_fast.core.optional_deps import TRAIN
from fmm_fast.measures import captum_methods
from fmm_fast.measures.base import Measure, check_positive
from fmm_fast.measures.beam import BeamSearch
from fmm_fast.measures.gradient import GradL1, GradL2, InputGradAbs, InputGradSign, IntGradAbs, IntGradSign
from fmm_fast.measures.occlusion import LeaveOneOutAbs, LeaveOneOutSign
from fmm_fast.measures.random import RandomMeasure

BEAM_PATTERN = re.compile(r"beam-sign-(.+)")
PAPER_BEAM = "beam-sign-10"
GRADIENT_NEEDS = (
    " and give the model's PyTorch checkpoint (--model CHECKPOINT_DIR, or an .onnx exported from a "
    "checkpoint that still exists)"
)
CATALOGUE: dict[str, type[Measure]] = {
    cls.name: cls
    for cls in (
        RandomMeasure,
        GradL1,
        GradL2,
        InputGradSign,
        InputGradAbs,
        IntGradSign,
        IntGradAbs,
        LeaveOneOutSign,
        LeaveOneOutAbs,
    )
}


def takes(cls: type[Measure]) -> tuple[str, ...]:
    """The options (and `seed`) a measure class declares: its constructor's keyword parameters."""
    return tuple(name for name in inspect.signature(cls).parameters)


OPTION_NAMES = tuple(
    dict.fromkeys(o for cls in [*CATALOGUE.values(), BeamSearch] for o in takes(cls) if o != "seed")
) + tuple(captum_methods.OPTIONS)


def measure_names() -> list[str]:
    """The fixed measure names plus the paper's beam (any beam-sign-B with integer B >= 1 is valid too)."""
    return [*CATALOGUE, PAPER_BEAM]


def parse_measure_options(pairs: Sequence[str]) -> dict[str, int]:
    """["ig_steps=50", ...] -> {"ig_steps": 50}; UserError for a malformed pair, a key given twice, an
    unknown key or a bad value."""
    options: dict[str, object] = {}
    given: dict[str, str] = {}  # key -> the pair that gave it
    for pair in pairs:
        key, equals, value = pair.partition("=")
        key = key.strip()
        if not equals or not key:
            raise UserError(f"--measure-option '{pair}' is not KEY=VALUE; write e.g. ig_steps=50")
        if key in given:  # as for a repeated single-value option: refused, never the last one winning
            raise UserError(
                f"--measure-option {key} was given more than once ({given[key]}, {pair}); it takes one "
                "value, give it once"
            )
        given[key] = pair
        try:
            options[key] = int(value)
        except ValueError:
            options[key] = value  # check_measure_options names the key and the bad value
    return check_measure_options(options)


def check_measure_options(options: Mapping[str, object]) -> dict[str, int]:
    """The options as ints (captum's as their own type); UserError for a name no measure takes or a value that
    is not an integer ≥ 1 (or not of the captum option's type)."""
    unknown = sorted(set(options) - set(OPTION_NAMES))
    if unknown:
        raise UserError(f"unknown measure option(s) {', '.join(unknown)}; valid: {', '.join(OPTION_NAMES)}")
    return {
        name: captum_methods.check_option(name, value)
        if name in captum_methods.OPTIONS
        else check_positive(name, value)  # type: ignore[arg-type]
        for name, value in options.items()
    }


def get_measure(name: str, *, seed: int = 0, **options: int) -> Measure:
    """A fresh measure instance. seed drives `rand`; options: see the module docstring."""
    options = check_measure_options(options)
    if name.startswith(captum_methods.PREFIX):
        return captum_methods.CaptumMeasure(name, seed=seed, **options)
    if name == "beam":
        name = f"beam-sign-{options['beam_size']}" if "beam_size" in options else PAPER_BEAM
    beam = BEAM_PATTERN.fullmatch(name)
    if beam:
        size = beam.group(1)
        if not size.isdecimal() or int(size) < 1:
            raise UserError(f"beam size in '{name}' must be an integer >= 1; write e.g. beam-sign-10")
        if options.get("beam_size", int(size)) != int(size):
            raise UserError(f"'{name}' conflicts with beam_size={options['beam_size']}; give the size once")
        return BeamSearch(beam_size=int(size))
    if name not in CATALOGUE:
        valid = ", ".join(
            [*CATALOGUE, "beam-sign-B (integer B >= 1)", "beam (= beam-sign-10)", "captum:ClassName"]
        )
        raise UserError(f"unknown measure '{name}'; valid names: {valid}")
    cls = CATALOGUE[name]
    if cls.needs_gradients:  # the gradient measures import PyTorch when they run
        TRAIN.require(f"the gradient measure '{name}'", GRADIENT_NEEDS)
    given = {**options, "seed": seed}
    return cls(**{option: given[option] for option in takes(cls) if option in given})
