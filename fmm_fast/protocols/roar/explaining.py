"""A measure's scores on every split of a (masked) dataset, with one step's model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fmm_fast.backends.loading import load_model
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.settings import RoarSettings
from fmm_fast.data.base import SPLIT_NAMES
from fmm_fast.measures.gradient import GradientMeasure
from fmm_fast.measures.spec import MeasureSpec
from fmm_fast.protocols.erasure import explain_split
from fmm_fast.protocols.roar.masking import MaskedDataset


@dataclass
class Passes:
    """Rows (examples) run through a model: forward, and backward (gradient measures, training)."""

    forward: int = 0
    backward: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"forward": self.forward, "backward": self.backward}


def example_ids(encoded: dict[str, EncodedSplit]) -> dict[str, np.ndarray]:
    """Each example's index in the three splits laid end to end: the per-example seed of `rand`, so no
    two examples of a run draw alike."""
    ids, offset = {}, 0
    for name in SPLIT_NAMES:
        ids[name] = offset + np.arange(len(encoded[name]), dtype=np.int64)
        offset += len(encoded[name])
    return ids


def explain_dataset(
    settings: RoarSettings,
    spec: MeasureSpec,
    seed: int,
    step: int,
    model: Path,
    encoded: dict[str, EncodedSplit],
    current: MaskedDataset,
    on_batch: Callable[[int], None] | None = None,
) -> tuple[dict[str, list[np.ndarray]], Passes]:
    """Scores of the measure `spec` at step `step` (its random draws seeded per example and step, as
    recursive erasure seeds them) by the checkpoint `model` on the inputs `current` of every split, and
    the passes it ran."""
    loaded = load_model(model, settings.explaining_backend)
    engine = settings.engine.engine_on(loaded.backend)
    measure = spec.build(seed, step)
    ids = example_ids(encoded)
    scores = {
        name: explain_split(
            measure,
            engine,
            current[name],
            encoded[name],
            settings.engine.explain_batch_rows,
            on_batch,
            ids[name],
        )
        for name in SPLIT_NAMES
    }
    examples = sum(len(encoded[name]) for name in SPLIT_NAMES)
    # each gradient row runs forward and backward once per path point
    gradient_rows = examples * len(measure.path()[0]) if isinstance(measure, GradientMeasure) else 0
    return scores, Passes(engine.stats.forward_rows + gradient_rows, gradient_rows)
