"""The one way the pages build HTML: a template of this code filled with escaped values.

`markup(template, **values)` formats `template` (str.format syntax, format specs allowed) with every
value escaped for text and for quoted attributes, whatever its type: a label, a score or an index read
from a file can never open a tag, even when it is not the type it should be. Only the result of
`markup` (or `join` of such results) is `Html`, a fragment passed through unescaped; the page shell
(`document`) takes nothing else. Constants of this code (the stylesheet, the script) become Html by
`Html(CONSTANT)`; tests/test_injection.py checks that nothing else does and that no f-string or
stdlib `html` call in these modules builds markup around it.
"""

from __future__ import annotations

import html
import string
from collections.abc import Iterable
from typing import Any


class Html(str):
    """An HTML fragment that is safe to insert as is: made by `markup`, `join` or from a constant."""


class _Escaping(string.Formatter):
    def format_field(self, value: Any, format_spec: str) -> str:
        if isinstance(value, Html):
            return value
        return html.escape(format(value, format_spec), quote=True)


_FORMATTER = _Escaping()


def markup(template: str, /, **values: Any) -> Html:
    """`template` with each {name} (or {name:spec}) replaced by the value, escaped unless it is Html."""
    return Html(_FORMATTER.vformat(template, (), values))


def join(fragments: Iterable[Html], separator: str = "") -> Html:
    """Fragments one after the other; a plain string among them is escaped, not trusted."""
    return Html(html.escape(separator).join(markup("{f}", f=f) for f in fragments))
