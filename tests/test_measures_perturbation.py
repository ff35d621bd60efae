"""The perturbation measures (shapley-sampling, kernel-shap, lime, occlusion-W) against their plain
references and exact Shapley values by brute force (fmm_fast/measures/perturbation_reference.py)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from doubles import MASK_ID, LookupBackend, interaction_model, random_batch
from scipy.stats import chi2
from test_measures_occlusion import CountingEngine

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.core.datatypes import unpad
from fmm_fast.core.errors import UserError
from fmm_fast.measures import get_measure
from fmm_fast.measures.base import ExplainBatch
from fmm_fast.measures.external import load_explanations
from fmm_fast.measures.kernel_shap import (
    KernelShapSign,
    enumerates,
    kernel_shap_coalitions,
    kernel_shap_draws,
)
from fmm_fast.measures.lime import KERNEL_WIDTH, RIDGE_ALPHA, LimeSign, lime_coalitions
from fmm_fast.measures.occlusion import LeaveOneOutSign
from fmm_fast.measures.occlusion_window import OcclusionWindowAbs, OcclusionWindowSign
from fmm_fast.measures.perturbation_reference import (
    coalition_value,
    exact_shapley,
    kernel_shap_reference,
    lime_reference,
    occlusion_reference,
    shapley_sampling_reference,
)
from fmm_fast.measures.registry import OPTION_NAMES, measure_names, perturbation_names
from fmm_fast.measures.shapley_sampling import ShapleySamplingSign, antithetic_permutations, draw_permutations

SEED = 7


def nonlinear_model(seed: int, num_labels: int = 2):
    """The interaction model squashed by tanh: interactions of every order, so no estimator is exact by
    luck."""
    inner = interaction_model(seed, num_labels)
    return lambda ids: 3.0 * np.tanh(inner(ids) / 3.0)


def with_ids(batch: ExplainBatch, units: np.ndarray | None = None) -> ExplainBatch:
    """batch with example ids 100, 101, ... (and `units`)."""
    ids = np.arange(100, 100 + batch.input_ids.shape[0])
    return ExplainBatch(batch.input_ids, batch.attention_mask, batch.labels, batch.explained, ids, units)


def row_values(backend: LookupBackend, batch: ExplainBatch, row: int):
    """(v, n, units) of one row through the plain reference value function."""
    units = batch.visible_units(row, MASK_ID)
    x = unpad(batch.input_ids, batch.attention_mask)[row]
    return coalition_value(backend.score, x, units, int(batch.labels[row]), MASK_ID), len(units), units


def unit_scores(scores: np.ndarray, row: int, units) -> np.ndarray:
    """(n,) the score of each unit; every token of a unit must carry it."""
    for positions in units:
        assert np.all(scores[row, positions] == scores[row, positions[0]])
    return np.array([scores[row, positions[0]] for positions in units])


def word_units(batch: ExplainBatch) -> np.ndarray:
    """Units of two neighbouring explained tokens each (the last alone when odd): multi-token units."""
    units = np.full(batch.input_ids.shape, -1, dtype=np.int64)
    for row in range(len(units)):
        positions = np.flatnonzero(batch.explained[row])
        units[row, positions] = np.arange(len(positions)) // 2
    return units


# ------------------------------------------------------------------------------------- exact Shapley
def test_exact_shapley_matches_the_closed_form_of_a_pairwise_model() -> None:
    """v(z) = Σ_{t∈z} a_t + Σ_{s<t∈z} b_st (+ terms with always-visible tokens) has φ_t = a_t + ½Σ_s b_st
    (+ t's whole pair terms with tokens outside M)."""
    single_and_pairs = interaction_model(3)
    backend = LookupBackend(single_and_pairs)
    batch = random_batch(4, [6], premasked=1)
    value, n, _ = row_values(backend, batch, 0)
    # recover a and b from v itself: singletons and pairs against the empty coalition
    empty = value(frozenset())
    alone = np.array([value(frozenset({t})) - empty for t in range(n)])
    pair = np.zeros((n, n))
    for s, t in itertools.combinations(range(n), 2):
        pair[s, t] = pair[t, s] = value(frozenset({s, t})) - empty - alone[s] - alone[t]
    assert np.abs(pair).max() > 0.1  # the model does interact
    np.testing.assert_allclose(exact_shapley(value, n), alone + pair.sum(axis=1) / 2, atol=1e-5)


# -------------------------------------------------------------------------------------- kernel-shap
@pytest.mark.parametrize("token_units", [True, False])
def test_enumerated_kernel_shap_equals_exact_shapley(token_units: bool) -> None:
    backend = LookupBackend(nonlinear_model(1, num_labels=3), num_labels=3)
    plain = random_batch(2, [7, 1, 0, 10, 5], premasked=1, num_labels=3)
    batch = with_ids(plain, None if token_units else word_units(plain))
    samples = 2**9  # every row's 2ⁿ − 2 coalitions fit (n ≤ 9 visible tokens)
    scores = KernelShapSign(samples=samples).explain(batch, MaskBatchEngine(backend))
    checked = 0
    for row in range(len(scores)):
        value, n, units = row_values(backend, batch, row)
        if n:
            assert enumerates(n, samples)
            exact = exact_shapley(value, n)
            np.testing.assert_allclose(unit_scores(scores, row, units), exact, rtol=1e-9, atol=1e-9)
            efficiency = value(frozenset(range(n))) - value(frozenset())
            np.testing.assert_allclose(exact.sum(), efficiency, atol=1e-9)
            checked += n > 1
    assert checked == 3
    covered = np.zeros(scores.shape, dtype=bool)  # a unit's already masked token shares its unit's score
    for row in range(len(scores)):
        for positions in batch.visible_units(row, MASK_ID):
            covered[row, positions] = True
    assert (scores[~covered] == 0).all()


@pytest.mark.parametrize("samples", [60, 61])
def test_sampled_kernel_shap_equals_its_reference_and_keeps_efficiency(samples: int) -> None:
    """Odd samples: the last drawn coalition goes without its complement."""
    backend = LookupBackend(nonlinear_model(2))
    batch = with_ids(random_batch(5, [9, 12], premasked=0))
    scores = KernelShapSign(samples=samples, seed=SEED).explain(batch, MaskBatchEngine(backend))
    for row, example in enumerate(batch.example_ids):
        value, n, units = row_values(backend, batch, row)
        assert not enumerates(n, samples)
        drawn = kernel_shap_draws(n, (samples + 1) // 2, np.random.default_rng([SEED, int(example)]))
        expected = kernel_shap_reference(value, n, samples, drawn)
        got = unit_scores(scores, row, units)
        np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(got.sum(), value(frozenset(range(n))) - value(frozenset()), atol=1e-9)


def test_sampled_coalitions_come_in_complementary_pairs_drawn_by_the_kernel() -> None:
    """Each drawn coalition, then its complement; the drawn sizes follow the kernel's size mass
    (n−1)/(k(n−k)), normalised (a chi-square test at 1e-4), and so do the complements' (the mass is
    symmetric in k ↔ n − k)."""
    n, samples = 16, 20000
    assert not enumerates(n, samples)
    keep = kernel_shap_coalitions(n, samples, np.random.default_rng(SEED))
    assert keep.shape == (samples + 2, n) and not keep[0].any() and keep[1].all()
    half = samples // 2
    drawn, complements = keep[2 : 2 + half], keep[2 + half :]
    np.testing.assert_array_equal(complements, ~drawn)
    sizes = np.arange(1, n)
    mass = (n - 1) / (sizes * (n - sizes))
    np.testing.assert_allclose(mass, mass[::-1])
    expected = half * mass / mass.sum()
    observed = np.bincount(drawn.sum(axis=1), minlength=n)[1:]
    assert observed.sum() == half
    assert chi2.sf(((observed - expected) ** 2 / expected).sum(), df=n - 2) > 1e-4


def pairwise_row(seed: int, n: int):
    """(v, n, units, batch, backend) of one example whose logit has interactions of order ≤ 2 only."""
    backend = LookupBackend(interaction_model(seed))
    batch = with_ids(random_batch(seed, [n], premasked=0))
    value, found, units = row_values(backend, batch, 0)
    assert found == n
    return value, units, batch, backend


def test_paired_kernel_shap_is_exact_on_a_pairwise_model() -> None:
    """With coalitions in complementary pairs the fit recovers exact Shapley values of a logit whose
    interactions are of order ≤ 2, far from enumeration (40 of 1022 coalitions); independent draws do not
    (their error here is of the order of the values)."""
    value, units, batch, backend = pairwise_row(11, 10)
    samples = 40
    assert not enumerates(10, samples)
    scores = KernelShapSign(samples=samples, seed=SEED).explain(batch, MaskBatchEngine(backend))
    exact = exact_shapley(value, 10)
    np.testing.assert_allclose(unit_scores(scores, 0, units), exact, atol=1e-4 * np.abs(exact).max())


def test_sampled_kernel_shap_converges_to_exact_shapley() -> None:
    """The mean of R independent estimates lies within 4 standard errors (estimated from the R replicates)
    of exact Shapley for every token, and the spread shrinks as the samples grow (about as 1/sqrt(N))."""
    backend = LookupBackend(nonlinear_model(4))
    batch = random_batch(6, [10], premasked=0)
    value, n, units = row_values(backend, batch, 0)
    exact = exact_shapley(value, n)
    engine = MaskBatchEngine(backend)  # its cache serves the coalitions replicates share
    spreads = []
    for samples in (60, 960):
        assert not enumerates(n, samples)
        replicates = np.array(
            [
                unit_scores(KernelShapSign(samples, seed).explain(batch, engine), 0, units)
                for seed in range(30)
            ]
        )
        error = replicates.mean(axis=0) - exact
        standard_error = replicates.std(axis=0, ddof=1) / math.sqrt(len(replicates))
        assert (np.abs(error) <= 4 * standard_error).all(), (error, standard_error)
        spreads.append(replicates.std(axis=0, ddof=1).mean())
    assert spreads[1] < spreads[0] / 2  # 16× the samples: a quarter of the spread, expected


# --------------------------------------------------------------------------------- shapley-sampling
def pair_spread(value, n: int) -> np.ndarray:
    """(n,) the standard deviation of a unit's mean gain over an order and its reverse, over all n! orders
    (the estimate of one antithetic pair)."""
    gains = np.array([shapley_sampling_reference(value, n, 2, np.array([order])) for order in
                      itertools.permutations(range(n))])  # fmt: skip
    return gains.std(axis=0)


def test_shapley_sampling_converges_to_exact_shapley() -> None:
    """Each unit's estimate is the mean of S/2 independent pairs' mean gains: within 4.5 σ/√(S/2) of exact
    Shapley, σ the pair's exact spread over all orders (a false alarm per unit below 1e-5), for growing S."""
    backend = LookupBackend(nonlinear_model(5))
    batch = random_batch(8, [6], premasked=0)
    value, n, units = row_values(backend, batch, 0)
    exact, spread = exact_shapley(value, n), pair_spread(value, n)
    assert spread.min() > 0
    errors = []
    for permutations in (10, 200, 5000):
        scores = ShapleySamplingSign(permutations, seed=SEED).explain(batch, MaskBatchEngine(backend))
        error = np.abs(unit_scores(scores, 0, units) - exact)
        assert (error <= 4.5 * spread / math.sqrt(permutations / 2)).all(), (permutations, error)
        np.testing.assert_allclose(scores.sum(), value(frozenset(range(n))) - value(frozenset()), atol=1e-9)
        errors.append(error.max())
    assert errors[-1] < errors[0]


def test_antithetic_shapley_sampling_is_exact_on_a_pairwise_model() -> None:
    """In an order and its reverse, t's predecessors and successors swap: with a logit whose interactions are
    of order ≤ 2, one pair gives exact Shapley values (one permutation does not)."""
    value, units, batch, backend = pairwise_row(12, 9)
    exact = exact_shapley(value, 9)
    scores = ShapleySamplingSign(2, seed=SEED).explain(batch, MaskBatchEngine(backend))
    np.testing.assert_allclose(unit_scores(scores, 0, units), exact, atol=1e-4 * np.abs(exact).max())
    one = ShapleySamplingSign(1, seed=SEED).explain(batch, MaskBatchEngine(backend))
    assert np.abs(unit_scores(one, 0, units) - exact).max() > 0.1 * np.abs(exact).max()


@pytest.mark.parametrize("permutations", [6, 7])
def test_shapley_sampling_equals_its_reference_with_units_and_shares_the_ends(permutations: int) -> None:
    """Odd permutations: the last drawn order goes without its reverse."""
    backend = LookupBackend(nonlinear_model(6, num_labels=3), num_labels=3)
    plain = random_batch(9, [9, 4, 1], premasked=1, num_labels=3)
    batch = with_ids(plain, word_units(plain))
    engine = MaskBatchEngine(backend)
    scores = ShapleySamplingSign(permutations, seed=SEED).explain(batch, engine)
    distinct = 0
    for row, example in enumerate(batch.example_ids):
        value, n, units = row_values(backend, batch, row)
        drawn = draw_permutations(n, (permutations + 1) // 2, np.random.default_rng([SEED, int(example)]))
        np.testing.assert_allclose(
            unit_scores(scores, row, units),
            shapley_sampling_reference(value, n, permutations, drawn),
            atol=1e-12,
        )
        orders = antithetic_permutations(n, permutations, np.random.default_rng([SEED, int(example)]))
        assert len(orders) == permutations
        if n:  # an example with nothing to mask sends no row
            distinct += len({frozenset(order[:k].tolist()) for order in orders for k in range(n + 1)})
    # one forward pass per distinct masked row: ∅ and M once per example, not once per permutation
    assert engine.stats.forward_rows == distinct < engine.stats.requested_rows


# ------------------------------------------------------------------------------------------------ lime
def test_lime_matches_a_direct_weighted_ridge_fit() -> None:
    backend = LookupBackend(nonlinear_model(7))
    plain = random_batch(10, [8, 3, 12], premasked=1)
    for units in (None, word_units(plain)):
        batch = with_ids(plain, units)
        samples = 50
        scores = LimeSign(samples, seed=SEED).explain(batch, MaskBatchEngine(backend))
        for row, example in enumerate(batch.example_ids):
            value, n, row_units = row_values(backend, batch, row)
            keep = lime_coalitions(n, samples, np.random.default_rng([SEED, int(example)]))
            assert keep[0].all() and (~keep[1:]).sum(axis=1).min() >= 1
            expected = lime_reference(value, keep, KERNEL_WIDTH, RIDGE_ALPHA)
            assert np.abs(expected).max() > 0.05
            np.testing.assert_allclose(unit_scores(scores, row, row_units), expected, rtol=1e-8, atol=1e-10)


# ------------------------------------------------------------------------------------------- occlusion
def test_occlusion_1_is_loo_sign() -> None:
    backend = LookupBackend(interaction_model(5, num_labels=3), num_labels=3)
    batch = random_batch(7, [5, 1, 0, 8, 3], premasked=2, num_labels=3)
    engine = MaskBatchEngine(backend)
    loo = LeaveOneOutSign().explain(batch, engine)
    assert (loo != 0).any()
    np.testing.assert_array_equal(OcclusionWindowSign(window=1).explain(batch, engine), loo)


@pytest.mark.parametrize("window", [2, 3, 20])
def test_occlusion_window_equals_its_reference(window: int) -> None:
    backend = LookupBackend(nonlinear_model(8))
    plain = random_batch(11, [7, 2, 5], premasked=1)
    for units in (None, word_units(plain)):
        batch = with_ids(plain, units)
        scores = OcclusionWindowSign(window).explain(batch, MaskBatchEngine(backend))
        for row in range(len(scores)):
            value, n, row_units = row_values(backend, batch, row)
            expected = occlusion_reference(value, n, window)
            np.testing.assert_allclose(unit_scores(scores, row, row_units), expected, atol=1e-12)
        np.testing.assert_array_equal(
            OcclusionWindowAbs(window).explain(batch, MaskBatchEngine(backend)), np.abs(scores)
        )


# ---------------------------------------------------------------------------- shared: batching, seeds
ALL_NEW = ["shapley-sampling", "kernel-shap", "lime", "occlusion-2"]


@pytest.mark.parametrize("name", ALL_NEW)
def test_one_engine_call_cached_rows_abs_and_zero_elsewhere(name: str) -> None:
    backend = LookupBackend(nonlinear_model(9, num_labels=3), num_labels=3)
    batch = with_ids(random_batch(12, [9, 1, 0, 6], premasked=1, num_labels=3))
    engine = CountingEngine(backend)
    options = {"samples": 40, "permutations": 3}
    signed = get_measure(name, seed=SEED, **options).explain(batch, engine)
    assert engine.calls == 1
    visible = batch.explained & (batch.input_ids != MASK_ID)
    assert (signed[~visible] == 0).all() and (signed[visible] != 0).mean() > 0.8 and (signed < 0).any()
    rows_run = engine.stats.forward_rows
    again = get_measure(name, seed=SEED, **options).explain(batch, engine)
    np.testing.assert_array_equal(again, signed)
    assert engine.stats.forward_rows == rows_run  # the same draws: every row served from the cache
    absolute = get_measure(f"{name}-abs", seed=SEED, **options)
    assert not absolute.signed and absolute.scores_units
    np.testing.assert_array_equal(absolute.explain(batch, engine), np.abs(signed))


@pytest.mark.parametrize("name", ["shapley-sampling", "kernel-shap", "lime"])
def test_draws_are_per_example_whatever_the_batch(name: str) -> None:
    backend = LookupBackend(nonlinear_model(10))
    batch = with_ids(random_batch(13, [9, 11, 10], premasked=0))
    options = {"samples": 30, "permutations": 2}
    whole = get_measure(name, seed=SEED, **options).explain(batch, MaskBatchEngine(backend))
    for row in range(3):  # each example alone, as another worker would explain it
        arrays = (batch.input_ids, batch.attention_mask, batch.labels, batch.explained, batch.example_ids)
        alone = ExplainBatch(*(array[row : row + 1] for array in arrays))
        single = get_measure(name, seed=SEED, **options).explain(alone, MaskBatchEngine(backend))
        np.testing.assert_array_equal(single[0], whole[row])
    other_seed = get_measure(name, seed=SEED + 1, **options).explain(batch, MaskBatchEngine(backend))
    assert not np.array_equal(other_seed, whole)
    no_ids = ExplainBatch(batch.input_ids, batch.attention_mask, batch.labels, batch.explained)
    first = get_measure(name, seed=SEED, **options).explain(no_ids, MaskBatchEngine(backend))
    np.testing.assert_array_equal(
        get_measure(name, seed=SEED, **options).explain(no_ids, MaskBatchEngine(backend)), first
    )


# ---------------------------------------------------------------------------------------------- names
def test_registry_names_options_and_defaults() -> None:
    assert not set(perturbation_names()) & set(measure_names())  # the paper's ten are unchanged
    for name in perturbation_names():
        measure = get_measure(name)
        assert measure.name == name and measure.signed is (not name.endswith("-abs"))
        assert measure.recursive and not measure.needs_gradients and measure.scores_units
    assert {"samples", "permutations", "window"} <= set(OPTION_NAMES)
    assert get_measure("kernel-shap", samples=9, permutations=4, ig_steps=3).samples == 9
    assert get_measure("lime-abs", samples=11).samples == 11
    assert get_measure("shapley-sampling", permutations=4).permutations == 4
    assert get_measure("occlusion").name == "occlusion-3"
    assert get_measure("occlusion-abs", window=5).name == "occlusion-5-abs"
    assert get_measure("occlusion-12-abs").window == 12
    assert get_measure("occlusion-4", window=4).window == 4


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("occlusion-0", {}, "window in 'occlusion-0' must be an integer >= 1"),
        ("occlusion-x-abs", {}, "must be an integer >= 1"),
        ("occlusion-2.5", {}, "must be an integer >= 1"),
        ("occlusion-3", {"window": 4}, "conflicts with window=4"),
        ("occlusion", {"window": 0}, "window must be an integer >= 1"),
        ("kernel-shap", {"samples": 0}, "samples must be an integer >= 1"),
        ("shapley-sampling", {"permutations": -2}, "permutations must be an integer >= 1"),
        ("shap", {}, "kernel-shap, kernel-shap-abs, lime, lime-abs, occlusion-W"),
    ],
)
def test_registry_errors(name: str, options: dict, message: str) -> None:
    with pytest.raises(UserError) as error:
        get_measure(name, **options)
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("stem", ["lime", "kernel-shap-abs", "occlusion-4", "occlusion"])
def test_an_explanations_file_named_like_a_perturbation_measure_is_refused(tmp_path, stem: str) -> None:
    """aopc --explanations labels results by the file's name: it may not pass for a built-in measure."""
    with pytest.raises(UserError, match=f"named like the built-in measure '{stem}'; rename it"):
        load_explanations(tmp_path / f"{stem}.jsonl", None, None)  # refused before it is read
