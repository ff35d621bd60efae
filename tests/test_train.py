"""Masked fine-tuning: optimizer recipe, batch order, a small end-to-end run, determinism and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from transformers import RobertaConfig, RobertaForSequenceClassification

from fmm_fast.backends.loading import load_model
from fmm_fast.backends.options import BackendOptions
from fmm_fast.cli import main
from fmm_fast.core.datatypes import pad_batch
from fmm_fast.core.metrics import compute_metrics
from fmm_fast.core.records import write_record
from fmm_fast.core.settings import TrainSettings
from fmm_fast.data.options import DataOptions
from fmm_fast.data.tokenization import encode_split
from fmm_fast.training import train as train_module
from fmm_fast.training.loop_state import RESUME_FILE, read_resume_file, splits_digest
from fmm_fast.training.train import (
    build_model,
    epoch_batches,
    make_optimizer,
    optimizer_groups,
    selection_metric,
    train,
)


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """The test machine is small and shared: several intra-op threads fighting over 2 cores are many times
    slower than one on these tiny models."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_hf_model() -> nn.Module:
    config = RobertaConfig(
        vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=1, intermediate_size=64,
        max_position_embeddings=40, type_vocab_size=1, num_labels=3,
    )  # fmt: skip
    return RobertaForSequenceClassification(config)


def test_weight_decay_skips_biases_and_layer_norms() -> None:
    model = tiny_hf_model()
    decayed, exempt = optimizer_groups(model, weight_decay=0.01)
    assert decayed["weight_decay"] == 0.01 and exempt["weight_decay"] == 0.0
    names = {id(p): name for name, p in model.named_parameters()}
    decayed_names = {names[id(p)] for p in decayed["params"]}
    exempt_names = {names[id(p)] for p in exempt["params"]}
    assert decayed_names | exempt_names == set(names.values())
    assert not decayed_names & exempt_names
    assert exempt_names == {n for n in names.values() if n.endswith("bias") or "LayerNorm" in n}
    assert "roberta.embeddings.LayerNorm.weight" in exempt_names
    assert "roberta.encoder.layer.0.attention.self.query.weight" in decayed_names
    assert "roberta.embeddings.word_embeddings.weight" in decayed_names


def test_learning_rate_warms_up_over_six_percent_then_decays_to_zero() -> None:
    model = tiny_hf_model()
    optimizer, schedule = make_optimizer(model, lr=1e-3, total_steps=100)
    group = optimizer.param_groups[0]
    assert group["betas"] == (0.9, 0.999) and group["eps"] == 1e-8
    rates = []
    for _ in range(100):
        rates.append(group["lr"])
        optimizer.step()
        schedule.step()
    rates.append(group["lr"])  # after the last step
    assert rates[0] == 0.0
    assert rates[3] == pytest.approx(0.5e-3)
    assert rates[6] == pytest.approx(1e-3)  # warm-up ends after int(0.06 * 100) = 6 steps
    assert max(rates) == pytest.approx(1e-3)
    assert rates[53] == pytest.approx(1e-3 * 47 / 94)  # linear decay from step 6 to step 100
    assert rates[99] == pytest.approx(1e-3 / 94)
    assert rates[100] == 0.0
    assert optimizer.param_groups[1]["lr"] == 0.0  # the no-decay group follows the same schedule


def test_epoch_batches_cover_every_row_once_and_keep_halves_random() -> None:
    lengths = np.random.default_rng(0).integers(5, 200, size=1000)
    rng = np.random.default_rng(1)
    first_half, second_half, spreads = [], [], []
    for _ in range(20):
        batches = epoch_batches(lengths, 16, rng, bucket_batches=10)
        np.testing.assert_array_equal(np.sort(np.concatenate(batches)), np.arange(1000))
        assert [len(b) for b in batches].count(16) == len(batches) - 1
        for batch in batches:
            first_half.extend(lengths[batch[:8]])
            second_half.extend(lengths[batch[8:]])
            spreads.append(np.ptp(lengths[batch]))
    # bucketing makes batches homogeneous in length ...
    plain = epoch_batches(lengths, 16, rng, bucket_batches=1)
    assert np.mean(spreads) < 0.5 * np.mean([np.ptp(lengths[b]) for b in plain])
    # ... without making the untouched first half of a batch shorter than the masked second half
    assert abs(np.mean(first_half) - np.mean(second_half)) < 3


