"""Public Python API: explain batches (plain arrays) or texts with any model or custom scorer."""

from __future__ import annotations

import html
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from fmm_fast.backends.base import Backend
from fmm_fast.backends.engine import DEFAULT_TOKEN_BUDGET, MaskBatchEngine
from fmm_fast.backends.loading import LoadedModel, gradient_backend, load_model
from fmm_fast.backends.options import BackendOptions
from fmm_fast.backends.precision import DEFAULT_PRECISION
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.errors import UserError
from fmm_fast.core.records import dumps_record, loads_record
from fmm_fast.core.settings import DEFAULT_EXPLAIN_BATCH_ROWS
from fmm_fast.data.tokenization import encode_texts
from fmm_fast.measures import get_measure
from fmm_fast.measures.base import ExplainBatch, Measure
from fmm_fast.protocols.erasure import explain_split

ModelLike = str | Path | LoadedModel | Backend | MaskBatchEngine


def as_engine(
    model: ModelLike,
    needs_gradients: bool = False,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    precision: str = DEFAULT_PRECISION,
) -> MaskBatchEngine:
    """Wrap whatever the caller has (path, loaded model, backend, engine) in a mask-batch engine.

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
    return MaskBatchEngine(backend, token_budget=token_budget)


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
    chosen = get_measure(measure, seed=seed, **options)
    batch = ExplainBatch(
        np.asarray(input_ids, dtype=np.int64),
        np.asarray(attention_mask, dtype=np.int64),
        np.asarray(labels, dtype=np.int64),
        np.asarray(explained, dtype=bool) & np.asarray(attention_mask, dtype=bool),
    )
    return chosen.explain(batch, as_engine(model, chosen.needs_gradients, precision=precision))


@dataclass
class Explanation:
    """One explained example: tokens with their scores, gold label and prediction."""

    tokens: list[str]
    scores: list[float]
    explained: list[bool]
    label: str
    prediction: str
    measure: str
    signed: bool

    def to_html(self) -> str:
        """Tokens coloured by importance: red for positive, blue for negative (signed measures)."""
        top = max((abs(s) for s in self.scores), default=0.0) or 1.0
        spans = []
        for token, score, is_explained in zip(self.tokens, self.scores, self.explained, strict=True):
            alpha = abs(score) / top if is_explained else 0.0
            colour = "220,40,40" if score >= 0 else "40,90,220"
            spans.append(
                f'<span title="{score:.4g}" style="background:rgba({colour},{alpha:.2f})">'
                f"{html.escape(token)}</span>"
            )
        return (
            f"<p><b>{html.escape(self.measure)}</b> label={html.escape(self.label)} "
            f"prediction={html.escape(self.prediction)}<br>{' '.join(spans)}</p>"
        )


def explain_texts(
    model: str | Path | LoadedModel,
    texts: list[str],
    pairs: list[str] | None = None,
    labels: list[str] | list[int] | None = None,
    measure: str = "loo-abs",
    seed: int = 0,
    precision: str = DEFAULT_PRECISION,
    **options,
) -> list[Explanation]:
    """Explain raw texts (with optional second segments). Without labels, the predicted label is explained.

    A text that truncates to no explained token gets an all-zero explanation. precision: fp32|bf16|auto
    for a model given by path.
    """
    backend = BackendOptions(precision=precision)
    loaded = model if isinstance(model, LoadedModel) else load_model(model, backend)
    if not texts or any(not t.strip() for t in texts):
        raise UserError("every text to explain must be non-empty")
    names = loaded.info.label_names
    label_ids = [0] * len(texts) if labels is None else [_label_index(label, names) for label in labels]
    encoded = encode_texts(loaded.tokenizer, texts, pairs, np.asarray(label_ids, dtype=np.int64))
    return explain_encoded(loaded, encoded, measure, seed, explain_predicted=labels is None, **options)


def explain_encoded(
    loaded: LoadedModel,
    encoded: EncodedSplit,
    measure: str,
    seed: int = 0,
    explain_predicted: bool = False,
    batch_rows: int = DEFAULT_EXPLAIN_BATCH_ROWS,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    on_batch: Callable[[int], None] | None = None,
    **options,
) -> list[Explanation]:
    """Explanations of a tokenized split: scores of the gold label (or of the prediction).

    batch_rows: examples per explain call; token_budget: the engine's; options: the measure's cost knobs.
    """
    chosen = get_measure(measure, seed=seed, **options)
    engine = as_engine(loaded, token_budget=token_budget)
    scoring_engine = (
        as_engine(loaded, needs_gradients=True, token_budget=token_budget)
        if chosen.needs_gradients
        else engine
    )
    predictions, scores = predict_and_explain(
        engine, scoring_engine, encoded, chosen, batch_rows, on_batch, explain_predicted
    )
    return to_explanations(loaded, encoded, chosen, predictions, scores)


def predict_and_explain(
    engine: MaskBatchEngine,
    scoring_engine: MaskBatchEngine,
    encoded: EncodedSplit,
    measure: Measure,
    batch_rows: int = 32,
    on_batch: Callable[[int], None] | None = None,
    explain_predicted: bool = False,
    example_ids: np.ndarray | None = None,
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Predictions (N,) of `engine` and `measure`'s scores on `scoring_engine`, one (T_i,) array per example,
    of the gold label or (explain_predicted) of the prediction. example_ids: (N,) the examples' indices when
    `encoded` is a shard of a larger split."""
    predictions = engine.logits(encoded.input_ids).argmax(axis=1)
    if explain_predicted:
        encoded = replace(encoded, labels=predictions.astype(np.int64))
    scores = explain_split(
        measure, scoring_engine, encoded.input_ids, encoded, batch_rows, on_batch, example_ids
    )
    return predictions, scores


