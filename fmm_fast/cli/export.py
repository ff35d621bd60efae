"""`fmm-fast export`: a checkpoint or Hugging Face classifier to a self-describing, verified ONNX file."""

from __future__ import annotations

from pathlib import Path

import typer

from fmm_fast.cli.app import app
from fmm_fast.cli.options import OverwriteOption
from fmm_fast.core.optional_deps import TRAIN
from fmm_fast.core.outputs import check_file, output_lock
from fmm_fast.data.labels import parse_label_names


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
    label_names = parse_label_names(labels)
    with output_lock(out, file=True):  # before PyTorch loads: a second process exits at once
        TRAIN.require("export")
        from fmm_fast.export.onnx_export import check_export_options, export_onnx, format_report
        from fmm_fast.export.onnx_format import exported_by_fmm

        check_export_options(out, opset, quantize, fp16)
        check_file(out, overwrite, exported_by_fmm, "an ONNX model")
        report = export_onnx(model, out, opset=opset, quantize=quantize, fp16=fp16, label_names=label_names)
    for line in format_report(report, out):
        typer.echo(line)
