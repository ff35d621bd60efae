"""Options shared by several commands, declared once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

ModelOption = Annotated[
    Path,
    typer.Option(
        "--model", help="A checkpoint directory (`fmm-fast train`) or an ONNX file (`fmm-fast export`)."
    ),
]
DatasetOption = Annotated[
    str,
    typer.Option(
        "--dataset",
        "-d",
        help="A registry name (babi-1/2/3 and movie-snippets work offline; sst2, imdb, ... need the hub) "
        "or a local .csv/.jsonl/.parquet file with --text-field/--label-field.",
    ),
]
LimitOption = Annotated[int | None, typer.Option(help="Use only the first N examples of the split.")]
DeviceOption = Annotated[
    str,
    typer.Option(help="auto|cpu|cuda: the PyTorch device, or the ONNX Runtime provider for .onnx models."),
]
PrecisionOption = Annotated[
    str,
    typer.Option(
        help="fp32|bf16|auto: the precision of every forward pass. bf16 on CPU: OpenVINO for .onnx models "
        "(`pip install 'fmm-fast[openvino]'`), PyTorch autocast for checkpoints (gradients too). auto: bf16 "
        "where the CPU has native bf16 (AVX512_BF16/AMX), fp16 on CUDA, else fp32.",
    ),
]
TokenBudgetOption = Annotated[
    int, typer.Option(help="Max rows × padded length per forward batch (bounds memory; a cost knob).")
]
SizeOption = Annotated[
    int | None, typer.Option(help="Cap train+validation at N examples (a seeded subset; bAbI: N generated).")
]
TestSizeOption = Annotated[
    int | None, typer.Option(help="Cap the test split at N examples (a seeded subset; bAbI: N generated).")
]
TextFieldOption = Annotated[
    str | None, typer.Option(help="Local file: the column holding the explained text.")
]
PairFieldOption = Annotated[str | None, typer.Option(help="Local file: the column of the second segment.")]
LabelFieldOption = Annotated[str | None, typer.Option(help="Local file: the label column.")]
