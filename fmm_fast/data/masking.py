"""Random masking: the training recipe's half-batch masking (method.md §2) and share-of-explained masking.

Training (`mask_training_batch`): in every mini-batch the first floor(B/2) rows stay untouched and
each of the remaining B - floor(B/2) rows draws its own ratio r ~ U[0, 1) and masks each of its
maskable tokens independently with probability r (`masked`); `only-masked` treats every row like the
second half, `plain` masks nothing. With an odd B the masked half is the larger one (B = 1 is masked).

Evaluation (`mask_explained_share`): exactly floor(float32(r)·n) of an example's n explained tokens,
chosen uniformly at random, so 0% leaves the input alone and 100% masks every explained token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import numpy as np

from fmm_fast.core.datatypes import EncodedSplit, pad_batch, unpad
from fmm_fast.core.errors import UserError

if TYPE_CHECKING:  # torch batches come from training only; evaluation runs without PyTorch
    import torch

STRATEGIES = ("masked", "plain", "only-masked")
DEFAULT_STRATEGY = "masked"
TRAINING_BATCH_SIZE = 16

Batch = TypeVar("Batch", np.ndarray, "torch.Tensor")


def check_strategy(strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise UserError(f"unknown masking strategy '{strategy}'; choose one of {', '.join(STRATEGIES)}")
    return strategy


def first_masked_row(batch_size: int, strategy: str) -> int:
    """Rows [0, first) of a batch stay untouched, rows [first, B) are randomly masked."""
    check_strategy(strategy)
    if strategy == "plain":
        return batch_size
    if strategy == "only-masked":
        return 0
    return batch_size // 2


def mask_training_batch(
    input_ids: Batch,
    maskable: Batch,
    strategy: str,
    mask_id: int,
    generator: np.random.Generator | torch.Generator,
) -> Batch:
    """Mask one padded training batch (method.md §2); returns a new (B, T) int64 array of the input's kind.

    input_ids: (B, T) int64, numpy or torch. maskable: (B, T) bool, False on specials and padding.
    generator: np.random.Generator for numpy input, torch.Generator (on the batch's device) for torch.
    Per masked row one ratio r ~ U[0, 1), then one U[0, 1) draw per position; a maskable position is
    masked when its draw is below r.
    """
    batch_size, width = input_ids.shape
    first = first_masked_row(batch_size, strategy)
    rows = batch_size - first
    if isinstance(input_ids, np.ndarray):
        masked = np.array(input_ids, dtype=np.int64, copy=True)
        if rows == 0:
            return masked
        ratios = generator.random((rows, 1))
        draws = generator.random((rows, width))
    else:  # a torch.Tensor: torch is already imported by whoever made it
        import torch

        masked = input_ids.clone()
        if rows == 0:
            return masked
        options = {"generator": generator, "device": input_ids.device}
        ratios = torch.rand((rows, 1), **options)
        draws = torch.rand((rows, width), **options)
    chosen = (draws < ratios) & maskable[first:]
    masked[first:][chosen] = mask_id
    return masked


def pad_flags(flags: list[np.ndarray]) -> np.ndarray:
    """Ragged (T_i,) bool flags -> (B, T) bool, False on padding."""
    padded, _ = pad_batch([f.astype(np.int64) for f in flags], pad_id=0)
    return padded.astype(bool)


def random_masking(
    encoded: EncodedSplit,
    strategy: str,
    mask_id: int,
    seed: int,
    batch_size: int = TRAINING_BATCH_SIZE,
) -> list[np.ndarray]:
    """A masked copy of a split, masked the way training masks it; masks drawn once from `seed`.

    The split is cut, in its own order, into consecutive batches of `batch_size`, each masked by
    mask_training_batch. Use strategy `only-masked` for the fixed masked validation copy (every row at its
    own r ~ U[0, 1)) and the model's training strategy for MaSF calibration data. Returns (T_i,) int64 arrays.
    """
    check_strategy(strategy)
    rng = np.random.default_rng(seed)
    copies: list[np.ndarray] = []
    for start in range(0, len(encoded), batch_size):
        stop = min(start + batch_size, len(encoded))
        # the pad value never survives: padding is not maskable and unpad cuts it off again
        input_ids, attention_mask = pad_batch(encoded.input_ids[start:stop], pad_id=0)
        maskable = pad_flags(encoded.maskable[start:stop])
        masked = mask_training_batch(input_ids, maskable, strategy, mask_id, rng)
        copies.extend(unpad(masked, attention_mask))
    return copies


def masked_count(ratio: float, explained_count: np.ndarray | int) -> np.ndarray:
    """floor(float32(ratio) · float32(n)) per example (docs/method.md §4); (N,) int64 for (N,) counts."""
    product = np.float32(ratio) * np.asarray(explained_count, dtype=np.float32)
    return np.floor(product).astype(np.int64)


def mask_explained_share(encoded: EncodedSplit, ratio: float, mask_id: int, seed: int) -> list[np.ndarray]:
    """Mask floor(float32(ratio)·n) of each example's n explained units (encoded.units; tokens by default),
    chosen uniformly at random, every token of a chosen unit.

    Already-masked units count in n and may be chosen again. Returns (T_i,) int64 arrays; the same seed
    gives the same masks (token units: the same draws as units numbered by position).
    """
    if not 0.0 <= ratio <= 1.0:
        raise UserError(f"masking ratio {ratio} is outside [0, 1]; give a fraction such as 0.5")
    rng = np.random.default_rng(seed)
    copies = []
    totals = encoded.unit_counts()
    for i, (input_ids, explained) in enumerate(zip(encoded.input_ids, encoded.explained, strict=True)):
        units = encoded.example_units(i)
        count = int(masked_count(ratio, totals[i]))
        copy = input_ids.copy()
        if units is None:
            copy[rng.choice(np.flatnonzero(explained), size=count, replace=False)] = mask_id
        else:
            copy[np.isin(units, rng.choice(totals[i], size=count, replace=False)) & (units >= 0)] = mask_id
        copies.append(copy)
    return copies
