"""Shared pieces of the benchmarks: the model and its exports, the sentences, timing, FLOPs and the
large-matmul peaks (the best of several kernels, and the guard that no share of them exceeds 100%), the
straightforward LOO baseline, the machine (CPU model, ISA, torch's BLAS), tables and JSON.

Every bench times fmm-fast against a straightforward baseline measured in the same run and reports the
ratio; nothing asserts a speed. The machine may be shared, so each timing is the best of a few interleaved
rounds (the least disturbed one).

Model: the masked fine-tuned MiniLM at bench/results/cache/minilm-masked/model when the lead has trained
one, else the pretrained all-MiniLM-L6-v2 encoder with a fresh (seeded, untrained) 2-label head, saved once
as a checkpoint; with --quick the tests' tiny model instead (a 2-layer, width-64 RoBERTa with its tokenizer
trained on movie-snippets, random weights). Its ONNX exports (fp32, int8, fp16) are written next to it on
first use and reused. --cache moves all of it (default bench/results/cache).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import platform
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch
from tokenizers import Tokenizer

from fmm_fast.backends.onnx_backend import PROVIDERS, OnnxBackend
from fmm_fast.backends.openvino_backend import OpenVinoBackend
from fmm_fast.backends.precision import cpu_has_native_bf16
from fmm_fast.backends.torch_backend import TorchBackend
from fmm_fast.core import records as runrecord
from fmm_fast.core.datatypes import EncodedSplit, ModelInfo
from fmm_fast.core.machine import cpu_model, isa_extensions
from fmm_fast.core.records import versions
from fmm_fast.core.threads import physical_cores
from fmm_fast.data import load_dataset
from fmm_fast.data.tokenization import encode_split
from fmm_fast.export.onnx_export import export_onnx
from fmm_fast.training.base_models import MINILM, TINY_ROBERTA
from fmm_fast.training.models import INFO_FILE, SequenceClassifier, load_checkpoint, save_checkpoint
from fmm_fast.training.train import build_model

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "bench" / "results"
CACHE_DIR = RESULTS_DIR / "cache"
MASKED_CHECKPOINT = Path("minilm-masked") / "model"  # these three under the cache folder
RANDOM_HEAD_CHECKPOINT = Path("minilm-random-head")
QUICK_CHECKPOINT = Path("tiny-roberta")
QUICK_SHAPE = {"layers": 2, "width": 64}  # the tests' tiny models (MiniLM ignores it)
DATASET = "movie-snippets"
SEED = 0
PRECISIONS = ("fp32", "int8", "fp16")
QUICK_MAX_EXPLAINED = 8
FLOP_FORMULA = (
    "T·L·[2·(4·D² + 2·D·I) + 2·2·T·D] per row of T real tokens (encoder only); fmm-fast's first-token last "
    "layer counts T·2·2·D² + 2·(2·D² + 2·D·I) + 2·2·T·D for that layer"
)
# Square matmul sizes for the peak: large enough to reach the BLAS / tensor-core plateau on each device;
# --quick's (by quick) only show that the kernels run.
PEAK_SIZES = {False: {"cpu": 2048, "cuda": 8192}, True: {"cpu": 256, "cuda": 1024}}
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
OPENVINO_HINTS = {"fp32": "f32", "bf16": "bf16"}
T = TypeVar("T")


# ------------------------------------------------------------------------------------------------ model
@dataclass
class BenchModel:
    """The benchmark model: its PyTorch checkpoint and ONNX exports (kept in `cache`, --cache)."""

    checkpoint: Path
    cache: Path  # the folder of the checkpoint and its ONNX exports
    description: str
    fine_tuned: bool
    tokenizer: Tokenizer
    info: ModelInfo
    shape: tuple[int, int, int]  # layers L, width D, feed-forward width I
    _torch_models: dict[str, SequenceClassifier] = field(default_factory=dict, repr=False)

    def torch_model(self, device: str = "cpu", straightforward: bool = False) -> SequenceClassifier:
        """The checkpoint in eval mode on `device`; one copy per device (TorchBackend moves its model).

        straightforward: the model exactly as Hugging Face computes it, every layer in full (the
        baselines), instead of fmm-fast's first-token last layer (export.first_token)."""
        key = f"{device}-straightforward" if straightforward else device
        if key not in self._torch_models:
            model, _, _ = load_checkpoint(self.checkpoint)
            model.use_first_token_last_layer = not straightforward
            self._torch_models[key] = model.to(device).eval()
        return self._torch_models[key]

    def torch_backend(self, device: str = "cpu", precision: str = "fp32") -> TorchBackend:
        """fmm-fast's PyTorch backend; precision bf16 / fp16 runs it under autocast."""
        return TorchBackend(self.torch_model(device), self.info, device=device, precision=precision)

    def openvino_backend(self, precision: str = "bf16") -> OpenVinoBackend:
        """OpenVINO on the fp32 export, at `precision` (what `--precision bf16` runs for an .onnx model)."""
        return OpenVinoBackend(self.onnx_path("fp32"), precision=precision)

    def onnx_path(self, precision: str = "fp32") -> Path:
        """The ONNX export at `precision` (fp32 | int8 | fp16), exported now if missing or older than the
        checkpoint."""
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        path = self.cache / f"{self.checkpoint_name}-{precision}.onnx"
        if not path.is_file() or path.stat().st_mtime < (self.checkpoint / INFO_FILE).stat().st_mtime:
            started = time.perf_counter()
            export_onnx(
                self.checkpoint,
                path,
                quantize="int8" if precision == "int8" else None,
                fp16=precision == "fp16",
            )
            print(f"exported {path.name} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        return path

    def ort_backend(self, precision: str = "fp32", provider: str = "cpu") -> OnnxBackend:
        """ONNX Runtime on `provider` (cpu | cuda); a missing provider is an error, never a silent CPU run."""
        return OnnxBackend.from_file(self.onnx_path(precision), provider=provider, strict_provider=True)

    @property
    def checkpoint_name(self) -> str:
        return "minilm-masked" if self.fine_tuned else self.checkpoint.name


def prepare_model(quick: bool = False, cache: Path = CACHE_DIR) -> BenchModel:
    """The masked fine-tuned MiniLM in `cache` if the lead trained one, else MiniLM with a seeded random head;
    quick: the tiny model (QUICK_SHAPE), whose figures only show that a bench runs."""
    # bench/run starts subprocesses: tokenizers must not have started its thread pool before they fork
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    fine_tuned = not quick and (cache / MASKED_CHECKPOINT).is_dir()
    checkpoint = cache / (
        QUICK_CHECKPOINT if quick else MASKED_CHECKPOINT if fine_tuned else RANDOM_HEAD_CHECKPOINT
    )
    if not fine_tuned and not (checkpoint / INFO_FILE).is_file():
        # seeded: the same random head (and tiny model) on every machine
        built = build_model(
            TINY_ROBERTA if quick else MINILM, load_dataset(DATASET), seed=SEED, **QUICK_SHAPE
        )
        save_checkpoint(checkpoint, *built)
    model, tokenizer, info = load_checkpoint(checkpoint)
    config = model.hf_model.config
    if quick:
        description = (
            f"tiny RoBERTa ({QUICK_SHAPE['layers']} layers, width {QUICK_SHAPE['width']}, random weights: "
            "the figures only show that it runs)"
        )
    elif fine_tuned:
        description = "MiniLM-L6 masked fine-tuned on movie-snippets"
    else:
        description = "MiniLM-L6 pretrained + random 2-label head (not fine-tuned: RACU figures mean nothing)"
    return BenchModel(
        checkpoint=checkpoint,
        cache=cache,
        description=description,
        fine_tuned=fine_tuned,
        tokenizer=tokenizer,
        info=info,
        shape=(config.num_hidden_layers, config.hidden_size, config.intermediate_size),
        _torch_models={"cpu": model},
    )


def model_for(args: argparse.Namespace) -> BenchModel:
    """The bench model of bench_parser's options: tiny with --quick, kept in --cache."""
    return prepare_model(args.quick, args.cache)


def test_sentences(tokenizer: Tokenizer, limit: int | None = None, short: bool = False) -> EncodedSplit:
    """The first `limit` movie-snippets test sentences (of 917; all if None), tokenized.

    short: draw only from those with at most QUICK_MAX_EXPLAINED explained tokens (what --quick runs on,
    so that it takes seconds).
    """
    encoded = encode_split(tokenizer, load_dataset(DATASET).splits["test"])
    if short:
        encoded = encoded.subset(np.flatnonzero(explained_counts(encoded) <= QUICK_MAX_EXPLAINED))
    return encoded if limit is None else encoded.subset(range(min(limit, len(encoded))))


def explained_counts(split: EncodedSplit) -> np.ndarray:
    """(N,) int64: explained tokens per sentence."""
    return np.asarray([int(e.sum()) for e in split.explained], dtype=np.int64)


# ------------------------------------------------------------------------------------------- devices
def cuda_available() -> bool:
    """ONNX Runtime has the CUDA provider (onnxruntime-gpu) and PyTorch sees a GPU for the baselines."""
    import onnxruntime

    return PROVIDERS["cuda"] in onnxruntime.get_available_providers() and torch.cuda.is_available()


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


# -------------------------------------------------------------------------------------- timing, FLOPs
def best_of_rounds(runners: dict[str, Callable[[], T]], repeat: int) -> dict[str, tuple[float, T]]:
    """Run every runner once per round for `repeat` rounds; per runner its best seconds and that result."""
    best: dict[str, tuple[float, T]] = {}
    for _ in range(repeat):
        for name, run in runners.items():
            start = time.perf_counter()
            result = run()
            seconds = time.perf_counter() - start
            if name not in best or seconds < best[name][0]:
                best[name] = (seconds, result)
    return best


def encoder_flops(lengths: np.ndarray, shape: tuple[int, int, int], first_token_last_layer: bool) -> float:
    """Useful FLOPs of encoder forward passes over rows of `lengths` (R,) real tokens (see FLOP_FORMULA).

    first_token_last_layer: the last layer as fmm-fast runs it for logits (export.first_token): keys and
    values for every token, query, attention, output projection and feed-forward for the first only."""
    layers, width, intermediate = shape
    lengths = np.asarray(lengths, dtype=np.float64)
    per_token = 2 * (4 * width**2 + 2 * width * intermediate) + 2 * 2 * lengths * width
    if not first_token_last_layer:
        return float((lengths * layers * per_token).sum())
    last_layer = lengths * 2 * 2 * width**2 + (
        2 * (2 * width**2 + 2 * width * intermediate) + 2 * 2 * lengths * width
    )
    return float((lengths * (layers - 1) * per_token + last_layer).sum())


def torch_matmul_gflops(
    device: str = "cpu", dtype: torch.dtype = torch.float32, repeat: int = 5, quick: bool = False
) -> float:
    """Best GFLOP/s of one large square torch.matmul on `device` (torch's default threads on CPU)."""
    size = PEAK_SIZES[quick][device]
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    torch.matmul(a, b)  # warm-up
    synchronize(device)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        torch.matmul(a, b)
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def onnxruntime_matmul_gflops(repeat: int = 5, quick: bool = False) -> float:
    """Best GFLOP/s of a one-node fp32 MatMul graph on ONNX Runtime's CPU provider (physical-core threads,
    as OnnxBackend runs)."""
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper

    size = PEAK_SIZES[quick]["cpu"]
    shape = [size, size]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"])],
        "matmul",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name in ("a", "b")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = physical_cores()
    session = onnxruntime.InferenceSession(
        onnx.shape_inference.infer_shapes(model).SerializeToString(), options, ["CPUExecutionProvider"]
    )
    rng = np.random.default_rng(SEED)
    feeds = {name: rng.standard_normal(shape, dtype=np.float32) for name in ("a", "b")}
    return 2 * size**3 / _best_seconds(lambda: session.run(None, feeds), repeat) / 1e9


def openvino_matmul_gflops(precision: str, repeat: int = 5, quick: bool = False) -> float:
    """Best GFLOP/s of a one-node MatMul model on OpenVINO's CPU plugin at `precision` (fp32 | bf16)."""
    import openvino
    import openvino.opset13 as ops

    size = PEAK_SIZES[quick]["cpu"]
    a, b = (ops.parameter([size, size], np.float32, name=name) for name in ("a", "b"))
    model = openvino.Model([ops.matmul(a, b, False, False)], [a, b], "matmul")
    compiled = openvino.Core().compile_model(
        model,
        "CPU",
        {
            "INFERENCE_PRECISION_HINT": OPENVINO_HINTS[precision],
            "INFERENCE_NUM_THREADS": physical_cores(),
            "NUM_STREAMS": 1,
        },
    )
    rng = np.random.default_rng(SEED)
    feeds = [rng.standard_normal((size, size), dtype=np.float32) for _ in range(2)]
    return 2 * size**3 / _best_seconds(lambda: compiled(feeds), repeat) / 1e9


# Run in a fresh interpreter: NumPy's OpenBLAS reads its environment when it loads.
NUMPY_MATMUL_SCRIPT = """
import sys, time
import numpy as np
size, repeat = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
a, b = (rng.standard_normal((size, size), dtype=np.float32) for _ in range(2))
a @ b
best = float("inf")
for _ in range(repeat):
    start = time.perf_counter()
    a @ b
    best = min(best, time.perf_counter() - start)
print(2 * size**3 / best / 1e9)
"""
# OpenBLAS settings that pin a core type or cache size (set on some machines for other programs): NumPy's
# peak is measured without them, so OpenBLAS picks its kernels for this CPU.
OPENBLAS_PINNING = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def numpy_matmul_gflops(repeat: int = 5, quick: bool = False) -> float:
    """Best GFLOP/s of an fp32 `a @ b` in NumPy (OpenBLAS), in a subprocess without OPENBLAS_PINNING."""
    environment = {key: value for key, value in os.environ.items() if key not in OPENBLAS_PINNING}
    output = subprocess.run(
        [sys.executable, "-c", NUMPY_MATMUL_SCRIPT, str(PEAK_SIZES[quick]["cpu"]), str(repeat)],
        env=environment,
        check=True,
        capture_output=True,
        text=True,
    )
    return float(output.stdout.strip())


def _best_seconds(run: Callable[[], object], repeat: int) -> float:
    run()  # warm-up
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def matmul_peaks(
    device: str = "cpu", precision: str = "fp32", repeat: int = 5, quick: bool = False
) -> dict[str, float]:
    """GFLOP/s of one large square matmul per kernel that runs `precision` on `device` (quick: a small one).

    CPU fp32: torch (its BLAS: MKL takes an AVX2 path on AMD CPUs), an ONNX Runtime MatMul graph and NumPy
    (OpenBLAS). CPU bf16, only where the CPU has native bf16 (else {}): torch and, when installed, OpenVINO.
    CUDA fp32 / fp16: torch.
    """
    if device == "cuda":
        return {"torch": torch_matmul_gflops(device, TORCH_DTYPES[precision], repeat, quick)}
    if precision == "fp32":
        return {
            "torch": torch_matmul_gflops("cpu", torch.float32, repeat, quick),
            "onnxruntime": onnxruntime_matmul_gflops(repeat, quick),
            "numpy": numpy_matmul_gflops(repeat, quick),
        }
    if precision != "bf16" or not cpu_has_native_bf16():
        return {}
    peaks = {"torch": torch_matmul_gflops("cpu", torch.bfloat16, repeat, quick)}
    if importlib.util.find_spec("openvino") is not None:
        peaks["openvino"] = openvino_matmul_gflops("bf16", repeat, quick)
    return peaks


def peak_gflops(device: str = "cpu", precision: str = "fp32", repeat: int = 5, quick: bool = False) -> float:
    """The peak a share is taken of: the best kernel of matmul_peaks (NaN where none runs `precision`)."""
    return max(matmul_peaks(device, precision, repeat, quick).values(), default=float("nan"))


def peak_share(gflops: float, peak: float) -> float | None:
    """gflops as a share of peak, in [0, 1]; None when it is above 1 or there is no peak.

    Useful work cannot outrun the best large matmul measured in the same run: a share above 100% means
    the peak was measured wrong (too slow a kernel, a disturbed round), a bench error and never a figure.
    """
    if not math.isfinite(peak) or peak <= 0:
        return None
    share = gflops / peak
    return share if share <= 1.0 else None


def share_text(gflops: float, peak: float) -> str:
    """'412.0 = 46% of 889', or the bench error in words when peak_share refuses."""
    share = peak_share(gflops, peak)
    if share is not None:
        return f"{gflops:.1f} = {100 * share:.0f}% of {peak:.0f}"
    if not math.isfinite(peak) or peak <= 0:
        return f"{gflops:.1f} (no peak measured)"
    return f"{gflops:.1f}: BENCH ERROR, above the measured peak {peak:.0f} (the peak is wrong)"


# ------------------------------------------------------------------------------------------ baselines
def straightforward_loo_abs(
    model: SequenceClassifier, input_ids: np.ndarray, explained: np.ndarray, label: int, mask_id: int
) -> np.ndarray:
    """loo-abs of one sentence, the obvious way: one batch of the sentence and its single-token maskings.

    input_ids: (T,) int64; explained: (T,) bool. Returns (T,) float64, 0 where nothing was masked.
    """
    positions = np.flatnonzero(explained & (input_ids != mask_id))
    rows = np.repeat(input_ids[None, :], len(positions) + 1, axis=0)
    rows[np.arange(1, len(positions) + 1), positions] = mask_id
    device = next(model.parameters()).device
    batch = torch.from_numpy(rows).to(device)
    with torch.inference_mode():
        logits, _ = model(batch, torch.ones_like(batch))  # equal lengths: no padding needed
    target = logits[:, label].double().cpu().numpy()
    scores = np.zeros(len(input_ids), dtype=np.float64)
    scores[positions] = np.abs(target[0] - target[1:])
    return scores


def max_abs_difference(scores: Sequence[np.ndarray], reference: Sequence[np.ndarray]) -> float:
    """Largest |a − b| over two lists of per-sentence score arrays of equal shapes."""
    return max(
        (float(np.abs(a - b).max(initial=0.0)) for a, b in zip(scores, reference, strict=True)), default=0.0
    )


# ------------------------------------------------------------------------------------ output, records
def bench_parser(
    description: str | None, repeat: bool = True, auto_device: bool = False
) -> argparse.ArgumentParser:
    """The options every bench has: --quick, --json PATH, --cache DIR, --device (and --repeat N).

    --device is cpu|cuda (where every row runs), or with auto_device auto|cpu|cuda (bench/run: CPU rows
    always; GPU rows for auto when CUDA is there, never for cpu, required for cuda).
    """
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the tiny model, tiny sizes, one round: seconds, to check it runs",
    )
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this path")
    parser.add_argument(
        "--cache",
        type=Path,
        default=CACHE_DIR,
        help="the bench model and its exports (default bench/results/cache)",
    )
    devices = ["auto", "cpu", "cuda"] if auto_device else ["cpu", "cuda"]
    device_help = (
        "CPU rows always; GPU rows: auto when CUDA is there, cpu never, cuda required"
        if auto_device
        else "where every row runs"
    )
    parser.add_argument("--device", choices=devices, default=devices[0], help=device_help)
    if repeat:
        parser.add_argument(
            "--repeat", type=int, help="interleaved rounds; the best counts (default 3, --quick 1)"
        )
    return parser


