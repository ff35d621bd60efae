"""Every importance measure by name (method.md §3): get_measure("loo-abs"), get_measure("beam-sign-5"),
get_measure("./my_measures.py:Mine"), ...: the built-in ones, and plug-ins (fmm_fast.measures.plugins).

Options are keyword parameters of the measures' constructors, shared across measures (captum style): each
measure takes those it declares and ignores the others. The built-in cost knobs: gradient_batch_size (rows
per backward pass), vocab_chunk (grad-l1/-l2 vocabulary chunk), ig_steps (int-grad K), beam_size (for the
name "beam"), permutations (shapley-sampling S), samples (kernel-shap and lime N), window (for the name
"occlusion"); a plug-in declares its own, typed by their annotations.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Mapping, Sequence

from fmm_fast import __version__
from fmm_fast.core.errors import UserError
from fmm_fast.core.optional_deps import TRAIN
from fmm_fast.measures import captum_methods
from fmm_fast.measures.base import Measure, check_positive
from fmm_fast.measures.beam import BeamSearch
from fmm_fast.measures.gradient import GradL1, GradL2, InputGradAbs, InputGradSign, IntGradAbs, IntGradSign
from fmm_fast.measures.kernel_shap import KernelShapAbs, KernelShapSign
from fmm_fast.measures.lime import LimeAbs, LimeSign
from fmm_fast.measures.occlusion import LeaveOneOutAbs, LeaveOneOutSign
from fmm_fast.measures.occlusion_window import DEFAULT_WINDOW, OcclusionWindowAbs, OcclusionWindowSign
from fmm_fast.measures.plugins import BUILTIN, MeasureSource, entry_point_names, load_plugin
from fmm_fast.measures.random import RandomMeasure
from fmm_fast.measures.shapley_sampling import ShapleySamplingAbs, ShapleySamplingSign

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
# The perturbation measures (method.md "Perturbation measures"): valid names, not among the paper's ten
# that measure_names() lists (the reproduction study runs those); occlusion-W is parsed like beam-sign-B.
PERTURBATION: dict[str, type[Measure]] = {
    cls.name: cls
    for cls in (ShapleySamplingSign, ShapleySamplingAbs, KernelShapSign, KernelShapAbs, LimeSign, LimeAbs)
}
OCCLUSION_PATTERN = re.compile(r"occlusion-(.+?)(-abs)?")


def takes(cls: type[Measure]) -> tuple[str, ...]:
    """The options (and `seed`) a measure class declares: its constructor's keyword parameters."""
    return tuple(name for name in inspect.signature(cls).parameters)


PARSED = (BeamSearch, OcclusionWindowSign)  # the classes behind beam-sign-B and occlusion-W
BUILTIN_CLASSES = (*CATALOGUE.values(), *PARSED, *PERTURBATION.values())
OPTION_NAMES = tuple(dict.fromkeys(o for cls in BUILTIN_CLASSES for o in takes(cls) if o != "seed"))
VALID_NAMES = (
    *CATALOGUE,
    "beam-sign-B (integer B >= 1)",
    "beam (= beam-sign-10)",
    *PERTURBATION,
    "occlusion-W and occlusion-W-abs (integer W >= 1)",
    f"occlusion (= occlusion-{DEFAULT_WINDOW})",
    f"{captum_methods.PREFIX}ClassName (Captum's methods)",
)


def measure_names() -> list[str]:
    """The paper's ten: its fixed measure names plus its beam (any beam-sign-B with integer B >= 1 is valid
    too, and so are the perturbation measures: perturbation_names())."""
    return [*CATALOGUE, PAPER_BEAM]


def perturbation_names() -> list[str]:
    """The perturbation measures' fixed names plus the default window's occlusion (any occlusion-W and
    occlusion-W-abs with integer W >= 1 is valid too)."""
    return [*PERTURBATION, f"occlusion-{DEFAULT_WINDOW}", f"occlusion-{DEFAULT_WINDOW}-abs"]


