"""OpenVINO backend: the file `fmm-fast export` wrote, run by OpenVINO's CPU plugin in fp32 or bf16.

OpenVINO reads the exported .onnx as it is (no conversion step, no second artefact). bf16 is the plugin's
INFERENCE_PRECISION_HINT: matrix products and attention run in bf16 on CPUs with native bf16 (AVX512_BF16,
AMX), the inputs and outputs stay int64 and float32. Like the ONNX Runtime backend it keeps two compiled
models: the graph cut down to `logits` for scoring passes, the whole graph (with `signals`) for MaSF.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fmm_fast.backends.base import ForwardOutput
from fmm_fast.backends.onnx_backend import _read_metadata
from fmm_fast.core.errors import UserError
from fmm_fast.core.threads import compute_threads
from fmm_fast.export.onnx_format import configure_tokenizer, model_feeds

EXTRA = "openvino"  # pyproject's optional dependency group
# fmm-fast's precision names -> OpenVINO's INFERENCE_PRECISION_HINT values
HINTS = {"fp32": "f32", "bf16": "bf16"}


def import_openvino() -> Any:
    """The openvino module; UserError naming the extra when it is not installed."""
    try:
        import openvino
    except ImportError as error:
        raise UserError(
            f"bf16 on CPU for an ONNX model runs on OpenVINO, which is not installed; install it with "
            f"`pip install 'fmm-fast[{EXTRA}]'` or run with --precision fp32"
        ) from error
    return openvino


class OpenVinoBackend:
    """Backend protocol on OpenVINO compiled models of one exported file.

    info, tokenizer (configured for info.max_length) and verification come from the file's metadata, as
    for OnnxBackend; precision (and `name`) is what the plugin reports it runs, fp32 or bf16.
    """

    def __init__(
        self,
        path: str | Path,
        precision: str = "bf16",
        threads: int | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> None:
        """threads: inference threads, default core.threads.compute_threads() (one stream: batches run
        one by one). precision: fp32 or bf16 (a key of HINTS). properties: CPU plugin properties over the
        defaults (bench/ sets PERF_COUNT for a per-operation profile)."""
        openvino = import_openvino()
        self.path = Path(path)
        info, tokenizer, self.verification, outputs = _read_metadata(self.path)
        self.info = info
        self.tokenizer = configure_tokenizer(tokenizer, info.max_length)
        self.has_signals = "signals" in outputs
        self._openvino = openvino
        self._core = openvino.Core()
        self._config = {
            "INFERENCE_PRECISION_HINT": HINTS[precision],
            "INFERENCE_NUM_THREADS": threads or compute_threads(),
            "NUM_STREAMS": 1,
            "PERFORMANCE_HINT": "LATENCY",
            **(properties or {}),
        }
        try:
            self._model = self._core.read_model(str(self.path))
        except RuntimeError as error:
            raise UserError(
                f"OpenVINO cannot read '{self.path}': {str(error).splitlines()[0]}; re-export it with "
                "`fmm-fast export`"
            ) from error
        self._requests = {True: self._compile(logits_only=True).create_infer_request()}
        # what the plugin runs: it may keep f32 where the CPU lacks bf16
        compiled = self._requests[True].get_compiled_model()
        reported = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        self.precision = next((name for name, hint in HINTS.items() if hint == reported), reported)
        self.name = f"openvino:CPU {self.precision}"

    def _compile(self, logits_only: bool) -> Any:
        model = self._model
        if logits_only:  # OpenVINO drops the nodes no kept output needs: most of the last layer
            model = self._openvino.Model(
                [model.output("logits").get_node()], model.get_parameters(), "logits"
            )
        return self._core.compile_model(model, "CPU", self._config)

    def forward(
        self, input_ids: np.ndarray, attention_mask: np.ndarray, with_signals: bool = False
    ) -> ForwardOutput:
        """input_ids, attention_mask (B, T) int64, right-padded -> logits (B, C), signals (B, L+1, D)."""
        feeds = model_feeds(self.path, self.has_signals, with_signals, input_ids, attention_mask)
        logits_only = not with_signals
        if logits_only not in self._requests:
            self._requests[logits_only] = self._compile(logits_only).create_infer_request()
        request = self._requests[logits_only]
        request.infer(feeds)
        logits = np.array(request.get_tensor("logits").data, dtype=np.float32)
        signals = None if logits_only else np.array(request.get_tensor("signals").data, dtype=np.float32)
        return ForwardOutput(logits=logits, signals=signals)

    def profiling_info(self) -> list[Any]:
        """The plugin's per-operation timings (openvino ProfilingInfo) of the last logits-only forward;
        empty (or all zero) unless opened with properties={"PERF_COUNT": True}."""
        return list(self._requests[True].get_profiling_info())
