"""The progress bar every long step shows: stderr, with rate and ETA."""

import sys

from tqdm import tqdm


def progress_bar(total: int, desc: str, unit: str = "ex", quiet: bool = False) -> tqdm:
    """Shown on a terminal only (disable=None), so logs and CI output stay clean; never when quiet."""
    return tqdm(
        total=total,
        desc=f"{desc:>14}",
        unit=unit,
        file=sys.stderr,
        leave=False,
        dynamic_ncols=True,
        disable=True if quiet else None,
    )
