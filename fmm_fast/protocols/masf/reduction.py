"""The split calibration's feature reduction (docs/method.md §6): per layer, the first r principal components
of half A.

With 384 features per layer and a few hundred examples in half A, nearly every fresh example is some
feature's extreme, and the Simes statistics of B and of a test example crowd at the bottom; a few principal
components per layer keep the directions the data vary in and lift the split calibration's power (measured in
bench/bench_masf_calibration.py).

It keeps the split calibration valid because it is a function of half A alone: given A, every member of half
B and a test example from the calibration distribution go through the same fixed map, so the bag B ∪ {x}
stays exchangeable and the full-conformal p-value keeps its guarantee. A reduction fitted on data that
includes B but not x would treat them differently (B's members would be in-sample for it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import scipy.linalg
from numba import prange

from fmm_fast.protocols.masf.components import check_components


@dataclass(frozen=True)
class LayerProjection:
    """Each layer's signals centred on half A's mean and projected on half A's first r principal axes.

    mean: (L+1, D) float64, half A's mean per layer; axes: (L+1, D, r) float64, each layer's first r right
    singular vectors of the centred half A (its principal axes), in order of decreasing variance, each
    signed so that its largest-magnitude loading is positive (so the result does not depend on the solver's
    sign choice).
    """

    mean: np.ndarray
    axes: np.ndarray

    @classmethod
    def fit(cls, half_a: np.ndarray, components: int) -> LayerProjection:
        """half_a: (|A|, L+1, D) float32; 0 < components < min(D, |A|).

        The right singular vectors of the centred A are the eigenvectors of its D×D scatter matrix; only the
        top r of them are solved for (LAPACK's subset eigensolver), which is what makes the fit cheap: the
        full SVD of each (|A|, D) layer was most of a split calibration's fit (bench/bench_masf.py).
        """
        check_components(components, half_a.shape[2], half_a.shape[0])
        values = half_a.astype(np.float64)
        mean = values.mean(axis=0)
        hidden = half_a.shape[2]
        axes = np.empty((half_a.shape[1], hidden, components), dtype=np.float64)
        for layer in range(half_a.shape[1]):
            centred = values[:, layer] - mean[layer]
            scatter = centred.T @ centred
            _, vectors = scipy.linalg.eigh(scatter, subset_by_index=[hidden - components, hidden - 1])
            top = vectors[:, ::-1].T  # (r, D), decreasing variance
            signs = np.sign(top[np.arange(components), np.abs(top).argmax(axis=1)])
            axes[layer] = (top * signs[:, None]).T
        return cls(mean, axes)

    @property
    def components(self) -> int:
        return int(self.axes.shape[2])

    def apply(self, signals: np.ndarray) -> np.ndarray:
        """(M, L+1, D) float32 -> (M, L+1, r) float32.

        Accumulated in float64 over d = 0, 1, ..., D − 1, one rounded product and one rounded sum per term
        (no BLAS, whose summation order depends on the batch's shape), then rounded once to float32: a
        signal projects to the same bits whichever other signals share its call, so every implementation
        that projects it agrees exactly.
        """
        return _project(np.ascontiguousarray(signals, dtype=np.float32), self.mean, self.axes)


def project_numpy(projection: LayerProjection, signals: np.ndarray) -> np.ndarray:
    """LayerProjection.apply in NumPy, bit for bit: (M, L+1, D) float32 -> (M, L+1, r) float32. The
    projection of masf_numpy_p_values (the all-NumPy implementation, bench/bench_masf.py's baseline) and the
    reference tests/test_masf.py holds the compiled one to; about 10x slower (a (M, L+1, r) temporary per d).
    """
    centred = signals.astype(np.float64) - projection.mean
    projected = np.zeros((len(signals), projection.axes.shape[0], projection.components), dtype=np.float64)
    for dim in range(projection.axes.shape[1]):
        projected += centred[:, :, dim, None] * projection.axes[:, dim, :]
    return projected.astype(np.float32)


@numba.njit(parallel=True, cache=True)
def _project(signals, mean, axes):  # pragma: no cover - compiled
    """(M, L+1, D) float32, mean (L+1, D) float64, axes (L+1, D, r) float64 -> (M, L+1, r) float32.

    Σ_d (signal_d − mean_d) · axes_{d, r} in float64, d ascending. Compiled without fastmath, so LLVM keeps
    every product and sum rounded on its own (no fused multiply-add, no reassociation): the same bits as the
    elementwise NumPy loop (project_numpy, tests/test_masf.py), about 10x faster (that loop was most of the
    split calibration's time: bench/bench_masf.py).
    """
    n_signals, n_layers, hidden = signals.shape
    components = axes.shape[2]
    projected = np.empty((n_signals, n_layers, components), dtype=np.float32)
    for row in prange(n_signals):
        total = np.empty(components, dtype=np.float64)
        for layer in range(n_layers):
            total[:] = 0.0
            for dim in range(hidden):
                centred = np.float64(signals[row, layer, dim]) - mean[layer, dim]
                for component in range(components):
                    total[component] += centred * axes[layer, dim, component]
            for component in range(components):
                projected[row, layer, component] = np.float32(total[component])
    return projected
