"""fmm-fast beside a busy neighbour: what keeps a run from slowing down when another job holds a core?

    .venv/bin/python bench/bench_neighbour.py [--quick] [--sentences N] [--repeat N] [--json PATH]

The workload: `fmm-fast evaluate -m loo-abs` (its `rand` baseline included) of the bench model's fp32
export on the first N movie-snippets test sentences (default 40), ONNX Runtime, started as a new process
in a new output folder each time; its time is the run record's `durations.total_seconds` (the evaluation,
without the process's start-up). The neighbour: a one-thread PyTorch matmul loop pinned to core 0, as a
one-thread training job beside it would be. Needs Linux and at least 2 cores; use it on a machine where
nothing else runs.

Rows, run in this order in every round (--repeat, default 3), each row's best against the first's (the
workload alone, pinned to core 1, one thread); ratio = that time / this time, so below 1× is a slowdown;
the slowest round shows the noise:
  - alone on all cores (the default: one thread per core);
  - beside the neighbour: the default (all cores' threads, unpinned), `fmm-fast --threads 1` (capped, not
    pinned), and pinned to the free core (`taskset -c 1`: fmm-fast then takes one thread from the mask).
--quick: the tiny model, 4 sentences, one round of the first and the last row, to check that it runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from common import (
    REPO_ROOT,
    bench_parser,
    machine_line,
    model_for,
    print_table,
    ratio_text,
    rounds,
    write_record,
)

from fmm_fast.core.records import read_record

NEIGHBOUR_CORE, FREE_CORE = 0, 1
NEIGHBOUR = (
    "import torch\n"
    "torch.set_num_threads(1)\n"
    "a = torch.randn(1024, 1024)\n"
    "while True:\n"
    "    a = torch.tanh(a @ a)\n"
)
SENTENCES = {False: 40, True: 4}  # by --quick
QUICK_ROWS = ("alone, pinned to core 1", "beside the neighbour, pinned to the free core")


def pinned_to(core: int) -> Callable[[], None]:
    """A subprocess preexec_fn that pins the child to one core."""
    return lambda: os.sched_setaffinity(0, {core})


def evaluate_seconds(onnx: Path, sentences: int, threads: int | None, core: int | None) -> float:
    """One `fmm-fast evaluate` run of the workload; the seconds its record says the evaluation took."""
    with tempfile.TemporaryDirectory(prefix="fmm-bench-neighbour-") as work:
        out = Path(work) / "evaluate"
        command = [sys.executable, "-m", "fmm_fast"]
        command += [] if threads is None else ["--threads", str(threads)]
        command += ["evaluate", "--model", str(onnx), "--dataset", "movie-snippets"]
        command += ["--limit", str(sentences), "-m", "loo-abs", "--out", str(out), "--quiet"]
        subprocess.run(
            command,
            check=True,
            cwd=REPO_ROOT,
            env=os.environ | {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
            preexec_fn=None if core is None else pinned_to(core),
            stdout=subprocess.DEVNULL,
        )
        return float(read_record(out / "seed-0" / "result.json")["durations"]["total_seconds"])


def beside_neighbour(run: Callable[[], float]) -> float:
    """run() while the neighbour loop holds core 0; the neighbour is stopped afterwards."""
    neighbour = subprocess.Popen([sys.executable, "-c", NEIGHBOUR], preexec_fn=pinned_to(NEIGHBOUR_CORE))
    try:
        time.sleep(2.0)  # let it import torch and start multiplying
        return run()
    finally:
        neighbour.kill()
        neighbour.wait()


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--sentences", type=int, help="test sentences of the workload (default 40)")
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        parser.error("needs at least 2 cores to run on (the neighbour takes core 0, the workload core 1)")
    sentences = args.sentences or SENTENCES[args.quick]
    onnx = model_for(args).onnx_path("fp32")
    print(machine_line())
    print(f"workload: evaluate -m loo-abs (with rand), {sentences} sentences, ONNX Runtime fp32")

    def workload(threads: int | None = None, core: int | None = None) -> Callable[[], float]:
        return lambda: evaluate_seconds(onnx, sentences, threads, core)

    runners = {
        "alone, pinned to core 1": workload(core=FREE_CORE),
        "alone, all cores (default)": workload(),
        "beside the neighbour, default (all cores' threads)": lambda: beside_neighbour(workload()),
        "beside the neighbour, --threads 1, not pinned": lambda: beside_neighbour(workload(threads=1)),
        "beside the neighbour, pinned to the free core": lambda: beside_neighbour(workload(core=FREE_CORE)),
    }
    if args.quick:  # the baseline and one run beside the neighbour: each row is an fmm-fast process
        runners = {name: runners[name] for name in QUICK_ROWS}
    seconds: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds(args)):  # interleaved: a slow minute of the machine touches every row
        for name, run in runners.items():
            seconds[name].append(run())
    baseline = min(seconds["alone, pinned to core 1"])
    print_table(
        ["run", "best", "slowest", "vs alone on one core (best)"],
        [
            [name, f"{min(times):.1f} s", f"{max(times):.1f} s", ratio_text(baseline / min(times))]
            for name, times in seconds.items()
        ],
    )
    if args.json:
        write_record(args.json, {"sentences": sentences, "seconds": seconds})


if __name__ == "__main__":
    main()
