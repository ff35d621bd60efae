"""`fmm-fast export`: a checkpoint or Hugging Face classifier to a self-describing, verified ONNX file, on
top of `fmm_fast.export` (fmm_fast.api.exporting)."""

from __future__ import annotations

from pathlib import Path

import typer

from fmm_fast.cli.app import app
from fmm_fast.cli.options import OverwriteOption


@app.command()
def export(
    model: str = typer.Option(
        ...,
        "--model",
        help="A checkpoint directory from `fmm-fast train`, a Hugging Face sequence-classifier folder "
        "(save_pretrained, with tokenizer.json) or a Hub name of one (from the local cache).",
    ),
    out: Path = typer.Option(..., "--out", help="The ONNX file to write (ends in .onnx)."),
    labels: str | None = typer.Option(
        None,
        "--labels",
        metavar="NAME,...",
        help="Name the model's labels, in its order (for a model whose labels are LABEL_0, LABEL_1, ...).",
    ),
    opset: int = typer.Option(17, help="ONNX opset version."),
    quantize: str | None = typer.Option(
        None, help="int8: dynamic quantization for CPU (a different model; agreement is reported)."
    ),
    fp16: bool = typer.Option(False, "--fp16", help="Half precision, for GPU (a different model)."),
    overwrite: OverwriteOption = False,
) -> None:
    """Export a model to ONNX (logits and MaSF signals), verified against PyTorch before writing.

    The file carries the tokenizer, label names and the verification report, so every command takes it
    as --model. fp32 must match PyTorch within 1e-4 on the logits, or nothing is written.
    """
    from fmm_fast.api.exporting import export as run

    run(model=model, out=out, labels=labels, opset=opset, quantize=quantize, fp16=fp16, overwrite=overwrite)
