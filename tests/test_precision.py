"""--precision fp32|bf16|auto: resolution, the fallback without native bf16, the OpenVINO extra, fidelity."""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import replace

import numpy as np
import pytest
import torch

from fmm_fast.api import as_engine, explain, explain_texts
from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import gradient_backend, load_model
from fmm_fast.backends.onnx_backend import OnnxBackend
from fmm_fast.backends.openvino_backend import OpenVinoBackend
from fmm_fast.backends.options import BackendOptions
from fmm_fast.backends.precision import cpu_has_native_bf16, resolve_precision
from fmm_fast.backends.torch_backend import TorchBackend
from fmm_fast.cli import main
from fmm_fast.core import machine as machine_module
from fmm_fast.core.datatypes import pad_batch
from fmm_fast.core.errors import UserError
from fmm_fast.core.settings import EvaluationSettings, MasfSettings
from fmm_fast.data.options import DataOptions

HAS_OPENVINO = importlib.util.find_spec("openvino") is not None
CPU_ORT = BackendOptions(device="cpu", provider="cpu")
needs_openvino = pytest.mark.skipif(not HAS_OPENVINO, reason="the openvino extra is not installed")


@pytest.fixture
def cpu_without_bf16(monkeypatch):
    monkeypatch.setattr(machine_module, "cpu_flags", lambda: frozenset({"avx2", "avx512f"}))


@pytest.fixture
def cpu_with_bf16(monkeypatch):
    monkeypatch.setattr(machine_module, "cpu_flags", lambda: frozenset({"avx2", "avx512_bf16"}))


@pytest.fixture
def no_openvino(monkeypatch):
    """`import openvino` fails, as where the extra is not installed."""
    monkeypatch.setitem(sys.modules, "openvino", None)


def test_cpu_flags_come_from_cpuinfo(monkeypatch, tmp_path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: Some CPU 9000\nflags\t\t: fpu avx2 amx_bf16 avx512f\n\nflags\t: fpu\n"
    )
    monkeypatch.setattr(machine_module, "CPUINFO", cpuinfo)
    assert machine_module.cpu_flags() == {"fpu", "avx2", "amx_bf16", "avx512f"}
    assert cpu_has_native_bf16()
    assert machine_module.cpu_model() == "Some CPU 9000"
    assert machine_module.isa_extensions() == ["AVX2", "AVX-512"]
    cpuinfo.write_text("processor\t: 0\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC\n")
    assert machine_module.cpu_model() == "AMD EPYC (family 26 model 2)"  # the numbers tell Zen 4 from 5
    monkeypatch.setattr(machine_module, "CPUINFO", tmp_path / "missing")
    assert machine_module.cpu_flags() == frozenset() and not cpu_has_native_bf16()


def test_auto_resolves_by_hardware(cpu_with_bf16) -> None:
    assert resolve_precision("auto", on_cuda=False).used == "bf16"
    assert resolve_precision("auto", on_cuda=True).used == "fp16"
    assert resolve_precision("fp32", on_cuda=False).used == "fp32"
    assert resolve_precision("bf16", on_cuda=False).note is None
    with pytest.raises(UserError, match="unknown precision 'fp8'"):
        resolve_precision("fp8", on_cuda=False)


def test_auto_without_native_bf16_is_fp32_with_a_note(cpu_without_bf16) -> None:
    chosen = resolve_precision("auto", on_cuda=False)
    assert chosen.used == "fp32"
    assert "no native bf16" in chosen.note and "avx512_bf16" in chosen.note


@needs_openvino
@pytest.mark.skipif(not cpu_has_native_bf16(), reason="OpenVINO runs bf16 on a CPU with native bf16 only")
def test_precision_option_reaches_the_backend_and_the_record(tiny_babi, tmp_path, capsys) -> None:
    _, onnx_path, data = tiny_babi
    out = tmp_path / "eval"
    flags = ["--dataset", "babi-1", "--size", str(data["size"]), "--test-size", str(data["test_size"])]
    arguments = ["evaluate", "--model", str(onnx_path), *flags, "--measure", "loo-abs", "--limit", "4"]
    arguments += ["--provider", "cpu", "--precision", "bf16", "--out", str(out), "--quiet"]
    code = main(arguments)
    assert code == 0
    record = json.loads((out / "seed-0" / "result.json").read_text())
    assert record["model"]["backend"].startswith("openvino:CPU")
    assert record["arguments"]["backend"]["precision"] == "bf16"  # stored once: what ran
    assert "precision" not in record["model"]
    assert record["model"]["backend"] in capsys.readouterr().out  # what ran is printed, as masf/explain do


