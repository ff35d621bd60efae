"""A measure's name as a file or folder name: where runs keep a measure's state, masked sets and ROAR chain.

Built-in and plug-in measure names are letters, digits and . _ + -, but Captum's hold a ':'
(`captum:IntegratedGradients`), which Windows refuses in file names and shells make awkward, and the stem of
an explanations file (`aopc --explanations`) may hold anything its file system allows. `path_name` writes
any name with those safe characters alone, one to one (two measures never share a file): ':' becomes '@'
(`captum@IntegratedGradients`), every other character outside them %XX per UTF-8 byte. A name of safe
characters only is its own path name, so the files earlier versions wrote for it keep their names.
"""

from __future__ import annotations

import os
import string
from pathlib import Path

SAFE_CHARACTERS = frozenset(string.ascii_letters + string.digits + "._+-")
COLON = "@"  # what ':' becomes: outside the characters of measure names, so never confused with one


def path_name(name: str) -> str:
    """The file or folder name standing for measure `name` (see the module docstring)."""
    return "".join(
        character
        if character in SAFE_CHARACTERS
        else COLON
        if character == ":"
        else "".join(f"%{byte:02X}" for byte in character.encode())
        for character in name
    )


def measure_entry(parent: Path, name: str, suffix: str = "") -> Path:
    """parent / (path_name(name) + suffix): a measure's file or folder in `parent`. Where only the entry an
    earlier version named after the name as it is exists (`captum:Saliency`), that one: a run begun before
    path names reads and resumes where it wrote."""
    entry = parent / f"{path_name(name)}{suffix}"
    earlier = parent / f"{name}{suffix}"
    if earlier != entry and not os.path.lexists(entry) and os.path.lexists(earlier):
        return earlier
    return entry
