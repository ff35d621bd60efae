"""The optional parts of the install: the evaluation install lacks PyTorch, transformers and the hub.

A step that needs a missing extra stops with one UserError line naming the pip command, before any work.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from fmm_fast.core.errors import UserError


@dataclass(frozen=True)
class Extra:
    """A pip extra of fmm-fast: its name, the modules a step imports from it and what they are."""

    name: str
    modules: tuple[str, ...]
    described: str

    def require(self, purpose: str, then: str = "") -> None:
        """UserError unless every module imports. purpose: what needs them ("training"); then: what else
        the user must do, appended to the fix. An installed but broken module raises its own error."""
        for module in self.modules:
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as error:
                if error.name is None or error.name.split(".")[0] != module:
                    raise
                raise UserError(
                    f"{purpose} needs {self.described}, which this install lacks (no module '{module}'); "
                    f'pip install "fmm-fast[{self.name}]"{then}'
                ) from error


TRAIN = Extra("train", ("torch", "transformers"), "PyTorch and transformers")
HUB = Extra("hub", ("datasets",), "the Hugging Face datasets library")
PARQUET = Extra("hub", ("pyarrow",), "pyarrow")
# captum:ClassName measures; KernelShap and Lime fit their surrogate models with scikit-learn
CAPTUM = Extra("captum", ("captum", "sklearn"), "Captum and scikit-learn")
