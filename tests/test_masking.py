"""Training masking (method.md §2) and share-of-explained masking: who gets masked, how much, reproducibly."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.errors import UserError
from fmm_fast.data.masking import (
    mask_explained_share,
    mask_training_batch,
    masked_count,
    random_masking,
)
from fmm_fast.data.tokenization import encode_texts
from fmm_fast.training.models import train_tiny_tokenizer

MASK_ID = 4
PAD_ID = 1


def synthetic_batch(batch_size: int, width: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """input_ids (B, T) with <s> first, </s> last, random lengths, padding after; maskable (B, T)."""
    input_ids = np.full((batch_size, width), PAD_ID, dtype=np.int64)
    maskable = np.zeros((batch_size, width), dtype=bool)
    for row in range(batch_size):
        length = rng.integers(width // 2, width + 1)
        input_ids[row, :length] = rng.integers(10, 100, size=length)
        input_ids[row, 0], input_ids[row, length - 1] = 0, 2
        maskable[row, 1 : length - 1] = True
    return input_ids, maskable


def realised_ratios(original: np.ndarray, masked: np.ndarray, maskable: np.ndarray) -> np.ndarray:
    """(B,) share of each row's maskable tokens that were masked."""
    return ((masked != original) & maskable).sum(axis=1) / maskable.sum(axis=1)


@pytest.mark.parametrize("batch_size", [16, 7, 1])
def test_masked_strategy_keeps_first_half_and_masks_only_maskable_tokens(batch_size: int) -> None:
    rng = np.random.default_rng(0)
    untouched_rows = batch_size // 2
    ratios = []
    for _ in range(300):
        input_ids, maskable = synthetic_batch(batch_size, 200, rng)
        masked = mask_training_batch(input_ids, maskable, "masked", MASK_ID, rng)
        assert masked.shape == input_ids.shape and masked.dtype == np.int64
        np.testing.assert_array_equal(masked[:untouched_rows], input_ids[:untouched_rows])
        changed = masked != input_ids
        assert not (changed & ~maskable).any()  # <s>, </s> and padding never masked
        assert (masked[changed] == MASK_ID).all()
        ratios.extend(realised_ratios(input_ids, masked, maskable)[untouched_rows:])
    # Each masked row's realised ratio is ≈ its r ~ U[0, 1): quantiles spread evenly over [0, 1).
    quantiles = np.quantile(ratios, [0.1, 0.25, 0.5, 0.75, 0.9])
    np.testing.assert_allclose(quantiles, [0.1, 0.25, 0.5, 0.75, 0.9], atol=0.06)
    assert min(ratios) < 0.05 and max(ratios) > 0.95


def test_plain_is_unchanged_and_only_masked_masks_every_row() -> None:
    rng = np.random.default_rng(1)
    input_ids, maskable = synthetic_batch(16, 200, rng)
    np.testing.assert_array_equal(mask_training_batch(input_ids, maskable, "plain", MASK_ID, rng), input_ids)
    ratios = np.concatenate(
        [
            realised_ratios(
                input_ids, mask_training_batch(input_ids, maskable, "only-masked", MASK_ID, rng), maskable
            )
            for _ in range(100)
        ]
    )
    per_row = ratios.reshape(100, 16)
    # every row position, the first half included, is masked at ≈ U[0, 1) ratios (mean 0.5)
    np.testing.assert_allclose(per_row.mean(axis=0), 0.5, atol=0.12)


def test_torch_batches_follow_the_same_rules() -> None:
    rng = np.random.default_rng(2)
    generator = torch.Generator().manual_seed(0)
    input_ids, maskable = synthetic_batch(16, 64, rng)
    ids_tensor, maskable_tensor = torch.from_numpy(input_ids), torch.from_numpy(maskable)
    masked = mask_training_batch(ids_tensor, maskable_tensor, "masked", MASK_ID, generator)
    assert isinstance(masked, torch.Tensor) and masked.dtype == torch.int64
    assert torch.equal(ids_tensor, torch.from_numpy(input_ids))  # the input is not modified
    assert torch.equal(masked[:8], ids_tensor[:8])
    changed = masked != ids_tensor
    assert not (changed & ~maskable_tensor).any()
    assert changed[8:].any()
    again = mask_training_batch(
        ids_tensor, maskable_tensor, "masked", MASK_ID, torch.Generator().manual_seed(0)
    )
    assert torch.equal(masked, again)


@pytest.fixture(scope="module")
def pair_split() -> EncodedSplit:
    """A real two-segment encoding: <s> first </s></s> second </s>."""
    stories = [f"Mary went to the kitchen. John moved to the garden number {i}." for i in range(40)]
    questions = [f"Where is Mary {i}?" for i in range(40)]
    tokenizer = train_tiny_tokenizer(stories + questions, vocab_size=300)
    return encode_texts(tokenizer, stories, questions, np.zeros(40, dtype=np.int64))


