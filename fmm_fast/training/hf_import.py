"""Hugging Face models in: a sequence classifier trained elsewhere, or a pretrained encoder to fine-tune.

open_classifier turns any classifier folder into what the rest of fmm-fast consumes (SequenceClassifier,
`tokenizers.Tokenizer`, ModelInfo): an fmm-fast checkpoint as it is, or a `save_pretrained` folder of a
Hugging Face sequence classifier (config.json with id2label, tokenizer.json, weights), or a Hub name of one
(from the local cache; downloaded only when the Hub is not offline). Everything is taken from the model,
never guessed: label names (id2label), mask, pad and special tokens (the tokenizer's), how a pair is
encoded (the tokenizer's own post-processor: the token types it gives are what the model sees), the
maximum length (the tokenizer's, within the model's position embeddings). The info says the model was
trained elsewhere (trained_by "elsewhere", strategy unknown). What cannot work (no mask token, a decoder or
encoder-decoder model, no fast tokenizer, weights without config.json, a head the weights do not hold)
is a UserError naming the fix.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import torch
from tokenizers import Tokenizer

from fmm_fast.core.datatypes import ModelInfo
from fmm_fast.core.errors import UserError
from fmm_fast.export.onnx_format import configure_tokenizer
from fmm_fast.training.base_models import MINILM, TINY_ROBERTA, resolve_pretrained
from fmm_fast.training.checkpoint_layout import (
    CONFIG_FILE,
    TOKENIZER_FILE,
    is_checkpoint,
    is_classifier_config,
    typed_as_path,
)
from fmm_fast.training.folder_check import check_model_folder, read_config_object
from fmm_fast.training.models import SequenceClassifier, load_checkpoint, quiet_transformers

TRAINED_ELSEWHERE = "elsewhere"
HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
# Model types whose position ids start after the padding id (RoBERTa's convention): fewer usable positions.
POSITIONS_AFTER_PADDING = ("roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "mpnet", "data2vec-text")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack")
IGNORED_DOWNLOADS = [f"*{suffix}" for suffix in (*WEIGHT_SUFFIXES[1:], ".onnx", ".ot", ".tflite", ".py")]
SAME_LOGITS = 1e-4  # the first-token shortcut must give the full model's logits within this


def resolve_model_dir(model: str | Path) -> Path:
    """The folder of `model`: a local path as it is, or a Hub name's snapshot in the local Hugging Face
    cache (downloaded first unless the Hub is offline). UserError when it is neither, or a base model's
    name (those are for `fmm-fast train`, which resolves them first)."""
    if str(model) in (MINILM, TINY_ROBERTA) and not Path(model).exists():
        raise UserError(
            f"'{model}' is a base model that `fmm-fast train --model {model}` starts from, not a trained "
            "classifier; give a checkpoint folder from `fmm-fast train`, a Hugging Face classifier folder "
            "(save_pretrained), a Hub name of one or an .onnx file from `fmm-fast export`"
        )
    path = Path(model).expanduser()
    if path.exists() or typed_as_path(str(model)) or not HUB_NAME.fullmatch(str(model)):
        return path
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        return Path(
            snapshot_download(
                str(model),
                local_files_only=constants.HF_HUB_OFFLINE,
                # safetensors weights only (folder_check refuses pickle files): never download the others
                ignore_patterns=[*IGNORED_DOWNLOADS, "onnx/*", "openvino/*"],
            )
        )
    except LocalEntryNotFoundError as error:
        raise UserError(
            f"model '{model}' is neither a local folder nor in the Hugging Face cache, and the Hub is "
            f"offline; download it once with `hf download {model}` where there is network, or give a folder"
        ) from error
    except (HFValidationError, OSError) as error:  # not a repo name, no such repo, no network
        raise UserError(
            f"model '{model}' is no local path and cannot be fetched from the Hugging Face Hub "
            f"({_first_line(error)}); "
            "give a checkpoint folder, a Hugging Face model folder or an .onnx file"
        ) from error


def open_classifier(
    model: str | Path, label_names: list[str] | None = None
) -> tuple[SequenceClassifier, Tokenizer, ModelInfo]:
    """An fmm-fast checkpoint, or a Hugging Face sequence classifier (folder or Hub name) imported as one
    (eval mode, float32). label_names: the names of the model's labels, in its order, where its own are
    the generic LABEL_0, LABEL_1, ... (`--labels`); None keeps the model's. The folder is checked whole
    (folder_check) before anything loads from it."""
    directory = resolve_model_dir(model)
    if is_checkpoint(directory):
        check_model_folder(directory, label_names=label_names)
        classifier, tokenizer, info = load_checkpoint(directory)
    else:
        classifier, tokenizer, info = import_classifier(directory, label_names)
    info = rename_labels(info, label_names, directory)
    config = classifier.hf_model.config  # a checkpoint saved from it names them alike
    config.id2label = dict(enumerate(info.label_names))
    config.label2id = {name: i for i, name in enumerate(info.label_names)}
    return classifier, tokenizer, info


def rename_labels(info: ModelInfo, label_names: list[str] | None, directory: Path) -> ModelInfo:
    """info with `label_names` (one per model label, distinct), or as it is for None."""
    if label_names is None:
        return info
    if len(label_names) != info.num_labels or len(set(label_names)) != len(label_names):
        raise UserError(
            f"--labels gives {len(label_names)} names {label_names}, the model '{directory}' has "
            f"{info.num_labels} labels {info.label_names}; give one distinct name per label, in its order"
        )
    return replace(info, label_names=list(label_names))


def import_classifier(
    directory: Path, label_names: list[str] | None = None
) -> tuple[SequenceClassifier, Tokenizer, ModelInfo]:
    """A `save_pretrained` folder of a Hugging Face sequence classifier as an fmm-fast model (label_names:
    the user's names for its labels, as open_classifier's)."""
    config = read_config(directory, label_names=label_names)
    hf_tokenizer = fast_tokenizer(directory)
    hf_model = _classifier_weights(directory, config)
    info = model_info(hf_model, hf_tokenizer, _label_names(hf_model.config), source=str(directory))
    tokenizer = configure_tokenizer(hf_tokenizer.backend_tokenizer, info.max_length)
    model = SequenceClassifier(
        hf_model, pair_separator(hf_model, tokenizer, hf_tokenizer.sep_token_id, directory)
    )
    model.eval()
    _check_first_token_shortcut(model, tokenizer)
    return model, tokenizer, info


def read_config(directory: Path, new_head: bool = False, label_names: list[str] | None = None) -> dict:
    """config.json of a folder fmm-fast can run: an encoder (not a decoder, not encoder-decoder), with its
    tokenizer and weights checked against it (folder_check.check_model_folder, whose new_head and
    label_names these are)."""
    if not directory.is_dir():
        raise UserError(
            f"model '{directory}' does not exist; give a checkpoint folder from `fmm-fast train`, a Hugging "
            "Face model folder (save_pretrained), a Hub model name or an ONNX file from `fmm-fast export`"
        )
    config_path = directory / CONFIG_FILE
    if not config_path.is_file():
        if any(p.suffix in WEIGHT_SUFFIXES for p in directory.iterdir()):
            raise UserError(
                f"'{directory}' holds weights but no {CONFIG_FILE}; save the model with "
                "`model.save_pretrained(folder)`, which writes both"
            )
        raise UserError(
            f"'{directory}' is not a model folder (no {CONFIG_FILE}); give a checkpoint folder from "
            "`fmm-fast train`, a Hugging Face model folder (save_pretrained) or an ONNX file from "
            "`fmm-fast export`"
        )
    config = read_config_object(directory)
    model_type = str(config.get("model_type", ""))
    if config.get("is_encoder_decoder"):
        raise UserError(
            f"'{directory}' is an encoder-decoder model ({model_type}); erasure by masking needs an encoder "
            "with a mask token (BERT, RoBERTa, DeBERTa, ...): fine-tune one of those"
        )
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    decoder = model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    if decoder and model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        raise UserError(
            f"'{directory}' is a decoder-only model ({model_type}); erasure by masking needs an encoder with "
            "a mask token (BERT, RoBERTa, DeBERTa, ...): fine-tune one of those"
        )
    check_model_folder(directory, new_head=new_head, label_names=label_names)
    return config


def fast_tokenizer(directory: Path, name: str | None = None):
    """The folder's fast tokenizer (transformers' PreTrainedTokenizerFast), with a mask token."""
    from transformers import AutoTokenizer

    where = name or str(directory)
    if not (directory / TOKENIZER_FILE).is_file():
        raise UserError(
            f"'{where}' has no fast tokenizer ({TOKENIZER_FILE}); write one with `AutoTokenizer."
            "from_pretrained(folder).save_pretrained(folder)` (transformers converts a slow one)"
        )
    try:
        hf_tokenizer = AutoTokenizer.from_pretrained(directory, trust_remote_code=False)
    except (OSError, ValueError) as error:
        raise UserError(
            f"cannot load the tokenizer of '{where}' ({_first_line(error)}); save it again with "
            "save_pretrained"
        ) from error
    if getattr(hf_tokenizer, "backend_tokenizer", None) is None:
        raise UserError(
            f"'{where}' has no fast tokenizer; save a fast one ({TOKENIZER_FILE}) with save_pretrained"
        )
    if hf_tokenizer.mask_token_id is None or hf_tokenizer.pad_token_id is None:
        missing = "mask" if hf_tokenizer.mask_token_id is None else "padding"
        raise UserError(
            f"the tokenizer of '{where}' has no {missing} token; erasure replaces tokens by the mask token "
            "of a masked language model (BERT, RoBERTa, DeBERTa, ...): use one of those"
        )
    return hf_tokenizer


def _classifier_weights(directory: Path, config: dict) -> torch.nn.Module:
    """The sequence classifier with every weight from the folder (a head it lacks would be random)."""
    from transformers import AutoModelForSequenceClassification

    quiet_transformers()
    try:
        hf_model, loading = AutoModelForSequenceClassification.from_pretrained(
            directory, output_loading_info=True, trust_remote_code=False, use_safetensors=True
        )
    except (OSError, ValueError, KeyError) as error:
        raise UserError(
            f"cannot load '{directory}' as a sequence classifier ({_first_line(error)}); give the folder "
            "`save_pretrained` wrote for an ...ForSequenceClassification model"
        ) from error
    missing = loading.get("missing_keys") or []
    if missing:
        kind = ", ".join(config.get("architectures") or [str(config.get("model_type", "model"))])
        raise UserError(
            f"'{directory}' ({kind}) is not a trained sequence classifier: its weights lack "
            f"{len(missing)} tensors (e.g. {sorted(missing)[0]}); fine-tune it first, e.g. "
            f"`fmm-fast train --model {directory} --dataset ...`"
        )
    return hf_model.float().eval()


def _label_names(config) -> list[str]:
    return [str(config.id2label[i]) for i in range(int(config.num_labels))]


def model_info(
    hf_model: torch.nn.Module,
    hf_tokenizer,
    label_names: list[str],
    source: str,
    trained_by: str = TRAINED_ELSEWHERE,
) -> ModelInfo:
    """What a backend needs to know, from the model's config and tokenizer."""
    config = hf_model.config
    return ModelInfo(
        label_names=list(label_names),
        mask_id=int(hf_tokenizer.mask_token_id),
        pad_id=int(hf_tokenizer.pad_token_id),
        special_ids=sorted({int(i) for i in hf_tokenizer.all_special_ids}),
        max_length=max_length(config, hf_tokenizer),
        num_hidden_layers=int(config.num_hidden_layers),
        hidden_size=int(config.hidden_size),
        source=source,
        trained_precision="unknown" if trained_by == TRAINED_ELSEWHERE else "fp32",
        trained_by=trained_by,
    )


