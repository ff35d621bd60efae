"""The Python API: explaining batches and texts (`batches.py`; the explained split and its
records are protocols.explanations), and one function per protocol, each the body
of its command (`training.py`, `exporting.py`, `explaining.py`, `evaluation.py`, `peer.py`, `masf.py`,
`roar.py`, `checking.py`, `reporting.py`), which `fmm_fast` offers at its root; their argument groups
(`options.py`), checked on entry (`arguments.py`), inputs as users hold them (`inputs.py`), results as
objects (`results.py`, `explanations.py`), the seed folders of evaluate and aopc (`seed_runs.py`)."""

from fmm_fast.api.batches import ModelLike, as_engine, explain, explain_texts
from fmm_fast.protocols.explanations import (
    Explanation,
    explain_encoded,
    load_explanations,
    predict_and_explain,
    save_explanations,
    to_explanations,
    token_offsets,
)

__all__ = [
    "Explanation",
    "ModelLike",
    "as_engine",
    "explain",
    "explain_encoded",
    "explain_texts",
    "load_explanations",
    "predict_and_explain",
    "save_explanations",
    "to_explanations",
    "token_offsets",
]
