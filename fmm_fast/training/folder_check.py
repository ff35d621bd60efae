"""One validation of a user's model, before anything loads from it: config, tokenizer and weights checked
against each other, and the metadata of an fmm-fast .onnx against its graph.

Every failure is a UserError of one line naming the file and the field, so a damaged folder never reaches
transformers, safetensors or tokenizers (whose errors name neither) and never runs code: a config or
tokenizer config that asks for the folder's own Python (an `auto_map`, or a model type transformers does
not define) is refused here, and weights are read only from safetensors files (pickle files can run code
when read, even with torch's weights_only restrictions, whose guard has had escapes).

check_model_folder(directory) covers a Hugging Face folder and an fmm-fast checkpoint; check_onnx_metadata
covers an .onnx. Torch-free at import (the evaluation install checks .onnx files); the weights' shapes
against the config build the model on PyTorch's meta device (no memory, no initialisation).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn

from tokenizers import Tokenizer

from fmm_fast.core.datatypes import ModelInfo
from fmm_fast.core.errors import UserError
from fmm_fast.core.reading import shape_error
from fmm_fast.training.checkpoint_layout import (
    CONFIG_FILE,
    INFO_FILE,
    TOKENIZER_CONFIG_FILE,
    TOKENIZER_FILE,
)

SPECIAL_TOKENS_FILE = "special_tokens_map.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
REMOTE_CODE_FIX = (
    "fmm-fast never runs a model folder's own code: save the model as a built-in transformers "
    "architecture (BERT, RoBERTa, DeBERTa, ...) without auto_map"
)
SAVE_AGAIN = "save the model again with save_pretrained"
# The config fields fmm-fast reads, each optional, with the JSON type it must have where present.
CONFIG_SHAPE: dict[str, Any] = {
    "model_type": str,
    "architectures?": ([str], None),
    "num_labels?": int,
    "id2label?": {"*": str},
    "label2id?": {"*": int},
    "vocab_size?": int,
    "hidden_size?": int,
    "dim?": int,  # DistilBERT's names for the width and depth
    "num_hidden_layers?": int,
    "n_layers?": int,
    "max_position_embeddings?": int,
    "type_vocab_size?": int,
    "pad_token_id?": (int, None),
    "is_encoder_decoder?": bool,
}


def check_model_folder(directory: Path, new_head: bool = False, label_names: list[str] | None = None) -> None:
    """UserError (one line: file, field, fix) unless the folder's config, tokenizer and weights agree.

    new_head: the folder is a pretrained encoder that training gives a new head (its labels and head are
    not read). label_names: the user's names for the labels (`--labels`), which replace the config's own,
    so the config's may be generic or repeated.
    """
    config = read_config_object(directory)
    _check_no_custom_code(directory, config)
    if not new_head:
        _check_labels(directory, config, renamed=label_names is not None)
    tokenizer = _read_tokenizer(directory)
    weights = _weight_shapes(directory)
    rows = _embedding_rows_of(weights)
    vocab_size = config.get("vocab_size")
    if rows is not None and vocab_size is not None and rows != vocab_size:
        _fail(directory, CONFIG_FILE, f"vocab_size is {vocab_size} but the word embedding has {rows} rows")
    rows = rows if rows is not None else vocab_size
    if tokenizer is not None and rows is not None:
        _check_tokenizer_fits(directory, tokenizer, rows)
    pad = config.get("pad_token_id")
    if pad is not None and rows is not None and not 0 <= pad < rows:
        _fail(directory, CONFIG_FILE, f"pad_token_id {pad} is outside the vocabulary (0..{rows - 1})")
    positions = config.get("max_position_embeddings")
    if positions is not None and positions < 2:
        _fail(directory, CONFIG_FILE, f"max_position_embeddings is {positions}; it must be at least 2")
    if (directory / INFO_FILE).is_file():
        _check_checkpoint_info(directory, config, tokenizer, rows)
    _check_weight_shapes(directory, weights, new_head)


def read_config_object(directory: Path) -> dict:
    """config.json as a JSON object whose fields have the types transformers expects."""
    path = directory / CONFIG_FILE
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise UserError(f"cannot read '{path}' ({_first_line(error)}); {SAVE_AGAIN}") from error
    if not isinstance(config, dict):
        _fail(directory, CONFIG_FILE, f"holds {_json_kind(config)}, not an object; {SAVE_AGAIN}")
    if error := shape_error(config, CONFIG_SHAPE):
        _fail(directory, CONFIG_FILE, f"{error}; {SAVE_AGAIN}")
    return config


def _check_no_custom_code(directory: Path, config: dict) -> None:
    from transformers import CONFIG_MAPPING

    if "auto_map" in config:
        _fail(directory, CONFIG_FILE, f"auto_map asks to run the folder's own code; {REMOTE_CODE_FIX}")
    if config["model_type"] not in CONFIG_MAPPING:
        _fail(
            directory,
            CONFIG_FILE,
            f"model_type '{config['model_type']}' is not a transformers architecture, so it needs the "
            f"folder's own code; {REMOTE_CODE_FIX}",
        )
    tokenizer_config = _json_object(directory, TOKENIZER_CONFIG_FILE)
    if "auto_map" in tokenizer_config:
        _fail(
            directory,
            TOKENIZER_CONFIG_FILE,
            f"auto_map asks to run the folder's own tokenizer code; {REMOTE_CODE_FIX}",
        )


def _check_labels(directory: Path, config: dict, renamed: bool) -> None:
    """num_labels ≥ 1; id2label keys 0..n-1 without gaps; distinct, non-empty names (unless renamed)."""
    id2label = config.get("id2label")
    count = config.get("num_labels", len(id2label) if id2label else 2)
    if count < 1:
        _fail(directory, CONFIG_FILE, f"num_labels is {count}; a classifier has at least 1 label")
    if id2label is None:
        return
    if set(id2label) != {str(i) for i in range(len(id2label))}:
        keys = ", ".join(sorted(id2label))
        _fail(
            directory, CONFIG_FILE, f"id2label keys are {keys}; they must be 0..{len(id2label) - 1}, no gaps"
        )
    if "num_labels" in config and len(id2label) != count:
        _fail(directory, CONFIG_FILE, f"id2label has {len(id2label)} labels but num_labels is {count}")
    if renamed:
        return
    names = [id2label[str(i)] for i in range(len(id2label))]
    if any(not name.strip() for name in names) or len(set(names)) != len(names):
        _fail(
            directory,
            CONFIG_FILE,
            f"id2label names {names} are empty or repeated; give each label its own name in id2label "
            "(export and train also take --labels NAME,NAME,... in the model's label order)",
        )


def _read_tokenizer(directory: Path) -> Tokenizer | None:
    """tokenizer.json as a `tokenizers.Tokenizer`; None where the folder has none (a later step says so)."""
    path = directory / TOKENIZER_FILE
    if not path.is_file():
        return None
    try:
        return Tokenizer.from_file(str(path))
    except Exception as error:  # tokenizers raises a bare Exception for a file of another schema
        _fail(
            directory,
            TOKENIZER_FILE,
            f"is not a tokenizers file ({_first_line(error)}); save the tokenizer again with save_pretrained",
        )


def _check_tokenizer_fits(directory: Path, tokenizer: Tokenizer, rows: int) -> None:
    """Every token id (added tokens included) indexes the embedding; mask and pad tokens are tokens."""
    largest = max(tokenizer.get_vocab(with_added_tokens=True).values(), default=-1)
    if largest >= rows:
        _fail(
            directory,
            TOKENIZER_FILE,
            f"vocabulary reaches id {largest} but the model's word embedding has {rows} rows; the "
            "tokenizer does not belong to this model",
        )
    specials = {
        **_json_object(directory, SPECIAL_TOKENS_FILE),
        **_json_object(directory, TOKENIZER_CONFIG_FILE),
    }
    for field in ("mask_token", "pad_token"):
        token = specials.get(field)
        token = token.get("content") if isinstance(token, dict) else token
        if isinstance(token, str) and tokenizer.token_to_id(token) is None:
            _fail(
                directory, TOKENIZER_CONFIG_FILE, f"{field} '{token}' is not in {TOKENIZER_FILE}'s vocabulary"
            )
    limit = specials.get("model_max_length")
    if limit is not None and (not isinstance(limit, int | float) or isinstance(limit, bool) or limit < 2):
        _fail(directory, TOKENIZER_CONFIG_FILE, f"model_max_length is {limit!r}; give a number of tokens ≥ 2")


def _check_checkpoint_info(
    directory: Path, config: dict, tokenizer: Tokenizer | None, rows: int | None
) -> None:
    """An fmm-fast checkpoint's fmm_info.json against its config, tokenizer and embedding."""
    try:
        record = json.loads((directory / INFO_FILE).read_text())
        info = ModelInfo.from_dict(record.get("info") if isinstance(record, dict) else record)
    except (OSError, ValueError) as error:
        _fail(directory, INFO_FILE, f"is damaged ({_first_line(error)}); re-train it with `fmm-fast train`")
    size = tokenizer.get_vocab_size(with_added_tokens=True) if tokenizer is not None else None
    for field, value in (("mask_id", info.mask_id), ("pad_id", info.pad_id)):
        if (rows is not None and not 0 <= value < rows) or (
            tokenizer and tokenizer.id_to_token(value) is None
        ):
            _fail(
                directory,
                INFO_FILE,
                f"{field} {value} is outside the vocabulary ({size} tokens, {rows} rows)",
            )
    count = config.get("num_labels", len(config.get("id2label") or {}) or 2)
    if len(info.label_names) != count:
        _fail(
            directory, INFO_FILE, f"label_names has {len(info.label_names)} names, config.json {count} labels"
        )
    positions = config.get("max_position_embeddings")
    if positions is not None and info.max_length > positions:
        _fail(
            directory, INFO_FILE, f"max_length {info.max_length} exceeds max_position_embeddings {positions}"
        )


