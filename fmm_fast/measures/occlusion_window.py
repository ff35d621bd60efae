"""Sliding-window occlusion (docs/method.md "Perturbation measures"): occlusion-W and occlusion-W-abs."""

from __future__ import annotations

import numpy as np

from fmm_fast.measures.base import check_positive
from fmm_fast.measures.perturbation import CoalitionMeasure

DEFAULT_WINDOW = 3  # the name "occlusion" (without W) means occlusion-3


class OcclusionWindowSign(CoalitionMeasure):
    """Unit t's score: the mean, over every window of W consecutive visible units that contains t, of
    v(M) − v(M minus the window). Windows are M[i : i+W]; an example with fewer than W units has one
    window, all of M. W = 1 is loo-sign. Draws nothing."""

    signed = True

    def __init__(self, window: int = DEFAULT_WINDOW) -> None:
        super().__init__()
        self.window = check_positive("window", window)

    @property
    def name(self) -> str:  # type: ignore[override]  # the window is part of the name
        return f"occlusion-{self.window}" + ("" if self.signed else "-abs")

    def coalitions(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """(1 + windows, n): all units kept, then each window removed, in order."""
        width = min(self.window, n)
        offset = np.arange(n)[None, :] - np.arange(n - width + 1)[:, None]  # (windows, n): unit − start
        inside = (offset >= 0) & (offset < width)
        return np.vstack([np.ones((1, n), dtype=bool), ~inside])

    def attribute(self, keep: np.ndarray, values: np.ndarray) -> np.ndarray:
        removed = ~keep[1:]
        return (removed.T @ (values[0] - values[1:])) / removed.sum(axis=0)


class OcclusionWindowAbs(OcclusionWindowSign):
    signed = False
