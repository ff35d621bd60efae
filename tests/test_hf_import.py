"""Hugging Face classifiers in (training/hf_import.py): eight architectures export within 1e-4 of
transformers' own logits and run an erasure; what cannot work exits 2 with one line; training continues a
classifier with its head and labels; beam curves agree between the folder and its ONNX export.

Every model is a tiny random one (2 layers, width 32) saved with save_pretrained, with a tokenizer trained
here with the `tokenizers` library: WordPiece (BERT-likes), byte-level BPE (RoBERTa, MPNet), Unigram with
SentencePiece pre-tokenization (ALBERT, DeBERTa-v2, XLM-R).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from fmm_fast.backends.loading import load_model
from fmm_fast.cli import main
from fmm_fast.core.datatypes import pad_batch
from fmm_fast.training.models import quiet_transformers

CORPUS = [
    "a gripping beautifully shot film with a tender heart",
    "dull and slow",
    "the plot wanders and the jokes fall flat",
    "mary went to the kitchen and john picked up the apple",
    "it rained all day in the small town by the sea",
    "an honest funny and surprisingly moving story",
    "two hours i will never get back",
    "where is mary",
    "did the reviewer like it",
]
PAIRS = [(text, question) for text in CORPUS[:6] for question in ("where is mary", "was it sunny")]
BERT_SPECIALS = {
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "mask_token": "[MASK]",
}
ROBERTA_SPECIALS = {
    "bos_token": "<s>",
    "eos_token": "</s>",
    "pad_token": "<pad>",
    "unk_token": "<unk>",
    "cls_token": "<s>",
    "sep_token": "</s>",
    "mask_token": "<mask>",
}
WITH_TOKEN_TYPES = ["input_ids", "token_type_ids", "attention_mask"]
WITHOUT_TOKEN_TYPES = ["input_ids", "attention_mask"]
# architecture: (tokenizer family, the tokenizer's model inputs, config overrides)
ARCHITECTURES = {
    "bert": ("wordpiece", WITH_TOKEN_TYPES, {}),
    "distilbert": ("wordpiece", WITHOUT_TOKEN_TYPES, {}),
    "electra": ("wordpiece", WITH_TOKEN_TYPES, {"embedding_size": 16}),
    "roberta": ("bpe", WITHOUT_TOKEN_TYPES, {"type_vocab_size": 1}),
    "mpnet": ("bpe", WITHOUT_TOKEN_TYPES, {}),
    "xlm-roberta": ("unigram-roberta", WITHOUT_TOKEN_TYPES, {"type_vocab_size": 1}),
    "albert": ("unigram-bert", WITH_TOKEN_TYPES, {"embedding_size": 16}),
    "deberta-v2": ("unigram-bert", WITH_TOKEN_TYPES, {"type_vocab_size": 0}),  # as DeBERTa-v3
}
LABELS = {0: "neg", 1: "pos"}
# one optimizer step at a negligible learning rate: what training keeps of its start shows
TINY_TRAINING = ["--epochs", "1", "--max-steps", "1", "--lr", "1e-9", "--batch-size", "4", "--quiet"]


def _bert_template(tokenizer):
    from tokenizers import processors

    return processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[(t, tokenizer.token_to_id(t)) for t in ("[CLS]", "[SEP]")],
    )


def _corpus_pieces() -> tuple[list[str], list[str]]:
    """The corpus's distinct lowercase words and characters, sorted. The WordPiece and Unigram vocabularies
    are built from them instead of trained: the `tokenizers` trainers break ties in an order that changes
    from process to process, and with it the random model's logits (a test that needs erasure to move its
    predictions then passed or failed by chance). Words outside the corpus ("sunny") fall back to
    characters, so subword splitting stays exercised."""
    words = sorted({word for text in CORPUS for word in text.split()})
    characters = sorted({character for word in words for character in word})
    return words, characters


def _wordpiece():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    words, characters = _corpus_pieces()
    pieces = [*BERT_SPECIALS.values(), *words, *characters, *(f"##{c}" for c in characters)]
    ids = {piece: i for i, piece in enumerate(dict.fromkeys(pieces))}  # the word "a" is also a character
    tokenizer = Tokenizer(models.WordPiece(ids, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = _bert_template(tokenizer)
    return tokenizer, BERT_SPECIALS


def _bpe():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    tokenizer.post_processor = processors.RobertaProcessing(
        ("</s>", tokenizer.token_to_id("</s>")), ("<s>", tokenizer.token_to_id("<s>"))
    )
    return tokenizer, ROBERTA_SPECIALS


def _unigram(specials: list[str], unk: str):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    words, characters = _corpus_pieces()
    # a whole word ("▁word") is always likelier than its characters, which only spell unknown words
    scored = [(piece, 0.0) for piece in specials] + [("\u2581", -4.0)]
    scored += [(f"\u2581{word}", -2.0) for word in words] + [(character, -8.0) for character in characters]
    tokenizer = Tokenizer(models.Unigram(scored, unk_id=specials.index(unk), byte_fallback=False))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    return tokenizer


def _unigram_bert():  # ALBERT, DeBERTa-v2/v3: [CLS] A [SEP] B [SEP], types 0 then 1
    tokenizer = _unigram(list(BERT_SPECIALS.values()), "[UNK]")
    tokenizer.post_processor = _bert_template(tokenizer)
    return tokenizer, BERT_SPECIALS


def _unigram_roberta():  # XLM-R: <s> A </s></s> B </s>, no token types
    from tokenizers import processors

    tokenizer = _unigram(["<pad>", "<unk>", "<s>", "</s>", "<mask>"], "<unk>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        special_tokens=[(t, tokenizer.token_to_id(t)) for t in ("<s>", "</s>")],
    )
    return tokenizer, ROBERTA_SPECIALS


@pytest.fixture(scope="session")
def tokenizers():
    """Each tokenizer family trained once: {family: (tokenizers.Tokenizer, special tokens)}."""
    return {
        "wordpiece": _wordpiece(),
        "bpe": _bpe(),
        "unigram-bert": _unigram_bert(),
        "unigram-roberta": _unigram_roberta(),
    }


def save_classifier(
    folder: Path,
    architecture: str,
    tokenizers: dict,
    id2label: dict | None = LABELS,
    head: str = "classifier",
) -> Path:
    """A tiny random `architecture` sequence classifier (or masked LM: head="masked-lm") and its fast
    tokenizer, written with save_pretrained."""
    from transformers import (
        AutoConfig,
        AutoModelForMaskedLM,
        AutoModelForSequenceClassification,
        PreTrainedTokenizerFast,
    )

    quiet_transformers()  # no progress bar on stderr, where the tests read one error line
    family, inputs, overrides = ARCHITECTURES[architecture]
    tokenizer, specials = tokenizers[family]
    hf_tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, model_max_length=64, model_input_names=inputs, **specials
    )
    sizes = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
    if architecture == "distilbert":
        sizes = {"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64}
    labels = (
        {} if id2label is None else {"id2label": id2label, "label2id": {v: k for k, v in id2label.items()}}
    )
    config = AutoConfig.for_model(
        architecture,
        vocab_size=tokenizer.get_vocab_size(),
        max_position_embeddings=80,
        pad_token_id=tokenizer.token_to_id(specials["pad_token"]),
        num_labels=2,
        initializer_range=0.2,  # logits that differ between inputs: erasure curves that move
        **labels,
        **sizes,
        **overrides,
    )
    torch.manual_seed(0)
    auto = AutoModelForMaskedLM if head == "masked-lm" else AutoModelForSequenceClassification
    auto.from_config(config).save_pretrained(folder)
    hf_tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def classifiers(tmp_path_factory, tokenizers):
    """{architecture: its saved folder}, built on first use."""
    root = tmp_path_factory.mktemp("hf")
    built: dict[str, Path] = {}

    def get(architecture: str) -> Path:
        if architecture not in built:
            built[architecture] = save_classifier(root / architecture, architecture, tokenizers)
        return built[architecture]

    return get


@pytest.fixture(scope="session")
def pairs_csv(tmp_path_factory) -> Path:
    """A local dataset of (text, question) pairs labelled neg / pos."""
    path = tmp_path_factory.mktemp("data") / "pairs.csv"
    rng = np.random.default_rng(0)
    words = " ".join(CORPUS).split()
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "question", "label"])
        for row in range(40):
            text = " ".join(rng.choice(words, size=int(rng.integers(4, 10))))
            writer.writerow(
                [text, "where is mary" if row % 2 else "was it sunny", LABELS[int(rng.integers(2))]]
            )
    return path


def data_flags(path: Path) -> list[str]:
    return [
        "--dataset",
        str(path),
        "--text-field",
        "text",
        "--pair-field",
        "question",
        "--label-field",
        "label",
    ]


def transformers_logits(folder: Path, pairs: list[tuple[str, str]]) -> np.ndarray:
    """(N, C) logits of transformers' own classifier on its own tokenizer's encodings (token types included
    where the model takes them), one row at a time: the reference fmm-fast must reproduce."""
    import inspect

    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    hf_tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    takes_types = "token_type_ids" in inspect.signature(model.forward).parameters
    rows = []
    with torch.inference_mode():
        for first, second in pairs:
            encoding = hf_tokenizer.backend_tokenizer.encode(first, second)
            inputs = {"input_ids": torch.tensor([encoding.ids])}
            if takes_types:
                inputs["token_type_ids"] = torch.tensor([encoding.type_ids])
            rows.append(model(**inputs).logits[0].numpy())
    return np.stack(rows)


@pytest.mark.parametrize("architecture", list(ARCHITECTURES))
def test_architecture_exports_within_tolerance_and_erases(
    architecture, classifiers, pairs_csv, tmp_path, capsys, one_torch_thread
):
    folder = classifiers(architecture)
    out = tmp_path / f"{architecture}.onnx"
    assert main(["export", "--model", str(folder), "--out", str(out)]) == 0, capsys.readouterr().err
    loaded = load_model(out)
    assert loaded.info.label_names == ["neg", "pos"] and loaded.info.trained_by == "elsewhere"
    assert loaded.tokenizer.id_to_token(loaded.info.mask_id) in ("[MASK]", "<mask>")
    ids = [np.asarray(loaded.tokenizer.encode(first, second).ids, dtype=np.int64) for first, second in PAIRS]
    logits = loaded.backend.forward(*pad_batch(ids, loaded.info.pad_id)).logits
    reference = transformers_logits(folder, PAIRS)
    assert np.abs(logits - reference).max() <= 1e-4
    margins = reference[:, 1] - reference[:, 0]
    assert np.ptp(margins) > 1e-3  # the inputs matter: a comparison that can fail

    runs = tmp_path / "erasure"
    argv = ["evaluate", "--model", str(folder), *data_flags(pairs_csv), "--limit", "3", "--quiet"]
    assert main([*argv, "--measure", "loo-abs", "--out", str(runs)]) == 0, capsys.readouterr().err
    record = json.loads((runs / "seed-0" / "result.json").read_text())
    assert record["model"]["trained_by"] == "elsewhere" and record["model"]["strategy"] == "unknown"
    assert len(record["curves"]["loo-abs"]["accuracy"]) == 11


def test_pair_encoding_follows_the_tokenizer(classifiers):
    """BERT types its second segment, RoBERTa puts two separators between segments and no types."""
    bert = load_model(classifiers("bert"))
    roberta = load_model(classifiers("roberta"))
    assert bert.backend.model.sep_id == bert.tokenizer.token_to_id("[SEP]")
    assert roberta.backend.model.sep_id is None
    encoding = roberta.tokenizer.encode("a b", "c")
    separator = roberta.tokenizer.token_to_id("</s>")
    assert [a == b == separator for a, b in zip(encoding.ids, encoding.ids[1:], strict=False)].count(
        True
    ) == 1


def _one_error_line(capsys, needle: str) -> None:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fmm-fast: error:") and needle in lines[0], lines


def _no_mask_token(root: Path, classifiers, tokenizers) -> Path:
    folder = shutil.copytree(classifiers("bert"), root / "no-mask")
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config.pop("mask_token")
    config_path.write_text(json.dumps(config))
    return folder


def _config_only(root: Path, architecture: str, **sizes) -> Path:
    from transformers import AutoConfig

    AutoConfig.for_model(architecture, **sizes).save_pretrained(root / architecture)
    return root / architecture


def _slow_tokenizer_only(root: Path, classifiers, tokenizers) -> Path:
    folder = shutil.copytree(classifiers("bert"), root / "slow")
    vocab = tokenizers["wordpiece"][0].get_vocab()
    (folder / "tokenizer.json").unlink()
    (folder / "vocab.txt").write_text("\n".join(sorted(vocab, key=vocab.get)) + "\n")
    return folder


def _weights_only(root: Path, classifiers, tokenizers) -> Path:
    (root / "weights").mkdir()
    shutil.copy(classifiers("bert") / "model.safetensors", root / "weights")
    return root / "weights"


BAD_FOLDERS = {
    "no mask token": (_no_mask_token, "no mask token"),
    "decoder-only": (
        lambda root, *_: _config_only(root, "gpt2", n_layer=1, n_embd=32, n_head=2),
        "decoder-only",
    ),
    "encoder-decoder": (lambda root, *_: _config_only(root, "bart", d_model=32), "encoder-decoder"),
    "slow tokenizer only": (_slow_tokenizer_only, "no fast tokenizer"),
    "weights without config": (_weights_only, "no config.json"),
    "masked LM, no classifier head": (
        lambda root, _, tokenizers: save_classifier(root / "mlm", "bert", tokenizers, head="masked-lm"),
        "not a trained sequence classifier",
    ),
    "Hub name not in the cache": (lambda *_: "fmm-fast-tests/not-cached", "Hugging Face cache"),
}


@pytest.mark.parametrize("case", list(BAD_FOLDERS))
def test_what_cannot_work_exits_2_with_one_line(
    case, classifiers, tokenizers, pairs_csv, tmp_path, capsys, monkeypatch
):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    make, needle = BAD_FOLDERS[case]
    (tmp_path / "models").mkdir()
    model = str(make(tmp_path / "models", classifiers, tokenizers))
    capsys.readouterr()  # what building the folder printed
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main(["export", "--model", model, "--out", str(tmp_path / "m.onnx")]) == 2
    _one_error_line(capsys, needle)
    argv = ["evaluate", "--model", model, *data_flags(pairs_csv), "--out", str(tmp_path / "run"), "--quiet"]
    assert main(argv) == 2
    _one_error_line(capsys, needle)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written


def test_a_cached_hub_name_is_its_snapshot(classifiers, tmp_path, capsys, monkeypatch):
    from huggingface_hub import constants

    repository = tmp_path / "hub" / "models--fmm-fast-tests--tiny-bert"
    shutil.copytree(classifiers("bert"), repository / "snapshots" / "0123abc")
    (repository / "refs").mkdir()
    (repository / "refs" / "main").write_text("0123abc")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    out = tmp_path / "hub.onnx"
    assert main(["export", "--model", "fmm-fast-tests/tiny-bert", "--out", str(out)]) == 0, (
        capsys.readouterr()
    )
    assert load_model(out).info.label_names == ["neg", "pos"]


def test_generic_labels_are_named_or_paired_only_when_the_user_says(
    tokenizers, pairs_csv, tmp_path, capsys, one_torch_thread
):
    folder = save_classifier(tmp_path / "generic", "bert", tokenizers, id2label=None)
    argv = ["evaluate", "--model", str(folder), *data_flags(pairs_csv), "--limit", "2", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "unpaired")]) == 2
    _one_error_line(capsys, "--label-map neg=LABEL_0,pos=LABEL_1")
    assert not (tmp_path / "unpaired").exists()
    paired = ["--label-map", "neg=LABEL_0,pos=LABEL_1", "--out", str(tmp_path / "paired")]
    assert main([*argv, *paired]) == 0, capsys.readouterr().err
    out = tmp_path / "named.onnx"
    assert main(["export", "--model", str(folder), "--out", str(out), "--labels", "neg,pos"]) == 0
    assert load_model(out).info.label_names == ["neg", "pos"]
    assert (
        main(["export", "--model", str(folder), "--out", str(out), "--labels", "a,b,c", "--overwrite"]) == 2
    )
    _one_error_line(capsys, "--labels gives 3 names")
    train = ["train", "--model", str(folder), *data_flags(pairs_csv), "--labels", "neg,pos", *TINY_TRAINING]
    assert main([*train, "--out", str(tmp_path / "train")]) == 0, capsys.readouterr().err
    config = json.loads((tmp_path / "train" / "model" / "config.json").read_text())
    assert config["id2label"] == {"0": "neg", "1": "pos"}


def test_training_continues_a_classifier_with_its_head_and_labels(
    tokenizers, pairs_csv, tmp_path, capsys, one_torch_thread
):
    """The classifier's label order (pos, neg) is not the dataset's (neg, pos): kept, and matched by name."""
    folder = save_classifier(tmp_path / "mine", "bert", tokenizers, id2label={0: "pos", 1: "neg"})
    out = tmp_path / "train"
    argv = ["train", "--model", str(folder), *data_flags(pairs_csv), "--strategy", "masked"]
    assert main([*argv, *TINY_TRAINING, "--out", str(out)]) == 0, capsys.readouterr().err
    config = json.loads((out / "model" / "config.json").read_text())
    assert config["id2label"] == {"0": "pos", "1": "neg"}
    info = json.loads((out / "model" / "fmm_info.json").read_text())["info"]
    assert info["label_names"] == ["pos", "neg"] and info["strategy"] == "masked"
    assert info["trained_by"] == "fmm-fast"
    assert json.loads((out / "run.json").read_text())["model"]["start"] == "classifier"
    start, continued = load_file(folder / "model.safetensors"), load_file(out / "model" / "model.safetensors")
    head = [name for name in start if name.startswith("classifier.")]
    assert head and all(torch.allclose(start[name], continued[name], atol=1e-6) for name in head)


def centred_copy(folder: Path, target: Path, pairs: list[tuple[str, str]]) -> Path:
    """A copy of a BERT classifier whose bias puts its decision boundary in the widest gap between the
    middle half of its margins on `pairs`: it predicts both classes, so erasure changes its predictions,
    and no example sits on the boundary, where float rounding could tip it."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    logits = transformers_logits(folder, pairs)
    margins = np.sort(logits[:, 1] - logits[:, 0])
    middle = margins[len(margins) // 4 : 3 * len(margins) // 4]
    widest = int(np.argmax(np.diff(middle)))
    model = AutoModelForSequenceClassification.from_pretrained(folder)
    with torch.no_grad():
        model.classifier.bias[1] -= float(middle[widest] + middle[widest + 1]) / 2
    model.save_pretrained(target)
    AutoTokenizer.from_pretrained(folder).save_pretrained(target)
    return target


def test_beam_curves_of_the_folder_and_its_onnx_export_agree(classifiers, pairs_csv, tmp_path, capsys):
    """Beam, and grad-l2 (on the ONNX file through its source folder in PyTorch), give the same curves."""
    with pairs_csv.open() as handle:
        pairs = [(row["text"], row["question"]) for row in csv.DictReader(handle)]
    folder = centred_copy(classifiers("bert"), tmp_path / "centred", pairs)
    onnx = tmp_path / "bert.onnx"
    assert main(["export", "--model", str(folder), "--out", str(onnx)]) == 0
    records = {}
    for model in (folder, onnx):
        out = tmp_path / f"run-{model.name}"
        argv = ["evaluate", "--model", str(model), *data_flags(pairs_csv), "--limit", "8", "--quiet"]
        argv += ["--measure", "beam", "--measure", "grad-l2", "--precision", "fp32", "--out", str(out)]
        assert main(argv) == 0, capsys.readouterr().err
        records[model] = json.loads((out / "seed-0" / "result.json").read_text())
    assert records[onnx]["model"]["source"] == str(folder)
    assert records[onnx]["model"]["backend"].startswith("onnxruntime")
    for measure in ("beam-sign-10", "grad-l2"):
        assert records[folder]["curves"][measure] == records[onnx]["curves"][measure]
    beam = records[folder]["curves"]["beam-sign-10"]["accuracy"]
    assert len(set(beam)) > 1  # the curve moves: agreement is not of two flat lines


def test_a_loaded_model_and_tokenizer_pair_is_the_folder_they_save_to(
    classifiers, pairs_csv, tmp_path, monkeypatch
):
    """fmm_fast's functions take a loaded transformers (model, tokenizer) pair: saved once into the cache,
    named by its content (the same pair again is the same folder), and erased like the folder it came
    from."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    import fmm_fast
    from fmm_fast.api.inputs import model_source

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = classifiers("bert")
    pair = (AutoModelForSequenceClassification.from_pretrained(folder), AutoTokenizer.from_pretrained(folder))
    saved = model_source(pair)
    assert saved.parent == tmp_path / "cache" / "fmm-fast" / "models" and model_source(pair) == saved
    assert [p.name for p in saved.parent.iterdir()] == [saved.name]  # no staging folder left behind
    flags = {
        "text_field": "text",
        "pair_field": "question",
        "label_field": "label",
        "limit": 3,
        "quiet": True,
    }
    runs = {
        name: fmm_fast.evaluate(
            model, dataset=str(pairs_csv), measure="loo-abs", out=tmp_path / name, **flags
        )
        for name, model in (("pair", pair), ("folder", folder))
    }
    curves = [run.records["seed-0/result.json"]["curves"]["loo-abs"] for run in runs.values()]
    assert curves[0] == curves[1]
    with torch.no_grad():
        pair[0].classifier.bias += 1.0  # another model: another folder
    assert model_source(pair) != saved
