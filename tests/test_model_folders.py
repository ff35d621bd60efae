"""A user's model folder is checked whole before any work (training/folder_check.py), and no code from it
ever runs: every damaged folder exits 2 with one line naming the file and the field; a folder asking for
its own code (auto_map, an unknown model_type) is refused on every route in (a folder, an fmm-fast
checkpoint, a cached Hub name, the checkpoint an .onnx names for gradient measures), with "y" waiting on
stdin; no `from_pretrained` call in fmm_fast lacks trust_remote_code=False; an .onnx whose metadata does
not fit its graph is refused.

Folders are copies of one tiny random BERT classifier (2 layers, width 32) saved in the test.
"""

from __future__ import annotations

import ast
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from test_hf_import import _wordpiece, save_classifier

from fmm_fast.backends.loading import gradient_backend, load_model
from fmm_fast.cli import main
from fmm_fast.core.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
MARKER = "custom-code-ran"


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory) -> Path:
    """A tiny random BERT sequence classifier (labels neg, pos) with its fast tokenizer, saved once."""
    root = tmp_path_factory.mktemp("folders")
    return save_classifier(root / "bert", "bert", {"wordpiece": _wordpiece()})


def _edit_json(name: str, change: Callable[[dict], object]) -> Callable[[Path], None]:
    """A damage: `change` applied to the folder's JSON file `name` (its return value, if not None, is
    written in the file's place)."""

    def damage(folder: Path) -> None:
        path = folder / name
        value = json.loads(path.read_text())
        replaced = change(value)
        path.write_text(json.dumps(value if replaced is None else replaced))

    return damage


def _set(name: str, **fields) -> Callable[[Path], None]:
    return _edit_json(name, lambda value: value.update(fields))


def _weights(content: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        path = folder / "model.safetensors"
        path.write_bytes(content(path.read_bytes()))

    return damage


def _pickle_only(folder: Path) -> None:
    import torch
    from safetensors.torch import load_file

    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()


def _smaller_embedding(folder: Path) -> None:
    """The model resized to 10 fewer tokens than its tokenizer has (config and weights agree)."""
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=False)
    model.resize_token_embeddings(model.config.vocab_size - 10)
    model.save_pretrained(folder)


def _three_labels(config: dict) -> None:
    config.update(num_labels=3, id2label={"0": "a", "1": "b", "2": "c"}, label2id={"a": 0, "b": 1, "c": 2})


