"""A list of explanations as a notebook shows it: the page of `fmm-fast explain --html` inline."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fmm_fast.api.arguments import checked_arguments
from fmm_fast.protocols.explanations import Explanation, load_explanations, save_explanations

if TYPE_CHECKING:
    import pandas

VIEWER_HEIGHT = 520  # pixels of the inline viewer; the page scrolls inside it


class Explanations(list[Explanation]):
    """Explanation records (one per example and measure, in example order), as `fmm_fast.explain` returns
    them. A notebook shows the word-level viewer of `fmm-fast explain --html` (one self-contained page in
    a sandboxed frame: no outside resources). `about`: lines that describe the run, shown on the page.

    Example: `fmm_fast.explain(model, measure=["loo-abs"], limit=5)` in a cell shows the words coloured by
    score; `.to_pandas()` has one row per token.
    """

    def __init__(self, explanations: list[Explanation] = (), about: list[str] | None = None) -> None:  # type: ignore[assignment]
        super().__init__(explanations)
        self.about = list(about or [])

    @classmethod
    @checked_arguments
    def load(cls, path: str | Path) -> Explanations:
        """The explanations a .jsonl of `fmm-fast explain` (or save()) holds."""
        return cls(load_explanations(Path(path)), [f"from {path}"])

    @checked_arguments
    def save(self, path: str | Path) -> Path:
        """Write the .jsonl `fmm-fast explain --out` writes (load() and `fmm-fast aopc` read it)."""
        save_explanations(Path(path), list(self))
        return Path(path)

    def page(self) -> str:
        """The whole HTML page of `fmm-fast explain --html`."""
        from fmm_fast.report.pages.explain_page import explanations_page

        return explanations_page(list(self), self.about)

    def _repr_html_(self) -> str:
        from fmm_fast.report.pages.markup import markup

        return markup(
            '<iframe srcdoc="{page}" sandbox="allow-scripts" '
            'style="width:100%;height:{height}px;border:1px solid #ddd"></iframe>',
            page=str(self.page()),  # a whole page, escaped as the attribute's text
            height=VIEWER_HEIGHT,
        )

    def rows(self) -> Iterator[dict[str, Any]]:
        """One row per token of each explanation: (index, measure, position, token, score, explained,
        label, prediction)."""
        for e in self:
            units = zip(e.tokens, e.scores, e.explained, strict=True)
            for position, (token, score, explained) in enumerate(units):
                yield {
                    "index": e.index,
                    "measure": e.measure,
                    "position": position,
                    "token": token,
                    "score": score,
                    "explained": explained,
                    "label": e.label,
                    "prediction": e.prediction,
                }

    def to_pandas(self) -> pandas.DataFrame:
        """rows() as a pandas DataFrame (imported here: the evaluation install need not have pandas)."""
        import pandas

        return pandas.DataFrame(list(self.rows()))
