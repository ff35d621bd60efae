"""`bench/run --quick`'s second part: every other bench script end to end at its --quick size (the tiny
model, a handful of examples), each in a process of its own as a person runs it, all output under one folder.

A Python script's process is forked from a server that imported the heavy libraries once (PyTorch,
Transformers, ONNX Runtime, Numba: about 5 CPU seconds a fresh interpreter pays before a script's first
line, most of a quick run's cost), then runs the file as `python SCRIPT ARGS` would: as __main__, with its
arguments in sys.argv, bench/ first on the path, its output in its log, its exit status its own.

A script that needs what this machine lacks (a GPU, a CPU with native bf16, two cores, PyPI) is skipped with
the reason. bench/run's own table runs the rest (TABLE_SCRIPTS). tests/test_bench_quick.py runs it all and
checks that every script of bench/ is in one or the other, so a new script cannot be left out.
"""

from __future__ import annotations

import atexit
import importlib.util
import multiprocessing
import os
import resource
import runpy
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
TABLE_SCRIPTS = (
    "bench_occlusion.py",
    "bench_curve.py",
    "bench_masf.py",
    "bench_perturbation.py",
    "bench_memory.py",
)  # run by bench/run's own table
LOG_TAIL_LINES = 25
# What the fork server imports once for every script (the lazily loaded Transformers model classes included);
# the bench scripts' own modules stay out, so that each script's process imports its code afresh.
PRELOAD = [
    "torch",
    "transformers",
    "transformers.models.roberta.modeling_roberta",
    "transformers.models.bert.modeling_bert",
    "onnxruntime",
    "numba",
    "scipy.stats",
    "tokenizers",
    "fmm_fast.cli",
    "fmm_fast.backends.engine",
    "fmm_fast.training.train",
    "fmm_fast.export.onnx_export",
]

Arguments = Callable[[Path, Path], list[str]]  # (output folder, model cache) -> command-line arguments


@dataclass(frozen=True)
class QuickRun:
    """One script's quick run. needs: why it cannot run here (None when it can), asked just before it runs;
    runner: what starts it (python for a .py)."""

    script: str
    arguments: Arguments
    needs: Callable[[str], str | None] = field(default=lambda device: None)
    runner: tuple[str, ...] = (sys.executable,)


@dataclass
class Outcome:
    script: str
    status: str  # ok | skipped | FAILED
    seconds: float = 0.0  # wall
    cpu_seconds: float = 0.0  # user + system of the script's processes: its cost on a busy machine too
    note: str = ""  # the reason of a skip, the exit status and log of a failure


# ---------------------------------------------------------------------------------------- arguments
def model_bench(name: str) -> Arguments:
    """A script on the tiny model kept in the cache, its JSON at OUT/NAME.json."""
    return lambda out, cache: ["--quick", "--json", str(out / f"{name}.json"), "--cache", str(cache)]


def json_only(name: str) -> Arguments:
    """A script without a model, its JSON at OUT/NAME.json."""
    return lambda out, cache: ["--quick", "--json", str(out / f"{name}.json")]


def into(name: str, *options: str) -> Arguments:
    """--quick (or `options`) with everything written under OUT/NAME (--out)."""
    return lambda out, cache: [*(options or ("--quick",)), "--out", str(out / name)]


# ----------------------------------------------------------------------------------------------- needs
def needs_module(module: str, extra: str) -> Callable[[str], str | None]:
    def check(device: str) -> str | None:
        found = importlib.util.find_spec(module) is not None
        return None if found else f"needs {module} (pip install -e '.[{extra}]')"

    return check


def needs_native_bf16(device: str) -> str | None:
    from fmm_fast.backends.precision import cpu_has_native_bf16, no_native_bf16

    return None if cpu_has_native_bf16() else f"{no_native_bf16()}: it refuses to emulate it"


def needs_two_cores(device: str) -> str | None:
    cores = len(os.sched_getaffinity(0))
    return (
        None if cores >= 2 else f"needs 2 cores to run on (the neighbour takes one), this process has {cores}"
    )


def needs_cuda(device: str) -> str | None:
    from common import cuda_available

    if device == "cpu":
        return "--device cpu"
    return None if cuda_available() else "no CUDA (onnxruntime-gpu and a GPU PyTorch sees)"


def needs_pypi(device: str) -> str | None:
    return "resolves the install against PyPI over the network: run it by hand"


# A tiny reproduction study (one dataset, one seed, its ROAR of 2 steps), then roar_summary on its ROAR run
# and racu_table on its report.
REPRODUCTION = ["--scale", "tiny", "--datasets", "babi-1", "--seeds", "0"]
REPRODUCTION_ROAR = Path("reproduce") / "roar" / "babi-1" / "seed-0"

