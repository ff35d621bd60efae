"""The typer application that every command module registers on, and the options given before a command."""

import typer

from fmm_fast.cli.once import OnceGroup

app = typer.Typer(
    name="fmm-fast",
    cls=OnceGroup,
    help="Fast faithfulness evaluation of NLP explanations (masked fine-tuning, ONNX, erasure, MaSF).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help paragraphs re-wrapped to the terminal, not broken at the docstring's lines
)


@app.callback()
def computing(
    context: typer.Context,
    threads: int | None = typer.Option(
        None,
        "--threads",
        min=1,
        metavar="N",
        envvar="FMM_FAST_THREADS",
        help="Threads this process computes on: ONNX Runtime, OpenVINO, PyTorch and Numba (default: the "
        "physical cores it may run on). Given before the command: fmm-fast --threads 1 evaluate ... Ray "
        "workers take --worker-cpus instead.",
    ),
) -> None:
    if threads is not None:  # held until the command returns
        from fmm_fast.core.threads import limited_threads  # imports Numba: not for --help

        context.with_resource(limited_threads(threads))