def _weight_shapes(directory: Path) -> dict[str, list[int]]:
    """{tensor name: shape} of the folder's safetensors files, read from their headers; UserError for
    pickle-only weights and for a file safetensors cannot read (empty, truncated, not safetensors)."""
    from safetensors import safe_open

    files = sorted(directory.glob("*.safetensors"))
    if not files:
        pickles = sorted(p.name for p in directory.iterdir() if p.suffix in PICKLE_SUFFIXES)
        if pickles:
            _fail(
                directory,
                pickles[0],
                "holds pickle weights, which can run code when read; fmm-fast reads safetensors only: "
                "save the model with `model.save_pretrained(folder)` (safetensors by default)",
            )
        _fail(directory, "model.safetensors", f"is missing: the folder has no weights; {SAVE_AGAIN}")
    shapes: dict[str, list[int]] = {}
    for path in files:
        try:
            with safe_open(str(path), framework="numpy") as weights:
                for name in weights.keys():  # noqa: SIM118 (safe_open is no mapping)
                    shapes[name] = list(weights.get_slice(name).get_shape())
        except Exception as error:  # safetensors' SafetensorError and OSError alike: unreadable file
            _fail(directory, path.name, f"is not readable safetensors ({_first_line(error)}); {SAVE_AGAIN}")
    return shapes


