"""The Python functions' argument groups, declared once: the data, engine, backend, scale and training
arguments of each function, with the defaults of the commands' flags (cli/options.py), handed to the
function as the object its command builds (DataOptions, EngineOptions, ...). See core.option_groups."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from fmm_fast.api.inputs import DatasetLike, data_options
from fmm_fast.backends.engine import DEFAULT_CACHE_MB, DEFAULT_TOKEN_BUDGET
from fmm_fast.backends.options import BackendOptions
from fmm_fast.backends.precision import DEFAULT_PRECISION
from fmm_fast.core.option_groups import keyword, option_group
from fmm_fast.core.settings import DEFAULT_EXPLAIN_BATCH_ROWS, EngineOptions
from fmm_fast.data.masking import TRAINING_BATCH_SIZE
from fmm_fast.data.options import DEFAULT_DATASET
from fmm_fast.data.units import DEFAULT_UNIT
from fmm_fast.distributed.runtime import ScaleOptions

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def data_arguments(
    *, split: bool = True, limit: int | None = None, dataset_required: bool = False, units: bool = True
) -> Decorator:
    """dataset= (a name, a file, your own split files, data held in Python or your own splits held in
    Python: a DatasetDict or dict of splits; api.inputs), split= and limit= (unless not split), size=,
    test_size=, text_field=, pair_field=, label_field=, metric=, label_map=, max_length= and (with units)
    unit=, handed over as `data: DataOptions`."""
    dataset = keyword(
        "dataset", DatasetLike, inspect.Parameter.empty if dataset_required else DEFAULT_DATASET
    )
    chosen = [keyword("split", str, "test"), keyword("limit", int | None, limit)] if split else []
    rest = [
        keyword("size", int | None, None),
        keyword("test_size", int | None, None),
        keyword("text_field", str | None, None),
        keyword("pair_field", str | None, None),
        keyword("label_field", str | None, None),
        keyword("metric", str | None, None),
        keyword("label_map", str | Mapping[str, str] | None, None),
        keyword("max_length", int | None, None),
    ]
    if units:
        rest.append(keyword("unit", str, DEFAULT_UNIT))
    return option_group("data", data_options, [dataset, *chosen, *rest])


def engine_arguments(*, explain_rows: bool = True) -> Decorator:
    """token_budget=, cache_mb= (and explain_batch_rows=), handed over as `engine: EngineOptions`."""
    parameters = [
        keyword("token_budget", int, DEFAULT_TOKEN_BUDGET),
        keyword("cache_mb", float, DEFAULT_CACHE_MB),
    ]
    if explain_rows:
        parameters.append(keyword("explain_batch_rows", int, DEFAULT_EXPLAIN_BATCH_ROWS))
    return option_group("engine", EngineOptions, parameters)


def backend_arguments(*, provider: bool = True) -> Decorator:
    """device=, provider= (unless not provider: training's) and precision=, handed over as `backend:
    BackendOptions`."""
    parameters = [keyword("device", str, "auto")]
    if provider:
        parameters.append(keyword("provider", str, "auto"))
    parameters.append(keyword("precision", str, DEFAULT_PRECISION))
    return option_group("backend", BackendOptions, parameters)


def scale_arguments() -> Decorator:
    """workers=, ray_address=, worker_cpus=, worker_gpus=, handed over as `scale: ScaleOptions | None`
    (None: one process)."""
    parameters = [
        keyword("workers", int | None, None),
        keyword("ray_address", str | None, None),
        keyword("worker_cpus", int, 1),
        keyword("worker_gpus", float | None, None),
    ]
    return option_group("scale", ScaleOptions.from_flags, parameters)


def training_arguments() -> Decorator:
    """epochs=, batch_size=, lr=, max_steps=, layers=, width= (every fine-tuning's recipe), handed over as
    `training: dict` of TrainSettings' keyword arguments."""
    parameters = [
        keyword("epochs", int | None, None),
        keyword("batch_size", int, TRAINING_BATCH_SIZE),
        keyword("lr", float | None, None),  # None: the settings' (5e-5 on a local file, else 2e-5)
        keyword("max_steps", int | None, None),
        keyword("layers", int, 2),
        keyword("width", int, 64),
    ]
    return option_group("training", lambda **recipe: recipe, parameters)
