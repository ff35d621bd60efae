"""A pool of ModelWorker actors: tasks fed to idle actors as they free up, results reassembled by key."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from fmm_fast.backends.engine import EngineStats
from fmm_fast.core.errors import UserError
from fmm_fast.core.settings import EngineOptions
from fmm_fast.distributed.runtime import ScaleOptions, ray_runtime
from fmm_fast.distributed.worker import ModelFile, ModelWorker, TaskResult

# A crashed actor process is restarted and its running task re-executed (Ray's own fault tolerance);
# a task whose actor stays dead is handed to another actor by the pool.
ACTOR_RESTARTS = 2
TASK_RETRIES = 2


@dataclass
class Task:
    """One unit of work: key (how the caller reassembles it), method name and arguments, examples it holds."""

    key: Hashable
    method: str
    args: tuple
    examples: int


@dataclass
class WorkerAccount:
    """What one actor did: its host and process ids (more than one after a restart), examples and seconds."""

    host: str = ""
    pids: list[int] = field(default_factory=list)
    tasks: int = 0
    examples: int = 0
    seconds: float = 0.0
    forward_rows: int = 0


class WorkerPool:
    """Ray actors each holding the model; `run` spreads tasks over them (see its docstring)."""

    def __init__(self, ray, options: ScaleOptions, model: Path, provider: str, engine: EngineOptions) -> None:
        started = time.perf_counter()
        self.ray = ray
        self.options = options
        gpus = options.gpus_per_worker(provider)
        count = options.workers or self._cluster_slots(ray, options.worker_cpus, gpus)
        remote = ray.remote(ModelWorker).options(
            num_cpus=options.worker_cpus,
            num_gpus=gpus,
            max_restarts=ACTOR_RESTARTS,
            max_task_retries=TASK_RETRIES,
        )
        self.model = ModelFile.publish(model, ray)  # held here: its bytes stay in the object store
        self.actors = [remote.remote(provider, options.worker_cpus, engine) for _ in range(count)]
        try:  # the actors open the model now: a bad file fails here, once, with the actor's message
            identities = self._get([actor.open.remote(self.model) for actor in self.actors])
        except ray.exceptions.RayActorError as error:
            self.close()
            raise UserError(f"a Ray worker could not start: {last_line(error)}") from error
        except UserError:
            self.close()
            raise
        self.accounts = [WorkerAccount(host=i["host"], pids=[i["pid"]]) for i in identities]
        self.startup_seconds = time.perf_counter() - started
        self.engine = EngineStats()  # all actors' engines together
        self.wall_seconds = 0.0
        self.overhead_seconds = 0.0  # Σ over tasks of (round trip − time inside the actor)
        self.reassigned = 0  # tasks handed to another actor after theirs died for good

    @staticmethod
    def _cluster_slots(ray, cpus: int, gpus: float) -> int:
        """Workers of `cpus` CPUs and `gpus` GPUs the cluster holds at once."""
        resources = ray.cluster_resources()
        slots = int(resources.get("CPU", 0) // cpus)
        if gpus > 0:
            slots = min(slots, int(resources.get("GPU", 0) / gpus))
        if slots < 1:
            raise UserError(
                f"the Ray cluster has {resources.get('CPU', 0):.0f} CPUs and {resources.get('GPU', 0):.0f} "
                f"GPUs, too few for one worker of {cpus} CPUs and {gpus} GPUs; "
                "lower --worker-cpus/--worker-gpus or add nodes"
            )
        return slots

    def run(self, tasks: list[Task], on_result: Callable[[Task, TaskResult], None]) -> None:
        """Run every task once; on_result(task, result) is called in the driver as each finishes.

        Each idle actor gets the next task (in list order: put the costliest first), so uneven tasks
        balance themselves. A task whose actor died beyond its restarts goes to another actor.
        """
        ray = self.ray
        started = time.perf_counter()
        queue = list(reversed(tasks))
        idle = list(range(len(self.actors)))
        running: dict = {}  # object ref -> (task, actor index, submit time)
        while queue or running:
            while queue and idle:
                task, index = queue.pop(), idle.pop(0)
                ref = getattr(self.actors[index], task.method).remote(self.model, *task.args)
                running[ref] = (task, index, time.perf_counter())
            if not running:
                raise UserError(
                    "every Ray worker has died; see the Ray logs (`ray logs`) and rerun to resume"
                )
            [ref], _ = ray.wait(list(running), num_returns=1)
            task, index, submitted = running.pop(ref)
            try:
                result: TaskResult = self._get(ref)
            except ray.exceptions.RayActorError:
                self.reassigned += 1
                queue.append(task)  # this actor is gone for good: not returned to `idle`
                continue
            self._account(index, task, result, time.perf_counter() - submitted)
            idle.append(index)
            on_result(task, result)
        self.wall_seconds += time.perf_counter() - started

    def _get(self, refs):
        """ray.get, with a UserError raised inside an actor (a bad model file, ...) raised as itself."""
        try:
            return self.ray.get(refs)
        except self.ray.exceptions.RayTaskError as error:
            if isinstance(error.cause, UserError):
                raise UserError(str(error.cause)) from None
            raise

    def _account(self, index: int, task: Task, result: TaskResult, round_trip: float) -> None:
        account = self.accounts[index]
        if result.pid not in account.pids:  # the actor was restarted
            account.pids.append(result.pid)
        account.tasks += 1
        account.examples += task.examples
        account.seconds += result.seconds
        account.forward_rows += result.engine["forward_rows"]
        add_stats(self.engine, result.engine)
        self.overhead_seconds += max(0.0, round_trip - result.seconds)

    def begin(self) -> None:
        """Start a new account (one per seed or model): the record then describes that run alone."""
        self.accounts = [WorkerAccount(host=a.host, pids=a.pids[-1:]) for a in self.accounts]
        self.engine = EngineStats()
        self.wall_seconds = self.overhead_seconds = 0.0
        self.reassigned = 0

    def record(self) -> dict:
        """The run record's `workers` section: who ran what, for how long, and the scheduling overhead."""
        return {
            **self.options.as_dict(),
            "workers": len(self.actors),
            "hosts": sorted({a.host for a in self.accounts}),
            "per_worker": [vars(a) for a in self.accounts],
            "startup_seconds": self.startup_seconds,
            "wall_seconds": self.wall_seconds,
            "busy_seconds": sum(a.seconds for a in self.accounts),
            "scheduling_overhead_seconds": self.overhead_seconds,
            "reassigned_tasks": self.reassigned,
        }

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def add_stats(total: EngineStats, increments: dict) -> None:
    """Add one task's engine counters (EngineStats fields) to `total`."""
    for name, value in increments.items():
        setattr(total, name, getattr(total, name) + value)


@contextmanager
def open_pool(
    options: ScaleOptions | None, model: Path, device: str, engine: EngineOptions
) -> Iterator[WorkerPool | None]:
    """A WorkerPool on `model` for the block (Ray started or joined as options say); None without options.
    Each worker's engine gets `engine`'s token and cache budgets, as the driver's own would."""
    if options is None:
        yield None
        return
    with ray_runtime(options) as ray, WorkerPool(ray, options, model, device, engine) as pool:
        yield pool


def last_line(error: BaseException) -> str:
    """The last non-empty line of an error's message: for a Ray error, what the remote exception said."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__