def _embedding_rows_of(shapes: dict[str, list[int]]) -> int | None:
    rows = [shape[0] for name, shape in shapes.items() if name.endswith("word_embeddings.weight") and shape]
    return rows[0] if rows else None


def _check_weight_shapes(directory: Path, shapes: dict[str, list[int]], new_head: bool) -> None:
    """Each tensor of the file has the shape the config's model gives it (built on the meta device)."""
    if not shapes:
        return
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    try:
        config = AutoConfig.from_pretrained(directory, trust_remote_code=False)
        with torch.device("meta"):
            model = AutoModelForSequenceClassification.from_config(config, trust_remote_code=False)
    except (ValueError, TypeError, KeyError, AttributeError, OSError) as error:
        _fail(directory, CONFIG_FILE, f"does not describe a sequence classifier ({_first_line(error)})")
    prefix = f"{model.base_model_prefix}."
    for name, tensor in model.state_dict().items():
        if new_head and not name.startswith(prefix):
            continue  # the new head replaces whatever the folder holds there
        saved = shapes.get(name, shapes.get(name.removeprefix(prefix)))
        if saved is not None and saved != list(tensor.shape):
            field = _field_of(name)
            _fail(
                directory,
                _weights_file(directory),
                f"tensor {name} has shape {saved} but config.json ({field}) gives {list(tensor.shape)}",
            )


