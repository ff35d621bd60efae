"""Export a model folder (an fmm-fast checkpoint or a Hugging Face classifier: training.hf_import) to a
self-describing ONNX file, verified against PyTorch before it is written.

The graph takes `input_ids` and `attention_mask` ((B, T) int64, right-padded, dynamic B and T) and gives
`logits` (B, C) and `signals` (B, L+1, D), exactly what :class:`fmm_fast.training.models.SequenceClassifier`
computes with `with_signals=True`. The file carries everything a backend needs in its metadata:
ModelInfo, the tokenizer and the verification report (fmm_fast/export/onnx_format.py).

fp32 and int8 keep the traced graph: ONNX Runtime fuses what its CPU kernels gain from when it loads the
file, and the fully fused graph of onnxruntime's transformer optimizer (Attention, EmbedLayerNormalization)
ran about 10% slower on CPU (bench/bench_engine.py). fp16, meant for GPU, goes through that optimizer;
if the fused graph does not match PyTorch, the traced graph is used instead. fp32 output must match
PyTorch within FP32_LOGIT_TOLERANCE or nothing is written. int8 and fp16 are opt-in, different models:
their report gives prediction agreement instead of refusing.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer
from torch import nn

from fmm_fast.core.datatypes import ModelInfo, pad_batch, trained_in, unpad
from fmm_fast.core.digest import content_sha256
from fmm_fast.core.disk_errors import naming
from fmm_fast.core.errors import UserError
from fmm_fast.core.records import dumps_record
from fmm_fast.core.writing import replacing
from fmm_fast.data.labels import generic_labels
from fmm_fast.data.local import display_name
from fmm_fast.export.onnx_format import (
    FORMAT_VERSION,
    INPUT_NAMES,
    METADATA_FORMAT_VERSION,
    METADATA_INFO,
    METADATA_TOKENIZER,
    METADATA_VERIFICATION,
    OUTPUT_NAMES,
    stored_source,
)
from fmm_fast.training.hf_import import open_classifier, resolve_model_dir
from fmm_fast.training.models import SequenceClassifier

QUANTIZATIONS = ("int8",)
# Opsets the TorchScript exporter supports for these graphs (CumSum needs 11, torch's maximum is 20).
MIN_OPSET, MAX_OPSET = 11, 20

FP32_LOGIT_TOLERANCE = 1e-4  # max |Δlogit| vs PyTorch, absolute
# Hidden states reach tens in magnitude; 1e-4 of the largest |signal| (at least 1) catches a broken output.
FP32_SIGNAL_RELATIVE_TOLERANCE = 1e-4

VERIFY_BATCH_SIZES = (1, 3, 8)
VERIFY_MASK_RATE = 0.3
VERIFY_RANDOM_ROWS = 4
VERIFY_RANDOM_MAX_TOKENS = 40
VERIFY_SENTENCES = [
    ("A gripping, beautifully shot film with a tender heart.", None),
    ("Dull.", None),
    ("The plot wanders, the jokes fall flat and the ending drags on far too long.", None),
    ("Mary went to the kitchen. John picked up the apple.", "Where is Mary?"),
    ("It rained all day in the small town by the sea, and nobody minded.", "Was it sunny?"),
    ("An honest, funny and surprisingly moving story about growing old together.", None),
    ("I wanted to like it.", "Did the reviewer like it?"),
    ("Two hours I will never get back.", None),
]

QUANTIZED_NOTE = (
    "{precision} makes a different model: its predictions are not the checkpoint's; compare results only "
    "with runs of this same file"
)


class _SignalsGraph(nn.Module):
    """The traced function: input_ids, attention_mask (B, T) -> logits (B, C), signals (B, L+1, D)."""

    def __init__(self, model: SequenceClassifier) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.model(input_ids, attention_mask, with_signals=True)


@dataclass
class VerificationBatch:
    """One verification batch: input_ids and attention_mask (B, T) int64, right-padded."""

    input_ids: np.ndarray
    attention_mask: np.ndarray

    def feed(self) -> dict[str, np.ndarray]:
        return {"input_ids": self.input_ids, "attention_mask": self.attention_mask}


def export_onnx(
    checkpoint_dir: str | Path,
    out_path: str | Path,
    opset: int = 17,
    quantize: str | None = None,
    fp16: bool = False,
    verify_examples: list[np.ndarray] | None = None,
    label_names: list[str] | None = None,
) -> dict:
    """Export, verify and write `out_path`; returns the verification report (also stored in the file).

    checkpoint_dir: an fmm-fast checkpoint, a Hugging Face classifier folder or a Hub name; label_names
    rename its labels (one per label, in order: for generic LABEL_0, LABEL_1, ...).

    verify_examples: (T_i,) int64 token-id arrays to verify on; by default, built-in sentences and random
    ids encoded with the checkpoint's tokenizer. Either way about a third of the tokens of every other row
    are replaced by the mask id. Raises UserError, leaving nothing at out_path, when fp32 output differs
    from PyTorch by more than the tolerances.
    """
    out_path = Path(out_path)
    check_export_options(out_path, opset, quantize, fp16)
    checkpoint = resolve_model_dir(checkpoint_dir).resolve()
    model, tokenizer, info = open_classifier(checkpoint, label_names)
    info = replace(
        info,
        dataset=display_name(info.dataset),
        source=stored_source(checkpoint, out_path),
        source_digest=content_sha256(checkpoint),  # gradient measures refuse the folder once it changes
    )
    batches = verification_batches(tokenizer, info, verify_examples)
    # The reference is what TorchBackend computes: the model as loaded, before the attention switch below.
    reference = [_torch_outputs(model, batch) for batch in batches]
    # Eager attention traces to the MatMul/Softmax pattern that onnxruntime's optimizer fuses (fp16).
    model.hf_model.set_attn_implementation("eager")

    out_path.parent.mkdir(parents=True, exist_ok=True)
    # Work next to out_path so the final rename is atomic and a failure leaves nothing behind.
    with (
        tempfile.TemporaryDirectory(prefix=".fmm-export-", dir=out_path.parent) as work,
        naming(out_path, work),  # a full disk there: name the file being exported, not the work folder
    ):
        work_dir = Path(work)
        plain = work_dir / "plain.onnx"
        sample = _trace_sample(batches, info.pad_id)
        _trace(model, plain, opset, sample)
        fused, fused_operators = _fuse(model, opset, sample, work_dir) if fp16 else (None, {})
        fp32_graph, fp32_check = _first_verified([fused, plain], batches, reference)
        report = {
            "format_version": FORMAT_VERSION,
            "opset": opset,
            "graph": "plain" if fp32_graph == plain else "fused",
            "fused_operators": {} if fp32_graph == plain else fused_operators,
            "precision": "fp32",
            "reference": "PyTorch fp32 on the model folder" + trained_in(info),
            "label_names": info.label_names,
            "rows": sum(len(batch.input_ids) for batch in batches),
            "batch_shapes": [list(batch.input_ids.shape) for batch in batches],
            "checks": {"fp32": fp32_check},
        }
        final = fp32_graph
        if quantize or fp16:
            precision = "int8" if quantize else "fp16"
            final = work_dir / f"{precision}.onnx"
            (_quantize_int8 if quantize else _convert_fp16)(fp32_graph, final)
            report["precision"] = precision
            report["checks"][precision] = _compare(_run_onnx(final, batches), reference)
            report["note"] = QUANTIZED_NOTE.format(precision=precision)
        _write_with_metadata(final, out_path, info, tokenizer, report)
    return report


def _first_verified(
    candidates: list[Path | None],
    batches: list[VerificationBatch],
    reference: list[tuple[np.ndarray, np.ndarray]],
) -> tuple[Path, dict]:
    """The first candidate graph whose fp32 output matches PyTorch, and its check; UserError if none does."""
    for candidate in candidates:
        if candidate is None:
            continue
        check = _compare(_run_onnx(candidate, batches), reference)
        if _within_fp32_tolerance(check):
            return candidate, check
    raise UserError(
        f"the ONNX export does not match PyTorch (max |Δlogit| {check['max_abs_logit_diff']:.2e}, tolerance "
        f"{FP32_LOGIT_TOLERANCE:.0e}; max |Δsignal| {check['max_abs_signal_diff']:.2e} of "
        f"{check['max_abs_signal']:.2e}); nothing was written; try another --opset or report the model type"
    )


def check_export_options(out_path: Path, opset: int, quantize: str | None, fp16: bool) -> None:
    """UserError for an --out that is not .onnx, an unknown --quantize, both precisions, a bad --opset, or a
    missing ONNX Runtime."""
    if out_path.suffix != ".onnx":
        raise UserError(f"--out '{out_path}' must end in .onnx (that is how fmm-fast recognises ONNX models)")
    if quantize is not None and quantize not in QUANTIZATIONS:
        raise UserError(f"unknown --quantize '{quantize}'; use {' or '.join(QUANTIZATIONS)}")
    if quantize and fp16:
        raise UserError("--quantize and --fp16 exclude each other; int8 is for CPU, fp16 for GPU: pick one")
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise UserError(f"--opset {opset} is not supported; use {MIN_OPSET}..{MAX_OPSET} (default 17)")
    try:
        import onnxruntime  # noqa: F401
    except ImportError as error:
        raise UserError(
            "export verifies with ONNX Runtime, which is not installed; pip install 'fmm-fast[cpu]' "
            "(or 'fmm-fast[gpu]')"
        ) from error


def verification_batches(
    tokenizer: Tokenizer, info: ModelInfo, examples: list[np.ndarray] | None = None, seed: int = 0
) -> list[VerificationBatch]:
    """Right-padded batches of VERIFY_BATCH_SIZES rows (cycled while examples last), every other row masked.

    examples: (T_i,) int64 arrays; by default VERIFY_SENTENCES (pairs included, so BERT token types are
    exercised) plus VERIFY_RANDOM_ROWS rows of random non-special ids between the tokenizer's specials.
    """
    rng = np.random.default_rng(seed)
    if examples is None:
        examples = _default_examples(tokenizer, info, rng)
    else:
        examples = [np.asarray(example, dtype=np.int64) for example in examples]
        if not examples or min(len(example) for example in examples) == 0:
            raise UserError("verify_examples must be non-empty token-id arrays; pass at least one example")
        longest = max(len(example) for example in examples)
        if longest > info.max_length:
            raise UserError(
                f"verify_examples has a {longest}-token example, the model takes {info.max_length}; "
                "truncate them with the model's tokenizer"
            )
    special = np.asarray(info.special_ids, dtype=np.int64)
    rows = []
    for index, example in enumerate(examples):
        row = example.copy()
        if index % 2:
            maskable = ~np.isin(row, special)
            row[maskable & (rng.random(len(row)) < VERIFY_MASK_RATE)] = info.mask_id
        rows.append(row)
    batches, start, size_index = [], 0, 0
    while start < len(rows):
        size = VERIFY_BATCH_SIZES[size_index % len(VERIFY_BATCH_SIZES)]
        input_ids, attention_mask = pad_batch(rows[start : start + size], info.pad_id)
        batches.append(VerificationBatch(input_ids, attention_mask))
        start, size_index = start + size, size_index + 1
    return batches


def _default_examples(tokenizer: Tokenizer, info: ModelInfo, rng: np.random.Generator) -> list[np.ndarray]:
    encodings = [
        tokenizer.encode(first, second) if second else tokenizer.encode(first)
        for first, second in VERIFY_SENTENCES
    ]
    examples = [np.asarray(encoding.ids, dtype=np.int64) for encoding in encodings]
    # The single-sentence template (e.g. [CLS] x [SEP]) around random ids: covers tokens no sentence has.
    template = encodings[0]
    opening = [i for i, s in zip(template.ids, template.special_tokens_mask, strict=True) if s][:1]
    closing = [i for i, s in zip(template.ids, template.special_tokens_mask, strict=True) if s][1:]
    ordinary = np.setdiff1d(np.arange(tokenizer.get_vocab_size()), info.special_ids)
    limit = min(VERIFY_RANDOM_MAX_TOKENS, info.max_length - len(opening) - len(closing))
    for _ in range(VERIFY_RANDOM_ROWS):
        body = rng.choice(ordinary, size=int(rng.integers(1, limit + 1)))
        examples.append(np.concatenate([opening, body, closing]).astype(np.int64))
    return examples


def _torch_outputs(model: SequenceClassifier, batch: VerificationBatch) -> tuple[np.ndarray, np.ndarray]:
    model.eval()
    with torch.inference_mode():
        logits, signals = model(
            torch.from_numpy(batch.input_ids), torch.from_numpy(batch.attention_mask), with_signals=True
        )
    assert signals is not None
    return logits.float().numpy(), signals.float().numpy()


def _trace_sample(batches: list[VerificationBatch], pad_id: int) -> VerificationBatch:
    """The longest verification row and its first half, padded: a sample with padding to trace on."""
    rows = [row for batch in batches for row in unpad(batch.input_ids, batch.attention_mask)]
    longest = max(rows, key=len)
    return VerificationBatch(*pad_batch([longest, longest[: max(1, len(longest) // 2)]], pad_id))


def _trace(model: SequenceClassifier, path: Path, opset: int, sample: VerificationBatch) -> None:
    """TorchScript-based export (the dynamo exporter needs onnxscript)."""
    graph = _SignalsGraph(model).eval()
    dynamic = {0: "batch", 1: "sequence"}
    with warnings.catch_warnings():
        # Tracer warnings about Python control flow: verification on several shapes is the real check.
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(
                graph,
                (torch.from_numpy(sample.input_ids), torch.from_numpy(sample.attention_mask)),
                str(path),
                input_names=list(INPUT_NAMES),
                output_names=list(OUTPUT_NAMES),
                dynamic_axes={
                    "input_ids": dynamic,
                    "attention_mask": dynamic,
                    "logits": {0: "batch"},
                    "signals": {0: "batch"},
                },
                opset_version=opset,
                dynamo=False,
            )
        except RuntimeError as error:  # the exporter's own errors (e.g. an op missing at this opset)
            reason = str(error).splitlines()[0].split(" [Caused by")[0]
            raise UserError(f"torch.onnx.export failed at opset {opset}: {reason}; try --opset 17") from error
    model.eval()  # export restores the wrapper's training flag recursively; keep the model in eval mode


def _fuse(
    model: SequenceClassifier, opset: int, sample: VerificationBatch, work_dir: Path
) -> tuple[Path | None, dict[str, int]]:
    """onnxruntime's transformer optimizer (opt_level 0: portable fusions only) on a trace of the full
    model: its pattern matching breaks on the first-token last layer beside the full one (on a GPU the
    fused kernels matter more than that layer's saving).

    Returns the fused graph and {fused operator: count}, or (None, {}) when the optimizer fails.
    """
    from onnxruntime.transformers import optimizer

    config = model.hf_model.config
    full = work_dir / "full.onnx"
    model.use_first_token_last_layer = False
    try:
        _trace(model, full, opset, sample)
    finally:
        model.use_first_token_last_layer = True
    fused = work_dir / "fused.onnx"
    try:
        with _quiet_onnxruntime_tools():
            optimized = optimizer.optimize_model(
                str(full),
                model_type="bert",  # BERT, RoBERTa, ELECTRA, ... share the encoder fusions
                num_heads=int(config.num_attention_heads),
                hidden_size=int(config.hidden_size),
                opt_level=0,
            )
            optimized.save_model_to_file(str(fused))
    except Exception:  # an unfamiliar architecture: the plain graph still works
        return None, {}
    counts = optimized.get_fused_operator_statistics()
    return fused, {name: count for name, count in counts.items() if count}


@contextlib.contextmanager
def _quiet_onnxruntime_tools() -> Iterator[None]:
    """Silence the optimizer's and quantizer's advice (warnings and root-logger messages) while they run."""
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(logging.NOTSET)


def _run_onnx(path: Path, batches: list[VerificationBatch]) -> list[tuple[np.ndarray, np.ndarray]]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    outputs = []
    for batch in batches:
        logits, signals = session.run(list(OUTPUT_NAMES), batch.feed())
        outputs.append((logits.astype(np.float32), signals.astype(np.float32)))
    return outputs


def _compare(
    outputs: list[tuple[np.ndarray, np.ndarray]], reference: list[tuple[np.ndarray, np.ndarray]]
) -> dict:
    """max |Δlogit|, max |Δsignal|, largest |signal| and argmax agreement rate over all rows."""
    logit_diff = max(
        float(np.abs(out[0] - ref[0]).max()) for out, ref in zip(outputs, reference, strict=True)
    )
    signal_diff = max(
        float(np.abs(out[1] - ref[1]).max()) for out, ref in zip(outputs, reference, strict=True)
    )
    agree = sum(
        int((out[0].argmax(1) == ref[0].argmax(1)).sum()) for out, ref in zip(outputs, reference, strict=True)
    )
    rows = sum(len(ref[0]) for ref in reference)
    return {
        "max_abs_logit_diff": logit_diff,
        "max_abs_signal_diff": signal_diff,
        "max_abs_signal": max(float(np.abs(ref[1]).max()) for ref in reference),
        "argmax_agreement": agree / rows,
    }


def _within_fp32_tolerance(check: dict) -> bool:
    signal_tolerance = FP32_SIGNAL_RELATIVE_TOLERANCE * max(1.0, check["max_abs_signal"])
    return (
        check["max_abs_logit_diff"] <= FP32_LOGIT_TOLERANCE
        and check["max_abs_signal_diff"] <= signal_tolerance
    )


def _quantize_int8(source: Path, target: Path) -> None:
    """Dynamic quantization: int8 weights, activations quantized per batch at run time (CPU)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _quiet_onnxruntime_tools():
        quantize_dynamic(
            source,
            target,
            weight_type=QuantType.QInt8,
            per_channel=True,
            # fused contrib ops (Attention, ...) defeat ONNX shape inference; their outputs are float
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )


def _convert_fp16(source: Path, target: Path) -> None:
    """fp16 weights and activations; inputs and outputs stay int64 / float32 so backends need no change."""
    import onnx

    try:
        from onnxruntime.transformers.onnx_model import OnnxModel
    except ImportError as error:
        raise UserError(
            "--fp16 needs onnxruntime's transformer tools (onnxruntime.transformers); pip install "
            "onnxruntime-gpu (or onnxruntime)"
        ) from error
    converted = OnnxModel(onnx.load(str(source)))
    with _quiet_onnxruntime_tools():
        converted.convert_float_to_float16(keep_io_types=True)
    converted.save_model_to_file(str(target))


def _write_with_metadata(
    source: Path, out_path: Path, info: ModelInfo, tokenizer: Tokenizer, report: dict
) -> None:
    import onnx

    model = onnx.load(str(source))
    onnx.helper.set_model_props(
        model,
        {
            METADATA_INFO: info.to_json(),
            METADATA_TOKENIZER: tokenizer.to_str(),
            METADATA_VERIFICATION: dumps_record(report, indent=None),
            METADATA_FORMAT_VERSION: FORMAT_VERSION,
        },
    )
    with replacing(out_path, ".onnx") as staged:
        onnx.save(model, str(staged))


def format_report(report: dict, out_path: str | Path) -> list[str]:
    """A few human-readable lines about an export report (what the CLI prints)."""
    shapes = ", ".join(f"{rows}×{length}" for rows, length in report["batch_shapes"])
    lines = [
        f"wrote {out_path} ({report['precision']}, {report['graph']} graph, opset {report['opset']}, "
        f"{Path(out_path).stat().st_size / 2**20:.1f} MiB)",
        f"verified against {report['reference']} on {report['rows']} rows (batches {shapes}):",
    ]
    if report["fused_operators"]:
        fused = ", ".join(f"{name}×{count}" for name, count in report["fused_operators"].items())
        lines.insert(1, f"fused by onnxruntime's transformer optimizer: {fused}")
    for precision, check in report["checks"].items():
        tolerance = f" (tolerance {FP32_LOGIT_TOLERANCE:.0e})" if precision == "fp32" else ""
        lines.append(
            f"  {precision}: max |Δlogit| {check['max_abs_logit_diff']:.2e}{tolerance}, "
            f"max |Δsignal| {check['max_abs_signal_diff']:.2e}, "
            f"argmax agreement {100 * check['argmax_agreement']:.1f}%"
        )
    if "note" in report:
        lines.append(f"note: {report['note']}")
    if generic_labels(report.get("label_names", [])):
        lines.append(
            f"note: the model's labels are generic ({', '.join(report['label_names'])}); name them with "
            "--labels, or pair them with a dataset's labels by --label-map when evaluating"
        )
    return lines