def to_explanations(
    loaded: LoadedModel,
    encoded: EncodedSplit,
    measure: Measure,
    predictions: np.ndarray,
    scores: list[np.ndarray],
) -> list[Explanation]:
    """Explanation records of a split from its predictions (N,) and one (T_i,) score array per example."""
    names = loaded.info.label_names
    return [
        Explanation(
            tokens=[loaded.tokenizer.id_to_token(int(t)) or "" for t in ids],
            scores=[float(s) for s in row_scores],
            explained=[bool(e) for e in flags],
            label=names[int(label)],
            prediction=names[int(prediction)],
            measure=measure.name,
            signed=measure.signed,
        )
        for ids, row_scores, flags, label, prediction in zip(
            encoded.input_ids, scores, encoded.explained, encoded.labels, predictions, strict=True
        )
    ]


def _label_index(label: str | int, names: list[str]) -> int:
    if isinstance(label, int | np.integer) and 0 <= int(label) < len(names):
        return int(label)
    if isinstance(label, str) and label in names:
        return names.index(label)
    raise UserError(f"label {label!r} is not one of the model's labels {names}")


def save_explanations(path: Path, explanations: list[Explanation], extra: list[dict] | None = None) -> None:
    """One JSON object per line (non-finite scores follow the run records' NaN policy); atomic (a temporary
    file renamed over `path`), so a killed run leaves no half-written file."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp")
    with temporary.open("w") as handle:
        for i, item in enumerate(explanations):
            record = asdict(item) | (extra[i] if extra else {})
            handle.write(dumps_record(record, indent=None))
    os.replace(temporary, path)


def load_explanations(path: Path) -> list[Explanation]:
    fields = set(Explanation.__dataclass_fields__)
    with Path(path).open() as handle:
        return [
            Explanation(**{k: v for k, v in loads_record(line).items() if k in fields}) for line in handle
        ]


def write_html(path: Path, explanations: list[Explanation]) -> None:
    body = "\n".join(e.to_html() for e in explanations)
    Path(path).write_text(
        f"<!doctype html><meta charset='utf-8'><title>fmm-fast explanations</title>"
        f"<body style='font-family:sans-serif;max-width:60em'>{body}</body>"
    )