def test_selection_metric_concatenates_unmasked_and_masked_for_masked() -> None:
    labels = np.array([0, 1, 1, 0])
    unmasked = np.array([0, 1, 1, 0])
    masked = np.array([1, 1, 0, 0])
    assert selection_metric("plain", "accuracy", labels, unmasked, masked, 2) == 1.0
    assert selection_metric("only-masked", "accuracy", labels, unmasked, masked, 2) == 0.5
    assert selection_metric("masked", "accuracy", labels, unmasked, masked, 2) == 0.75


# ---------------------------------------------------------------------------------------------- end to end

CPU = BackendOptions(device="cpu")
RECIPE = {"epochs": 10, "lr": 1e-3, "backend": CPU}


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("train") / "run"
    data = DataOptions("babi-1", size=600, test_size=200)
    settings = TrainSettings(data, "tiny-roberta", "masked", 0, **RECIPE)
    return train(settings, out, progress=False), out


def test_training_beats_the_majority_class_and_records_every_epoch(trained) -> None:
    record, out = trained
    assert record["kind"] == "train" and record["finished"]
    assert record["test"]["0.0"]["accuracy"] > record["majority_baseline"] + 0.05
    assert len(record["epochs"]) == 10
    assert sum(epoch["steps"] for epoch in record["epochs"]) == record["optimizer"]["total_steps"] == 10 * 30
    for epoch in record["epochs"]:
        assert set(epoch["validation"]) == {"0.0", "0.5", "1.0"}
        for metrics in epoch["validation"].values():
            assert set(metrics) == {"accuracy", "macro_f1", "micro_f1", "matthews"}
    scores = [epoch["selection_metric"] for epoch in record["epochs"]]
    assert record["best_epoch"] == int(np.argmax(scores)) + 1
    assert record["test"]["1.0"]["accuracy"] <= record["test"]["0.0"]["accuracy"]
    assert json.loads((out / "run.json").read_text()) == json.loads(json.dumps(record))


def test_checkpoint_is_the_best_epoch_and_loads(trained) -> None:
    record, out = trained
    loaded = load_model(out / "model", CPU)
    assert loaded.info.strategy == "masked" and loaded.info.dataset == "babi-1"
    assert loaded.info.source == str(out / "model")  # the checkpoint is its own source
    from fmm_fast.data import load_dataset
    from fmm_fast.data.tokenization import encode_split

    test_split = load_dataset("babi-1", size=600, test_size=200).splits["test"]
    encoded = encode_split(loaded.tokenizer, test_split)
    input_ids, attention_mask = pad_batch(encoded.input_ids, loaded.info.pad_id)
    predictions = loaded.backend.forward(input_ids, attention_mask).logits.argmax(axis=1)
    recomputed = compute_metrics(encoded.labels, predictions, 6)
    assert recomputed["accuracy"] == pytest.approx(record["test"]["0.0"]["accuracy"])


def test_same_seed_same_run(tmp_path) -> None:
    data = DataOptions("babi-1", size=80, test_size=20)
    settings = TrainSettings(data, strategy="masked", seed=5, max_steps=5, **{**RECIPE, "epochs": 2})
    runs = [train(settings, tmp_path / str(i), progress=False) for i in range(2)]
    assert [e["train_loss"] for e in runs[0]["epochs"]] == [e["train_loss"] for e in runs[1]["epochs"]]
    assert runs[0]["optimizer"]["total_steps"] == 5 and sum(e["steps"] for e in runs[0]["epochs"]) == 5
    weights = [(tmp_path / str(i) / "model" / "model.safetensors").read_bytes() for i in range(2)]
    assert weights[0] == weights[1]


