"""`fmm-fast train --precision`: how it resolves, what bf16 training changes, where the precision is kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from fmm_fast.backends.loading import load_model
from fmm_fast.backends.options import BackendOptions
from fmm_fast.backends.precision import resolve_training_precision
from fmm_fast.cli import main
from fmm_fast.core import machine as machine_module
from fmm_fast.core.datatypes import trained_in
from fmm_fast.core.errors import UserError
from fmm_fast.core.outputs import RUN_MARKER
from fmm_fast.core.settings import TrainSettings
from fmm_fast.data.options import DataOptions
from fmm_fast.training.train import train

NATIVE = frozenset({"avx512f", "avx512_bf16"})
EMULATED = frozenset({"avx2", "avx512f"})


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def pretend_cpu(monkeypatch: pytest.MonkeyPatch, flags: frozenset[str]) -> None:
    """Resolve as on a CPU with these ISA flags (the bf16 training itself runs on any CPU, only slower)."""
    monkeypatch.setattr(machine_module, "cpu_flags", lambda: flags)


# ---------------------------------------------------------------------------------------------- resolution


@pytest.mark.parametrize(
    ("requested", "flags", "used"),
    [
        ("fp32", NATIVE, "fp32"),
        ("fp32", EMULATED, "fp32"),
        ("bf16", NATIVE, "bf16"),
        ("auto", NATIVE, "bf16"),
        ("auto", EMULATED, "fp32"),
    ],
)
def test_cpu_training_precision(monkeypatch, requested, flags, used) -> None:
    pretend_cpu(monkeypatch, flags)
    chosen = resolve_training_precision(requested, on_cuda=False)
    assert (chosen.requested, chosen.used) == (requested, used)
    assert (chosen.note is not None) == (requested == "auto" and used == "fp32")
    assert resolve_training_precision(used, on_cuda=False).used == used  # resolving again changes nothing


@pytest.mark.parametrize(
    ("requested", "message"),
    [
        ("bf16", "this CPU has no native bf16"),
        ("fp16", "fp16 runs on CUDA only"),
        ("fp64", "unknown precision 'fp64'"),
    ],
)
def test_cpu_training_precision_refused(monkeypatch, requested, message) -> None:
    pretend_cpu(monkeypatch, EMULATED)
    with pytest.raises(UserError, match=message) as error:
        resolve_training_precision(requested, on_cuda=False)
    assert "use " in str(error.value) and "\n" not in str(error.value)  # one line naming the fix


@pytest.mark.parametrize(
    ("requested", "bf16_supported", "used"),
    [("auto", True, "bf16"), ("auto", False, "fp16"), ("bf16", True, "bf16"), ("fp16", True, "fp16")],
)
def test_cuda_training_precision(monkeypatch, requested, bf16_supported, used) -> None:
    """The CUDA rule, without a GPU: bf16 where the device has it (no loss scaling), else fp16."""
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: bf16_supported)
    assert resolve_training_precision(requested, on_cuda=True).used == used


def test_cuda_without_bf16_refuses_bf16(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: False)
    with pytest.raises(UserError, match="no bf16; train with --precision auto"):
        resolve_training_precision("bf16", on_cuda=True)


def test_settings_hold_the_precision_that_runs(monkeypatch) -> None:
    pretend_cpu(monkeypatch, NATIVE)
    data = DataOptions("babi-1", size=60, test_size=20)
    settings = TrainSettings(data, backend=BackendOptions(device="cpu", precision="auto"))
    assert settings.backend.precision == "bf16"
    assert settings.fingerprint_fields()["precision"] == "bf16"
    assert settings.to_dict()["backend"]["precision"] == "bf16"
    pretend_cpu(monkeypatch, EMULATED)
    assert (
        TrainSettings(data, backend=BackendOptions(device="cpu", precision="auto")).backend.precision
        == "fp32"
    )


# ---------------------------------------------------------------------------------------------- training


def separable_csv(path: Path) -> Path:
    """Two classes told apart by one word of every text (the rest shared): any working training learns it."""
    fillers = ["the film", "this one", "a story", "the plot", "my evening", "that show"]
    rows = ["text,label"]
    for i in range(240):
        word, label = ("wonderful", "good") if i % 2 else ("dreadful", "bad")
        rows.append(f"{fillers[i % len(fillers)]} was {word} number {i % 7},{label}")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture(scope="module")
def trained_pair(tmp_path_factory) -> dict[str, tuple[dict, Path]]:
    """The same seeded tiny-roberta run in fp32 and in bf16 (resolved as on a CPU with native bf16)."""
    root = tmp_path_factory.mktemp("precision")
    data = DataOptions(str(separable_csv(root / "separable.csv")), text_field="text", label_field="label")
    runs = {}
    with pytest.MonkeyPatch.context() as patch:
        pretend_cpu(patch, NATIVE)
        for precision in ("fp32", "bf16"):
            backend = BackendOptions(device="cpu", precision=precision)
            settings = TrainSettings(data, strategy="plain", epochs=5, lr=1e-3, seed=3, backend=backend)
            runs[precision] = (train(settings, root / precision, progress=False), root / precision)
    return runs


def test_bf16_training_learns_and_differs_from_fp32(trained_pair) -> None:
    fp32, bf16 = trained_pair["fp32"][0], trained_pair["bf16"][0]
    for record in (fp32, bf16):
        assert record["test"]["0.0"]["accuracy"] >= 0.9 > record["majority_baseline"]
    # the same seed, data order and masks: only the forward passes' precision differs
    assert fp32["optimizer"] == bf16["optimizer"]
    fp32_losses = [epoch["train_loss"] for epoch in fp32["epochs"]]
    bf16_losses = [epoch["train_loss"] for epoch in bf16["epochs"]]
    assert fp32_losses != bf16_losses
    assert bf16_losses == pytest.approx(fp32_losses, rel=0.1)


def test_record_marker_and_checkpoint_carry_the_precision(trained_pair) -> None:
    for precision, (record, out) in trained_pair.items():
        assert record["arguments"]["backend"]["precision"] == precision
        assert json.loads((out / RUN_MARKER).read_text())["fields"]["precision"] == precision
        loaded = load_model(out / "model", BackendOptions(device="cpu"))
        assert loaded.info.trained_precision == precision
        assert loaded.describe(str(out / "model"))["trained_precision"] == precision
        assert trained_in(loaded.info) == ("" if precision == "fp32" else " (trained in bf16)")  # printed
        assert loaded.precision == "fp32"  # how it was trained is not how it is evaluated


def test_resuming_in_another_precision_is_refused(trained_pair, tmp_path, capsys) -> None:
    record, out = trained_pair["bf16"]
    data = record["arguments"]["data"]
    before = (out / "run.json").read_text()
    argv = ["train", "--dataset", data["dataset"], "--text-field", "text", "--label-field", "label"]
    argv += ["--strategy", "plain", "--epochs", "5", "--lr", "1e-3", "--seed", "3", "--device", "cpu"]
    code = main([*argv, "--precision", "fp32", "--quiet", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and 'it differs in precision ("bf16" → "fp32")' in err and err.count("\n") == 1
    assert (out / "run.json").read_text() == before


def test_cli_refuses_bf16_without_native_bf16(monkeypatch, tmp_path, capsys) -> None:
    pretend_cpu(monkeypatch, EMULATED)
    argv = [
        "train",
        "--dataset",
        "babi-1",
        "--size",
        "60",
        "--precision",
        "bf16",
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("fmm-fast: error: this CPU has no native bf16") and err.count("\n") == 1
    assert "--precision fp32 or auto" in err
    assert not (tmp_path / "o").exists()


def test_cli_trains_in_bf16_and_says_so(monkeypatch, tmp_path, capsys) -> None:
    pretend_cpu(monkeypatch, NATIVE)
    argv = ["train", "--dataset", "babi-1", "--size", "60", "--test-size", "20", "--epochs", "1"]
    argv += ["--max-steps", "2", "--lr", "1e-3", "--device", "cpu", "--precision", "auto", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "o")]) == 0
    assert "seed 0, bf16: best epoch 1 of 1" in capsys.readouterr().out


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_mixed_precision_training(tmp_path) -> None:
    backend = BackendOptions(device="cuda", precision="auto")
    settings = TrainSettings(
        DataOptions("babi-1", size=60, test_size=20), max_steps=3, lr=1e-3, backend=backend
    )
    record = train(settings, tmp_path / "cuda", progress=False)
    assert record["arguments"]["backend"]["precision"] in ("bf16", "fp16")
    assert all(epoch["train_loss"] == epoch["train_loss"] for epoch in record["epochs"])  # finite, not NaN


# ---------------------------------------------------------------------------------------- bench/reproduce

BENCH = Path(__file__).resolve().parent.parent / "bench"
STUDY = ["--scale", "tiny", "--datasets", "babi-1", "--seeds", "0", "--dry-run"]


def test_reproduce_trains_in_the_precision_it_resolved(monkeypatch, capsys) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    from reproduce import main as reproduce

    pretend_cpu(monkeypatch, NATIVE)
    assert reproduce([*STUDY, "--train-precision", "auto"]) == 0
    steps = capsys.readouterr().out.splitlines()
    trainings = [line for line in steps if line.startswith("  $ fmm-fast train ")]
    assert len(trainings) == 3 and all(" --precision bf16" in line for line in trainings)
    assert all("reproduce-tiny-babi-1-seeds-0-train-bf16/" in line for line in steps if "$ fmm-fast" in line)
    assert reproduce(STUDY) == 0  # fp32: the commands and folder of a study from before the flag
    assert "--precision" not in capsys.readouterr().out


def test_reproduce_refuses_bf16_without_native_bf16(monkeypatch, capsys) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    from reproduce import main as reproduce

    pretend_cpu(monkeypatch, EMULATED)
    assert reproduce([*STUDY, "--train-precision", "bf16"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("reproduce: this CPU has no native bf16") and error.count("\n") == 1


# --------------------------------------------------------------------------------------------- fmm-fast roar


def test_roar_trains_every_step_in_the_resolved_precision_and_explains_in_fp32(
    monkeypatch, tmp_path, capsys
) -> None:
    from fmm_fast.protocols.roar import explaining, run

    pretend_cpu(monkeypatch, NATIVE)
    explained_in = []

    def spy(original):
        def load(model, backend):
            explained_in.append(backend.precision)
            return original(model, backend)

        return load

    monkeypatch.setattr(explaining, "load_model", spy(explaining.load_model))
    monkeypatch.setattr(run, "load_model", spy(run.load_model))
    out = tmp_path / "roar"
    argv = ["roar", "--dataset", "babi-1", "--size", "60", "--test-size", "20", "--epochs", "1"]
    argv += ["--max-steps", "2", "--lr", "1e-3", "--steps", "2", "--device", "cpu", "--precision", "auto"]
    assert main([*argv, "--quiet", "--out", str(out)]) == 0, capsys.readouterr().err
    assert json.loads((out / RUN_MARKER).read_text())["fields"]["precision"] == "bf16"
    models = sorted(out.glob("seed-0/**/model"))
    assert len(models) == 4  # step 0, grad-l2 and rand at 50%, the fully masked step
    assert {load_model(m, BackendOptions(device="cpu")).info.trained_precision for m in models} == {"bf16"}
    # the step-0 tokenizer, the 50% explanations (grad-l2, rand), the erasure: all fp32
    assert len(explained_in) >= 4 and set(explained_in) == {"fp32"}
