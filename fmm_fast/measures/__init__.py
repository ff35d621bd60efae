"""Importance measures (docs/method.md §3) behind one registry: get_measure(name, seed=..., **options)."""

from fmm_fast.measures.base import ExplainBatch, Measure
from fmm_fast.measures.registry import get_measure, measure_names

__all__ = ["ExplainBatch", "Measure", "get_measure", "measure_names"]