# damage: (what is done to the folder, the file and the field the one error line must name)
DAMAGED = {
    "config a JSON list": (_edit_json("config.json", lambda value: [value]), "config.json", "not an object"),
    "config null": (_edit_json("config.json", lambda value: "null"), "config.json", "not an object"),
    "num_labels of the wrong type": (_set("config.json", num_labels="2"), "config.json", "num_labels"),
    "hidden_size of the wrong type": (_set("config.json", hidden_size=32.5), "config.json", "hidden_size"),
    "num_labels 0": (_set("config.json", num_labels=0, id2label={}), "config.json", "num_labels is 0"),
    "id2label with a gap": (
        _set("config.json", id2label={"0": "neg", "2": "pos"}),
        "config.json",
        "id2label keys",
    ),
    "duplicate label names": (_set("config.json", id2label={"0": "x", "1": "x"}), "config.json", "id2label"),
    "empty label name": (_set("config.json", id2label={"0": "neg", "1": " "}), "config.json", "id2label"),
    "pickle weights only": (_pickle_only, "pytorch_model.bin", "pickle"),
    "empty safetensors": (_weights(lambda data: b""), "model.safetensors", "safetensors"),
    "truncated safetensors": (
        _weights(lambda data: data[: len(data) // 2]),
        "model.safetensors",
        "safetensors",
    ),
    "random safetensors": (_weights(lambda data: os.urandom(4096)), "model.safetensors", "safetensors"),
    "tokenizer of another schema": (
        _edit_json("tokenizer.json", lambda value: {"version": "1.0", "vocab": ["a"]}),
        "tokenizer.json",
        "tokenizers file",
    ),
    "tokenizer larger than the embedding": (_smaller_embedding, "tokenizer.json", "word embedding"),
    "mask token outside the vocabulary": (
        _set("tokenizer_config.json", mask_token="<no such token>"),
        "tokenizer_config.json",
        "mask_token",
    ),
    "model_max_length not a number": (
        _set("tokenizer_config.json", model_max_length="long"),
        "tokenizer_config.json",
        "model_max_length",
    ),
    "pad id outside the vocabulary": (_set("config.json", pad_token_id=10**6), "config.json", "pad_token_id"),
    "vocab_size unlike the embedding": (_set("config.json", vocab_size=7), "config.json", "vocab_size"),
    "max_position_embeddings 1": (
        _set("config.json", max_position_embeddings=1),
        "config.json",
        "max_position_embeddings",
    ),
    "head shape unlike num_labels": (
        _edit_json("config.json", _three_labels),
        "model.safetensors",
        "num_labels",
    ),
    "weights unlike the width": (
        _set("config.json", intermediate_size=48),
        "model.safetensors",
        "intermediate.dense.weight",
    ),
    "custom model_type": (_set("config.json", model_type="my-bert"), "config.json", "model_type"),
    "auto_map in config": (
        _set("config.json", auto_map={"AutoModelForSequenceClassification": "evil.Model"}),
        "config.json",
        "auto_map",
    ),
    "auto_map in tokenizer_config": (
        _set("tokenizer_config.json", auto_map={"AutoTokenizer": ["evil.Tokenizer", None]}),
        "tokenizer_config.json",
        "auto_map",
    ),
}


def _one_error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fmm-fast: error:"), lines
    return lines[0]


@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_damaged_folder_exits_2_naming_file_and_field(case, bert_folder, tmp_path, capsys):
    damage, file, field = DAMAGED[case]
    folder = shutil.copytree(bert_folder, tmp_path / "model")
    damage(folder)
    capsys.readouterr()
    out = tmp_path / "model.onnx"
    assert main(["export", "--model", str(folder), "--out", str(out)]) == 2
    line = _one_error_line(capsys)
    assert f"{folder / file}'" in line and field in line, line
    assert not out.exists()


def test_an_intact_folder_passes(bert_folder, tmp_path, capsys):
    """The check refuses damage, not folders: the copy every case starts from exports."""
    out = tmp_path / "model.onnx"
    assert main(["export", "--model", str(bert_folder), "--out", str(out)]) == 0, capsys.readouterr().err


def test_renamed_labels_may_replace_repeated_ones(bert_folder, tmp_path, capsys):
    folder = shutil.copytree(bert_folder, tmp_path / "model")
    _set("config.json", id2label={"0": "x", "1": "x"})(folder)
    out = tmp_path / "model.onnx"
    argv = ["export", "--model", str(folder), "--out", str(out), "--labels", "neg,pos"]
    assert main(argv) == 0, capsys.readouterr().err
    assert load_model(out).info.label_names == ["neg", "pos"]


def _with_custom_code(folder: Path) -> Path:
    """`folder` with a config of a model type transformers lacks, whose auto_map names a module of the
    folder that leaves MARKER beside the folder on import (transformers asks "[y/N]" on stdin for it)."""
    marker = folder.parent / MARKER  # transformers imports a copy of the module from its own cache
    (folder / "evil.py").write_text(f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n")
    _set(
        "config.json",
        model_type="fmm-evil",
        auto_map={"AutoConfig": "evil.Config", "AutoModelForSequenceClassification": "evil.Model"},
    )(folder)
    return folder


def _as_checkpoint(folder: Path, tiny_babi) -> Path:
    """An fmm-fast checkpoint (the tiny bAbI one) whose config asks for custom code."""
    shutil.rmtree(folder, ignore_errors=True)
    return _with_custom_code(shutil.copytree(tiny_babi[0], folder))


def _as_hub_name(folder: Path, tiny_babi) -> str:
    """A Hub name whose cached snapshot asks for custom code (HF_HUB_CACHE: the snapshot's hub folder)."""
    snapshot = folder.parent / "hub" / "models--someone--custom" / "snapshots" / "0123abc"
    shutil.move(folder, snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0123abc")
    return "someone/custom"


ROUTES = {
    "folder": lambda folder, _: str(folder),
    "checkpoint": lambda folder, tiny_babi: str(_as_checkpoint(folder, tiny_babi)),
    "cached Hub name": _as_hub_name,
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_a_folders_own_code_never_runs_even_with_yes_on_stdin(route, bert_folder, tiny_babi, tmp_path):
    folder = _with_custom_code(shutil.copytree(bert_folder, tmp_path / "model"))
    model = ROUTES[route](folder, tiny_babi)
    environment = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "HF_MODULES_CACHE": str(tmp_path / "modules"),  # where transformers would copy the module to
    }
    done = subprocess.run(
        [sys.executable, "-m", "fmm_fast", "export", "--model", model, "--out", str(tmp_path / "m.onnx")],
        input="y\n" * 4,
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert not (tmp_path / MARKER).exists()  # the folder's module was never imported
    assert "[y/N]" not in done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "auto_map" in lines[0] and "never runs" in lines[0], lines


def test_the_gradient_path_of_an_onnx_never_runs_its_folders_code(tiny_babi, tmp_path, monkeypatch):
    """The checkpoint an .onnx names (its source) is opened, and checked, like any other folder."""
    folder = _as_checkpoint(tmp_path / "model", tiny_babi)
    onnx_path = shutil.copy(tiny_babi[1], tmp_path / "model.onnx")
    loaded = load_model(onnx_path)
    # the recorded source: now a folder asking for its own code (and no digest of the checkpoint exported
    # from, as in an .onnx exported before digests: the folder check alone stands between it and its code)
    loaded.backend.info = replace(loaded.info, source=str(folder), source_digest=None)
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n" * 4))
    with pytest.raises(UserError, match="auto_map"):
        gradient_backend(loaded)
    assert not (tmp_path / MARKER).exists()


def test_every_from_pretrained_call_refuses_remote_code():
    """A code check: each `from_pretrained(...)` / `from_config(...)` call in fmm_fast passes
    trust_remote_code=False (transformers' default None prompts, and runs the code on "y")."""
    calls, lacking = 0, []
    for path in sorted((ROOT / "fmm_fast").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            is_load = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            if not (is_load and node.func.attr in ("from_pretrained", "from_config")):
                continue
            calls += 1
            keywords = {k.arg: k.value for k in node.keywords}
            refused = keywords.get("trust_remote_code")
            if not (isinstance(refused, ast.Constant) and refused.value is False):
                lacking.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert calls >= 5 and not lacking, lacking


def _onnx_with_info(source: Path, target: Path, **fields) -> Path:
    """A copy of the .onnx `source` whose ModelInfo metadata has `fields` changed."""
    import onnx

    from fmm_fast.export.onnx_format import METADATA_INFO

    model = onnx.load(str(source))
    for prop in model.metadata_props:
        if prop.key == METADATA_INFO:
            prop.value = json.dumps({**json.loads(prop.value), **fields})
    onnx.save(model, str(target))
    return target


ONNX_DAMAGE = {
    "labels unlike the logits": ({"label_names": ["a", "b", "c", "d", "e", "f", "g"]}, "label_names"),
    "mask id outside the vocabulary": ({"mask_id": 10**6}, "mask_id"),
    "pad id outside the vocabulary": ({"pad_id": 10**6}, "pad_id"),
    "max length beyond the positions": ({"max_length": 10**6}, "max_length"),
}


@pytest.mark.parametrize("case", list(ONNX_DAMAGE))
def test_onnx_metadata_that_does_not_fit_its_graph_is_refused(case, tiny_babi, tmp_path):
    fields, field = ONNX_DAMAGE[case]
    path = _onnx_with_info(tiny_babi[1], tmp_path / "model.onnx", **fields)
    with pytest.raises(UserError) as refused:
        load_model(path)
    message = str(refused.value)
    assert "\n" not in message and str(path) in message and field in message, message


def test_a_checkpoint_tells_other_tools_its_max_length_and_special_tokens(tiny_babi):
    """AutoTokenizer on an fmm-fast checkpoint: the model's maximum length (not transformers' 1e30
    placeholder, under which tools stop truncating) and its mask, pad, unknown, cls and sep tokens."""
    from transformers import AutoTokenizer

    info = load_model(tiny_babi[0]).info
    hf_tokenizer = AutoTokenizer.from_pretrained(tiny_babi[0], trust_remote_code=False)
    assert hf_tokenizer.model_max_length == info.max_length
    assert (hf_tokenizer.mask_token_id, hf_tokenizer.pad_token_id) == (info.mask_id, info.pad_id)
    assert (hf_tokenizer.cls_token, hf_tokenizer.sep_token, hf_tokenizer.unk_token) == (
        "<s>",
        "</s>",
        "<unk>",
    )
    long = hf_tokenizer("mary went to the kitchen " * 400, truncation=True)["input_ids"]
    assert len(long) == info.max_length


def test_a_template_tokenizers_framing_tokens_are_named():
    """BERT's template post-processor: [CLS] before the text, [SEP] after it."""
    from fmm_fast.core.datatypes import ModelInfo
    from fmm_fast.training.tokenizer_files import tokenizer_config

    tokenizer, _ = _wordpiece()
    ids = [tokenizer.token_to_id(t) for t in ("[MASK]", "[PAD]")]
    info = ModelInfo(["neg", "pos"], ids[0], ids[1], ids, 64, 2, 32)
    config = json.loads(tokenizer_config(tokenizer, info))
    assert config["model_max_length"] == 64
    expected = {"cls_token": "[CLS]", "sep_token": "[SEP]", "unk_token": "[UNK]", "mask_token": "[MASK]"}
    assert expected.items() <= config.items()


def test_no_lock_file_outlives_its_run(bert_folder, tmp_path, capsys):
    from fmm_fast.core.outputs import output_lock

    out = tmp_path / "model.onnx"
    assert main(["export", "--model", str(bert_folder), "--out", str(out)]) == 0, capsys.readouterr().err
    assert out.is_file() and not list(tmp_path.glob("*.lock")) and not list(tmp_path.glob(".*.lock"))
    directory = tmp_path / "run"
    with output_lock(directory):
        lock = next(directory.iterdir())
        with pytest.raises(UserError, match="another fmm-fast process"), output_lock(directory):
            pass
        assert lock.exists()  # the refused taker leaves the holder's lock alone
    assert list(directory.iterdir()) == []
    with pytest.raises(RuntimeError), output_lock(tmp_path / "failed"):
        raise RuntimeError("the run fails")
    assert not (tmp_path / "failed").exists()


def test_a_lock_taken_on_a_removed_lock_file_is_taken_again(tmp_path, monkeypatch):
    """A holder that ends between another process's open and flock of the lock file removes that file:
    the flock then guards nothing (a third process would lock a new file), so the taker locks again."""
    import fcntl

    from fmm_fast.core import outputs

    real_flock, calls = fcntl.flock, []

    def holder_ends_first(handle, operation):
        if not calls:  # the earlier holder finishes now: it removes the lock file this handle opened
            (tmp_path / "run" / outputs.LOCK_NAME).unlink()
        calls.append(os.fstat(handle.fileno()).st_ino)
        return real_flock(handle, operation)

    monkeypatch.setattr(outputs.fcntl, "flock", holder_ends_first)
    with outputs.output_lock(tmp_path / "run"):
        assert len(calls) == 2  # locked twice: the second time the file in place
        assert calls[1] == os.stat(tmp_path / "run" / outputs.LOCK_NAME).st_ino


def test_the_examples_out_that_is_a_file_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    """Not a NotADirectoryError after the whole fine-tuning: one line at once, the file untouched."""
    import importlib.util

    path = ROOT / "examples" / "bring_your_own_classifier.py"
    spec = importlib.util.spec_from_file_location("bring_your_own_classifier", path)
    example = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, example)  # its dataclass looks its module up
    spec.loader.exec_module(example)
    (tmp_path / "notes.txt").write_text("mine")
    assert example.main(["--out", str(tmp_path / "notes.txt"), "--tiny"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "is a file" in lines[0], lines
    assert (tmp_path / "notes.txt").read_text() == "mine" and sorted(tmp_path.iterdir()) == [
        tmp_path / "notes.txt"
    ]


def test_a_path_typed_as_one_never_becomes_a_hub_name(tmp_path, capsys, monkeypatch):
    """`./org/name` that does not exist is a missing path (one line), not the Hub model org/name."""
    monkeypatch.chdir(tmp_path)
    assert main(["export", "--model", "./org/name", "--out", str(tmp_path / "m.onnx")]) == 2
    line = _one_error_line(capsys)
    assert "'./org/name' does not exist" in line and "Hugging Face cache" not in line, line


@pytest.mark.parametrize("command", ["export", "evaluate", "check"])
def test_a_base_model_name_where_a_classifier_is_needed_names_what_works(command, tmp_path, capsys):
    """`--model minilm` on a command that needs a trained classifier: no `hf download minilm` advice."""
    argv = [command, "--model", "minilm", "--out", str(tmp_path / ("m.onnx" if command == "export" else "o"))]
    if command != "export":
        argv += ["--dataset", "babi-1", "--limit", "2"]
    assert main(argv) == 2
    line = _one_error_line(capsys)
    assert "base model" in line and "hf download" not in line and "checkpoint folder" in line, line
