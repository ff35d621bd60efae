"""How many principal components per layer the split calibration keeps (the default and its check): apart
from the reduction itself (reduction.py, Numba and SciPy), so the settings and `--help` load without them."""

from __future__ import annotations

from fmm_fast.core.errors import UserError

DEFAULT_SPLIT_COMPONENTS = 32  # per layer; 0 = no reduction


def check_components(components: int, hidden: int | None = None, n_level_1: int | None = None) -> None:
    """UserError unless 0 ≤ components < hidden and components < n_level_1 (the examples of half A): half A
    varies in at most |A| − 1 directions, and `hidden` or more would not reduce anything."""
    fix = "pass a smaller --split-components, or 0 for no reduction"
    if components < 0:
        raise UserError(f"--split-components must be 0 (no reduction) or positive, got {components}")
    if components == 0:
        return
    if hidden is not None and components >= hidden:
        raise UserError(
            f"--split-components {components} must be below the hidden size {hidden} to reduce it; {fix}"
        )
    if n_level_1 is not None and components >= n_level_1:
        raise UserError(
            f"--split-components {components} needs more than {components} examples in half A, got "
            f"{n_level_1} (half A varies in at most {n_level_1 - 1} directions); {fix}, or use a larger "
            "validation split"
        )
