"""The self-describing ONNX format that `fmm-fast export` writes and the ONNX backend reads.

Torch-free on purpose: the evaluation install (no PyTorch) opens these files. The graph takes INPUT_NAMES
((B, T) int64, right-padded) and gives OUTPUT_NAMES (logits (B, C), signals (B, L+1, D)); the metadata keys
hold ModelInfo as JSON, the tokenizer as `tokenizers` JSON, the export's verification report, and
FORMAT_VERSION, which a reader must match. ModelInfo.source, the PyTorch checkpoint gradient measures run
on, is stored relative to the .onnx file's folder: a shared file carries no one's directory layout.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from fmm_fast.core.errors import UserError

METADATA_INFO = "fmm_fast.info"
METADATA_TOKENIZER = "fmm_fast.tokenizer"
METADATA_VERIFICATION = "fmm_fast.verification"
METADATA_FORMAT_VERSION = "fmm_fast.format_version"
FORMAT_VERSION = "1"

INPUT_NAMES = ("input_ids", "attention_mask")
OUTPUT_NAMES = ("logits", "signals")


def exported_by_fmm(path: Path) -> bool:
    """Whether `path` is an ONNX file `fmm-fast export` wrote (it carries fmm-fast's model metadata)."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # protobuf's DecodeError and friends: not an ONNX file at all
        return False
    return any(prop.key == METADATA_INFO for prop in model.metadata_props)


def configure_tokenizer(tokenizer: Tokenizer, max_length: int) -> Tokenizer:
    """A copy that truncates pairs longest-first to max_length (specials included) and never pads."""
    configured = Tokenizer.from_str(tokenizer.to_str())
    configured.no_padding()
    configured.enable_truncation(max_length=max_length, strategy="longest_first")
    return configured


def stored_source(checkpoint: Path, onnx_path: Path) -> str:
    """The checkpoint's path as the metadata stores it: relative to the folder of `onnx_path`."""
    return os.path.relpath(Path(checkpoint).resolve(), Path(onnx_path).resolve().parent)


def resolved_source(onnx_path: Path, source: str) -> str:
    """A stored source as a usable path: relative ones from the .onnx file's folder (older exports stored
    absolute paths, which stay as they are); empty stays empty."""
    return str((Path(onnx_path).parent / source).resolve()) if source else source


def model_feeds(path: object, has_signals: bool, with_signals: bool, input_ids, attention_mask) -> dict:
    """The exported graph's inputs (B, T) as contiguous int64, for ONNX Runtime and OpenVINO alike;
    UserError when signals are asked of a file exported without them."""
    if with_signals and not has_signals:
        raise UserError(
            f"'{path}' has no signals output (MaSF needs it); re-export it with `fmm-fast export`"
        )
    return {
        "input_ids": np.ascontiguousarray(input_ids, dtype=np.int64),
        "attention_mask": np.ascontiguousarray(attention_mask, dtype=np.int64),
    }
