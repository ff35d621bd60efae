"""LIME (Ribeiro et al. 2016, as lime's text explainer samples and weighs; docs/method.md "Perturbation
measures"): lime and lime-abs."""

from __future__ import annotations

import numpy as np

from fmm_fast.measures.base import check_positive
from fmm_fast.measures.perturbation import DEFAULT_SAMPLES, CoalitionMeasure, random_subsets

KERNEL_WIDTH = 25.0  # lime's text explainer's kernel_width
RIDGE_ALPHA = 1.0  # lime's default regressor: Ridge(alpha=1, fit_intercept=True)


def lime_coalitions(n: int, samples: int, rng: np.random.Generator) -> np.ndarray:
    """(samples, n) bool: all units kept, then samples − 1 coalitions each removing a uniform random
    count in 1..n of units (a uniform subset of that size)."""
    removed = random_subsets(rng.integers(1, n + 1, samples - 1), n, rng)
    return np.vstack([np.ones((1, n), dtype=bool), ~removed])


def lime_weights(keep: np.ndarray) -> np.ndarray:
    """(K, n) bool -> (K,) float64 sqrt(exp(−d²/w²)), d = 100 × the cosine distance of the keep-vector
    to all-ones, which is 1 − sqrt(|z|/n) (1 for the empty coalition, as scikit-learn's cosine distance)."""
    distance = 100.0 * (1.0 - np.sqrt(keep.sum(axis=1) / keep.shape[1]))
    return np.sqrt(np.exp(-(distance**2) / KERNEL_WIDTH**2))


class LimeSign(CoalitionMeasure):
    """φ = the coefficients of a weighted ridge regression (α = 1, unpenalised intercept) of v(z) on the
    keep-vector, over the `samples` coalitions of `lime_coalitions`, weighted by `lime_weights`."""

    name = "lime"

    def __init__(self, samples: int = DEFAULT_SAMPLES, seed: int = 0) -> None:
        super().__init__(seed)
        self.samples = check_positive("samples", samples)

    def coalitions(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return lime_coalitions(n, self.samples, rng)

    def attribute(self, keep: np.ndarray, values: np.ndarray) -> np.ndarray:
        weights = lime_weights(keep)
        kept = keep.astype(np.float64)
        # centring by the weighted means fits the intercept without penalising it (as scikit-learn's Ridge)
        kept = kept - weights @ kept / weights.sum()
        centred = values - weights @ values / weights.sum()
        gram = kept.T @ (weights[:, None] * kept) + RIDGE_ALPHA * np.eye(keep.shape[1])
        return np.linalg.solve(gram, kept.T @ (weights * centred))


class LimeAbs(LimeSign):
    name = "lime-abs"
    signed = False
