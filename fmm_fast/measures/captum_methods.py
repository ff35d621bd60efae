"""Captum's attribution methods as measures: `captum:ClassName`, `captum:ClassName-abs`,
`captum:NoiseTunnel-ClassName` (docs/guides/evaluate.md, "Captum's methods as measures").

Every method explains the gold label's logit of one example at a time (captum's own advice for its
perturbation methods), so a random method draws from a generator seeded per example as `rand` does.
- Gradient methods (IntegratedGradients, DeepLift, GradientShap, Saliency, InputXGradient, and NoiseTunnel
  around any of them but GradientShap) attribute over the input word embeddings e = W[x] through the
  backend's autograd (PyTorch only); the baseline, where the method takes one, is the input with every
  explained token replaced by the mask token's embedding. A token's score is its attribution summed over the
  embedding dimension, as captum users do.
- Perturbation methods (Occlusion, FeatureAblation, ShapleyValueSampling, KernelShap, Lime) see one input
  feature per erasure unit still visible (batch.visible_units): 1 keeps the unit as it is, the baseline 0
  masks it. Captum's perturbed inputs become masked token rows that the mask-batch engine scores, so they run
  on every backend (ONNX included) and repeated rows run once.
Captum (and scikit-learn, which KernelShap and Lime fit with) are imported when a measure is made.
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fmm_fast.backends.engine import MaskBatchEngine, mask_positions
from fmm_fast.core.datatypes import unpad
from fmm_fast.core.errors import UserError
from fmm_fast.core.optional_deps import CAPTUM
from fmm_fast.measures.base import ExplainBatch, Measure
from fmm_fast.measures.gradient import require_gradient_backend

if TYPE_CHECKING:
    from torch import Tensor

    from fmm_fast.backends.base import GradientBackend

PREFIX = "captum:"
ABS_SUFFIX = "-abs"
NOISE_TUNNEL = "NoiseTunnel-"


@dataclass(frozen=True)
class CaptumOption:
    """A keyword argument of captum's `attribute` given as --measure-option: a count (integer ≥ 1), a number
    (finite, ≥ 0) or one of `choices`."""

    kind: str  # "count" | "number" | "choice"
    example: str
    choices: tuple[str, ...] = ()

    def check(self, key: str, value: object) -> int | float | str:
        """value in the option's type; UserError naming the key and a valid value otherwise."""
        if self.kind == "choice":
            if value not in self.choices:
                raise UserError(
                    f"{key} must be one of {', '.join(self.choices)}, got {value!r}; pass e.g. {self.example}"
                )
            return str(value)
        if self.kind == "count":
            if isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= 1:
                return int(value)
            raise UserError(f"{key} must be an integer >= 1, got {value!r}; pass e.g. {self.example}")
        try:  # a number: the CLI hands "0.5" over as text
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            number = math.nan
        if isinstance(value, bool) or not math.isfinite(number) or number < 0:
            raise UserError(f"{key} must be a number >= 0, got {value!r}; pass e.g. {self.example}")
        return number


OPTIONS: dict[str, CaptumOption] = {
    "n_steps": CaptumOption("count", "n_steps=50"),
    "method": CaptumOption(
        "choice",
        "method=riemann_trapezoid",
        ("gausslegendre", "riemann_right", "riemann_left", "riemann_middle", "riemann_trapezoid"),
    ),
    "internal_batch_size": CaptumOption("count", "internal_batch_size=16"),
    "n_samples": CaptumOption("count", "n_samples=200"),
    "stdevs": CaptumOption("number", "stdevs=0.01"),
    "nt_type": CaptumOption("choice", "nt_type=smoothgrad", ("smoothgrad", "smoothgrad_sq", "vargrad")),
    "nt_samples": CaptumOption("count", "nt_samples=10"),
    "nt_samples_batch_size": CaptumOption("count", "nt_samples_batch_size=5"),
    "sliding_window_shapes": CaptumOption("count", "sliding_window_shapes=3"),
    "strides": CaptumOption("count", "strides=1"),
    "perturbations_per_eval": CaptumOption("count", "perturbations_per_eval=64"),
}
NOISE_TUNNEL_OPTIONS = ("nt_type", "nt_samples", "nt_samples_batch_size", "stdevs")
# Where fmm-fast's default differs from captum's. Occlusion's window has none in captum (and 1 would be
# FeatureAblation); perturbations per forward call change the cost only: captum's 1 calls the engine per row.
DEFAULTS: dict[str, int] = {"sliding_window_shapes": 3, "perturbations_per_eval": 128}
# what a --measure-option's text becomes, by the option's kind
OPTION_TYPES: dict[str, type] = {"count": int, "number": float, "choice": str}


