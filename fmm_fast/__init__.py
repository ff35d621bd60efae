"""fmm-fast: fast faithfulness evaluation of NLP explanations (see README.md).

One function per protocol, each the body of its command with the same options (snake_case) and
defaults: `train`, `export`, `explain`, `evaluate`, `aopc`, `masf`, `roar`, `check`, `report`; `load` reads a
result back from its folder. Every argument is checked on entry: a wrong type or value raises
`fmm_fast.UserError` (a ValueError and a TypeError) naming the argument and what to give. They are
imported on first use, so `import fmm_fast` stays light (no NumPy, PyTorch or pandas): the
evaluation-only install imports it without PyTorch.

    import fmm_fast
    trained = fmm_fast.train(dataset="movie-snippets", size=200, epochs=1, lr=1e-3)
    evaluation = fmm_fast.evaluate(trained, measure=["loo-abs", "grad-l2"], limit=40)
    evaluation            # in a notebook: the ACU/RACU table and the curves
    evaluation.to_pandas()

Your own importance measure is a `fmm_fast.Measure` subclass, or a function marked with
`@fmm_fast.measure(signed=...)`, given wherever a measure name is (docs/guides/your-measure.md).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    "train": "fmm_fast.api.training",
    "export": "fmm_fast.api.exporting",
    "explain": "fmm_fast.api.explaining",
    "evaluate": "fmm_fast.api.evaluation",
    "aopc": "fmm_fast.api.peer",
    "masf": "fmm_fast.api.masf",
    "roar": "fmm_fast.api.roar",
    "check": "fmm_fast.api.checking",
    "report": "fmm_fast.api.reporting",
    "load": "fmm_fast.api.results",
    "Evaluation": "fmm_fast.api.results",
    "PeerMetrics": "fmm_fast.api.results",
    "Masf": "fmm_fast.api.results",
    "Roar": "fmm_fast.api.results",
    "Check": "fmm_fast.api.results",
    "Training": "fmm_fast.api.results",
    "Report": "fmm_fast.api.results",
    "Explanations": "fmm_fast.api.explanations",
    "Explanation": "fmm_fast.protocols.explanations",
    # the extension point: your own importance measure (docs/guides/your-measure.md)
    "Measure": "fmm_fast.measures.base",
    "ExplainBatch": "fmm_fast.measures.base",
    "measure": "fmm_fast.measures.plugins",
    "UserError": "fmm_fast.core.errors",
}
__all__ = [*_PUBLIC, "__version__"]


def __getattr__(name: str) -> Any:
    """The public names, imported on first use (PEP 562)."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'fmm_fast' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])


class _Package(ModuleType):
    """fmm_fast itself: importing its subpackages fmm_fast.export and fmm_fast.report (sys.modules holds
    them) leaves `fmm_fast.export` and `fmm_fast.report` the functions, where Python would set the
    subpackage as the attribute."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _PUBLIC and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
