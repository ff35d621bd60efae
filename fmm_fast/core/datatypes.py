"""Core data types shared by data loading, backends, measures, evaluation and MaSF."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np

from fmm_fast.core.reading import shape_error
from fmm_fast.core.writing import replacing


@dataclass
class EncodedSplit:
    """A tokenized split, ragged (no padding): one array per example.

    input_ids[i]: (T_i,) int64 token ids, specials included.
    explained[i]: (T_i,) bool, first-segment non-special tokens (what evaluation may mask).
    maskable[i]:  (T_i,) bool, all non-special tokens of both segments (what training may mask).
    labels:       (N,) int64 gold label index.
    supporting[i]: (T_i,) bool, first-segment tokens inside a supporting-fact span (bAbI); an empty list
                  when the dataset records no supporting facts.
    token_totals: (N,) int64 tokens of each example before truncation to the model's maximum (T_i when
                  it was not cut); empty when unknown (a split built by hand).
    max_length:   the length the examples were cut to (the model's maximum or a smaller --max-length); None
                  when unknown.
    unit:         the erasure unit (token | word | sentence, fmm_fast.data.units).
    units[i]:     (T_i,) int64 the unit of each explained token, numbered 0..n_i-1 in order, -1 where not
                  explained; an empty list for token units (every explained token its own unit).
    """

    input_ids: list[np.ndarray]
    explained: list[np.ndarray]
    maskable: list[np.ndarray]
    labels: np.ndarray
    texts: list[tuple[str, str | None]] = field(default_factory=list)
    supporting: list[np.ndarray] = field(default_factory=list)
    token_totals: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    max_length: int | None = None
    unit: str = "token"
    units: list[np.ndarray] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.input_ids)

    def tokens_total(self, i: int) -> int:
        """Example i's token count before truncation (its kept count when unknown)."""
        return int(self.token_totals[i]) if len(self.token_totals) else len(self.input_ids[i])

    def truncation(self) -> dict[str, int]:
        """What truncation to the model's maximum length cut: examples cut, and tokens kept / total."""
        kept = [len(ids) for ids in self.input_ids]
        totals = [self.tokens_total(i) for i in range(len(self))]
        return {
            "examples": len(self),
            "examples_cut": sum(t > k for k, t in zip(kept, totals, strict=True)),
            "tokens_kept": sum(kept),
            "tokens_total": sum(totals),
            "max_length": self.max_length,
        }

    def example_units(self, i: int) -> np.ndarray | None:
        """Example i's (T_i,) int64 units (see `units`), None for token units."""
        return self.units[i] if self.units else None

    def unit_counts(self) -> np.ndarray:
        """(N,) int64 the units n of each example (token units: its explained tokens), what a masking ratio
        takes its share of."""
        if self.units:
            return np.asarray([int(u.max(initial=-1)) + 1 for u in self.units], dtype=np.int64)
        return np.asarray([int(e.sum()) for e in self.explained], dtype=np.int64)

    def subset(self, indices: np.ndarray | list[int]) -> EncodedSplit:
        idx = [int(i) for i in indices]
        return EncodedSplit(
            input_ids=[self.input_ids[i] for i in idx],
            explained=[self.explained[i] for i in idx],
            maskable=[self.maskable[i] for i in idx],
            labels=self.labels[idx],
            texts=[self.texts[i] for i in idx] if self.texts else [],
            supporting=[self.supporting[i] for i in idx] if self.supporting else [],
            token_totals=self.token_totals[idx] if len(self.token_totals) else self.token_totals,
            max_length=self.max_length,
            unit=self.unit,
            units=[self.units[i] for i in idx] if self.units else [],
        )


@dataclass
class ModelInfo:
    """What every backend knows about its model; travels in checkpoints and ONNX metadata."""

    label_names: list[str]
    mask_id: int
    pad_id: int
    special_ids: list[int]
    max_length: int
    num_hidden_layers: int
    hidden_size: int
    strategy: str = "unknown"  # plain | masked | only-masked | unknown
    dataset: str = ""
    source: str = ""  # the PyTorch checkpoint this model came from, if any
    source_digest: str = ""  # core.digest.content_sha256 of `source` when exported: a changed one is refused
    trained_precision: str = "fp32"  # what training's forward passes ran in (fp32 before --precision)
    trained_by: str = "fmm-fast"  # fmm-fast | elsewhere (a Hugging Face classifier imported as it is)

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_dict(cls, values: object) -> ModelInfo:
        """The info `asdict` gave; ValueError naming the field when it is missing or of the wrong type."""
        if error := shape_error(values, MODEL_INFO_SHAPE, "info"):
            raise ValueError(error)
        known = {name: value for name, value in values.items() if name in cls.__dataclass_fields__}  # type: ignore[union-attr]
        return cls(**known)

    @classmethod
    def from_json(cls, text: str) -> ModelInfo:
        return cls.from_dict(json.loads(text))


def trained_in(info: ModelInfo) -> str:
    """' (trained in bf16)' for a model trained in reduced precision, '' for fp32 (printed lines);
    ' (trained elsewhere)' for an imported model."""
    if info.trained_by != "fmm-fast":
        return f" (trained {info.trained_by})"
    return "" if info.trained_precision == "fp32" else f" (trained in {info.trained_precision})"


MODEL_INFO_SHAPE = {
    "label_names": [str],
    "mask_id": int,
    "pad_id": int,
    "special_ids": [int],
    "max_length": int,
    "num_hidden_layers": int,
    "hidden_size": int,
}


def pad_batch(sequences: list[np.ndarray], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-pad ragged sequences.

    Returns input_ids (B, T) int64 and attention_mask (B, T) int64, T = longest sequence.
    """
    width = max(len(s) for s in sequences)
    input_ids = np.full((len(sequences), width), pad_id, dtype=np.int64)
    attention_mask = np.zeros((len(sequences), width), dtype=np.int64)
    for row, seq in enumerate(sequences):
        input_ids[row, : len(seq)] = seq
        attention_mask[row, : len(seq)] = 1
    return input_ids, attention_mask


def unpad(input_ids: np.ndarray, attention_mask: np.ndarray) -> list[np.ndarray]:
    """Inverse of pad_batch for right-padded (B, T) arrays: one (T_i,) array per row."""
    lengths = attention_mask.astype(bool).sum(axis=1)
    return [input_ids[row, :n].astype(np.int64) for row, n in enumerate(lengths)]


def save_ragged(path, arrays: list[np.ndarray], **extra: np.ndarray) -> None:
    """Store ragged 1-D arrays as one concatenated array plus offsets (.npz)."""
    lengths = np.asarray([len(a) for a in arrays], dtype=np.int64)
    values = np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int64)
    with replacing(path, ".npz") as staged:  # np.savez adds .npz to a name without it
        np.savez_compressed(staged, values=values, offsets=np.concatenate([[0], np.cumsum(lengths)]), **extra)


def load_ragged(path) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    """Inverse of save_ragged: (list of arrays, the extra arrays)."""
    with np.load(path) as data:
        values, offsets = data["values"], data["offsets"]
        extra = {k: data[k] for k in data.files if k not in ("values", "offsets")}
    return [values[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)], extra
