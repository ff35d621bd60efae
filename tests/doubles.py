"""Test doubles for the measures: hand-defined lookup backends, a tiny BERT gradient backend, oracles;
and a hand-made explanation with sub-word pieces for the explanations page."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import torch
from transformers import BertConfig, BertForSequenceClassification

from fmm_fast.api import Explanation
from fmm_fast.backends.base import ForwardOutput
from fmm_fast.core.datatypes import ModelInfo, pad_batch, unpad
from fmm_fast.measures.base import ExplainBatch

PAD_ID, MASK_ID, CLS_ID, SEP_ID = 0, 1, 2, 3
FIRST_WORD_ID = 4  # ids below are specials
VOCAB_SIZE = 50

LogitsFn = Callable[[np.ndarray], np.ndarray]  # (T,) int64 unpadded ids -> (C,) logits


def model_info(num_labels: int = 2) -> ModelInfo:
    return ModelInfo(
        label_names=[f"label{c}" for c in range(num_labels)],
        mask_id=MASK_ID,
        pad_id=PAD_ID,
        special_ids=[PAD_ID, MASK_ID, CLS_ID, SEP_ID],
        max_length=64,
        num_hidden_layers=0,
        hidden_size=0,
    )


class LookupBackend:
    """A Backend whose logits are a hand-defined function of each (unpadded) row: logits_fn(ids) -> (C,)."""

    def __init__(self, logits_fn: LogitsFn, num_labels: int = 2) -> None:
        self.logits_fn = logits_fn
        self.info = model_info(num_labels)
        self.name = "lookup"

    def forward(
        self, input_ids: np.ndarray, attention_mask: np.ndarray, with_signals: bool = False
    ) -> ForwardOutput:
        rows = unpad(input_ids, attention_mask)
        return ForwardOutput(np.stack([self.logits_fn(row) for row in rows]).astype(np.float32))

    def score(self, ids: np.ndarray) -> np.ndarray:
        """One row as the engine would see it: (T,) int64 -> (C,) float32 (float32 like forward)."""
        return np.asarray(self.logits_fn(np.asarray(ids, dtype=np.int64)), dtype=np.float32)


class RecordingBackend(LookupBackend):
    """A LookupBackend that keeps every batch it was given, and gives MaSF signals too.

    batches: one (input_ids (B, T), attention_mask (B, T)) per forward call, as the engine sent them.
    signals: (B, 2, 3) float32; per row [length, sum of ids, largest id], the second layer twice the first.
    """

    def __init__(self, logits_fn: LogitsFn, num_labels: int = 2) -> None:
        super().__init__(logits_fn, num_labels)
        self.batches: list[tuple[np.ndarray, np.ndarray]] = []

    def forward(
        self, input_ids: np.ndarray, attention_mask: np.ndarray, with_signals: bool = False
    ) -> ForwardOutput:
        self.batches.append((input_ids.copy(), attention_mask.copy()))
        output = super().forward(input_ids, attention_mask)
        if with_signals:
            output.signals = np.stack([self.row_signals(row) for row in unpad(input_ids, attention_mask)])
        return output

    @staticmethod
    def row_signals(ids: np.ndarray) -> np.ndarray:
        """(T,) int64 -> (2, 3) float32, what forward gives for this row with with_signals=True."""
        first = np.array([len(ids), ids.sum(), ids.max()], dtype=np.float32)
        return np.stack([first, 2 * first])

    def forwarded_rows(self) -> list[tuple[int, ...]]:
        """Every row run so far, unpadded, in the order the engine sent them."""
        return [tuple(row.tolist()) for ids, mask in self.batches for row in unpad(ids, mask)]


def interaction_model(seed: int, num_labels: int = 2, levels: Sequence[float] | None = None) -> LogitsFn:
    """Logits from the visible (unmasked) tokens: Σ_t effect[c, x_t] + Σ_{s<t} pair[c, x_s, x_t].

    levels: draw every effect from these values (small integers make exact ties common);
    None: standard normal effects.
    """
    rng = np.random.default_rng(seed)
    shape_single, shape_pair = (num_labels, VOCAB_SIZE), (num_labels, VOCAB_SIZE, VOCAB_SIZE)
    if levels is None:
        single, pair = rng.standard_normal(shape_single), 0.5 * rng.standard_normal(shape_pair)
    else:
        single, pair = rng.choice(levels, size=shape_single), rng.choice(levels, size=shape_pair)

    def logits(ids: np.ndarray) -> np.ndarray:
        visible = ids[ids != MASK_ID]
        pairs = pair[:, visible[:, None], visible[None, :]]  # (C, n, n)
        return single[:, visible].sum(axis=1) + np.triu(pairs, k=1).sum(axis=(1, 2))

    return logits


def drop_table_model(drops: dict[str, float], letters: dict[int, str], label: int) -> LogitsFn:
    """The target logit is −drops[masked letters, sorted and joined] (so y0 = −drops[""]).

    letters maps token id -> letter; a letter counts as masked when its token id is absent from the row.
    The other class gets a constant logit, so only the target label can explain a result.
    """

    def logits(ids: np.ndarray) -> np.ndarray:
        present = set(ids.tolist())
        masked = "".join(sorted(letter for token, letter in letters.items() if token not in present))
        out = np.full(2, 100.0)
        out[label] = -drops[masked]
        return out

    return logits


def make_batch(
    sequences: Sequence[Sequence[int]], explained: Sequence[Sequence[bool]], labels: Sequence[int]
) -> ExplainBatch:
    """Right-padded ExplainBatch from ragged rows (explained rows have their sequence's length)."""
    arrays = [np.asarray(s, dtype=np.int64) for s in sequences]
    input_ids, attention_mask = pad_batch(arrays, PAD_ID)
    explained_padded = np.zeros(input_ids.shape, dtype=bool)
    for row, flags in enumerate(explained):
        explained_padded[row, : len(flags)] = flags
    return ExplainBatch(input_ids, attention_mask, np.asarray(labels, dtype=np.int64), explained_padded)


def random_batch(
    seed: int, lengths: Sequence[int], premasked: int = 1, second_segment: int = 2, num_labels: int = 2
) -> ExplainBatch:
    """Rows [CLS] first-segment [SEP] second-segment [SEP] (no second part if second_segment = 0);
    explained = the first segment.

    lengths: first-segment length per row (0 allowed); up to `premasked` first-segment tokens per row are
    already the mask id. Word ids are distinct within a row, so every masking gives a distinct sequence.
    """
    rng = np.random.default_rng(seed)
    sequences, explained = [], []
    for length in lengths:
        words = rng.permutation(np.arange(FIRST_WORD_ID, VOCAB_SIZE))[: length + second_segment]
        first, second = words[:length].copy(), words[length:]
        first[rng.permutation(length)[:premasked]] = MASK_ID
        pair = [*second, SEP_ID] if second_segment else []
        sequences.append([CLS_ID, *first, SEP_ID, *pair])
        explained.append([False, *([True] * length), False, *([False] * len(pair))])
    labels = rng.integers(0, num_labels, size=len(lengths))
    return make_batch(sequences, explained, labels)


def exhaustive_beam_order(
    score_fn: LogitsFn, x: np.ndarray, explained: np.ndarray, label: int, mask_id: int
) -> list[int]:
    """The removal order beam search returns when the beam keeps every subset (B ≥ C(n, n//2)).

    Such a beam holds, for each set S of k masked tokens, the child that was made first. Children are made
    parent by parent in beam rank, and the beam ranks by (−score, creation index), so a set's candidate
    extends its best-ranked subset. Unrolling this, the candidate of the full set is the order π minimising
        key(π) = (−S_n, −S_{n−1}, …, −S_1, π_1, …, π_n),
        S_k = Σ_{i≤k} (y0 − logit_y(x with π_1..π_i masked)),
    i.e. the order with the largest total cumulative score, ties going to the larger partial sums, latest
    first, then to the earliest positions. S_k is summed left to right, as the beam adds to the parent score.
    This enumerates all n! orders (keep n ≤ 6).
    """
    maskable = [t for t in range(len(x)) if explained[t] and x[t] != mask_id]
    y0 = float(score_fn(x)[label])
    drop_of: dict[frozenset[int], float] = {}
    for size in range(1, len(maskable) + 1):
        for subset in itertools.combinations(maskable, size):
            masked = np.array(x, dtype=np.int64)
            masked[list(subset)] = mask_id
            drop_of[frozenset(subset)] = y0 - float(score_fn(masked)[label])

    def key(order: tuple[int, ...]) -> tuple:
        partial_sums, total = [], 0.0
        for k in range(1, len(order) + 1):
            total = total + drop_of[frozenset(order[:k])]
            partial_sums.append(-total)
        return (*reversed(partial_sums), *order)

    return list(min(itertools.permutations(maskable), key=key))


class TinyBertBackend:
    """A GradientBackend double on a tiny random BertForSequenceClassification (2 layers, hidden 32).

    The pad embedding is re-drawn (BERT initialises it to 0) so integrated gradients' baseline matters.
    """

    def __init__(self, seed: int = 0, num_labels: int = 2) -> None:
        torch.manual_seed(seed)
        config = BertConfig(
            vocab_size=VOCAB_SIZE,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
            num_labels=num_labels,
            pad_token_id=PAD_ID,
            initializer_range=0.2,
        )
        self.model = BertForSequenceClassification(config).eval()
        with torch.no_grad():
            self.embedding_matrix()[PAD_ID].normal_(0.0, 0.2)
        self.info = model_info(num_labels)
        self.name = "tiny-bert"

    def forward(
        self, input_ids: np.ndarray, attention_mask: np.ndarray, with_signals: bool = False
    ) -> ForwardOutput:
        with torch.no_grad():
            logits = self.model(
                input_ids=torch.from_numpy(np.asarray(input_ids, dtype=np.int64)),
                attention_mask=torch.from_numpy(np.asarray(attention_mask, dtype=np.int64)),
            ).logits
        return ForwardOutput(logits.numpy().astype(np.float32))

    def embedding_matrix(self) -> torch.Tensor:
        return self.model.get_input_embeddings().weight

    def logits_from_embeddings(
        self, embeddings: torch.Tensor, attention_mask: torch.Tensor, input_ids: torch.Tensor
    ) -> torch.Tensor:
        return self.model(inputs_embeds=embeddings, attention_mask=attention_mask).logits


TEXT = "ok lor, see you"  # "lor," is three tokens: lo ##r ,


def explanation(
    scores: list[float], measure: str = "loo-sign", signed: bool = True, **changes
) -> Explanation:
    """[CLS] ok lo ##r , see you [SEP] why ? [SEP] with the given scores of the 6 explained tokens."""
    tokens = ["[CLS]", "ok", "lo", "##r", ",", "see", "you", "[SEP]", "why", "?", "[SEP]"]
    offsets = [[0, 0], [0, 2], [3, 5], [5, 6], [6, 7], [8, 11], [12, 15], [0, 0], [0, 3], [3, 4], [0, 0]]
    segments = [-1, 0, 0, 0, 0, 0, 0, -1, 1, 1, -1]
    full = [0.0, *scores, 0.0, 0.0, 0.0, 0.0]
    base = Explanation(
        tokens, full, [s == 0 for s in segments], "ham", "ham", measure, signed, 0, TEXT, "why?", 0.9,
        offsets, segments,
    )  # fmt: skip
    return replace(base, **changes)
