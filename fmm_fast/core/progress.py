"""The progress bar every long step shows, fitting the place: a terminal bar on stderr (with rate and ETA)
on a terminal, a notebook bar in Jupyter (tqdm.auto; with ipywidgets), nothing in logs or when quiet."""

import sys
import time

from tqdm.auto import tqdm
from tqdm.autonotebook import tqdm as chosen_tqdm
from tqdm.std import tqdm as terminal_tqdm

IN_NOTEBOOK = chosen_tqdm is not terminal_tqdm  # a Jupyter kernel with ipywidgets: tqdm.auto's notebook bar


def progress_bar(total: int, desc: str, unit: str = "ex", quiet: bool = False, initial: int = 0) -> tqdm:
    """Shown on a terminal (disable=None: not in logs or CI output) or in a notebook; never when quiet.
    initial: the steps a resumed run finished before."""
    return tqdm(
        total=total,
        initial=initial,
        desc=f"{desc:>14}",
        unit=unit,
        file=sys.stderr,
        leave=False,
        dynamic_ncols=True,
        disable=True if quiet else (False if IN_NOTEBOOK else None),
    )


class LogLines:
    """A hidden bar's progress as plain lines on stderr, for a log or a batch job: one at the first update,
    then at most one every `every` seconds, so a long step shows it is moving from its first minute. Passes
    everything on to the hidden bar (`bar.disable` stays True)."""

    def __init__(self, bar: tqdm, total: int, desc: str, unit: str, initial: int = 0, every: float = 60.0):
        self.bar, self.total, self.desc, self.unit = bar, total, desc, unit
        self.done, self.every = initial, every
        self.started = time.monotonic()
        self.last: float | None = None

    @property
    def disable(self) -> bool:
        return self.bar.disable

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.last is None or now - self.last >= self.every:
            self.last = now
            print(
                f"{self.desc}: {self.done}/{self.total} {self.unit}s, {now - self.started:.0f} s",
                file=sys.stderr,
                flush=True,
            )

    def set_postfix(self, **values: object) -> None:
        self.bar.set_postfix(**values)

    def close(self) -> None:
        self.bar.close()


def logged_progress_bar(
    total: int, desc: str, unit: str = "ex", quiet: bool = False, initial: int = 0
) -> tqdm | LogLines:
    """progress_bar, and off a terminal (not quiet) LogLines in its place."""
    bar = progress_bar(total, desc, unit, quiet, initial)
    return LogLines(bar, total, desc, unit, initial) if bar.disable and not quiet else bar
