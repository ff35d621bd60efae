"""The step runner of the reproduction study: resumable steps, their wall times, and running them in order."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fmm_fast.cli import main as fmm_fast_main
from fmm_fast.core.outputs import finished_run, holds_run, read_marker, remove_owned
from fmm_fast.core.records import Stopwatch, read_record, write_record
from fmm_fast.export.onnx_format import exported_by_fmm


@dataclass
class Step:
    """One unit of work, done when its command's run marker says it finished with the same fingerprint.

    claim: the kind and fingerprint fields the command claims `output` with (computed when asked: they hold
    the content of input files an earlier step writes); a changed setting or input is another fingerprint,
    so the step runs again. Without a claim (a command writing one file: export, the overlap record) the
    step is done when `output` exists; the step that makes its input removes it when it runs again (clear).
    The settings resolve their precision as they are built, so a claim holds the precision that runs.
    complete(output): what else the output must hold
    (measures, which a fingerprint leaves out). clear: what a step removes before it runs, by the commands'
    ownership rule (never a file fmm-fast did not write): its own earlier output (unless it resumes a run
    of the same fingerprint) and the file outputs derived from it.
    """

    name: str
    command: str  # what runs, as a user would type it
    run: Callable[[], None]
    output: Path
    claim: Callable[[], tuple[str, dict]] | None = None
    complete: Callable[[Path], bool] = lambda _: True
    clear: tuple[Path, ...] = ()
    resumable: bool = False

    def done(self) -> bool:
        finished = self.output.exists() if self.claim is None else finished_run(self.output, *self.claim())
        return finished and self.complete(self.output)

    def resumes(self) -> bool:
        """Whether running the unfinished step continues what an earlier run left: a run of the same
        fingerprint, or a resumable output without a claim, which resumes by itself."""
        return self.resumable and (self.claim is None or holds_run(self.output, *self.claim()))

    def state(self) -> str:
        """done; started (an unfinished run of the same fingerprint is there, and the step resumes it); or
        todo."""
        if self.done():
            return "done"
        started = self.claim is not None and self.resumes()
        return "started" if started else "todo"

    def prepare(self) -> None:
        """Before running an unfinished step: remove what `clear` names, unless the step resumes."""
        if self.resumes():
            return
        for path in self.clear:
            if path.is_dir():
                if read_marker(path) is not None:  # without one, the command refuses what it holds
                    remove_owned(path)
            elif path.exists() and _written_by_fmm(path):
                path.unlink()


def _written_by_fmm(path: Path) -> bool:
    """Whether a file a step would remove is fmm-fast's: an exported model, or a record it wrote."""
    if path.suffix == ".onnx":
        return exported_by_fmm(path)
    try:
        return "kind" in read_record(path)
    except (OSError, ValueError):
        return False


class StepFailed(Exception):
    """A step exited with an error; finished steps stay, so rerunning resumes after fixing the cause."""


def fmm_fast_command(argv: list[str]) -> Callable[[], None]:
    """A step that runs `fmm-fast ARGV` in this process (no interpreter start-up per step)."""

    def run() -> None:
        code = fmm_fast_main(argv)
        if code != 0:
            raise StepFailed(f"`fmm-fast {' '.join(argv)}` exited with code {code}")

    return run


class Timings:
    """Wall time of every step, kept across resumed runs in steps.json.

    path None: kept in memory only, starting from `steps` (a chain on a Ray worker, whose driver writes
    steps.json alone, from the entries each chain sends back).
    """

    def __init__(self, path: Path | None, steps: dict[str, dict] | None = None) -> None:
        self.path = path
        if steps is None:
            steps = read_record(path)["steps"] if path is not None and path.is_file() else {}
        self.steps: dict[str, dict] = steps

    def record(self, step: Step, seconds: float | None, status: str) -> None:
        earlier = self.steps.get(step.name, {})
        if seconds is None:  # reused: keep the time it took when it ran
            seconds = earlier.get("seconds")
        self.update({step.name: {"command": step.command, "seconds": seconds, "status": status}})

    def update(self, entries: dict[str, dict]) -> None:
        """Add or replace steps' entries (record's, or those another Timings recorded) and save."""
        self.steps.update(entries)
        if self.path is not None:
            write_record(self.path, {"steps": self.steps})

    def of(self, steps: list[Step]) -> dict[str, dict]:
        """The entries of these steps that exist."""
        return {step.name: self.steps[step.name] for step in steps if step.name in self.steps}


def run_steps(steps: list[Step], timings: Timings) -> None:
    for number, step in enumerate(steps, start=1):
        prefix = f"[{number}/{len(steps)}] {step.name}"
        if step.done():
            timings.record(step, None, "reused")
            print(f"{prefix}: done earlier, reused", file=sys.stderr)
            continue
        step.prepare()
        print(f"{prefix}\n  $ {step.command}", file=sys.stderr, flush=True)
        with Stopwatch() as clock:
            step.run()
        timings.record(step, clock.seconds, "ran")
        print(f"{prefix}: {clock.seconds:.1f} s", file=sys.stderr, flush=True)
