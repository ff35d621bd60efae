"""The progress bar every long step shows, fitting the place: a terminal bar on stderr (with rate and ETA)
on a terminal, a notebook bar in Jupyter (tqdm.auto; with ipywidgets), nothing in logs or when quiet."""

import sys

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
