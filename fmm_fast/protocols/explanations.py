"""An explained split: the Explanation record of one example under one measure, explaining a tokenized split
with a measure (the predictions' pass and the measure's scores), and the explanation files `fmm-fast explain`
writes and `aopc --explanations`, the report and the explain page read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import LoadedModel, gradient_backend
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.errors import UserError
from fmm_fast.core.reading import READ_ERRORS, LineError, json_lines, shape_error
from fmm_fast.core.records import dumps_record, restore_non_finite
from fmm_fast.core.settings import EngineOptions
from fmm_fast.core.writing import replacing
from fmm_fast.data.tokenization import cut_to, encode_in_chunks
from fmm_fast.data.units import DEFAULT_UNIT
from fmm_fast.measures.base import Measure
from fmm_fast.measures.spec import MeasureSpec
from fmm_fast.protocols.aopc_metrics import softmax
from fmm_fast.protocols.erasure import explain_split


@dataclass
class Explanation:
    """One explained example under one measure: tokens with their scores, gold label and prediction.

    tokens, scores, explained, offsets, segments: one entry per model token (specials included).
    offsets: [start, end) characters of the token in its segment's text (text for segment 0, pair for
    segment 1); segments: 0, 1, or -1 for a special token. probability: the model's probability of its
    prediction. index: the example's position in the explained split. tokens_kept / tokens_total: the
    example's tokens after / before the cut to the model's maximum length (None when not known). unit:
    the erasure unit the scores are of (token | word | sentence); units: with word or sentence units, one
    entry per token, the unit it belongs to (0..n-1, -1 where not explained; every token of a unit holds
    its unit's score), empty for token units. Lines written before offsets were recorded load with empty
    offsets and segments (the page then shows tokens only).

    Example: `fmm_fast.explain(model, measure="loo-abs", limit=1)[0].scores` (one float per token).
    """

    tokens: list[str]
    scores: list[float]
    explained: list[bool]
    label: str
    prediction: str
    measure: str
    signed: bool
    index: int = 0
    text: str = ""
    pair: str | None = None
    probability: float | None = None
    offsets: list[list[int]] = field(default_factory=list)
    segments: list[int] = field(default_factory=list)
    tokens_kept: int | None = None
    tokens_total: int | None = None
    unit: str = DEFAULT_UNIT
    units: list[int] = field(default_factory=list)


def explain_encoded(
    loaded: LoadedModel,
    encoded: EncodedSplit,
    spec: MeasureSpec,
    seed: int = 0,
    explain_predicted: bool = False,
    engine: EngineOptions | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> list[Explanation]:
    """Explanations of a tokenized split by the measure `spec` seeded `seed`: scores of the gold label (or
    of the prediction).

    engine: the token and cache budgets and examples per explain call (default EngineOptions()).
    """
    chosen = spec.build(seed)
    options = engine or EngineOptions()
    predicting = options.engine_on(loaded.backend)
    scoring = predicting
    if chosen.needs_gradients:
        scoring = options.engine_on(gradient_backend(loaded))
    probabilities, scores = predict_and_explain(
        predicting, scoring, encoded, chosen, options.explain_batch_rows, on_batch, explain_predicted
    )
    return to_explanations(loaded, encoded, spec, probabilities, scores)


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
    """Class probabilities (N, C) float64 of `engine` and `measure`'s scores on `scoring_engine`, one (T_i,)
    array per example, of the gold label or (explain_predicted) of the prediction. example_ids: (N,) the
    examples' indices when `encoded` is a shard of a larger split."""
    probabilities = softmax(engine.logits(encoded.input_ids))
    if explain_predicted:
        encoded = replace(encoded, labels=probabilities.argmax(axis=1).astype(np.int64))
    scores = explain_split(
        measure, scoring_engine, encoded.input_ids, encoded, batch_rows, on_batch, example_ids
    )
    return probabilities, scores


def to_explanations(
    loaded: LoadedModel,
    encoded: EncodedSplit,
    measure: MeasureSpec,
    probabilities: np.ndarray,
    scores: list[np.ndarray],
) -> list[Explanation]:
    """Explanation records of a split by `measure` from its class probabilities (N, C) and one (T_i,) score
    array per example; the tokens' character offsets come from encoding the split's texts again."""
    names = loaded.info.label_names
    texts = encoded.texts or [("", None)] * len(encoded)
    # encoded again as the split was cut (--max-length): an uncut encoding matches no cut example's ids
    encodings = token_offsets(cut_to(loaded.tokenizer, encoded.max_length), texts, encoded.input_ids)
    explanations = []
    for index, (ids, row_scores, flags, label, row_probabilities, (text, pair), located) in enumerate(
        zip(encoded.input_ids, scores, encoded.explained, encoded.labels, probabilities, texts, encodings,
            strict=True)
    ):  # fmt: skip
        prediction = int(np.argmax(row_probabilities))
        explanations.append(
            Explanation(
                tokens=[loaded.tokenizer.id_to_token(int(t)) or "" for t in ids],
                scores=[float(s) for s in row_scores],
                explained=[bool(e) for e in flags],
                label=names[int(label)],
                prediction=names[prediction],
                measure=measure.name,
                signed=measure.signed,
                index=index,
                text=text,
                pair=pair,
                probability=float(row_probabilities[prediction]),
                offsets=located[0],
                segments=located[1],
                tokens_kept=len(ids),
                tokens_total=encoded.tokens_total(index),
                unit=encoded.unit,
                units=encoded.units[index].tolist() if encoded.units else [],
            )
        )
    return explanations


def token_offsets(
    tokenizer: Tokenizer, texts: list[tuple[str, str | None]], input_ids: list[np.ndarray]
) -> list[tuple[list[list[int]], list[int]]]:
    """Per example, each token's [start, end) characters in its segment's text and its segment (0, 1, -1
    for specials). An example whose texts do not encode to its ids (e.g. an EncodedSplit built without
    texts) gets empty lists: nothing is better than offsets of other tokens."""
    inputs = [(text, pair) if pair is not None else text for text, pair in texts]
    located = []
    for encoding, ids in zip(encode_in_chunks(tokenizer, inputs), input_ids, strict=True):
        if list(encoding.ids) != [int(i) for i in ids]:
            located.append(([], []))
            continue
        special = encoding.special_tokens_mask
        segments = [-1 if special[k] or s is None else int(s) for k, s in enumerate(encoding.sequence_ids)]
        located.append(([list(span) for span in encoding.offsets], segments))
    return located


def save_explanations(path: Path, explanations: list[Explanation]) -> None:
    """One JSON object per line and measure, in example order, each example's measures in the order given
    (non-finite scores follow the run records' NaN policy); written through core.writing (atomic, so a
    killed run leaves no half-written file, and never through a link)."""
    with replacing(path) as staged, staged.open("w", encoding="utf-8") as handle:
        for item in sorted(explanations, key=lambda e: e.index):  # stable: measures keep their order
            handle.write(dumps_record(asdict(item), indent=None))


# The fields of a line of `save_explanations` and their types; "?": absent in files written before it.
EXPLANATION_LINE = {
    "tokens": [str],
    "scores": [float],
    "explained": [bool],
    "label": str,
    "prediction": str,
    "measure": str,
    "signed": bool,
    "index?": int,
    "text?": str,
    "pair?": (str, None),
    "probability?": (float, None),
    "offsets?": [[int]],
    "segments?": [int],
    "tokens_kept?": (int, None),
    "tokens_total?": (int, None),
    "unit?": str,
    "units?": [int],
}


def _misaligned(record: dict) -> str | None:
    """What in a line of the right types does not fit together (one entry per token), or None."""
    tokens = len(record["tokens"])
    keys = ("scores", "explained", "offsets", "segments", "units")
    lengths = {key: len(record.get(key, [])) for key in keys}
    for key, given in lengths.items():
        # older files have no offsets and segments; token units have no units
        if given != tokens and not (key in ("offsets", "segments", "units") and given == 0):
            return f"{key} must have one entry per token ({tokens}), not {given}"
    if any(len(span) != 2 for span in record.get("offsets", [])):
        return "offsets must be [start, end] pairs"
    if record.get("index", 0) < 0:
        return "index must be 0 or more"
    return None


def load_explanations(path: Path) -> list[Explanation]:
    """The explanations `save_explanations` wrote (fields it does not know are skipped); UserError naming
    the file's own line when the file is not such a file."""
    path = Path(path)
    fields = Explanation.__dataclass_fields__
    try:
        lines = json_lines(path)
        explanations = []
        for number, line in lines:
            try:
                record = restore_non_finite(line)
            except ValueError as error:
                raise LineError(number, str(error)) from None
            if error := shape_error(record, EXPLANATION_LINE) or _misaligned(record):
                raise LineError(number, error)
            explanations.append(Explanation(**{k: v for k, v in record.items() if k in fields}))
    except LineError as error:
        raise UserError(
            f"{path} line {error.number} is not an `fmm-fast explain` line ({error.reason}); pass a file "
            "that `fmm-fast explain --out` wrote"
        ) from None
    except READ_ERRORS as error:
        raise UserError(f"cannot read {path} ({error}); check the path") from None
    return explanations

