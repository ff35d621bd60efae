"""`fmm-fast roar --workers/--ray-address`: the chains of (seed, measure) after step 0 as Ray tasks.

The driver trains each seed's step-0 model and the fully masked step (shared by every measure), then hands
out at most --workers chains at once (with only --ray-address, every chain: the cluster runs as many as its
CPUs allow). A task runs its chain in the Ray worker's process as the driver would, on --worker-cpus threads
(fmm_fast.core.threads), and writes every finished step's record itself, so a worker killed mid-step has its
chain rerun by Ray (max_retries), which resumes after the finished steps; so does a rerun of the command.
Tasks read and write OUT themselves: on a cluster OUT must be on storage every node sees.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from fmm_fast.core.progress import progress_bar
from fmm_fast.core.settings import RoarSettings
from fmm_fast.distributed.pool import last_line
from fmm_fast.distributed.runtime import ScaleOptions, check_runtime, ray_runtime, task_output
from fmm_fast.measures.spec import MeasureSpec
from fmm_fast.protocols.roar.steps import LOGS

# A worker process that dies (killed, out of memory) has its chain rerun this often; the rerun resumes
# after the chain's finished steps.
CHAIN_RETRIES = 2


class ChainsFailed(RuntimeError):
    """Some chains failed (named in the message, one line); the others finished and are saved."""


def chain_log(out: Path, seed: int, measure: str) -> Path:
    return out / LOGS / f"seed-{seed}-{measure}.log"


def run_chain(settings: RoarSettings, out: Path, seed: int, spec: MeasureSpec, threads: int) -> str | None:
    """The task: the chain of (seed, measure `spec`) on `threads` threads, its output in its log. Returns
    None, or why it failed."""
    from fmm_fast.protocols.roar.chain import Chain
    from fmm_fast.protocols.roar.run import load_data, seed_data

    with task_output(chain_log(out, seed, spec.name), threads):
        try:
            data = seed_data(settings, out, seed, load_data(settings))
            Chain(settings, out, seed, spec, data).run()
        except Exception as error:  # its traceback goes to the log, the reason back to the driver
            traceback.print_exc()
            return f"{type(error).__name__}: {error}"
    return None


def check_roar_scale_out(options: ScaleOptions) -> None:
    """Before any work: Ray installed, the cluster (if any) reachable."""
    check_runtime(options)


def ray_chain_runner(
    options: ScaleOptions,
) -> Callable[[RoarSettings, Path, list[tuple[int, MeasureSpec]], Callable[[], None]], None]:
    """A runner for RoarRun.run: every chain as a Ray task of options.worker_cpus CPUs, at most
    options.workers at once; on_chain() after each chain returns. Raises ChainsFailed naming the chains
    that failed, after all the others finished."""

    def run_chains(
        settings: RoarSettings, out: Path, chains: list[tuple[int, MeasureSpec]], on_chain: Callable[[], None]
    ) -> None:
        failures = []
        with ray_runtime(options) as ray, progress_bar(len(chains), "chains", unit="chain") as bar:
            task = ray.remote(run_chain).options(num_cpus=options.worker_cpus, max_retries=CHAIN_RETRIES)
            at_once = options.workers or len(chains)
            queue = list(reversed(chains))
            running: dict = {}  # object ref -> (seed, measure)
            while queue or running:
                while queue and len(running) < at_once:
                    seed, spec = queue.pop()
                    ref = task.remote(settings, out, seed, spec, options.worker_cpus)
                    running[ref] = (seed, spec.name)
                [ref], _ = ray.wait(list(running), num_returns=1)
                seed, measure = running.pop(ref)
                try:
                    failure = ray.get(ref)
                except ray.exceptions.RayError as error:  # its worker died beyond CHAIN_RETRIES
                    failure = f"its Ray worker failed: {last_line(error)}"
                bar.update(1)
                on_chain()
                if failure is not None:
                    failures.append(
                        f"seed {seed} {measure}: {failure} (log: {chain_log(out, seed, measure)})"
                    )
                    bar.write(f"FAILED {failures[-1]}", file=sys.stderr)
        if failures:
            raise ChainsFailed(f"{len(failures)} of {len(chains)} chains failed: " + "; ".join(failures))

    return run_chains