def test_auto_on_a_cpu_without_bf16_runs_fp32_and_says_so(
    tiny_babi, tmp_path, capsys, cpu_without_bf16
) -> None:
    _, onnx_path, data = tiny_babi
    out = tmp_path / "masf"
    flags = ["--dataset", "babi-1", "--size", str(data["size"]), "--test-size", str(data["test_size"])]
    arguments = ["masf", "--model", str(onnx_path), *flags, "--limit", "4", "--provider", "cpu"]
    arguments += ["--precision", "auto", "--out", str(out)]
    code = main(arguments)
    assert code == 0
    assert "no native bf16" in capsys.readouterr().err
    (model,) = json.loads((out / "masf.json").read_text())["models"].values()
    assert model["backend"].startswith("onnxruntime") and "precision" not in model
    assert json.loads((out / "masf.json").read_text())["arguments"]["backend"]["precision"] == "fp32"


def test_missing_openvino_extra_is_exit_2(tiny_babi, tmp_path, capsys, no_openvino) -> None:
    _, onnx_path, _ = tiny_babi
    out = tmp_path / "explanations.jsonl"
    arguments = ["explain", "--model", str(onnx_path), "--dataset", "babi-1", "--size", "300"]
    arguments += ["--test-size", "40", "--measure", "loo-abs", "--limit", "2", "--precision", "bf16"]
    code = main([*arguments, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert "fmm-fast[openvino]" in err and "--precision fp32" in err and len(err.strip().splitlines()) == 1


def test_auto_without_openvino_falls_back_to_fp32(tiny_babi, capsys, cpu_with_bf16, no_openvino) -> None:
    _, onnx_path, _ = tiny_babi
    loaded = load_model(onnx_path, BackendOptions(provider="cpu", precision="auto"))
    assert isinstance(loaded.backend, OnnxBackend) and loaded.precision == "fp32"
    assert "fmm-fast[openvino]" in capsys.readouterr().err


def test_unknown_precision_is_a_user_error(tiny_babi, capsys) -> None:
    checkpoint, _, _ = tiny_babi
    arguments = ["explain", "--model", str(checkpoint), "--measure", "loo-abs", "--precision", "half"]
    code = main([*arguments, "--out", "x.jsonl"])
    assert code == 2 and "unknown precision 'half'" in capsys.readouterr().err


def rows_of(loaded, count: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """A padded batch of masked and unmasked rows of the tiny model's vocabulary."""
    rng = np.random.default_rng(0)
    info = loaded.info
    words = [i for i in range(5, 200) if i not in info.special_ids]
    rows = []
    for length in rng.integers(4, 30, size=count):
        ids = rng.choice(words, size=length)
        ids[rng.random(length) < 0.3] = info.mask_id
        rows.append(np.asarray([info.special_ids[0], *ids, info.special_ids[-1]], dtype=np.int64))
    return pad_batch(rows, info.pad_id)


def assert_close_but_reduced(low, high, precision: str) -> None:
    """bf16 outputs agree with fp32 within bf16's 8-bit mantissa, and differ where bf16 really ran."""
    scale = max(1.0, float(np.abs(high).max()))
    assert np.abs(low - high).max() <= 0.05 * scale
    if precision == "bf16":
        assert not np.array_equal(low, high)


@needs_openvino
@pytest.mark.skipif(not cpu_has_native_bf16(), reason="OpenVINO runs bf16 on a CPU with native bf16 only")
def test_openvino_bf16_logits_and_signals_close_to_fp32(tiny_babi) -> None:
    _, onnx_path, _ = tiny_babi
    fp32 = OnnxBackend.from_file(onnx_path, provider="cpu")
    bf16 = load_model(onnx_path, BackendOptions(provider="cpu", precision="bf16")).backend
    assert isinstance(bf16, OpenVinoBackend)
    input_ids, attention_mask = rows_of(bf16)
    reference = fp32.forward(input_ids, attention_mask, with_signals=True)
    low = bf16.forward(input_ids, attention_mask, with_signals=True)
    assert low.logits.dtype == np.float32 and low.logits.shape == reference.logits.shape
    assert_close_but_reduced(low.logits, reference.logits, bf16.precision)
    assert_close_but_reduced(low.signals, reference.signals, bf16.precision)
    # the logits-only cut (scoring passes) rounds in its own order, within the same bound
    assert_close_but_reduced(bf16.forward(input_ids, attention_mask).logits, reference.logits, "fp32")


def test_torch_bf16_autocast_logits_and_gradients_close_to_fp32(tiny_babi) -> None:
    checkpoint, onnx_path, _ = tiny_babi
    fp32 = load_model(checkpoint, BackendOptions(device="cpu")).backend
    bf16 = load_model(checkpoint, BackendOptions(device="cpu", precision="bf16")).backend
    assert isinstance(bf16, TorchBackend) and bf16.name == "torch:cpu bf16-autocast"
    input_ids, attention_mask = rows_of(bf16)
    assert_close_but_reduced(
        bf16.forward(input_ids, attention_mask).logits, fp32.forward(input_ids, attention_mask).logits, "bf16"
    )
    explained, labels = attention_mask.astype(bool), np.zeros(len(input_ids), dtype=np.int64)
    scores = {
        name: explain(MaskBatchEngine(backend), input_ids, attention_mask, labels, explained, "grad-l2")
        for name, backend in (("fp32", fp32), ("bf16", bf16))
    }
    assert_close_but_reduced(scores["bf16"], scores["fp32"], "bf16")
    # an ONNX model's gradient measures run on its checkpoint in the same precision
    if HAS_OPENVINO:
        cpu = BackendOptions(device="cpu")
        gradients = gradient_backend(load_model(onnx_path, replace(cpu, precision="bf16")), cpu)
        # where the CPU has no native bf16 the .onnx resolves to fp32, and so do its gradients
        expected = "bf16" if cpu_has_native_bf16() else "fp32"
        assert isinstance(gradients, TorchBackend) and gradients.precision == expected


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_auto_on_cuda_runs_fp16_autocast(tiny_babi) -> None:
    checkpoint, _, _ = tiny_babi
    loaded = load_model(checkpoint, BackendOptions(device="cuda", precision="auto"))
    assert loaded.precision == "fp16" and loaded.backend.name == "torch:cuda fp16-autocast"
    input_ids, attention_mask = rows_of(loaded)
    reference_backend = load_model(checkpoint, BackendOptions(device="cuda")).backend
    reference = reference_backend.forward(input_ids, attention_mask).logits
    assert_close_but_reduced(loaded.backend.forward(input_ids, attention_mask).logits, reference, "fp16")


@needs_openvino
def test_api_precision_reaches_the_backend(tiny_babi) -> None:
    _, onnx_path, _ = tiny_babi
    # bf16 runs on OpenVINO where the CPU has it natively; elsewhere it resolves to fp32 on ONNX Runtime
    bf16_backend = OpenVinoBackend if cpu_has_native_bf16() else OnnxBackend
    assert type(as_engine(onnx_path, precision="bf16").backend) is bf16_backend
    assert isinstance(as_engine(str(onnx_path)).backend, OnnxBackend)  # fp32 stays the default
    explanations = explain_texts(onnx_path, ["Mary went to the kitchen."], precision="bf16")
    assert len(explanations[0].scores) == len(explanations[0].tokens)


@needs_openvino
def test_an_evaluation_resumes_only_in_its_own_precision(cpu_with_bf16) -> None:
    fp32 = EvaluationSettings("model.onnx", DataOptions("babi-1"), ("loo-abs",), backend=CPU_ORT)
    bf16 = replace(fp32, backend=replace(CPU_ORT, precision="bf16"))
    assert bf16.fingerprint() != fp32.fingerprint()
    assert replace(fp32, measures=("grad-l2",)).fingerprint() == fp32.fingerprint()
    # the settings hold what runs, resolved once as they are built: auto here is bf16, and resumes a bf16 run
    auto = replace(fp32, backend=replace(CPU_ORT, precision="auto"))
    assert auto.backend.precision == "bf16" and auto.fingerprint() == bf16.fingerprint()


def test_settings_resolve_the_precision_once_and_say_why(cpu_without_bf16, no_openvino, capsys) -> None:
    auto = EvaluationSettings("model.onnx", DataOptions("babi-1"), backend=replace(CPU_ORT, precision="auto"))
    assert auto.backend.precision == "fp32" and auto.to_dict()["backend"]["precision"] == "fp32"
    assert "so auto runs fp32" in capsys.readouterr().err
    assert replace(auto, seed=3).backend.precision == "fp32"
    assert capsys.readouterr().err == ""  # resolved already: no second note
    with pytest.raises(UserError, match="fmm-fast\\[openvino\\]"):  # bf16 asked for, its backend missing
        EvaluationSettings("model.onnx", DataOptions("babi-1"), backend=replace(CPU_ORT, precision="bf16"))
    with pytest.raises(UserError, match="fp16 runs on CUDA only"):
        EvaluationSettings("model.onnx", DataOptions("babi-1"), backend=replace(CPU_ORT, precision="fp16"))


def test_models_of_one_run_resolve_alike(tiny_babi, cpu_with_bf16, no_openvino) -> None:
    checkpoint, onnx_path, _ = tiny_babi
    backend = BackendOptions(device="cpu", provider="cpu", precision="auto")
    with pytest.raises(UserError, match=r"different precisions \(bf16, fp32\); give --precision fp32"):
        MasfSettings((str(checkpoint), str(onnx_path)), DataOptions("babi-1"), backend=backend)
