"""Plain per-example versions of the perturbation measures (docs/method.md "Perturbation measures") and
exact Shapley values by brute force: sets, loops and textbook formulas, one score_fn call per distinct
coalition. Test oracles and the bench's ground truth; the fast versions are in the measures' own modules.

Random draws are not re-implemented: a reference takes the permutations or coalitions the fast version
drew (its module's draw function with the same Generator) and checks what is made of them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np

ScoreFn = Callable[[np.ndarray], np.ndarray]  # (T,) int64 token ids -> (C,) logits
ValueFn = Callable[[frozenset[int]], float]  # kept units -> v(z)


def coalition_value(
    score_fn: ScoreFn, x: np.ndarray, units: Sequence[np.ndarray], label: int, mask_id: int
) -> ValueFn:
    """v(z) = logit_label(x with every unit not in z masked), one score_fn call per distinct z.

    x: (T,) int64 unpadded; units: the example's visible units, each an array of positions."""
    known: dict[frozenset[int], float] = {}

    def value(kept: frozenset[int]) -> float:
        if kept not in known:
            masked = np.array(x, dtype=np.int64)
            for unit, positions in enumerate(units):
                if unit not in kept:
                    masked[positions] = mask_id
            known[kept] = float(np.float32(score_fn(masked)[label]))
        return known[kept]

    return value


def exact_shapley(value: ValueFn, n: int) -> np.ndarray:
    """(n,) φ_t = Σ_{z ⊆ M∖{t}} |z|!(n−|z|−1)!/n! · (v(z ∪ {t}) − v(z)), by enumerating every z."""
    phi = np.zeros(n)
    for t in range(n):
        others = [unit for unit in range(n) if unit != t]
        for size in range(n):
            weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            for subset in itertools.combinations(others, size):
                z = frozenset(subset)
                phi[t] += weight * (value(z | {t}) - value(z))
    return phi


def shapley_sampling_reference(value: ValueFn, n: int, permutations: int, drawn: np.ndarray) -> np.ndarray:
    """(n,) the mean, over `permutations` orders, of each unit's gain when it joins its prefix: the drawn
    orders `drawn` ((⌈permutations/2⌉, n)) and each one reversed (but the last one when permutations is
    odd)."""
    orders = [list(order) for order in drawn]
    orders += [order[::-1] for order in orders[: permutations // 2]]
    phi = np.zeros(n)
    for order in orders:
        prefix: set[int] = set()
        for unit in order:
            before = value(frozenset(prefix))
            prefix.add(int(unit))
            phi[unit] += value(frozenset(prefix)) - before
    return phi / len(orders)


def kernel_shap_reference(value: ValueFn, n: int, samples: int, drawn: np.ndarray) -> np.ndarray:
    """(n,) the KernelSHAP fit: every proper non-empty coalition with its kernel weight when 2ⁿ − 2 ≤
    samples, else `samples` coalitions with weight 1 each: the drawn ones `drawn` ((⌈samples/2⌉, n) bool)
    and the complement of each (but the last one's when samples is odd); solved with a Lagrange multiplier
    for Σφ = v(M) − v(∅) (the KKT system)."""
    empty, full = value(frozenset()), value(frozenset(range(n)))
    if 2**n - 2 <= samples:
        rows = [
            (frozenset(subset), (n - 1) / (math.comb(n, size) * size * (n - size)))
            for size in range(1, n)
            for subset in itertools.combinations(range(n), size)
        ]
    else:
        kept = [frozenset(np.flatnonzero(keep).tolist()) for keep in drawn]
        complements = [frozenset(range(n)) - z for z in kept[: samples // 2]]
        rows = [(z, 1.0) for z in kept + complements]
    kkt = np.zeros((n + 1, n + 1))
    right = np.zeros(n + 1)
    for kept, weight in rows:
        z = np.array([1.0 if unit in kept else 0.0 for unit in range(n)])
        kkt[:n, :n] += weight * np.outer(z, z)
        right[:n] += weight * z * (value(kept) - empty)
    kkt[:n, n] = kkt[n, :n] = 1.0
    right[n] = full - empty
    return np.linalg.solve(kkt, right)[:n]


def lime_reference(value: ValueFn, keep: np.ndarray, kernel_width: float, alpha: float) -> np.ndarray:
    """(n,) the weighted ridge fit of v(z) on the keep-vectors `keep` (K, n) bool, with an unpenalised
    intercept, by the normal equations of [1, z] (weights sqrt(exp(−d²/w²)), d = 100 × the cosine distance
    of z to all-ones, 1 for the empty z)."""
    k, n = keep.shape
    design = np.hstack([np.ones((k, 1)), keep.astype(np.float64)])
    ones = np.ones(n)
    weights = np.zeros(k)
    targets = np.zeros(k)
    for row, z in enumerate(keep.astype(np.float64)):
        norm = np.linalg.norm(z)
        cosine = z @ ones / (norm * np.linalg.norm(ones)) if norm else 0.0
        weights[row] = math.sqrt(math.exp(-((100 * (1 - cosine)) ** 2) / kernel_width**2))
        targets[row] = value(frozenset(np.flatnonzero(z).tolist()))
    penalty = alpha * np.eye(n + 1)
    penalty[0, 0] = 0.0  # the intercept
    gram = design.T @ np.diag(weights) @ design + penalty
    return np.linalg.solve(gram, design.T @ (weights * targets))[1:]


def occlusion_reference(value: ValueFn, n: int, window: int) -> np.ndarray:
    """(n,) each unit's mean of v(M) − v(M minus the window) over the windows of `window` consecutive
    units that contain it (one window of all n when n < window)."""
    width = min(window, n)
    full = frozenset(range(n))
    drops: list[list[float]] = [[] for _ in range(n)]
    for start in range(n - width + 1):
        inside = set(range(start, start + width))
        drop = value(full) - value(full - inside)
        for unit in inside:
            drops[unit].append(drop)
    return np.array([sum(unit_drops) / len(unit_drops) for unit_drops in drops])
