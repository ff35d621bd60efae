"""The progress bar every long step shows: stderr, with rate and ETA."""

import sys

from tqdm import tqdm


def progress_bar(total: int, desc: str, unit: str = "ex") -> tqdm:
    return tqdm(total=total, desc=f"{desc:>14}", unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True)
