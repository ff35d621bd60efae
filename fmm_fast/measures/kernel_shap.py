"""KernelSHAP (Lundberg & Lee 2017; docs/method.md "Perturbation measures"): kernel-shap and
kernel-shap-abs."""

from __future__ import annotations

import math

import numpy as np

from fmm_fast.measures.base import check_positive
from fmm_fast.measures.perturbation import DEFAULT_SAMPLES, CoalitionMeasure, random_subsets


def shapley_kernel(n: int, sizes: np.ndarray) -> np.ndarray:
    """π(z) = (n−1) / (C(n,|z|)·|z|·(n−|z|)) for coalitions of sizes (K,) int in 1..n−1 -> (K,) float64."""
    sizes = np.asarray(sizes, dtype=np.int64)
    binomial = np.array([math.comb(n, k) for k in range(n + 1)], dtype=np.float64)
    return (n - 1) / (binomial[sizes] * sizes * (n - sizes))


def enumerates(n: int, samples: int) -> bool:
    """Whether all 2ⁿ − 2 proper non-empty coalitions fit in `samples`: then they are enumerated."""
    return 2**n - 2 <= samples


def kernel_shap_draws(n: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """(count, n) bool: coalitions whose size k ∈ 1..n−1 is drawn with probability ∝ the kernel mass of that
    size, C(n,k)·π = (n−1)/(k(n−k)), and whose units are a uniform subset of that size."""
    sizes = np.arange(1, n)
    mass = (n - 1) / (sizes * (n - sizes))
    return random_subsets(rng.choice(sizes, count, p=mass / mass.sum()), n, rng)


def kernel_shap_coalitions(n: int, samples: int, rng: np.random.Generator) -> np.ndarray:
    """(K, n) bool: ∅ and M first, then every proper non-empty coalition (K = 2ⁿ, when `enumerates`), else
    `samples` coalitions (K = samples + 2) drawn in complementary pairs: ⌈samples/2⌉ `kernel_shap_draws`,
    then their complements (the last one's left out when `samples` is odd).

    A complement is drawn ∝ π too (π(z) depends on |z| only and is symmetric in |z| ↔ n − |z|), so every
    sampled coalition is still drawn ∝ the kernel. Pairing them ("paired sampling", Covert & Lee 2021; the
    shap library's KernelExplainer pairs its draws too) makes the fit exact where v has no interactions of
    order above 2 (an even `samples`; the tests show it); on the bench's sentences it is closer to exact
    Shapley than independent draws.
    """
    ends = np.array([np.zeros(n, dtype=bool), np.ones(n, dtype=bool)])
    if enumerates(n, samples):
        codes = np.arange(1, 2**n - 1, dtype=np.int64)
        return np.vstack([ends, (codes[:, None] >> np.arange(n)) & 1]).astype(bool)
    drawn = kernel_shap_draws(n, (samples + 1) // 2, rng)
    return np.vstack([ends, drawn, ~drawn[: samples // 2]])


class KernelShapSign(CoalitionMeasure):
    """φ = the weighted least-squares fit of v(z) − v(∅) ≈ Σ_{t∈z} φ_t under Σ φ_t = v(M) − v(∅).

    Enumerated coalitions weigh π(z) (the fit is then the exact Shapley value); sampled ones (complementary
    pairs, `kernel_shap_coalitions`) weigh 1 each, since each was drawn with probability ∝ π (a repeated
    draw counts as often as it was drawn; the engine runs its row once).
    """

    name = "kernel-shap"

    def __init__(self, samples: int = DEFAULT_SAMPLES, seed: int = 0) -> None:
        super().__init__(seed)
        self.samples = check_positive("samples", samples)

    def coalitions(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return kernel_shap_coalitions(n, self.samples, rng)

    def attribute(self, keep: np.ndarray, values: np.ndarray) -> np.ndarray:
        n = keep.shape[1]
        total = values[1] - values[0]  # rows 0 and 1 are ∅ and M
        if n == 1:
            return np.array([total])
        kept, gains = keep[2:].astype(np.float64), values[2:] - values[0]
        enumerated = len(keep) == 2**n  # a sampled design has samples + 2 < 2ⁿ rows
        weights = shapley_kernel(n, kept.sum(axis=1)) if enumerated else np.ones(len(kept))
        # the constraint eliminates the last unit: φ_n = total − Σ_{t<n} φ_t
        design = kept[:, :-1] - kept[:, -1:]
        target = gains - kept[:, -1] * total
        root = np.sqrt(weights)[:, None]
        # least norm where the sample leaves the fit under-determined (few samples, many units)
        head = np.linalg.lstsq(design * root, target * root[:, 0], rcond=None)[0]
        return np.append(head, total - head.sum())


class KernelShapAbs(KernelShapSign):
    name = "kernel-shap-abs"
    signed = False
