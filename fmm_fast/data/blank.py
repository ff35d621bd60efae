"""Whether a user's text has anything to explain: one test for every place texts enter (a local data
file's text and pair columns, `fmm_fast.api.explain_texts`), so that an empty text, one of only
whitespace and one of only invisible characters (zero-width spaces and joiners, a byte-order mark,
control characters) are refused alike."""

from __future__ import annotations

import unicodedata

# Unicode categories that show nothing: format (zero-width space, joiners, BOM), control, separators.
INVISIBLE = {"Cf", "Cc", "Zs", "Zl", "Zp"}
BLANK_REASON = "is empty or holds only whitespace or invisible characters (e.g. zero-width spaces)"


def is_blank(text: str) -> bool:
    """True when `text` shows nothing: every character is whitespace or invisible (or there is none)."""
    return all(character.isspace() or unicodedata.category(character) in INVISIBLE for character in text)
