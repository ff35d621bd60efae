"""The step runner of the reproduction study: resumable steps, their wall times, and running them in order."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fmm_fast.cli import main as fmm_fast_main
from fmm_fast.core.records import Stopwatch, read_record, write_record


@dataclass
class Step:
    """One unit of work. Done when `complete(output)` holds and no input is newer than the output.

    clear: what to delete before running an unfinished step: always for a step that cannot resume,
    for a resumable one only when its output is stale (an input changed since).
    """

    name: str
    command: str  # what runs, as a user would type it
    run: Callable[[], None]
    output: Path
    inputs: tuple[Path, ...] = ()
    complete: Callable[[Path], bool] = Path.exists
    clear: Path | None = None
    resumable: bool = False

    def stale(self) -> bool:
        if not self.output.exists():
            return False
        made = self.output.stat().st_mtime
        return any(path.exists() and path.stat().st_mtime > made for path in self.inputs)

    def done(self) -> bool:
        return self.complete(self.output) and not self.stale()

    def prepare(self) -> None:
        """Before running an unfinished step: remove a stale result, or any partial one that cannot resume."""
        if self.clear is not None and self.clear.exists() and (self.stale() or not self.resumable):
            if self.clear.is_dir():
                shutil.rmtree(self.clear)
            else:
                self.clear.unlink()


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
