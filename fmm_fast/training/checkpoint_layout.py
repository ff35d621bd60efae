"""The files of a checkpoint directory; torch-free, so the evaluation install can tell one apart.

A checkpoint holds a Hugging Face model (`config.json`, weights), TOKENIZER_FILE (a `tokenizers.Tokenizer`)
and INFO_FILE (:class:`fmm_fast.core.datatypes.ModelInfo` and the separator id); see fmm_fast.training.models.
"""

from __future__ import annotations

from pathlib import Path

INFO_FILE = "fmm_info.json"
TOKENIZER_FILE = "tokenizer.json"


def is_checkpoint(path: str | Path) -> bool:
    return (Path(path) / INFO_FILE).is_file()
