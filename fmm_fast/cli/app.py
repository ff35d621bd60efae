"""The typer application that every command module registers on."""

import typer

app = typer.Typer(
    name="fmm-fast",
    help="Fast faithfulness evaluation of NLP explanations (masked fine-tuning, ONNX, erasure, MaSF).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help paragraphs re-wrapped to the terminal, not broken at the docstring's lines
)
