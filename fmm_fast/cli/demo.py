"""`fmm-fast demo`: the whole method end to end, offline, on the CPU, in minutes."""

from __future__ import annotations

from pathlib import Path

import typer

from fmm_fast.cli.app import app
from fmm_fast.core.optional_deps import TRAIN
from fmm_fast.core.outputs import output_lock


@app.command()
def demo(
    out: Path = typer.Option(Path("demo-output"), "--out", help="Where every step writes its files."),
    full: bool = typer.Option(False, "--full", help="Whole training set, 3 epochs, the whole test split."),
    eval_limit: int | None = typer.Option(None, min=1, help="Test sentences for the recursive curves."),
    beam_limit: int | None = typer.Option(None, min=1, help="Test sentences for beam search."),
) -> None:
    """The whole method offline in minutes: masked fine-tuning, ONNX, seven measures, MaSF, one table.

    Masked fine-tunes the pretrained MiniLM on movie-review sentences, exports it to ONNX, runs recursive
    erasure of seven importance measures and the MaSF test — no network, no GPU. Reruns reuse finished steps.
    """
    with output_lock(out):  # before PyTorch loads: a second process exits at once
        TRAIN.require("the demo")
        from fmm_fast.demo import BEAM_MEASURE, DemoConfig, run_demo

        config = DemoConfig.full() if full else DemoConfig()
        if eval_limit is not None:
            config.eval_limit = eval_limit
        if beam_limit is not None:
            config.beam_limit = beam_limit
        summary = run_demo(out, config)
    print(f"\nfmm-fast demo — masked fine-tuned MiniLM on movie-snippets, {summary['backend']}")
    print(f"{'measure':<14}{'signed':>7}{'read':>6}{'×100':>8}{'seconds':>9}")
    for name, m in summary["measures"].items():
        read = "ACU" if m["signed"] else "RACU"
        value = 100 * (m["acu"] if m["signed"] else m["racu"])
        print(f"{name:<14}{'yes' if m['signed'] else 'no':>7}{read:>6}{value:>8.1f}{m['seconds']:>9.1f}")
    print(
        f"({BEAM_MEASURE} on {config.beam_limit} sentences against its own rand baseline; "
        f"the others on {config.eval_limit})"
    )
    for method, masf in summary["masf"].items():
        calibration = summary["masf_calibration"][method]
        print(
            f"MaSF Simes p-value, {method} calibration (in distribution if > 0.05): "
            + ", ".join(f"{100 * r:.0f}% masked: {masf[r]:.3g}" for r in (0.0, 0.5, 1.0))
            + f" (calibrating sentences {calibration['n']}, "
            f"lowest possible p {calibration['p_value_floor']:.3g})"
        )
    machine = summary["machine"]
    print(
        "steps (s): "
        + ", ".join(f"{k} {v}" for k, v in summary["steps_seconds"].items())
        + f" (on {machine['cpu']}, {machine['threads']} threads)"
    )
    print(
        f"files: {out}/train/run.json, {out}/model.onnx, {out}/curves/result.json, {out}/beam/result.json, "
        f"{out}/curves.png, {out}/masf.json, {out}/masf.png, {out}/demo.json"
    )
