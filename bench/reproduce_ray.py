"""bench/reproduce --workers/--ray-address: the study's chains (one dataset × seed each) as Ray tasks.

Each task rebuilds its chain from the plan and runs its steps with run_steps, in the Ray worker's process
as the driver would, on --worker-cpus threads (fmm_fast.core.threads); what the steps print goes to
OUT/logs/DATASET-seed-S.log. The driver hands out at most --workers chains at once (with only
--ray-address, every chain: the cluster runs as many as its CPUs allow), writes each chain's step times to
steps.json as the chain returns them, in whatever order chains finish, and once the others are done names
the chains that failed. Tasks read and write OUT themselves: on a cluster, OUT must be on storage every
node sees, and every node needs this repository at the same path (Ray puts the driver's bench/ on the
workers' import path).
"""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from reproduce_plan import Chain, DatasetPlan, Scale, Study
from reproduce_steps import StepFailed, Timings, run_steps

from fmm_fast.core.progress import progress_bar
from fmm_fast.distributed.pool import last_line
from fmm_fast.distributed.runtime import ScaleOptions, ray_runtime, task_output

# A worker process that dies (killed, out of memory) has its chain rerun this often; the rerun resumes
# after the chain's finished steps.
CHAIN_RETRIES = 2


@dataclass
class ChainOutcome:
    """What a chain's task sends back: its steps' entries for steps.json, and why it stopped (None: every
    step finished)."""

    timings: dict[str, dict]
    failure: str | None


def chain_log(root: Path, chain: Chain) -> Path:
    return root / "logs" / f"{chain.plan.dataset}-seed-{chain.seed}.log"


def run_chain(
    scale: Scale,
    root: Path,
    plan: DatasetPlan,
    seed: int,
    masf_only: bool,
    roar: bool,
    threads: int,
    earlier: dict[str, dict],
) -> ChainOutcome:
    """The task: the chain of `plan` × `seed` in this process on `threads` threads (earlier: its steps'
    entries in steps.json, so a reused step keeps the time it took when it ran). Its ROAR step runs here
    too, in this process (no Ray inside a Ray task)."""
    study = Study(scale, root)
    chain = study.chain(plan, seed, masf_only, roar)
    timings = Timings(None, earlier)
    with task_output(chain_log(study.root, chain), threads):
        try:
            run_steps(chain.steps, timings)
        except StepFailed as error:
            return ChainOutcome(timings.steps, str(error))
        except Exception as error:  # a bug: its traceback goes to the log, the finished steps' times back
            traceback.print_exc()
            return ChainOutcome(timings.steps, f"{type(error).__name__}: {error}")
    return ChainOutcome(timings.steps, None)


def run_chains(
    study: Study,
    chains: list[Chain],
    masf_only: bool,
    roar: bool,
    timings: Timings,
    options: ScaleOptions,
) -> None:
    """Every chain as a Ray task of options.worker_cpus CPUs, at most options.workers at once; each
    finished chain's step times go to `timings` at once. Raises StepFailed naming the chains that failed,
    after all the others finished."""
    failures = []
    with ray_runtime(options) as ray, progress_bar(len(chains), "chains", unit="chain") as bar:
        task = ray.remote(run_chain).options(num_cpus=options.worker_cpus, max_retries=CHAIN_RETRIES)
        at_once = options.workers or len(chains)
        queue = list(reversed(chains))
        running: dict = {}  # object ref -> chain
        while queue or running:
            while queue and len(running) < at_once:
                chain = queue.pop()
                arguments = (study.scale, study.root, chain.plan, chain.seed, masf_only, roar)
                arguments += (options.worker_cpus,)
                running[task.remote(*arguments, timings.of(chain.steps))] = chain
            [ref], _ = ray.wait(list(running), num_returns=1)
            chain = running.pop(ref)
            log = chain_log(study.root, chain)
            try:
                outcome: ChainOutcome = ray.get(ref)
            except ray.exceptions.RayError as error:  # its worker died beyond CHAIN_RETRIES
                outcome = ChainOutcome({}, f"its Ray worker failed: {last_line(error)}")
            timings.update(outcome.timings)
            bar.update(1)
            if outcome.failure is None:
                ran = sum(timings.steps[step.name]["status"] == "ran" for step in chain.steps)
                done = f"{chain.name}: done, {ran} of {len(chain.steps)} steps ran (log: {log})"
                bar.write(done, file=sys.stderr)
            else:
                failures.append(f"{chain.name}: {outcome.failure} (log: {log})")
                bar.write(f"FAILED {failures[-1]}", file=sys.stderr)
    if failures:
        raise StepFailed(f"{len(failures)} of {len(chains)} chains failed: " + "; ".join(failures))
