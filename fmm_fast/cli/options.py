"""Options shared by several commands, declared once.

Groups of options (data, engine, backend) are added to a command by a decorator: the command declares
one parameter (`data: DataOptions`, ...) where the flags should stand in --help, and receives that object,
built from the flags, or (flags=True, for a command that hands them to its Python function, which builds
the object) the flags themselves as a dict.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from fmm_fast.backends.engine import DEFAULT_CACHE_MB, DEFAULT_TOKEN_BUDGET
from fmm_fast.backends.options import DEVICES, PROVIDERS, BackendOptions
from fmm_fast.backends.precision import DEFAULT_PRECISION, PRECISIONS
from fmm_fast.core.option_groups import keyword as _option
from fmm_fast.core.option_groups import option_group
from fmm_fast.core.settings import DEFAULT_EXPLAIN_BATCH_ROWS, DEFAULT_LR, EngineOptions
from fmm_fast.data.local import LOCAL_LR
from fmm_fast.data.masking import TRAINING_BATCH_SIZE
from fmm_fast.data.options import DEFAULT_DATASET, DataOptions
from fmm_fast.data.units import DEFAULT_UNIT, UNITS
from fmm_fast.measures.registry import OPTION_NAMES
from fmm_fast.training.base_models import TINY_ROBERTA

ModelOption = Annotated[
    Path,
    typer.Option(
        "--model",
        help="A checkpoint directory (`fmm-fast train`), an ONNX file (`fmm-fast export`), or a Hugging "
        "Face sequence-classifier folder (save_pretrained, with tokenizer.json) or cached Hub name of one.",
    ),
]
SeedOption = Annotated[
    int,
    typer.Option(
        "--seed",
        min=0,
        help="Seed of the measures' random draws (`rand`, shapley-sampling, kernel-shap, lime).",
    ),
]
OverwriteOption = Annotated[
    bool,
    typer.Option(
        "--overwrite",
        help="Replace what an earlier run wrote to --out (without it, --out must be new, empty, or hold "
        "this same run, which is then resumed).",
    ),
]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]
MeasuresOption = Annotated[
    list[str],
    typer.Option(
        "--measure",
        "-m",
        help="Importance measure: a built-in name, your own as package.module:Name or ./file.py:Name, or "
        "an installed plug-in's name (docs/guides/your-measure.md); repeat for several. `rand` always runs.",
    ),
]
SeedsOption = Annotated[
    list[int],
    typer.Option(
        "--seed",
        min=0,
        help="Seed of the `rand` baseline and the measures' random draws; repeat for several.",
    ),
]
FidelitySampleOption = Annotated[
    int,
    typer.Option(
        "--fidelity-sample",
        min=0,
        help="With a reduced --precision (bf16, fp16): run a seeded sample of N examples in fp32 too and "
        "report how far the reduced precision moved the run: prediction agreement, identical masks per "
        "step (evaluate: with ΔACU/ΔRACU; aopc: with ΔACU/ΔRACU, ΔAOPC and Δτ-LOO; each with its 95% "
        "interval; masf: the Δ of the sample's mean p-value per ratio, fp32 calibrating on the whole "
        "validation split again), and the sample's cost. 0: no estimate.",
    ),
]
MeasureOptionsOption = Annotated[
    list[str],
    typer.Option(
        "--measure-option",
        metavar="KEY=VALUE",
        help="An option of the measures chosen (a keyword of their constructors), e.g. ig_steps=50; repeat "
        f"for several. Built-in keys: {', '.join(OPTION_NAMES)}.",
    ),
]


def data_options(
    *,
    split_help: str | None = None,
    limit: int | None = None,
    dataset_required: bool = False,
    flags: bool = False,
    units: bool = True,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The dataset flags of every command that opens a dataset, handed to it as `data: DataOptions` (or as
    a dict of the flags: flags).

    split_help None: no --split/--limit (training uses every split). limit: --limit's default. units: with
    --unit (every command that masks at a ratio; training masks tokens).
    """
    dataset = _option(
        "dataset",
        Annotated[
            str,
            typer.Option(
                "--dataset",
                "-d",
                help="A registry name (babi-1/2/3 and movie-snippets work offline; sst2, imdb, ... need the "
                "hub), a local .csv/.jsonl/.parquet file with --text-field/--label-field (split 80/10/10 "
                "into train/validation/test, stratified by label, seed 0), or your own splits as three such "
                "files TRAIN,VALIDATION,TEST.",
            ),
        ],
        inspect.Parameter.empty if dataset_required else DEFAULT_DATASET,
    )
    chosen_split = (
        []
        if split_help is None
        else [
            _option("split", Annotated[str, typer.Option(help=split_help)], "test"),
            _option(
                "limit",
                Annotated[
                    int | None, typer.Option(min=1, help="Use only the first N examples of the split.")
                ],
                limit,
            ),
        ]
    )
    sizes = [
        _option(
            "size",
            Annotated[
                int | None,
                typer.Option(
                    min=2, help="Cap train+validation at N examples (a seeded subset; bAbI: N generated)."
                ),
            ],
            None,
        ),
        _option(
            "test_size",
            Annotated[
                int | None,
                typer.Option(
                    min=1, help="Cap the test split at N examples (a seeded subset; bAbI: N generated)."
                ),
            ],
            None,
        ),
        _option(
            "text_field",
            Annotated[str | None, typer.Option(help="Local file: the column holding the explained text.")],
            None,
        ),
        _option(
            "pair_field",
            Annotated[str | None, typer.Option(help="Local file: the column of the second segment.")],
            None,
        ),
        _option(
            "label_field", Annotated[str | None, typer.Option(help="Local file: the label column.")], None
        ),
        _option(
            "metric",
            Annotated[
                str | None,
                typer.Option(
                    help="Local file: the primary metric, accuracy (default; balanced classes) or macro-f1 "
                    "(imbalanced classes: always predicting the majority scores a high accuracy but a low "
                    "macro-F1)."
                ),
            ],
            None,
        ),
        _option(
            "label_map",
            Annotated[
                str | None,
                typer.Option(
                    metavar="DATA=MODEL,...",
                    help="Which model label each dataset label is, where their names differ (e.g. "
                    "a=negative,b=positive); labels are matched by name, never by position.",
                ),
            ],
            None,
        ),
    ]
    cutting = [
        _option(
            "max_length",
            Annotated[
                int | None,
                typer.Option(
                    "--max-length",
                    min=4,
                    help="Cut every example to N tokens (longest segment first; default: the model's "
                    "maximum). Cheaper on long texts; the cut is warned about and recorded.",
                ),
            ],
            None,
        )
    ]
    if units:
        cutting.append(
            _option(
                "unit",
                Annotated[
                    str,
                    typer.Option(
                        "--unit",
                        help=f"What is masked together: {' | '.join(UNITS)} (words: runs of non-space "
                        "characters; sentences: pysbd's English rules). The masking ratio counts units; "
                        "larger units need fewer forward passes.",
                    ),
                ],
                DEFAULT_UNIT,
            )
        )
    return option_group("data", DataOptions.from_flags, [dataset, *chosen_split, *sizes, *cutting], flags)