def check_device(parser: argparse.ArgumentParser, device: str) -> None:
    if device == "cuda" and not cuda_available():
        parser.error("--device cuda needs onnxruntime-gpu (CUDA provider) and a GPU that PyTorch sees")


def rounds(args: argparse.Namespace) -> int:
    return args.repeat or (1 if args.quick else 3)


def torch_blas() -> str:
    """The BLAS torch was built with (torch.__config__'s BLAS_INFO, e.g. mkl), and its CPU capability."""
    config = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", config)
    capability = re.search(r"CPU capability usage: (\w+)", config)
    return (blas.group(1) if blas else "unknown") + (f" ({capability.group(1)})" if capability else "")


def machine_info() -> dict:
    """Where and under what load the figures were taken."""
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "isa": isa_extensions(),
        "torch_blas": torch_blas(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "physical_cores": physical_cores(),
        "torch_threads": torch.get_num_threads(),
        "load_average": list(os.getloadavg()),
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "versions": versions(),
    }


def machine_line() -> str:
    info = machine_info()
    return (
        f"machine: {info['hostname']} ({info['machine']}), {info['cpu_model']} "
        f"[{', '.join(info['isa']) or 'no AVX2'}], {info['cpus']} CPUs / {info['physical_cores']} physical "
        f"cores, load average {info['load_average'][0]:.1f}, torch threads {info['torch_threads']}, torch "
        f"BLAS {info['torch_blas']}" + (f", GPU {info['cuda']}" if info["cuda"] else "")
    )


def write_record(path: Path, record: dict) -> None:
    """Write `record` with the command line and machine info as indented JSON (creating the folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join([sys.executable, *sys.argv])
    runrecord.write_record(path, {"command": command, "machine": machine_info(), **record})
    print(f"wrote {path}")


def default_record_path(quick: bool = False) -> Path:
    """bench/results/bench-<hostname>-<date>.json (-quick.json for --quick runs, which mean nothing)."""
    suffix = "-quick" if quick else ""
    return RESULTS_DIR / f"bench-{socket.gethostname()}-{date.today().isoformat()}{suffix}.json"


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Columns padded to their widest cell; a rule under the header."""
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(cell).ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()

    print(line(header))
    print("-" * len(line(header)))
    for row in rows:
        print(line(row), flush=True)


def ratio_text(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}×"


def yes_no(flag: bool) -> str:
    return "yes" if flag else "NO"
