"""Explaining batches (plain arrays) or texts with any model or custom scorer (the explained split and its
Explanation records: protocols.explanations)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fmm_fast.api.options import engine_arguments
from fmm_fast.backends.base import Backend
from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import LoadedModel, gradient_backend, load_model
from fmm_fast.backends.options import BackendOptions
from fmm_fast.backends.precision import DEFAULT_PRECISION
from fmm_fast.core.errors import UserError
from fmm_fast.core.settings import EngineOptions
from fmm_fast.data.blank import BLANK_REASON, is_blank
from fmm_fast.data.tokenization import cut_to, encode_texts
from fmm_fast.data.units import DEFAULT_UNIT, check_unit
from fmm_fast.measures.base import ExplainBatch
from fmm_fast.measures.guard import checked_scores
from fmm_fast.measures.spec import resolve_measure
from fmm_fast.protocols.explanations import Explanation, explain_encoded

ModelLike = str | Path | LoadedModel | Backend | MaskBatchEngine


def as_engine(
    model: ModelLike,
    needs_gradients: bool = False,
    options: EngineOptions | None = None,
    precision: str = DEFAULT_PRECISION,
) -> MaskBatchEngine:
    """Wrap whatever the caller has (path, loaded model, backend, engine) in a mask-batch engine.

    options: the engine's token and cache budgets (default EngineOptions()); an engine given keeps its own.
    precision (fp32|bf16|auto, see backends.precision) applies to a path; a model already loaded keeps its
    own (`load_model(path, BackendOptions(precision=...))`).
    """
    if isinstance(model, MaskBatchEngine):
        return model
    if isinstance(model, str | Path):
        model = load_model(model, BackendOptions(precision=precision))
    if isinstance(model, LoadedModel):
        backend = gradient_backend(model) if needs_gradients else model.backend
    else:
        backend = model
    return (options or EngineOptions()).engine_on(backend)


def explain(
    model: ModelLike,
    input_ids: np.ndarray,
    attention_mask: np.ndarray,
    labels: np.ndarray,
    explained: np.ndarray,
    measure: str = "loo-abs",
    seed: int = 0,
    precision: str = DEFAULT_PRECISION,
    **options,
) -> np.ndarray:
    """Importance scores for a right-padded batch.

    input_ids, attention_mask: (B, T) int; labels: (B,) int gold labels (the explained logit);
    explained: (B, T) bool, the tokens to score. Returns (B, T) float64, 0 outside `explained`.
    precision: fp32|bf16|auto for a model given by path. `options` are the measure's cost knobs (e.g.
    ig_steps, gradient_batch_size, beam_size).
    """
    chosen = resolve_measure(measure, options).build(seed)
    batch = ExplainBatch(
        np.asarray(input_ids, dtype=np.int64),
        np.asarray(attention_mask, dtype=np.int64),
        np.asarray(labels, dtype=np.int64),
        np.asarray(explained, dtype=bool) & np.asarray(attention_mask, dtype=bool),
    )
    return checked_scores(chosen, batch, as_engine(model, chosen.needs_gradients, precision=precision))


@engine_arguments()
def explain_texts(
    model: str | Path | LoadedModel,
    texts: list[str],
    pairs: list[str] | None = None,
    labels: list[str] | list[int] | None = None,
    measure: str = "loo-abs",
    seed: int = 0,
    precision: str = DEFAULT_PRECISION,
    unit: str = DEFAULT_UNIT,
    max_length: int | None = None,
    engine: EngineOptions = EngineOptions(),
    **options,
) -> list[Explanation]:
    """Explain raw texts (with optional second segments). Without labels, the predicted label is explained.

    A text that truncates to no explained token gets an all-zero explanation. precision: fp32|bf16|auto
    for a model given by path. unit: token | word | sentence, what is scored and masked together;
    max_length: cut every text to N tokens (default: the model's maximum). token_budget=, cache_mb=,
    explain_batch_rows=: the engine's cost knobs, as the commands' flags. Prints the run's cost line first
    (forward passes, their time from a short probe, and what makes it cheaper). `options`: the measure's.
    """
    if not texts:
        raise UserError("no text to explain; give at least one")
    check_unit(unit, "unit=")
    for kind, given in (("text", texts), ("pair", pairs or [])):
        for number, text in enumerate(given):
            if not isinstance(text, str):
                raise UserError(f"{kind} {number} is a {type(text).__name__}, not a string; give str texts")
            if is_blank(text):
                raise UserError(f"{kind} {number} {BLANK_REASON}; give it words to explain")
    backend = BackendOptions(precision=precision)
    loaded = model if isinstance(model, LoadedModel) else load_model(model, backend)
    names = loaded.info.label_names
    label_ids = [0] * len(texts) if labels is None else [_label_index(label, names) for label in labels]
    tokenizer = cut_to(loaded.tokenizer, max_length, "max_length=")
    encoded = encode_texts(tokenizer, texts, pairs, np.asarray(label_ids, dtype=np.int64), unit=unit)
    spec = resolve_measure(measure, options)
    from fmm_fast.protocols.cost import announce_cost  # loads Numba: on use

    announce_cost("explain_texts", [spec.build(seed)], encoded, (), loaded.backend, engine.token_budget)
    return explain_encoded(loaded, encoded, spec, seed, explain_predicted=labels is None, engine=engine)


def _label_index(label: str | int, names: list[str]) -> int:
    if isinstance(label, int | np.integer) and 0 <= int(label) < len(names):
        return int(label)
    if isinstance(label, str) and label in names:
        return names.index(label)
    raise UserError(f"label {label!r} is not one of the model's labels {names}")