def interrupt_in_epoch(monkeypatch, epoch: int) -> None:
    """Kill the next training in `epoch`'s validation (after the epochs before it were saved)."""
    calls = iter(range(1, 100))
    real = train_module.validate

    def validate(*args):
        if next(calls) == epoch:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(train_module, "validate", validate)


def test_an_interrupted_run_resumes_bit_for_bit(tmp_path, monkeypatch, capsys) -> None:
    data = DataOptions("babi-1", size=80, test_size=20)
    settings = TrainSettings(data, strategy="masked", seed=3, **{**RECIPE, "epochs": 3})
    whole = train(settings, tmp_path / "whole", progress=False)
    with monkeypatch.context() as patch:
        interrupt_in_epoch(patch, 3)
        with pytest.raises(KeyboardInterrupt):
            train(settings, tmp_path / "resumed", progress=False)
    partial = json.loads((tmp_path / "resumed" / "run.json").read_text())
    assert not partial["finished"] and [e["epoch"] for e in partial["epochs"]] == [1, 2]
    resume_file = tmp_path / "resumed" / RESUME_FILE
    saved = torch.load(resume_file, weights_only=False)
    saved["durations"] = json.dumps({**json.loads(saved["durations"]), "total": 1000.0})  # say it took long
    torch.save(saved, resume_file)
    resumed = train(settings, tmp_path / "resumed", progress=False)
    assert 1000 < resumed["durations"]["total"] < 1000 + 600  # the interrupted invocation's time counts
    assert "resuming " in capsys.readouterr().err
    assert resumed["finished"] and resumed["resumed_after_epochs"] == [2]
    assert resumed["earlier_machines"] == [partial["machine"]]  # where epochs 1-2 ran
    assert [e["epoch"] for e in resumed["epochs"]] == [1, 2, 3]
    # Weights, optimizer, schedule and every generator came back: epoch 3 is the same to the last bit.
    for key in ("train_loss", "selection_metric", "validation", "steps"):
        assert [e[key] for e in resumed["epochs"]] == [e[key] for e in whole["epochs"]]
    assert resumed["best_epoch"] == whole["best_epoch"] and resumed["test"] == whole["test"]
    weights = [(tmp_path / run / "model" / "model.safetensors").read_bytes() for run in ("whole", "resumed")]
    assert weights[0] == weights[1]
    assert not (tmp_path / "resumed" / RESUME_FILE).exists()  # gone with the finished run
    # A finished run of the same settings trains again from the start.
    again = train(settings, tmp_path / "resumed", progress=False)
    assert "resumed_after_epochs" not in again and len(again["epochs"]) == 3


def test_a_resume_file_of_other_splits_or_a_damaged_one_starts_afresh(tmp_path, monkeypatch) -> None:
    data = DataOptions("babi-1", size=80, test_size=20)
    settings = TrainSettings(data, strategy="masked", seed=3, **{**RECIPE, "epochs": 2})
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        interrupt_in_epoch(patch, 2)
        with pytest.raises(KeyboardInterrupt):
            train(settings, out, progress=False)
    dataset = data.load()
    tokenizer = build_model("tiny-roberta", dataset, settings.layers, settings.width, settings.seed)[1]
    encoded = {name: encode_split(tokenizer, split) for name, split in dataset.splits.items()}
    assert read_resume_file(out / RESUME_FILE, splits_digest(encoded), {}) is None  # other arguments
    encoded["train"].labels[0] = (encoded["train"].labels[0] + 1) % 6  # e.g. ROAR's next masked copy
    record = train(settings, out, progress=False, encoded=encoded)
    assert "resumed_after_epochs" not in record and [e["epoch"] for e in record["epochs"]] == [1, 2]
    with monkeypatch.context() as patch:
        interrupt_in_epoch(patch, 2)
        with pytest.raises(KeyboardInterrupt):
            train(settings, out, progress=False)
    (out / RESUME_FILE).write_bytes(b"not a resume file")
    record = train(settings, out, progress=False)
    assert "resumed_after_epochs" not in record and record["finished"]
    with monkeypatch.context() as patch:
        interrupt_in_epoch(patch, 2)
        with pytest.raises(KeyboardInterrupt):
            train(settings, out, progress=False)
    record = train(settings, out, progress=False, overwrite=True)  # --overwrite: afresh, not resumed
    assert "resumed_after_epochs" not in record and [e["epoch"] for e in record["epochs"]] == [1, 2]