def _field_of(tensor_name: str) -> str:
    """The config field that sizes a tensor, as far as its name tells."""
    if "word_embeddings" in tensor_name:
        return "vocab_size"
    if "position_embeddings" in tensor_name:
        return "max_position_embeddings"
    if "token_type_embeddings" in tensor_name:
        return "type_vocab_size"
    if tensor_name.startswith(("classifier", "score", "out_proj")) or ".out_proj." in tensor_name:
        return "num_labels"
    return "hidden sizes"


def _weights_file(directory: Path) -> str:
    return next(iter(sorted(p.name for p in directory.glob("*.safetensors"))), "weights")


def check_onnx_metadata(path: Path, graph_model: Any, info: ModelInfo, tokenizer: Tokenizer) -> None:
    """An .onnx's metadata (ModelInfo, tokenizer) against its graph (an onnx.ModelProto): the labels
    against the logits' width, mask and pad ids against the vocabulary and the word embedding, the maximum
    length against the position embedding."""
    where = f"'{path}' metadata"
    fix = "the metadata does not fit the model; re-export it with `fmm-fast export`"
    width = _logits_width(graph_model)
    if width is not None and width != len(info.label_names):
        raise UserError(f"{where}: label_names has {len(info.label_names)} labels, the logits {width}; {fix}")
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    for field, value in (("mask_id", info.mask_id), ("pad_id", info.pad_id)):
        if tokenizer.id_to_token(value) is None:
            raise UserError(
                f"{where}: {field} {value} is not in its tokenizer's vocabulary ({size} tokens); {fix}"
            )
    rows = onnx_embedding_rows(graph_model)
    if rows is not None and size > rows:
        raise UserError(
            f"{where}: its tokenizer has {size} tokens but the word-embedding matrix {rows} rows; {fix}"
        )
    positions = _onnx_position_rows(graph_model)
    if positions is not None and info.max_length > positions:
        raise UserError(
            f"{where}: max_length {info.max_length} exceeds the {positions} position embeddings; {fix}"
        )


def _logits_width(graph_model: Any) -> int | None:
    for output in graph_model.graph.output:
        if output.name == "logits":
            dims = output.type.tensor_type.shape.dim
            return dims[-1].dim_value if dims and dims[-1].HasField("dim_value") else None
    return None


def onnx_embedding_rows(graph_model: Any) -> int | None:
    """Rows of the table input_ids (or a Cast of it) index, in a Gather or an EmbedLayerNormalization."""
    shapes = {init.name: list(init.dims) for init in graph_model.graph.initializer}
    token_ids = {"input_ids"}
    for node in graph_model.graph.node:  # nodes are in topological order
        if node.op_type == "Cast" and node.input[0] in token_ids:
            token_ids.add(node.output[0])
        elif node.op_type == "Gather" and node.input[1] in token_ids and node.input[0] in shapes:
            return shapes[node.input[0]][0]
        elif node.op_type == "EmbedLayerNormalization" and node.input[0] in token_ids:
            return shapes[node.input[2]][0] if node.input[2] in shapes else None
    return None


def _onnx_position_rows(graph_model: Any) -> int | None:
    """Rows of the position-embedding table, where an initializer is named as one (absolute positions)."""
    rows = [
        init.dims[0]
        for init in graph_model.graph.initializer
        if "position_embeddings" in init.name and len(init.dims) == 2
    ]
    return rows[0] if rows else None


def _json_object(directory: Path, name: str) -> dict:
    """A JSON object file of the folder; {} where it is absent, UserError where it is no JSON object."""
    path = directory / name
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        _fail(directory, name, f"is not readable JSON ({_first_line(error)}); {SAVE_AGAIN}")
    if not isinstance(value, dict):
        _fail(directory, name, f"holds {_json_kind(value)}, not an object; {SAVE_AGAIN}")
    return value


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    return {list: "a list", str: "a string", bool: "true/false"}.get(type(value), "a number")


def _fail(directory: Path, file: str, problem: str) -> NoReturn:
    raise UserError(f"'{directory / file}': {problem}")


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__
