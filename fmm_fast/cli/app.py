"""The typer application that every command module registers on."""

import typer

app = typer.Typer(
    name="fmm-fast",
    help="Fast faithfulness evaluation of NLP explanations (masked fine-tuning, ONNX, erasure, MaSF).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