def training_options() -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The recipe of every fine-tuning (epochs, batch size, lr, step cap, tiny-roberta's size), handed over
    as `training: dict` of TrainSettings' keyword arguments."""
    parameters = [
        _option(
            "epochs",
            Annotated[
                int | None,
                typer.Option(
                    min=1, help="Epochs to train (default: the paper's for the dataset, e.g. 20 for bAbI)."
                ),
            ],
            None,
        ),
        _option(
            "batch_size",
            Annotated[int, typer.Option("--batch-size", min=1, help="Training batch size.")],
            TRAINING_BATCH_SIZE,
        ),
        _option(
            "lr",
            Annotated[
                float | None,
                typer.Option(
                    "--lr",
                    help="Peak learning rate of AdamW (6% warm-up, linear decay; default: "
                    f"{LOCAL_LR:g} on a local file, the paper's {DEFAULT_LR:g} on a registry dataset).",
                ),
            ],
            None,
        ),
        _option(
            "max_steps",
            Annotated[
                int | None,
                typer.Option(min=1, help="Stop after this many optimizer steps (a quick trial run)."),
            ],
            None,
        ),
        _option(
            "layers", Annotated[int, typer.Option(min=1, help=f"{TINY_ROBERTA}: transformer layers.")], 2
        ),
        _option(
            "width",
            Annotated[int, typer.Option(min=32, help=f"{TINY_ROBERTA}: hidden size (a multiple of 32).")],
            64,
        ),
    ]
    return option_group("training", lambda **recipe: recipe, parameters)


def engine_options(
    *, explain_rows: bool = True, flags: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--token-budget, --cache-mb (and --explain-batch-rows for commands that explain), handed over as
    `engine` (or as a dict of the flags: flags)."""
    parameters = [
        _option(
            "token_budget",
            Annotated[
                int,
                typer.Option(
                    min=1, help="Max rows × padded length per forward batch (bounds memory; a cost knob)."
                ),
            ],
            DEFAULT_TOKEN_BUDGET,
        ),
        _option(
            "cache_mb",
            Annotated[
                float,
                typer.Option(
                    min=0,
                    help="MiB of recently scored rows the engine keeps to skip running them again (0: none; "
                    "bounds memory on long documents, results are the same with any).",
                ),
            ],
            DEFAULT_CACHE_MB,
        ),
    ]
    if explain_rows:
        parameters.append(
            _option(
                "explain_batch_rows",
                Annotated[int, typer.Option(min=1, help="Examples per explain call (a cost knob).")],
                DEFAULT_EXPLAIN_BATCH_ROWS,
            )
        )
    return option_group("engine", EngineOptions, parameters, flags)


FORWARD_PRECISION_HELP = (
    f"{'|'.join(PRECISIONS)}: the precision of every forward pass. bf16 on CPU: OpenVINO for .onnx models "
    "(`pip install 'fmm-fast[openvino]'`), PyTorch autocast for checkpoints (gradients too). auto: bf16 "
    "where the CPU has native bf16 (AVX512_BF16/AMX), fp16 on CUDA, else fp32."
)
TRAINING_PRECISION_HELP = (
    f"{'|'.join(PRECISIONS)}: the precision of training's forward passes (PyTorch autocast; weights and "
    "optimizer state stay fp32). bf16 needs a CPU with native bf16 (AVX512_BF16/AMX) or a CUDA device; "
    "auto: bf16 where native (on an older GPU fp16 with loss scaling), else fp32. Reduced precision "
    "trains a slightly different model; the checkpoint records which."
)


def backend_options(
    *, provider: bool = True, precision: str | None = FORWARD_PRECISION_HELP, flags: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--device (PyTorch), --provider (ONNX Runtime, unless False) and --precision with help `precision`
    (unless None), handed over as `backend: BackendOptions` (or as a dict of the flags: flags)."""
    parameters = [
        _option(
            "device",
            Annotated[
                str,
                typer.Option(
                    help=f"{'|'.join(DEVICES)}: the PyTorch device of checkpoint models and gradient "
                    "measures."
                ),
            ],
            "auto",
        )
    ]
    if provider:
        parameters.append(
            _option(
                "provider",
                Annotated[
                    str,
                    typer.Option(
                        help=f"{'|'.join(PROVIDERS)}: the ONNX Runtime execution provider of .onnx models."
                    ),
                ],
                "auto",
            )
        )
    if precision is not None:
        parameters.append(
            _option("precision", Annotated[str, typer.Option(help=precision)], DEFAULT_PRECISION)
        )
    return option_group("backend", BackendOptions, parameters, flags)


def scale_options(*, flags: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--workers, --ray-address, --worker-cpus, --worker-gpus, handed over as `scale: ScaleOptions | None`
    (None: one process, Ray not needed), or as a dict of the flags (flags)."""
    from fmm_fast.distributed.runtime import ScaleOptions

    parameters = [
        _option(
            "workers",
            Annotated[
                int | None,
                typer.Option(
                    help="Spread the work over N Ray workers: a local Ray runtime, or N workers of the "
                    "--ray-address cluster (needs the `ray` extra and an .onnx model)."
                ),
            ],
            None,
        ),
        _option(
            "ray_address",
            Annotated[
                str | None,
                typer.Option(
                    help="Join a running Ray cluster (auto, or HEAD:6379) and use its CPUs/GPUs "
                    "(docs/many-machines.md)."
                ),
            ],
            None,
        ),
        _option(
            "worker_cpus",
            Annotated[int, typer.Option(help="CPUs per Ray worker = its ONNX Runtime intra-op threads.")],
            1,
        ),
        _option(
            "worker_gpus",
            Annotated[
                float | None,
                typer.Option(
                    help="GPUs per Ray worker, fractional allowed (default: 1 with --provider "
                    "cuda/tensorrt, else 0)."
                ),
            ],
            None,
        ),
    ]
    return option_group("scale", ScaleOptions.from_flags, parameters, flags)