@dataclass(frozen=True)
class CaptumMethod:
    """A class of captum.attr: gradient (over embeddings) or perturbation (over units); signed or not
    (Saliency takes the gradient's absolute value); the options its `attribute` takes; whether it takes
    baselines."""

    gradient: bool
    signed: bool
    options: tuple[str, ...]
    baselines: bool = True


METHODS: dict[str, CaptumMethod] = {
    "IntegratedGradients": CaptumMethod(True, True, ("n_steps", "method", "internal_batch_size")),
    "DeepLift": CaptumMethod(True, True, ()),
    "GradientShap": CaptumMethod(True, True, ("n_samples", "stdevs")),
    "Saliency": CaptumMethod(True, False, (), baselines=False),
    "InputXGradient": CaptumMethod(True, True, (), baselines=False),
    "Occlusion": CaptumMethod(False, True, ("sliding_window_shapes", "strides", "perturbations_per_eval")),
    "FeatureAblation": CaptumMethod(False, True, ("perturbations_per_eval",)),
    "ShapleyValueSampling": CaptumMethod(False, True, ("n_samples", "perturbations_per_eval")),
    "KernelShap": CaptumMethod(False, True, ("n_samples", "perturbations_per_eval")),
    "Lime": CaptumMethod(False, True, ("n_samples", "perturbations_per_eval")),
}
# GradientShap is itself a noise tunnel (over integrated gradients): its own stdevs would clash
TUNNELLED = tuple(name for name, method in METHODS.items() if method.gradient and name != "GradientShap")


@dataclass(frozen=True)
class CaptumName:
    """A parsed measure name: the captum class, wrapped in NoiseTunnel or not, absolute value or not."""

    name: str
    method_name: str
    tunnel: bool
    absolute: bool

    @property
    def method(self) -> CaptumMethod:
        return METHODS[self.method_name]

    @property
    def options(self) -> tuple[str, ...]:
        """The options this measure takes."""
        return (NOISE_TUNNEL_OPTIONS if self.tunnel else ()) + self.method.options


def parse_name(name: str) -> CaptumName:
    """'captum:NoiseTunnel-Saliency' -> CaptumName; UserError naming the valid spellings otherwise."""
    rest = name.removeprefix(PREFIX)
    absolute = rest.endswith(ABS_SUFFIX)
    rest = rest.removesuffix(ABS_SUFFIX)
    tunnel = rest.startswith(NOISE_TUNNEL)
    rest = rest.removeprefix(NOISE_TUNNEL)
    if rest not in METHODS or (tunnel and rest not in TUNNELLED):
        raise UserError(
            f"unknown Captum measure '{name}'; valid: {', '.join(f'{PREFIX}{m}' for m in METHODS)}, "
            f"{PREFIX}{NOISE_TUNNEL}NAME for NAME in {', '.join(TUNNELLED)}, each signed one also with "
            f"{ABS_SUFFIX}"
        )
    if absolute and not METHODS[rest].signed:
        raise UserError(
            f"'{name}': captum's {rest} already takes the gradient's absolute value; write "
            f"{name.removesuffix(ABS_SUFFIX)}"
        )
    return CaptumName(name, rest, tunnel, absolute)


def check_option(key: str, value: object) -> int | float | str:
    """One captum option's value, checked (see OPTIONS)."""
    return OPTIONS[key].check(key, value)


def row_seed(seed: int, example_id: int) -> int:
    """The seed of one example's draws: the same whichever batch or worker explains it."""
    return int(np.random.SeedSequence([seed, example_id]).generate_state(1)[0])