# ---------------------------------------------------------------------------------------------- run records


def test_write_record_converts_numpy(tmp_path) -> None:
    write_record(tmp_path / "r.json", {"a": np.float32(0.5), "b": np.arange(3), "c": np.int64(2)})
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": 0.5, "b": [0, 1, 2], "c": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left behind


# ---------------------------------------------------------------------------------------------- CLI


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["train", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--dataset", "no-such-set"], "unknown dataset 'no-such-set'"),
        (["--dataset", "babi-1", "--strategy", "half"], "unknown masking strategy 'half'"),
        (["--dataset", "babi-1", "--lr", "-1"], "--lr -1.0: give a number > 0"),
        (["--dataset", "babi-1", "--width", "100"], "--width 100 does not work"),
        (
            ["--dataset", "babi-1", "--size", "40", "--model", "/no/such/model"],
            "model '/no/such/model' does not exist",
        ),
    ],
)
def test_cli_user_errors_are_one_line_and_exit_2(capsys, tmp_path, arguments, message) -> None:
    code, _, err = run_cli(capsys, *arguments, "--out", str(tmp_path / "out"))
    assert code == 2
    assert err.startswith("fmm-fast: error: ") and message in err
    assert err.count("\n") == 1


def test_cli_refuses_a_non_empty_out_dir(capsys, tmp_path) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    code, _, err = run_cli(capsys, "--dataset", "babi-1", "--out", str(tmp_path))
    assert code == 2
    assert err.startswith(f"fmm-fast: error: output directory {tmp_path} holds files that are not this run's")
    assert err.count("\n") == 1
    assert (tmp_path / "notes.txt").read_text() == "keep me"


def test_cli_trains_and_summarises(capsys, tmp_path) -> None:
    out = tmp_path / "cli-run"
    code, stdout, err = run_cli(
        capsys, "--dataset", "babi-1", "--size", "60", "--test-size", "20", "--epochs", "1",
        "--max-steps", "2", "--lr", "1e-3", "--device", "cpu", "--quiet", "--out", str(out),
    )  # fmt: skip
    assert code == 0 and "epoch 1/1" not in err  # --quiet: no bar, no epoch lines
    assert "best epoch 1 of 1" in stdout and "majority baseline" in stdout and "0% " in stdout
    record = json.loads((out / "run.json").read_text())
    assert record["arguments"]["max_steps"] == 2 and record["optimizer"]["total_steps"] == 2
    assert (out / "model" / "fmm_info.json").is_file()


def test_off_a_terminal_every_epoch_is_one_log_line(capsys, tmp_path) -> None:
    """A log file gets no progress bar (it is not a terminal) but a line per epoch, as run.json records it."""
    code, _, err = run_cli(
        capsys, "--dataset", "babi-1", "--size", "40", "--test-size", "20", "--epochs", "2",
        "--lr", "1e-3", "--device", "cpu", "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert code == 0
    epochs = json.loads((tmp_path / "run" / "run.json").read_text())["epochs"]
    lines = [line for line in err.splitlines() if line.startswith("train babi-1 (masked): epoch ")]
    assert len(lines) == len(epochs) == 2
    for line, epoch in zip(lines, epochs, strict=True):
        assert line.startswith(f"train babi-1 (masked): epoch {epoch['epoch']}/2, {epoch['steps']} steps, ")
        assert (
            f"loss {epoch['train_loss']:.4f}, validation micro_f1 {epoch['selection_metric']:.4f} (model"
            in line
        )