QUICK_RUNS = (
    QuickRun("bench_engine.py", model_bench("bench_engine")),
    QuickRun("bench_peer_metrics.py", model_bench("bench_peer_metrics")),
    QuickRun("bench_backends.py", model_bench("bench_backends"), needs_module("openvino", "openvino")),
    QuickRun("bench_bf16_profile.py", model_bench("bench_bf16_profile"), needs_native_bf16),
    QuickRun("bench_neighbour.py", model_bench("bench_neighbour"), needs_two_cores),
    QuickRun("bench_scale.py", model_bench("bench_scale"), needs_module("ray", "ray")),
    QuickRun("gpu_check.py", model_bench("gpu_check"), needs_cuda),
    QuickRun("bench_long_document.py", model_bench("bench_long_document")),
    QuickRun("profile_int_grad.py", model_bench("profile_int_grad")),
    QuickRun("int_grad_versions.py", model_bench("int_grad_versions")),
    QuickRun("bench_masf_ties.py", json_only("bench_masf_ties")),
    QuickRun("bench_masf_calibration.py", json_only("bench_masf_calibration")),
    # one data set, one seed: a plain and a masked tiny model of 400 examples, one epoch each
    QuickRun("check_separation.py", into("check-separation", "--quick", "--datasets", "babi-1")),
    # --allow-emulated: without native bf16 its "bf16" side runs in fp32, which still runs every step; one
    # dataset, as the other runs the same code
    QuickRun("bench_precision.py", into("precision", "--quick", "--allow-emulated", "--datasets", "babi-1")),
    QuickRun("bench_train_precision.py", into("train-precision"), needs_native_bf16),
    QuickRun("reproduce.py", into("reproduce", *REPRODUCTION)),
    QuickRun(
        "roar_summary.py",
        lambda out, cache: ["--roar", str(out / REPRODUCTION_ROAR), "--out", str(out / "roar-summary")],
    ),
    QuickRun(
        "racu_table.py",
        lambda out, cache: ["--report", str(out / "reproduce" / "report"), "--out", str(out / "racu-table")],
    ),
    QuickRun("check_python_versions.sh", lambda out, cache: [], needs_pypi, runner=("bash",)),
)


# ------------------------------------------------------------------------------------------------- run
def run_one(item: QuickRun, out: Path, cache: Path, device: str) -> Outcome:
    """Run `item` with its output under `out` (models in `cache`) and its log in out/logs/; skipped with the
    reason if it cannot run here."""
    reason = item.needs(device)
    if reason is not None:
        return Outcome(item.script, "skipped", note=reason)
    log = out / "logs" / f"{item.script}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    arguments = item.arguments(out, cache)
    command = [*item.runner, str(BENCH_DIR / item.script), *arguments]
    log.write_text(" ".join(command) + "\n")
    started = time.perf_counter()
    if item.runner == (sys.executable,):
        code, cpu = run_forked(BENCH_DIR / item.script, arguments, log)
    else:
        cpu_started = children_cpu_seconds()
        with log.open("a") as stream:
            code = subprocess.run(command, stdout=stream, stderr=subprocess.STDOUT, check=False).returncode
        cpu = children_cpu_seconds() - cpu_started
    seconds = time.perf_counter() - started
    if code == 0:
        return Outcome(item.script, "ok", seconds, cpu)
    tail = "\n".join(log.read_text().splitlines()[-LOG_TAIL_LINES:])
    return Outcome(item.script, "FAILED", seconds, cpu, f"exit status {code}; {log}, last lines:\n{tail}")


def run_forked(script: Path, arguments: list[str], log: Path) -> tuple[int, float]:
    """`python SCRIPT ARGUMENTS` in a process forked from the preloaded server, output appended to `log`:
    (its exit status, its CPU seconds with those of the processes it started)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    receiving, sending = context.Pipe(duplex=False)
    process = context.Process(target=script_main, args=(str(script), arguments, str(log), sending))
    process.start()
    sending.close()
    cpu = receiving.recv() if receiving.poll(None) else 0.0  # nothing comes when the process was killed
    process.join()
    return process.exitcode, cpu


def script_main(script: str, arguments: list[str], log: str, usage: Connection) -> None:
    """In the forked process: run `script` as __main__ with `arguments`, its output into `log`, its exit
    status as the process's, its CPU seconds sent to `usage`."""
    with open(log, "a") as stream:  # the descriptors 1 and 2 keep the file open after the block
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(stream.fileno(), 1)
        os.dup2(stream.fileno(), 2)
    sys.argv = [script, *arguments]
    sys.path.insert(0, str(Path(script).parent))
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:  # exit statuses as the interpreter gives them: a message is printed, status 1
        if isinstance(stop.code, int):
            code = stop.code
        elif stop.code is not None:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()  # what the interpreter runs at exit (e.g. shutting down a Ray runtime it started)
    sys.stdout.flush()
    sys.stderr.flush()
    own, started = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    usage.send(own.ru_utime + own.ru_stime + started.ru_utime + started.ru_stime)
    sys.exit(code)


def children_cpu_seconds() -> float:
    """User + system seconds of every finished child process so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_all(out: Path, cache: Path, device: str, progress: Callable[[str], None]) -> list[Outcome]:
    """Every QUICK_RUNS script in order, into `out`."""
    outcomes = []
    for item in QUICK_RUNS:
        progress(f"quick: {item.script}")
        outcomes.append(run_one(item, out, cache, device))
    return outcomes


def preload_cpu_seconds() -> float:
    """User + system seconds of the fork server so far (its imports: paid once, not by any script); 0 when
    none started."""
    from multiprocessing import forkserver

    pid = forkserver._forkserver._forkserver_pid
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime in clock ticks
