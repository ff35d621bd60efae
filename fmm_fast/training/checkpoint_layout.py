"""The files of a model folder; torch-free, so the evaluation install can tell one apart.

A checkpoint holds a Hugging Face model (CONFIG_FILE, weights), TOKENIZER_FILE (a `tokenizers.Tokenizer`)
and INFO_FILE (:class:`fmm_fast.core.datatypes.ModelInfo` and the separator id); see fmm_fast.training.models.
A Hugging Face model folder (`save_pretrained`) has the first two without INFO_FILE; see
fmm_fast.training.hf_import.
"""

from __future__ import annotations

import json
from pathlib import Path

INFO_FILE = "fmm_info.json"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"  # for other Hugging Face tools (training.tokenizer_files)
CONFIG_FILE = "config.json"
CLASSIFIER_SUFFIX = "ForSequenceClassification"


def is_checkpoint(path: str | Path) -> bool:
    return (Path(path) / INFO_FILE).is_file()


def is_model_folder(path: str | Path) -> bool:
    """An fmm-fast checkpoint or a Hugging Face model folder (PyTorch runs it)."""
    return is_checkpoint(path) or (Path(path) / CONFIG_FILE).is_file()


def is_classifier_config(path: str | Path) -> bool:
    """Whether the folder's config names a sequence-classification architecture (a fine-tuned classifier)."""
    try:
        architectures = json.loads((Path(path) / CONFIG_FILE).read_text()).get("architectures") or []
    except (OSError, ValueError, AttributeError):
        return False
    return any(str(name).endswith(CLASSIFIER_SUFFIX) for name in architectures)


def typed_as_path(model: str) -> bool:
    """Whether `model` as the user typed it is a path, never a Hub name: it starts with ./, ../, / or ~."""
    return model in (".", "..") or model.startswith(("./", "../", "/", "~", ".\\", "..\\"))