def max_length(config, hf_tokenizer) -> int:
    """Tokens per input, specials included: the tokenizer's model_max_length where it sets one, within the
    model's absolute position embeddings (RoBERTa-likes number positions after the padding id)."""
    limits = []
    if int(hf_tokenizer.model_max_length) < 10**6:  # transformers' placeholder for "not set" is 1e30
        limits.append(int(hf_tokenizer.model_max_length))
    positions = getattr(config, "max_position_embeddings", None)
    if positions and getattr(config, "position_biased_input", True):
        padding = getattr(config, "pad_token_id", None)
        offset = int(padding or 0) + 1 if config.model_type in POSITIONS_AFTER_PADDING else 0
        limits.append(int(positions) - offset)
    if not limits:
        raise UserError(
            f"cannot tell the maximum input length of '{config.name_or_path}': set model_max_length in its "
            "tokenizer (`tokenizer.model_max_length = N; tokenizer.save_pretrained(folder)`)"
        )
    return min(limits)


def pair_separator(
    hf_model: torch.nn.Module, tokenizer: Tokenizer, sep_id: int | None, directory: Path | str
) -> int | None:
    """The separator id after whose first occurrence SequenceClassifier gives token type 1, or None when
    the model sees no token types. Taken from the tokenizer's own pair encoding; UserError when its token
    types are not that rule (SequenceClassifier derives them from the ids, backends never receive them)."""
    import inspect

    pair = tokenizer.encode("first segment", "second segment")
    accepts_types = "token_type_ids" in inspect.signature(hf_model.forward).parameters
    has_types = getattr(hf_model.config, "type_vocab_size", 1) > 1  # DeBERTa-v3: 0, types are ignored
    if not (accepts_types and has_types and any(pair.type_ids)):
        return None
    ids = torch.tensor([pair.ids])
    derived = SequenceClassifier.token_types(ids, sep_id)[0].tolist() if sep_id is not None else None
    if derived != list(pair.type_ids):
        raise UserError(
            f"the tokenizer of '{directory}' gives pairs token types {list(pair.type_ids)}, not 0 up to its "
            "first separator and 1 after it, which is the pair encoding fmm-fast runs; evaluate single texts "
            "or report the model type"
        )
    return int(sep_id)


