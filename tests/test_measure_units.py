"""The unit contract every masking measure uses (ExplainBatch.visible_units, ExplainBatch.row_units)."""

import numpy as np

from fmm_fast.measures.base import ExplainBatch

MASK = 9
IDS = np.array([[0, 5, MASK, 6, 7, 1]])
EXPLAINED = np.array([[0, 1, 1, 1, 1, 0]], dtype=bool)


def batch(units=None) -> ExplainBatch:
    return ExplainBatch(IDS, np.ones_like(IDS), np.array([0]), EXPLAINED, units=units)


def test_token_units_are_the_explained_tokens_not_yet_masked():
    assert [u.tolist() for u in batch().visible_units(0, MASK)] == [[1], [3], [4]]
    assert batch().row_units(0).tolist() == [-1, 1, 2, 3, 4, -1]


def test_a_unit_is_visible_while_any_of_its_tokens_is_and_lists_all_its_tokens():
    units = np.array([[-1, 0, 0, 1, 1, -1]])
    assert [u.tolist() for u in batch(units).visible_units(0, MASK)] == [[1, 2], [3, 4]]


def test_a_wholly_masked_unit_and_tokens_outside_explained_are_left_out():
    units = np.array([[3, 1, 1, 0, 0, 3]])  # unit 3 covers the specials, which are not explained
    ids = IDS.copy()
    ids[0, 1] = MASK
    masked = ExplainBatch(ids, np.ones_like(ids), np.array([0]), EXPLAINED, units=units)
    assert [u.tolist() for u in masked.visible_units(0, MASK)] == [[3, 4]]
    assert masked.row_units(0).tolist() == [-1, 1, 1, 0, 0, -1]
