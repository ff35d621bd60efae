"""The Python API: explaining batches and texts (`batches.py`), and one function per protocol, each the body
of its command (`training.py`, `exporting.py`, `explaining.py`, `evaluation.py`, `peer.py`, `masf.py`,
`roar.py`, `reporting.py`), which `fmm_fast` offers at its root; inputs as users hold them (`inputs.py`)
and results as objects (`results.py`, `explanations.py`)."""

from fmm_fast.api.batches import (
    Explanation,
    ModelLike,
    as_engine,
    explain,
    explain_encoded,
    explain_texts,
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
