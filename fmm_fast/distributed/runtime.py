"""Start a local Ray runtime or join a cluster, after checking everything a user can get wrong."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

from fmm_fast.core.errors import UserError
from fmm_fast.measures.spec import MeasureSpec

WORKER_NICENESS = "RAY_worker_niceness"  # Ray's config `worker_niceness`, read when its node starts

CONNECT_TIMEOUT_S = (
    10.0  # a reachable head answers a TCP connect at once; Ray itself would retry for a minute
)
DEFAULT_RAY_PORT = 6379


@dataclass(frozen=True)
class ScaleOptions:
    """How to spread one command over Ray actors.

    workers: actors to start (None with an address: as many as the cluster's CPUs allow);
    address: an existing cluster (`auto`, HOST:PORT or ray://HOST:PORT), None for a local runtime;
    worker_cpus: CPUs each actor reserves = its ONNX Runtime intra-op threads;
    worker_gpus: GPUs each actor reserves (fractional allowed); None: 1 for CUDA/TensorRT providers, else 0.
    """

    workers: int | None = None
    address: str | None = None
    worker_cpus: int = 1
    worker_gpus: float | None = None

    @classmethod
    def from_flags(
        cls, workers: int | None, ray_address: str | None, worker_cpus: int, worker_gpus: float | None
    ) -> ScaleOptions | None:
        """The options, or None when neither --workers nor --ray-address asks for Ray (one process)."""
        if workers is None and ray_address is None:
            return None
        if workers is not None and workers < 1:
            raise UserError(f"--workers must be at least 1, got {workers}; leave it out for one process")
        if worker_cpus < 1:
            raise UserError(f"--worker-cpus must be at least 1, got {worker_cpus}")
        if worker_gpus is not None and worker_gpus < 0:
            raise UserError(f"--worker-gpus must be at least 0, got {worker_gpus}")
        return cls(workers, ray_address, worker_cpus, worker_gpus)

    def gpus_per_worker(self, provider: str) -> float:
        """--worker-gpus, or by default 1 for GPU providers (cuda, tensorrt) and 0 otherwise."""
        if self.worker_gpus is not None:
            return self.worker_gpus
        return 1.0 if provider in ("cuda", "tensorrt") else 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def check_scale_out(options: ScaleOptions, model: Path, measures: Sequence[MeasureSpec]) -> None:
    """Refuse before any work starts: Ray missing, cluster unreachable, a model or measure actors cannot run
    (they run exported ONNX models, and no gradient measure)."""
    check_runtime(options)
    if model.suffix != ".onnx":
        raise UserError(
            f"--workers/--ray-address run an exported model, '{model}' is not an .onnx file; export it with "
            "`fmm-fast export --model CHECKPOINT --out MODEL.onnx` and pass --model MODEL.onnx"
        )
    gradient = [spec.name for spec in measures if spec.needs_gradients]
    if gradient:
        raise UserError(
            f"gradient measures ({', '.join(gradient)}) need PyTorch and the checkpoint on every worker, "
            "which --workers/--ray-address do not support; run them in a separate evaluation without "
            "--workers/--ray-address (they cost a few backward passes per example and step)"
        )


def check_runtime(options: ScaleOptions) -> None:
    """UserError unless Ray is installed and options.address (if any) answers."""
    import_ray()
    if options.address is not None:
        check_reachable(options.address)


def check_worker_precision(options: ScaleOptions | None, used: str) -> None:
    """Workers run the exported model on ONNX Runtime as exported: refuse any other precision the driver
    resolved (--precision bf16 runs on OpenVINO), rather than record one precision and run another."""
    if options is not None and used != "fp32":
        raise UserError(
            f"--workers/--ray-address run ONNX Runtime in fp32, not {used}; drop --precision (or --workers)"
        )


def import_ray() -> ModuleType:
    """The ray module, or UserError naming the extra that installs it."""
    try:
        import ray
    except ImportError as error:
        raise UserError(
            "--workers/--ray-address need Ray, which is not installed; install the extra: "
            "pip install 'fmm-fast[ray]'"
        ) from error
    return ray


def check_reachable(address: str) -> None:
    """UserError unless HOST:PORT (or ray://HOST:PORT) accepts a TCP connection within CONNECT_TIMEOUT_S.

    `auto` is left to Ray, which finds a local cluster at once or fails at once.
    """
    if address == "auto":
        return
    target = address.split("://", 1)[-1]
    host, _, port = target.rpartition(":")
    if not host:
        host, port = target, str(DEFAULT_RAY_PORT)
    if not port.isdecimal():
        raise UserError(f"--ray-address '{address}' is not HOST:PORT; give e.g. 10.0.0.1:6379 or auto")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as error:
        raise UserError(
            f"cannot reach the Ray cluster at {address} ({error.strerror or error}); start it with "
            "`ray start --head` there, or check the address and firewall"
        ) from error


@contextmanager
def task_output(log: Path, threads: int) -> Iterator[None]:
    """In a Ray task's block: stdout and stderr appended to `log`, computation on `threads` threads (the
    CPUs the task reserved; fmm_fast.core.threads)."""
    from fmm_fast.core.threads import limited_threads

    log.parent.mkdir(parents=True, exist_ok=True)
    with (
        log.open("a", encoding="utf-8") as stream,
        contextlib.redirect_stdout(stream),
        contextlib.redirect_stderr(stream),
        limited_threads(threads),
    ):
        yield


@contextmanager
def ray_runtime(options: ScaleOptions) -> Iterator[ModuleType]:
    """Start a local runtime (or join options.address: check_scale_out checked it) for the block.

    A runtime that is already up (a test's, or a notebook's) is used as it is and left running.
    """
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    try:
        if options.address is None:
            # Ray runs its workers at nice 15 (to keep its own daemons responsive); here they do the
            # command's work, which beside any other busy process would crawl: the driver's priority instead
            os.environ.setdefault(WORKER_NICENESS, "0")
            # CPUs for the actors only (the driver mostly waits); GPUs are detected
            ray.init(
                num_cpus=options.workers * options.worker_cpus,
                include_dashboard=False,
                log_to_driver=False,
                logging_level="ERROR",
            )
        else:
            ray.init(address=options.address, log_to_driver=False, logging_level="ERROR")
    except (ConnectionError, RuntimeError, ValueError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(
            f"cannot start or join Ray ({reason}); check --ray-address (`ray status` on the head shows it)"
        ) from error
    print(f"fmm-fast: Ray runtime with {ray.cluster_resources().get('CPU', 0):.0f} CPUs", file=sys.stderr)
    try:
        yield ray
    finally:
        ray.shutdown()