def test_validation_copy_masks_both_segments_never_specials_and_is_reproducible(pair_split) -> None:
    mask_id = 4  # <mask> in train_tiny_tokenizer's special list
    first = random_masking(pair_split, "only-masked", mask_id, seed=3)
    assert all(
        np.array_equal(a, b)
        for a, b in zip(first, random_masking(pair_split, "only-masked", mask_id, 3), strict=True)
    )
    other = random_masking(pair_split, "only-masked", mask_id, seed=4)
    assert not all(np.array_equal(a, b) for a, b in zip(first, other, strict=True))
    second_segment_masked = 0
    for original, copy, maskable, explained in zip(
        pair_split.input_ids, first, pair_split.maskable, pair_split.explained, strict=True
    ):
        assert copy.shape == original.shape
        changed = copy != original
        assert not (changed & ~maskable).any()
        second_segment_masked += int((changed & maskable & ~explained).sum())
    assert second_segment_masked > 0


def test_random_masking_with_masked_strategy_keeps_half_of_each_batch(pair_split) -> None:
    copies = random_masking(pair_split, "masked", 4, seed=0, batch_size=16)
    changed = np.array([not np.array_equal(c, o) for c, o in zip(copies, pair_split.input_ids, strict=True)])
    rows_in_batch = np.arange(len(copies)) % 16
    last_batch = np.arange(len(copies)) >= 32  # 8 rows: rows 0-3 untouched
    untouched = np.where(last_batch, rows_in_batch < 4, rows_in_batch < 8)
    assert not changed[untouched].any()
    assert changed[~untouched].mean() > 0.7
    plain = random_masking(pair_split, "plain", 4, seed=0)
    assert all(np.array_equal(c, o) for c, o in zip(plain, pair_split.input_ids, strict=True))


def test_masked_count_truncates_float32_products() -> None:
    assert masked_count(0.7, 10) == 7  # float32(0.7) = 0.69999999 times 10 in float64 would truncate to 6
    assert masked_count(0.7, 90) == 63  # the plain float64 product 62.99999999999999 would truncate to 62
    np.testing.assert_array_equal(masked_count(0.5, np.array([0, 1, 5, 9])), [0, 0, 2, 4])
    np.testing.assert_array_equal(masked_count(1.0, np.array([3, 7])), [3, 7])


def share_split() -> EncodedSplit:
    """Three examples: specials at both ends, 10 / 4 / 0 explained tokens, a second segment after."""
    lengths = [(10, 3), (4, 2), (0, 2)]
    input_ids, explained, maskable = [], [], []
    for first, second in lengths:
        ids = np.concatenate([[0], np.arange(10, 10 + first), [2, 2], np.arange(50, 50 + second), [2]])
        flags = np.zeros(len(ids), dtype=bool)
        flags[1 : 1 + first] = True
        input_ids.append(ids.astype(np.int64))
        explained.append(flags)
        maskable.append(~np.isin(ids, [0, 2]))
    return EncodedSplit(input_ids, explained, maskable, np.zeros(3, dtype=np.int64))


@pytest.mark.parametrize(
    ("ratio", "counts"), [(0.0, [0, 0, 0]), (0.5, [5, 2, 0]), (0.7, [7, 2, 0]), (1.0, [10, 4, 0])]
)
def test_explained_share_masks_exact_counts_of_explained_tokens_only(ratio: float, counts: list[int]) -> None:
    split = share_split()
    copies = mask_explained_share(split, ratio, MASK_ID, seed=0)
    for copy, original, explained, count in zip(
        copies, split.input_ids, split.explained, counts, strict=True
    ):
        changed = copy != original
        assert changed.sum() == count
        assert not (changed & ~explained).any()
        assert (copy[changed] == MASK_ID).all()


def test_explained_share_is_uniform_and_seeded() -> None:
    split = share_split()
    draws = np.stack([mask_explained_share(split, 0.5, MASK_ID, seed)[0] == MASK_ID for seed in range(2000)])
    # each of the 10 explained positions is among the masked 5 in about half of the draws
    np.testing.assert_allclose(draws[:, 1:11].mean(axis=0), 0.5, atol=0.05)
    first, again = (mask_explained_share(split, 0.5, MASK_ID, seed=9) for _ in range(2))
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))


def test_bad_strategy_and_ratio_are_user_errors() -> None:
    input_ids, maskable = synthetic_batch(2, 8, np.random.default_rng(0))
    with pytest.raises(UserError, match="unknown masking strategy 'half'"):
        mask_training_batch(input_ids, maskable, "half", MASK_ID, np.random.default_rng(0))
    with pytest.raises(UserError, match="outside"):
        mask_explained_share(share_split(), 1.5, MASK_ID, seed=0)