def is_builtin_name(name: str) -> bool:
    """Whether `name` is (or is spelled like) a built-in measure's: a plug-in may not take it."""
    return (
        name in CATALOGUE
        or name in PERTURBATION
        or name in ("beam", "occlusion", "occlusion-abs")
        or BEAM_PATTERN.fullmatch(name) is not None
        or OCCLUSION_PATTERN.fullmatch(name) is not None
        or name.startswith(captum_methods.PREFIX)
    )


def parse_measure_options(pairs: Sequence[str]) -> dict[str, str]:
    """["ig_steps=50", ...] -> {"ig_steps": "50"}; UserError for a malformed pair or a key given twice.
    The values stay text: each measure that takes a key converts it to its constructor's annotation
    (option_values), and the measures chosen decide which keys are known (fmm_fast.measures.spec)."""
    options: dict[str, str] = {}
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
        options[key] = value.strip()
    return options


def option_values(cls: type[Measure], options: Mapping[str, object], where: str) -> dict[str, object]:
    """The options `cls` takes (its constructor's parameters but `seed`), text converted to each
    parameter's annotation (int, float, bool or str; without one, to its default's type); other values
    as given (the constructor checks them). UserError naming the option when text does not convert."""
    parameters = inspect.signature(cls).parameters
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # an annotation that does not evaluate: fall back to the defaults' types
        hints = {}
    values: dict[str, object] = {}
    for key, value in options.items():
        if key not in parameters or key == "seed":
            continue
        wanted = hints.get(key)
        if wanted is None and parameters[key].default not in (inspect.Parameter.empty, None):
            wanted = type(parameters[key].default)
        values[key] = _converted(key, value, wanted, where) if isinstance(value, str) else value
    return values


def _converted(key: str, text: str, wanted: object, where: str) -> object:
    """`text` as a `wanted` (int, float, bool; anything else: the text itself)."""
    accepted = set(typing.get_args(wanted)) or {wanted}  # int | None -> {int, None}
    try:
        if int in accepted and re.fullmatch(r"[+-]?\d+", text):
            return int(text)
        if float in accepted:
            return float(text)
        if bool in accepted and text.lower() in ("true", "false"):
            return text.lower() == "true"
    except ValueError:
        pass
    if accepted & {int, float, bool}:
        kinds = " or ".join(k.__name__ for k in (int, float, bool) if k in accepted)
        hint = "an integer" if kinds == "int" else kinds
        raise UserError(f"measure option {key} of {where} must be {hint}, got {text!r}") from None
    return text


def builtin_knob(key: str, value: object) -> object:
    """A built-in cost knob (OPTION_NAMES) converted to the annotation of the first built-in measure that
    declares it; an integer knob must be ≥ 1 (UserError otherwise), whichever measure takes it."""
    declaring = next(cls for cls in BUILTIN_CLASSES if key in takes(cls))
    converted = option_values(declaring, {key: value}, "fmm-fast")[key]
    wanted = typing.get_type_hints(declaring.__init__).get(key)
    return check_positive(key, converted) if wanted is int else converted  # type: ignore[arg-type]


def find_measure(name: str) -> tuple[type[Measure], MeasureSource]:
    """The class behind a measure name (built-in, beam-sign-B, or a plug-in: "module:Name", "./file.py:Name"
    or an installed entry point's name) and where its code comes from; UserError for a name nothing
    answers to."""
    builtin = CATALOGUE.get(name) or PERTURBATION.get(name)
    if builtin is None and (name == "beam" or BEAM_PATTERN.fullmatch(name)):
        builtin = BeamSearch
    if builtin is None and name in ("occlusion", "occlusion-abs"):
        builtin = OcclusionWindowSign if name == "occlusion" else OcclusionWindowAbs
    occlusion = OCCLUSION_PATTERN.fullmatch(name)
    if builtin is None and occlusion:
        builtin = OcclusionWindowAbs if occlusion.group(2) else OcclusionWindowSign
    if builtin is None and name.startswith(captum_methods.PREFIX):
        builtin = captum_methods.measure_class(name)
    if builtin is not None:
        return builtin, MeasureSource(BUILTIN, name, __version__)
    try:
        found, source = load_plugin(name)
    except KeyError:  # no entry point of that name either
        installed = entry_point_names()
        plugins = f"; installed plug-ins: {', '.join(installed)}" if installed else ""
        raise UserError(
            f"unknown measure '{name}'; valid names: {', '.join(VALID_NAMES)}{plugins}; or your own as "
            "package.module:Name or ./file.py:Name"
        ) from None
    if is_builtin_name(found.name):
        raise UserError(
            f"measure {source.locator} is named '{found.name}', as a built-in measure is; give it another "
            "name"
        )
    return found, source


