"""The tokenizer files a checkpoint carries for other Hugging Face tools: tokenizer_config.json beside
tokenizer.json, so `AutoTokenizer.from_pretrained(checkpoint)` has the model's maximum length (without it,
transformers' placeholder 1e30: tools stop truncating) and its special tokens (mask, pad, unknown,
classification and separator)."""

from __future__ import annotations

import json

from tokenizers import Tokenizer

from fmm_fast.core.datatypes import ModelInfo

# The class every transformers version with fast tokenizers reads a plain tokenizer.json with.
TOKENIZER_CLASS = "PreTrainedTokenizerFast"


def tokenizer_config(tokenizer: Tokenizer, info: ModelInfo) -> str:
    """tokenizer_config.json of a checkpoint: the class, model_max_length and the special tokens (those the
    tokenizer defines: its model's unknown token, its post-processor's first and last special tokens)."""
    specials = {
        "mask_token": tokenizer.id_to_token(info.mask_id),
        "pad_token": tokenizer.id_to_token(info.pad_id),
    }
    described = json.loads(tokenizer.to_str())
    unknown = (described.get("model") or {}).get("unk_token")
    if isinstance(unknown, str):
        specials["unk_token"] = unknown
    specials.update(_framing_tokens(described.get("post_processor") or {}))
    return json.dumps(
        {"tokenizer_class": TOKENIZER_CLASS, "model_max_length": info.max_length, **specials}, indent=2
    )


def _framing_tokens(processor: dict) -> dict[str, str]:
    """cls_token and sep_token of a post-processor: RoBERTa's and BERT's name them; a template's single
    sequence has them before and after the text ($A)."""
    if "cls" in processor and "sep" in processor:
        return {"cls_token": processor["cls"][0], "sep_token": processor["sep"][0]}
    if processor.get("type") == "Sequence":
        found: dict[str, str] = {}
        for inner in processor.get("processors") or []:
            found.update(_framing_tokens(inner))
        return found
    single = processor.get("single") or []
    names = [item.get("SpecialToken", {}).get("id") if isinstance(item, dict) else None for item in single]
    text = next((i for i, item in enumerate(single) if isinstance(item, dict) and "Sequence" in item), None)
    if text is None:
        return {}
    before = [name for name in names[:text] if name]
    after = [name for name in names[text + 1 :] if name]
    return {**({"cls_token": before[0]} if before else {}), **({"sep_token": after[-1]} if after else {})}
