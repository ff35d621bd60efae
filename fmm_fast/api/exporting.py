"""`fmm_fast.export` (the body of `fmm-fast export`): a checkpoint to a self-describing, verified ONNX
file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fmm_fast.api.arguments import checked_arguments
from fmm_fast.api.inputs import label_names, model_source, run_folder
from fmm_fast.core.optional_deps import TRAIN
from fmm_fast.core.outputs import check_file, output_lock


@checked_arguments
def export(
    *,
    model: Any,
    out: str | Path | None = None,
    labels: str | Sequence[str] | None = None,
    opset: int = 17,
    quantize: str | None = None,
    fp16: bool = False,
    overwrite: bool = False,
) -> Path:
    """Export a checkpoint to ONNX (logits and MaSF signals), verified against PyTorch before writing: what
    `fmm-fast export` does, with its options.

    model: a checkpoint folder, a `fmm_fast.train` result, a Hugging Face sequence-classifier folder
    (save_pretrained, with tokenizer.json) or a cached Hub name of one. out: the .onnx file to write; None:
    model.onnx in a new temporary folder. labels: the model's label names in its order, "neg,pos" or a
    list (for labels LABEL_0, LABEL_1, ...). quantize: "int8" (dynamic, for CPU); fp16: half precision
    (for GPU); both make a different model, whose agreement is reported. The file carries the tokenizer,
    the label names and the verification report. Returns the file's path, which every other function
    takes as model=.

    Example: `onnx = fmm_fast.export(model=trained, out="model.onnx")`
    """
    names = label_names(labels)
    out = run_folder(None, "export") / "model.onnx" if out is None else Path(out)
    with output_lock(out, file=True):  # before PyTorch loads: a second process exits at once
        TRAIN.require("export")
        from fmm_fast.export.onnx_export import check_export_options, export_onnx, format_report
        from fmm_fast.export.onnx_format import exported_by_fmm

        check_export_options(out, opset, quantize, fp16)
        check_file(out, overwrite, exported_by_fmm, "an ONNX model")
        report = export_onnx(
            model_source(model), out, opset=opset, quantize=quantize, fp16=fp16, label_names=names
        )
    for line in format_report(report, out):
        print(line)
    return out