def build_measure(
    cls: type[Measure], source: MeasureSource, seed: int, options: Mapping[str, object]
) -> Measure:
    """A fresh instance of a plug-in class with its options and, where it takes one, `seed`; UserError
    naming the measure when its constructor refuses them."""
    given = {**option_values(cls, options, source.locator), "seed": seed}
    arguments = {option: given[option] for option in takes(cls) if option in given}
    try:
        return cls(**arguments)
    except UserError:
        raise
    except Exception as error:  # the plug-in's own check of its options
        raise UserError(
            f"measure {source.locator} refused its options {arguments} ({type(error).__name__}: {error})"
        ) from None


def get_measure(name: str, *, seed: int = 0, **options: object) -> Measure:
    """A fresh measure instance. seed drives `rand`; options: see the module docstring (text converts to
    each constructor parameter's annotation). An option no measure of fmm-fast and not this one takes is
    refused; others the measure does not take are ignored."""
    if name == "beam":
        name = (
            f"beam-sign-{builtin_knob('beam_size', options['beam_size'])}"
            if "beam_size" in options
            else PAPER_BEAM
        )
    cls, source = find_measure(name)
    unknown = sorted(set(options) - set(OPTION_NAMES) - set(takes(cls)) - {"seed"})
    if unknown:
        raise UserError(f"unknown measure option(s) {', '.join(unknown)}; '{name}' takes: {_taken(cls)}")
    if source.origin != BUILTIN or issubclass(cls, captum_methods.CaptumMeasure):  # options of their own
        return build_measure(cls, source, seed, options)
    options = {key: builtin_knob(key, value) for key, value in options.items()}  # all built-in knobs
    beam = BEAM_PATTERN.fullmatch(name)
    if beam:
        size = beam.group(1)
        if not size.isdecimal() or int(size) < 1:
            raise UserError(f"beam size in '{name}' must be an integer >= 1; write e.g. beam-sign-10")
        if options.get("beam_size", int(size)) != int(size):
            raise UserError(f"'{name}' conflicts with beam_size={options['beam_size']}; give the size once")
        return BeamSearch(beam_size=int(size))
    if name in ("occlusion", "occlusion-abs"):
        name = name.replace("occlusion", f"occlusion-{options.get('window', DEFAULT_WINDOW)}")
    occlusion = OCCLUSION_PATTERN.fullmatch(name)
    if occlusion:
        window, absolute = occlusion.groups()
        if not window.isdecimal() or int(window) < 1:
            raise UserError(f"window in '{name}' must be an integer >= 1; write e.g. occlusion-3")
        if options.get("window", int(window)) != int(window):
            raise UserError(f"'{name}' conflicts with window={options['window']}; give the window once")
        return (OcclusionWindowAbs if absolute else OcclusionWindowSign)(window=int(window))
    if cls.needs_gradients:  # the gradient measures import PyTorch when they run
        TRAIN.require(f"the gradient measure '{name}'", GRADIENT_NEEDS)
    given = {**options, "seed": seed}
    return cls(**{option: given[option] for option in takes(cls) if option in given})


def _taken(cls: type[Measure]) -> str:
    return ", ".join(o for o in takes(cls) if o != "seed") or "no options"
