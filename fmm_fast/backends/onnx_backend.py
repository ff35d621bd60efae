"""ONNX Runtime backend for files written by `fmm-fast export` (format: fmm_fast/export/onnx_format.py).

The file is self-describing: ModelInfo, tokenizer and verification report come from its metadata. The
sessions run graph optimisation ORT_ENABLE_ALL; the optimised graphs are cached next to the model
(`<stem>.logits.opt-<provider>-ort<version>-<sha256 prefix>.onnx` for the logits-only cut, `<stem>.opt-...`
for the whole graph), keyed by the model's content digest: a model replaced at the same path, whatever its
modification time, never runs an old model's graph. Each cache's own sha256 is noted beside it
(`<cache>.sha256`) when it is written: a cache whose content differs from it is written again.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from fmm_fast.backends.base import ForwardOutput
from fmm_fast.core.datatypes import ModelInfo
from fmm_fast.core.digest import content_sha256
from fmm_fast.core.errors import UserError
from fmm_fast.core.records import loads_record
from fmm_fast.core.threads import compute_threads
from fmm_fast.core.writing import replacing, write_text
from fmm_fast.export.onnx_format import (
    FORMAT_VERSION,
    INPUT_NAMES,
    METADATA_FORMAT_VERSION,
    METADATA_INFO,
    METADATA_TOKENIZER,
    METADATA_VERIFICATION,
    configure_tokenizer,
    model_feeds,
    resolved_source,
)
from fmm_fast.training.folder_check import check_onnx_metadata

PROVIDERS = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
}
# What each choice asks ONNX Runtime for, in order of preference (nodes a provider lacks fall through).
PROVIDER_CHAINS = {
    "cpu": [PROVIDERS["cpu"]],
    "cuda": [PROVIDERS["cuda"], PROVIDERS["cpu"]],
    "tensorrt": [PROVIDERS["tensorrt"], PROVIDERS["cuda"], PROVIDERS["cpu"]],
}
# TensorRT compiles its nodes, and compiled graphs cannot be saved: it keeps its own engine cache instead.
CACHED_PROVIDERS = ("cpu", "cuda")
CACHE_DIGEST_CHARS = 16  # of the model's sha256 in a cached graph's name: 64 bits, no accidental clash


class OnnxBackend:
    """Backend protocol on ONNX Runtime sessions.

    Two sessions on one file: logits-only calls run the graph cut down to the `logits` output (an export
    computes the logits through the first-token last layer, see fmm_fast.export.first_token, so the cut graph
    skips most of that layer); MaSF calls run the whole graph, opened on first use.
    info, tokenizer (configured for info.max_length) and verification come from the file's metadata;
    providers is what the sessions actually run on (session.get_providers()), name names the first.
    """

    def __init__(
        self,
        open_session: Callable[[bool], Any],
        info: ModelInfo,
        tokenizer: Tokenizer,
        verification: dict,
        path: Path,
        has_signals: bool,
    ) -> None:
        """open_session(logits_only) -> an onnxruntime.InferenceSession of the file (cut down or whole)."""
        self._open_session = open_session
        self._sessions = {True: open_session(True)}
        self.info = info
        self.tokenizer = tokenizer
        self.verification = verification
        self.path = path
        self.has_signals = has_signals
        self.providers: list[str] = self._sessions[True].get_providers()
        self.name = f"onnxruntime:{self.providers[0]}"
        self._io_binding = self.providers[0] == PROVIDERS["cuda"]

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        provider: str = "auto",
        threads: int | None = None,
        strict_provider: bool = False,
    ) -> OnnxBackend:
        """Open an exported model.

        provider: auto (CUDA when onnxruntime has it, else CPU) | cpu | cuda | tensorrt. A requested GPU
        provider that is missing falls back to CPU with a warning on stderr, or raises UserError when
        strict_provider. threads: intra-op threads, default core.threads.compute_threads() (inter-op 1,
        sequential).
        """
        import onnxruntime as ort

        path = Path(path)
        info, tokenizer, verification, outputs = _read_metadata(path)
        key = _resolve_provider(provider, ort.get_available_providers(), strict_provider)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or compute_threads()
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # ORT's own warnings (unused initializers, ...) are not the user's concern
        options.log_severity_level = 3
        chain = PROVIDER_CHAINS[key]

        def open_session(logits_only: bool):
            source = _session_source(path, key, chain, logits_only)
            try:
                session = ort.InferenceSession(source, options, providers=chain)
            except _ort_errors() as error:
                if source == str(path) or not isinstance(source, str):
                    raise _unloadable(path, error) from error
                # the cached graph is damaged (the model itself was checked): write it again
                print(f"fmm-fast: warning: {source} is damaged; writing it again", file=sys.stderr)
                source = _session_source(path, key, chain, logits_only, rebuild=True)
                try:
                    session = ort.InferenceSession(source, options, providers=chain)
                except _ort_errors() as again:
                    raise _unloadable(path, again) from again
            if PROVIDERS[key] not in session.get_providers():  # listed as available, yet failed to start
                _provider_missing(f"{PROVIDERS[key]} did not start (see ONNX Runtime's log)", strict_provider)
            return session

        tokenizer = configure_tokenizer(tokenizer, info.max_length)
        return cls(open_session, info, tokenizer, verification, path, has_signals="signals" in outputs)

    def forward(
        self, input_ids: np.ndarray, attention_mask: np.ndarray, with_signals: bool = False
    ) -> ForwardOutput:
        """input_ids, attention_mask (B, T) int64, right-padded -> logits (B, C), signals (B, L+1, D)."""
        feeds = model_feeds(self.path, self.has_signals, with_signals, input_ids, attention_mask)
        logits_only = not with_signals
        if logits_only not in self._sessions:
            self._sessions[logits_only] = self._open_session(logits_only)
        session = self._sessions[logits_only]
        names = ["logits"] if logits_only else ["logits", "signals"]
        outputs = self._run_bound(session, names, feeds) if self._io_binding else session.run(names, feeds)
        logits = np.asarray(outputs[0], dtype=np.float32)
        signals = None if logits_only else np.asarray(outputs[1], dtype=np.float32)
        return ForwardOutput(logits=logits, signals=signals)

    @staticmethod
    def _run_bound(session, names: list[str], feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """CUDA: inputs copied once, outputs kept on the device until the single copy back."""
        binding = session.io_binding()
        for name, array in feeds.items():
            binding.bind_cpu_input(name, array)
        for name in names:
            binding.bind_output(name, "cuda")
        session.run_with_iobinding(binding)
        return binding.copy_outputs_to_cpu()


def _read_metadata(path: Path) -> tuple[ModelInfo, Tokenizer, dict, set[str]]:
    """Parse and check the file: metadata present, inputs named as fmm-fast exports them, tokenizer fits.
    Returns the ModelInfo, tokenizer, verification report and the graph's output names."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as error:  # protobuf's DecodeError and friends have no common base worth naming
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(
            f"'{path}' is not an ONNX model ({reason}); create one with `fmm-fast export`"
        ) from error
    if not model.graph.node:
        raise UserError(f"'{path}' is not an ONNX model (no graph); create one with `fmm-fast export`")
    metadata = {prop.key: prop.value for prop in model.metadata_props}
    if METADATA_INFO not in metadata:
        raise UserError(
            f"'{path}' was not exported by fmm-fast export (no {METADATA_INFO} metadata); re-export with "
            "`fmm-fast export --model CHECKPOINT --out FILE.onnx`"
        )
    version = metadata.get(METADATA_FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise UserError(
            f"'{path}' has fmm-fast format version {version}, this fmm-fast reads {FORMAT_VERSION}; "
            "re-export it with this version's `fmm-fast export` (or upgrade fmm-fast)"
        )
    initializers = {init.name for init in model.graph.initializer}
    inputs = sorted(value.name for value in model.graph.input if value.name not in initializers)
    if inputs != sorted(INPUT_NAMES):
        raise UserError(
            f"'{path}' takes inputs {inputs}, fmm-fast feeds {list(INPUT_NAMES)}; "
            "re-export with `fmm-fast export`"
        )
    outputs = {value.name for value in model.graph.output}
    if "logits" not in outputs:
        raise UserError(f"'{path}' has no 'logits' output; re-export with `fmm-fast export`")
    try:
        info = ModelInfo.from_json(metadata[METADATA_INFO])
        info = replace(info, source=resolved_source(path, info.source))
        tokenizer = Tokenizer.from_str(metadata[METADATA_TOKENIZER])
    except Exception as error:  # bad JSON or fields from json, tokenizers or the dataclass
        raise UserError(
            f"'{path}' has unreadable fmm-fast metadata ({str(error).splitlines()[0]}); re-export it with "
            "`fmm-fast export`"
        ) from error
    check_onnx_metadata(path, model, info, tokenizer)
    try:
        verification = loads_record(metadata.get(METADATA_VERIFICATION, "{}"))
    except ValueError as error:
        raise UserError(
            f"'{path}' has an unreadable verification report ({error}); re-export it with `fmm-fast export`"
        ) from None
    return info, tokenizer, verification, outputs


def _ort_errors() -> tuple[type[Exception], ...]:
    """What ONNX Runtime raises for a file it cannot load: its own classes (Fail, InvalidProtobuf,
    InvalidGraph, ..., which derive from Exception only) and RuntimeError."""
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    names = ("Fail", "InvalidArgument", "NoSuchFile", "NoModel", "InvalidProtobuf", "InvalidGraph", "EPFail")
    return (RuntimeError, *(getattr(state, name) for name in names if hasattr(state, name)))


def _unloadable(path: Path, error: Exception) -> UserError:
    return UserError(
        f"ONNX Runtime cannot load '{path}': {str(error).splitlines()[0]}; re-export it with "
        "`fmm-fast export`"
    )


def _resolve_provider(provider: str, available: list[str], strict: bool) -> str:
    """auto|cpu|cuda|tensorrt -> the provider key to run, falling back to cpu when allowed."""
    if provider == "auto":
        return "cuda" if PROVIDERS["cuda"] in available else "cpu"
    if provider not in PROVIDERS:
        raise UserError(f"unknown ONNX Runtime provider '{provider}'; use auto, {', '.join(PROVIDERS)}")
    if PROVIDERS[provider] not in available:
        _provider_missing(
            f"{PROVIDERS[provider]} is not available in this onnxruntime (has {', '.join(available)})", strict
        )
        return "cpu"
    return provider


def _provider_missing(reason: str, strict: bool) -> None:
    if strict:
        raise UserError(f"{reason}; install onnxruntime-gpu with a matching CUDA, or use provider cpu")
    print(f"fmm-fast: warning: {reason}; running on CPUExecutionProvider", file=sys.stderr)


def _session_source(
    path: Path, key: str, chain: list[str], logits_only: bool, rebuild: bool = False
) -> str | bytes:
    """What a session loads: the cached optimised graph for provider `key` (the logits-only cut or the
    whole graph) of this model's content, written first if missing.

    Written at ORT_ENABLE_EXTENDED: ORT_ENABLE_ALL adds hardware-specific layouts that must not be saved;
    the session applies them when it loads the cache. Without a cache (TensorRT, a read-only folder) it
    is the model itself, or its logits-only cut as bytes. rebuild: write the cache again (a damaged one).
    """
    import onnxruntime as ort

    kind = ".logits" if logits_only else ""
    digest = content_sha256(path)[:CACHE_DIGEST_CHARS]
    cache = path.with_name(f"{path.stem}{kind}.opt-{key}-ort{ort.__version__}-{digest}.onnx")
    written = cache.with_name(f"{cache.name}.sha256")  # the cache's own digest, as it was written
    if cache.is_file() and not rebuild:
        if _cache_holds(cache, written):
            return str(cache)
        print(
            f"fmm-fast: warning: {cache} is not the graph fmm-fast cached (its content differs from "
            f"{written.name}, or that is missing); writing it again",
            file=sys.stderr,
        )
    source = _logits_only_graph(path) if logits_only else str(path)
    if key not in CACHED_PROVIDERS or not os.access(path.parent, os.W_OK):  # TensorRT; a read-only folder
        return source
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.log_severity_level = 3
    try:
        with replacing(cache, ".onnx") as staged:  # ORT picks the format by suffix
            options.optimized_model_filepath = str(staged)
            ort.InferenceSession(source, options, providers=chain)
        write_text(written, content_sha256(cache))
    except (OSError, *_ort_errors()):  # a full disk, or ORT could not write it: run the model itself
        return source
    return str(cache)


def _cache_holds(cache: Path, written: Path) -> bool:
    """Whether the cached graph is the one written (its sha256 is the one noted beside it when written):
    a file put in its place (another model's cache, a copy) is not run."""
    try:
        return written.read_text(encoding="utf-8").strip() == content_sha256(cache)
    except (OSError, UnicodeDecodeError, UserError):
        return False


def _logits_only_graph(path: Path) -> bytes:
    """The model cut down to the nodes its `logits` output needs (ONNX Runtime runs every node of a
    graph whatever outputs are asked for), serialised."""
    import onnx
    from onnx.utils import Extractor

    model = onnx.load(str(path))
    initializers = {init.name for init in model.graph.initializer}
    inputs = [value.name for value in model.graph.input if value.name not in initializers]
    return Extractor(model).extract_model(inputs, ["logits"]).SerializeToString()