@contextmanager
def seeded_generators(seed: int, device: Any) -> Iterator[None]:
    """Torch's global generators (CPU and `device`) and numpy's seeded for one call, and restored after it:
    captum draws its samples from them (GradientShap's path points from numpy's)."""
    import torch

    devices = [device.index or 0] if device.type == "cuda" else []
    numpy_state = np.random.get_state()
    try:
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            np.random.seed(seed % 2**32)
            yield
    finally:
        np.random.set_state(numpy_state)


def embeddings_forward(backend: GradientBackend) -> Any:
    """An nn.Module (embeddings (B, T, E), attention_mask (B, T), input_ids (B, T)) -> (B, C) logits over
    the backend. The backend's own model is a child when it has one, so DeepLift hooks its non-linearities."""
    from torch import nn

    class EmbeddingsToLogits(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            model = getattr(backend, "model", None)
            if isinstance(model, nn.Module):
                self.model = model

        def forward(self, embeddings: Tensor, attention_mask: Tensor, input_ids: Tensor) -> Tensor:
            return backend.logits_from_embeddings(embeddings, attention_mask, input_ids)

    return EmbeddingsToLogits()


class CaptumMeasure(Measure):
    """One `captum:...` measure. Its name, signedness and whether it needs gradients depend on the name, so
    they are set per instance. options: the run's measure options (those this measure takes are used);
    seed: draws per example (example_ids) or, without them, from one generator seeded here."""

    def __init__(self, name: str, seed: int = 0, **options: object) -> None:
        CAPTUM.require(f"the Captum measure '{name}'")
        self.parsed = parse_name(name)
        self.name = name  # type: ignore[misc]  # per instance: one class serves every captum name
        self.signed = self.parsed.method.signed and not self.parsed.absolute  # type: ignore[misc]
        self.needs_gradients = self.parsed.method.gradient  # type: ignore[misc]
        self.scores_units = not self.parsed.method.gradient  # type: ignore[misc]
        given = {**DEFAULTS, **options}
        self.options = {key: check_option(key, given[key]) for key in self.parsed.options if key in given}
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def explain(self, batch: ExplainBatch, engine: MaskBatchEngine) -> np.ndarray:
        """(B, T) float64 scores; 0 outside the explained positions."""
        if self.parsed.method.gradient:
            scores = self._gradient_scores(batch, engine)
        else:
            scores = self._perturbation_scores(batch, engine)
        return np.abs(scores) if self.parsed.absolute else scores

    def _seeds(self, batch: ExplainBatch) -> list[int]:
        if batch.example_ids is None:
            return [int(s) for s in self.rng.integers(0, 2**63, size=len(batch.input_ids))]
        return [row_seed(self.seed, int(i)) for i in batch.example_ids]

    def _explainer(self, forward: Callable, method_name: str | None = None) -> Any:
        """captum's explainer of this measure (or of `method_name`) over `forward`."""
        import captum.attr

        explainer = getattr(captum.attr, method_name or self.parsed.method_name)(forward)
        return captum.attr.NoiseTunnel(explainer) if self.parsed.tunnel else explainer

    def _gradient_scores(self, batch: ExplainBatch, engine: MaskBatchEngine) -> np.ndarray:
        import torch

        backend = require_gradient_backend(engine, self.name)
        weights = backend.embedding_matrix().detach()
        explainer = self._explainer(embeddings_forward(backend))
        scores = np.zeros(batch.input_ids.shape, dtype=np.float64)
        rows = unpad(batch.input_ids, batch.attention_mask)
        for row, (sequence, seed) in enumerate(zip(rows, self._seeds(batch), strict=True)):
            explained = batch.explained[row, : len(sequence)]
            if not explained.any():
                continue
            ids = torch.from_numpy(sequence.astype(np.int64))[None].to(weights.device)
            baseline_ids = torch.from_numpy(np.where(explained, engine.info.mask_id, sequence))
            given = {"baselines": weights[baseline_ids[None].to(weights.device)]}
            with seeded_generators(seed, weights.device), warnings.catch_warnings():
                # DeepLift announces the hooks it sets on the model's non-linearities at every call
                warnings.filterwarnings("ignore", "Setting forward, backward hooks", UserWarning)
                attributions = explainer.attribute(
                    weights[ids].requires_grad_(True),
                    target=int(batch.labels[row]),
                    additional_forward_args=(torch.ones_like(ids), ids),
                    **(given if self.parsed.method.baselines else {}),
                    **self.options,
                )
            values = attributions[0].sum(dim=-1).detach().to(torch.float64).cpu().numpy()
            scores[row, : len(sequence)] = np.where(explained, values, 0.0)
        return scores

    def _perturbation_scores(self, batch: ExplainBatch, engine: MaskBatchEngine) -> np.ndarray:
        import torch

        options = dict(self.options)
        scores = np.zeros(batch.input_ids.shape, dtype=np.float64)
        rows = unpad(batch.input_ids, batch.attention_mask)
        for row, (sequence, seed) in enumerate(zip(rows, self._seeds(batch), strict=True)):
            units = batch.visible_units(row, engine.info.mask_id)
            if not units:
                continue
            if "sliding_window_shapes" in self.options:  # a window wider than the units left covers them
                window = int(self.options["sliding_window_shapes"])
                options["sliding_window_shapes"] = (min(window, len(units)),)
            method_name, given = self.parsed.method_name, options
            if method_name == "KernelShap" and len(units) == 1:
                # captum's KernelShap fails on one feature (no coalition size to draw); one player's Shapley
                # value is v({u}) − v(∅), which FeatureAblation computes
                method_name, given = "FeatureAblation", {k: v for k, v in options.items() if k != "n_samples"}
            explainer = self._explainer(unit_forward(engine, sequence, units), method_name)
            with seeded_generators(seed, torch.device("cpu")):
                attributions = explainer.attribute(
                    torch.ones((1, len(units))), baselines=0.0, target=int(batch.labels[row]), **given
                )
            values = attributions[0].detach().to(torch.float64).numpy()
            for value, positions in zip(values, units, strict=True):
                scores[row, positions] = value
        return scores


def unit_forward(engine: MaskBatchEngine, sequence: np.ndarray, units: list[np.ndarray]) -> Callable:
    """captum's forward function for one example: keep (K, U) float (1 keeps unit u, 0 masks it) -> (K, C)
    float32 logits of the K masked copies of `sequence` (T,), scored by the engine."""
    import torch

    def forward(keep: Tensor) -> Tensor:
        dropped = keep.detach().cpu().numpy() < 0.5
        masks = np.zeros((len(dropped), len(sequence)), dtype=bool)
        for unit, positions in enumerate(units):
            masks[:, positions] = dropped[:, unit, None]
        return torch.from_numpy(engine.logits(mask_positions(sequence, masks, engine.info.mask_id)))

    return forward


def measure_class(name: str) -> type[CaptumMeasure]:
    """The measure class of one captum name: its flags as class attributes and the options its method takes
    as typed keyword parameters (None: captum's default), so the registry resolves, checks and records it
    like any measure."""
    parsed = parse_name(name)

    def __init__(self: CaptumMeasure, seed: int = 0, **options: object) -> None:
        CaptumMeasure.__init__(self, name, seed, **{k: v for k, v in options.items() if v is not None})

    keyword = inspect.Parameter.KEYWORD_ONLY
    options = [
        inspect.Parameter(key, keyword, default=DEFAULTS.get(key), annotation=OPTION_TYPES[OPTIONS[key].kind])
        for key in parsed.options
    ]
    seed = inspect.Parameter("seed", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=0, annotation=int)
    self = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    __init__.__signature__ = inspect.Signature([self, seed, *options])  # type: ignore[attr-defined]
    __init__.__annotations__ = {"seed": int, **{p.name: p.annotation | None for p in options}, "return": None}
    flags = {
        "name": name,
        "signed": parsed.method.signed and not parsed.absolute,
        "needs_gradients": parsed.method.gradient,
        "scores_units": not parsed.method.gradient,
        "__init__": __init__,
    }
    return type(f"Captum{parsed.method_name}Measure", (CaptumMeasure,), flags)