def _check_first_token_shortcut(model: SequenceClassifier, tokenizer: Tokenizer) -> None:
    """Turn the first-token last layer off where this classifier's logits read more than the first token."""
    if not model.first_token_last_layer.available:
        return
    ids = torch.tensor([tokenizer.encode("a short check sentence", "and a second segment").ids])
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        shortcut, _ = model(ids, mask)
        model.use_first_token_last_layer = False
        full, _ = model(ids, mask)
    model.use_first_token_last_layer = bool((shortcut - full).abs().max() <= SAME_LOGITS)


def is_sequence_classifier(model: str | Path) -> bool:
    """Whether `model` (a folder or cached Hub name) is a fine-tuned classifier to continue from, not a
    pretrained encoder to give a new head: an fmm-fast checkpoint, or a config naming a ...ForSequence-
    Classification architecture."""
    if model == TINY_ROBERTA:
        return False
    directory = resolve_model_dir(resolve_pretrained(str(model)))
    return is_checkpoint(directory) or is_classifier_config(directory)


def load_pretrained(name: str, label_names: list[str]) -> tuple[SequenceClassifier, Tokenizer, ModelInfo]:
    """A Hugging Face encoder (name, local path or MINILM) with a fresh head for `label_names`."""
    from transformers import AutoModelForSequenceClassification

    quiet_transformers()
    resolved = resolve_pretrained(name)
    directory = resolve_model_dir(resolved)
    read_config(directory, new_head=True)
    hf_tokenizer = fast_tokenizer(directory, name)
    try:
        hf_model = AutoModelForSequenceClassification.from_pretrained(
            directory,
            num_labels=len(label_names),
            id2label=dict(enumerate(label_names)),
            label2id={label: i for i, label in enumerate(label_names)},
            ignore_mismatched_sizes=True,
            trust_remote_code=False,
            use_safetensors=True,
        )
    except (OSError, ValueError) as error:
        raise UserError(
            f"cannot load model '{name}': {_first_line(error)}; give a Hugging Face model name "
            f"(needs network or the HF cache), a local model directory, '{MINILM}' or '{TINY_ROBERTA}'"
        ) from error
    info = model_info(hf_model, hf_tokenizer, label_names, source=resolved, trained_by="fmm-fast")
    tokenizer = configure_tokenizer(hf_tokenizer.backend_tokenizer, info.max_length)
    return (
        SequenceClassifier(hf_model, pair_separator(hf_model, tokenizer, hf_tokenizer.sep_token_id, name)),
        tokenizer,
        info,
    )


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__
