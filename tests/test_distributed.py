"""Scale-out on a local 2-worker Ray runtime: sharded runs equal one process, and survive kills.

One Ray runtime and one pool of 2 actors serve the whole module; the model is a random 2-layer width-64
RoBERTa exported to ONNX, evaluated on a few movie snippets.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from fmm_fast.api import explain_encoded
from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import load_model
from fmm_fast.backends.options import BackendOptions
from fmm_fast.cli import main
from fmm_fast.core.datatypes import load_ragged
from fmm_fast.core.errors import UserError
from fmm_fast.core.outputs import read_marker
from fmm_fast.core.settings import EngineOptions, EvaluationSettings, MasfSettings
from fmm_fast.data.options import DataOptions, open_split
from fmm_fast.export.onnx_export import export_onnx
from fmm_fast.measures.spec import resolve_measure
from fmm_fast.protocols.curve_stats import RATIOS
from fmm_fast.protocols.erasure import evaluate_model
from fmm_fast.protocols.masf.run import run_masf
from fmm_fast.training.models import build_tiny_roberta, save_checkpoint

ray = pytest.importorskip("ray")

from fmm_fast.distributed.evaluation import evaluate_sharded  # noqa: E402 (needs ray installed)
from fmm_fast.distributed.explanation import explain_sharded  # noqa: E402
from fmm_fast.distributed.pool import WorkerPool  # noqa: E402
from fmm_fast.distributed.runtime import ScaleOptions, ray_runtime  # noqa: E402
from fmm_fast.distributed.signals import ShardedSignals  # noqa: E402

ENGINE = EngineOptions(token_budget=2048)  # the pools' workers: batches small enough to spread

MEASURES = ["loo-abs", "beam-sign-2"]
DATA = DataOptions("movie-snippets", "test", limit=16)


@pytest.fixture(scope="module")
def snippets_onnx(tmp_path_factory) -> Path:
    dataset = DATA.load()
    texts = list(dataset.splits["train"].first[:300])
    model, tokenizer, info = build_tiny_roberta(texts, dataset.label_names, layers=2, width=64, seed=3)
    # weights of std 0.3 instead of 0.02: predictions then change as tokens are masked, so curves and RACU
    # are not flat (at the usual init a random model predicts one class for every input)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 2:
                parameter.copy_(0.3 * torch.randn(parameter.shape, generator=generator))
    root = tmp_path_factory.mktemp("snippets")
    save_checkpoint(root / "checkpoint", model, tokenizer, info)
    export_onnx(root / "checkpoint", root / "model.onnx")
    return root / "model.onnx"


def test_a_local_runtime_runs_its_workers_at_the_drivers_priority():
    """Ray would start them at nice 15: beside another busy process the command's work would crawl."""
    if ray.is_initialized():
        pytest.skip("a runtime is already up: ray_runtime uses it as it is")
    with ray_runtime(ScaleOptions(workers=1)) as runtime:
        niceness = runtime.remote(num_cpus=1)(lambda: os.nice(0))
        assert runtime.get(niceness.remote()) == os.nice(0)


@pytest.fixture(scope="module")
def pool(snippets_onnx):
    # 4 logical CPUs: the module's 2 actors plus the 2 a CLI run starts next to them
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        with WorkerPool(ray, ScaleOptions(workers=2), snippets_onnx, "cpu", ENGINE) as workers:
            yield workers
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def loaded(snippets_onnx):
    model = load_model(snippets_onnx, BackendOptions(provider="cpu"))
    dataset, encoded = open_split(model, DATA)
    return model, encoded, dataset


def settings(model: Path) -> EvaluationSettings:
    return EvaluationSettings(str(model), DATA, tuple(MEASURES), save_masked=True)


@pytest.fixture(scope="module")
def single_run(snippets_onnx, loaded, tmp_path_factory):
    model, encoded, dataset = loaded
    out = tmp_path_factory.mktemp("single")
    engine = MaskBatchEngine(model.backend)
    return out, evaluate_model(model, dataset, encoded, settings(snippets_onnx), out, engine)


@pytest.fixture(scope="module")
def sharded_run(pool, snippets_onnx, loaded, tmp_path_factory):
    model, encoded, dataset = loaded
    out = tmp_path_factory.mktemp("sharded")
    return out, evaluate_sharded(pool, model, dataset, encoded, settings(snippets_onnx), out)


def same_masked_share(first: Path, second: Path, measure: str) -> float:
    """Share of examples whose masked input is identical at every ratio (the saved masked test sets)."""
    same = None
    for ratio in RATIOS[1:]:
        a, _ = load_ragged(first / "masked" / measure / f"ratio-{ratio:.1f}.npz")
        b, _ = load_ragged(second / "masked" / measure / f"ratio-{ratio:.1f}.npz")
        equal = np.asarray([np.array_equal(x, y) for x, y in zip(a, b, strict=True)])
        same = equal if same is None else same & equal
    return float(same.mean())


def test_sharded_evaluation_equals_one_process(single_run, sharded_run):
    (single_dir, single), (sharded_dir, sharded) = single_run, sharded_run
    for measure in ["rand", *MEASURES]:
        share = same_masked_share(single_dir, sharded_dir, measure)
        racu_gap = abs(
            single["measures"][measure]["racu"] - sharded["measures"][measure]["racu"]
        )  # nan fails
        print(f"{measure}: same masked inputs at every step {share:.4f}, |ΔRACU| {racu_gap:.2e}")
        assert share >= 0.999
        assert racu_gap <= 1e-3
    assert sharded["curves"] == single["curves"]


def test_every_example_is_counted_once(loaded, sharded_run):
    _, encoded, _ = loaded
    _, record = sharded_run
    workers = record["workers"]
    # loo-abs (with rand) runs in chunks, beam in small groups: each example is in one of each
    assert sum(w["examples"] for w in workers["per_worker"]) == 2 * len(encoded)
    assert workers["workers"] == 2 and len(workers["per_worker"]) == 2
    assert workers["hosts"] and workers["busy_seconds"] > 0 and workers["scheduling_overhead_seconds"] >= 0
    assert record["engine"]["forward_rows"] == sum(w["forward_rows"] for w in workers["per_worker"]) > 0


class KillOnFirstUpdate:
    """A progress bar whose first update SIGKILLs a worker process: a crash in the middle of a run."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.killed = False

    def __call__(self, total: int, desc: str):
        return self

    def update(self, count: int) -> None:
        if not self.killed:
            os.kill(self.pid, signal.SIGKILL)
            self.killed = True

    def close(self) -> None:
        pass


def worker_pids(pool: WorkerPool) -> list[int]:
    """The current process id of each actor (restarts included)."""
    import ray

    return [identity["pid"] for identity in ray.get([a.open.remote(pool.model) for a in pool.actors])]


def test_a_killed_worker_is_restarted_and_nothing_is_lost(pool, snippets_onnx, loaded, sharded_run, tmp_path):
    model, encoded, dataset = loaded
    victim = worker_pids(pool)[1]
    killer = KillOnFirstUpdate(victim)
    record = evaluate_sharded(pool, model, dataset, encoded, settings(snippets_onnx), tmp_path, killer)
    assert killer.killed
    assert record["curves"] == sharded_run[1]["curves"]
    per_worker = record["workers"]["per_worker"]
    assert sum(w["examples"] for w in per_worker) == 2 * len(encoded)
    assert victim not in worker_pids(pool)  # its actor runs in a new process
    assert same_masked_share(sharded_run[0], tmp_path, "beam-sign-2") == 1.0


class KillForGoodOnFirstUpdate(KillOnFirstUpdate):
    """The first update kills an actor with no restart: its shards must go to the other actor."""

    def __init__(self, actor) -> None:
        super().__init__(pid=0)
        self.actor = actor

    def update(self, count: int) -> None:
        if not self.killed:
            ray.kill(self.actor, no_restart=True)
            self.killed = True


def test_a_worker_dead_for_good_has_its_shards_run_by_another(snippets_onnx, loaded, sharded_run, tmp_path):
    model, encoded, dataset = loaded
    with WorkerPool(ray, ScaleOptions(workers=2), snippets_onnx, "cpu", ENGINE) as spare:
        killer = KillForGoodOnFirstUpdate(spare.actors[1])
        record = evaluate_sharded(spare, model, dataset, encoded, settings(snippets_onnx), tmp_path, killer)
    assert record["curves"] == sharded_run[1]["curves"]
    assert record["workers"]["reassigned_tasks"] >= 1
    assert sum(w["examples"] for w in record["workers"]["per_worker"]) == 2 * len(encoded)


class InterruptAfter:
    """A progress bar that raises KeyboardInterrupt on its n-th update, like a driver killed mid-run."""

    def __init__(self, updates: int) -> None:
        self.left = updates

    def __call__(self, total: int, desc: str):
        return self

    def update(self, count: int) -> None:
        self.left -= 1
        if self.left == 0:
            raise KeyboardInterrupt

    def close(self) -> None:
        pass


def test_a_rerun_after_the_driver_died_resumes_from_saved_shards(
    pool, snippets_onnx, loaded, sharded_run, tmp_path
):
    model, encoded, dataset = loaded
    with pytest.raises(KeyboardInterrupt):
        evaluate_sharded(pool, model, dataset, encoded, settings(snippets_onnx), tmp_path, InterruptAfter(3))
    assert len(list((tmp_path / "state" / "shards").glob("*.json"))) == 3
    record = evaluate_sharded(pool, model, dataset, encoded, settings(snippets_onnx), tmp_path)
    assert record["resumed_shards"] == 3
    assert record["curves"] == sharded_run[1]["curves"]
    shards = [json.loads(p.read_text()) for p in (tmp_path / "state" / "shards").glob("*.json")]
    # every example once per kind of shard (chunks for loo-abs + rand, groups for beam)
    indices = sorted(i for s in shards for i in s["indices"])
    assert indices == sorted(2 * list(range(len(encoded))))


def test_a_sharded_run_claims_its_directory_like_one_process(
    pool, snippets_onnx, loaded, single_run, sharded_run
):
    model, encoded, dataset = loaded
    sharded_dir, _ = sharded_run
    assert read_marker(sharded_dir) == read_marker(single_run[0])
    # the same run marker as evaluate_model writes: kind and fingerprint fields of the run, precision included
    fields = settings(snippets_onnx).fingerprint_fields()
    assert read_marker(sharded_dir) == {
        "kind": "evaluate",
        "fields": json.loads(json.dumps(fields)),
        "files": ["state", "masked", "result.json"],
        "finished": True,
    }
    other_seed = replace(settings(snippets_onnx), seed=7)
    with pytest.raises(UserError, match=r"seed \(0 → 7\)"):
        evaluate_sharded(pool, model, dataset, encoded, other_seed, sharded_dir)


def test_a_damaged_shard_file_is_recomputed_with_a_warning(
    pool, snippets_onnx, loaded, sharded_run, tmp_path, capsys
):
    model, encoded, dataset = loaded
    evaluate_sharded(pool, model, dataset, encoded, settings(snippets_onnx), tmp_path)
    damaged = sorted((tmp_path / "state" / "shards").glob("*.json"))[0]
    damaged.write_text('{"indices": [0, 1')  # a half-written file
    record = evaluate_sharded(pool, model, dataset, encoded, settings(snippets_onnx), tmp_path)
    assert f"{damaged} is damaged" in capsys.readouterr().err
    assert record["resumed_shards"] == len(list(damaged.parent.glob("*.json"))) - 1
    assert record["curves"] == sharded_run[1]["curves"]


def test_sharded_explanations_equal_one_process(pool, loaded):
    model, encoded, _ = loaded
    for measure in map(resolve_measure, ["loo-sign", "beam-sign-2", "rand"]):
        expected = explain_encoded(model, encoded, measure, seed=1)
        got = explain_sharded(pool, model, encoded, measure, seed=1)
        assert [e.prediction for e in got] == [e.prediction for e in expected]
        np.testing.assert_allclose([e.probability for e in got], [e.probability for e in expected], atol=1e-6)
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_allclose(a.scores, b.scores, rtol=0, atol=1e-5)


def test_sharded_masf_signals_equal_one_process(pool, loaded):
    model, _, _ = loaded
    masf_settings = MasfSettings((model.path,), DATA, calibrations=("in-sample", "split"))
    expected = run_masf(model, masf_settings)["split"]
    sharded = ShardedSignals(pool)
    got = run_masf(model, masf_settings, engine=sharded)["split"]
    assert got["engine"]["forward_rows"] == expected["engine"]["forward_rows"]  # each unique row once
    assert sharded.stats.forward_tokens == expected["engine"]["forward_tokens"]
    for ratio, p_values in expected["p_values"].items():
        np.testing.assert_allclose(got["p_values"][ratio], p_values, rtol=0, atol=1e-6)


def test_cli_evaluate_with_workers_writes_the_worker_record(pool, snippets_onnx, sharded_run, tmp_path):
    flags = ["--dataset", "movie-snippets", "--limit", "16", "--out", str(tmp_path), "--quiet"]
    assert main(["evaluate", "--model", str(snippets_onnx), "-m", "loo-abs", "--workers", "2", *flags]) == 0
    record = json.loads((tmp_path / "seed-0" / "result.json").read_text())
    for measure in ["rand", "loo-abs"]:
        assert record["curves"][measure] == sharded_run[1]["curves"][measure]
    workers = record["workers"]
    assert workers["workers"] == 2 and workers["worker_cpus"] == 1
    assert sum(w["examples"] for w in workers["per_worker"]) == 16 and workers["address"] is None


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--workers", "0"], "--workers 0: give an integer ≥ 1"),
        (["--workers", "-2"], "--workers -2: give an integer ≥ 1"),
        (["--workers", "2", "--worker-cpus", "0"], "--worker-cpus 0: give an integer ≥ 1"),
        (["--workers", "2", "-m", "grad-l2"], "gradient measures (grad-l2)"),
        (["--ray-address", "127.0.0.1:1"], "cannot reach the Ray cluster at 127.0.0.1:1"),
    ],
)
def test_cli_refuses_bad_scale_out_flags_in_one_line(snippets_onnx, tmp_path, capsys, flags, message):
    started = time.monotonic()
    code = main(["evaluate", "--model", str(snippets_onnx), "--out", str(tmp_path / "out"), *flags])
    assert code == 2 and time.monotonic() - started < 30
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and message in error[0]
    assert not (tmp_path / "out" / "seed-0").exists()


def test_cli_names_the_extra_when_ray_is_missing(snippets_onnx, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    for command in (["evaluate"], ["explain", "--measure", "loo-abs"], ["masf"]):
        code = main([*command, "--model", str(snippets_onnx), "--out", str(tmp_path / "o"), "--workers", "2"])
        assert code == 2
        assert "pip install 'fmm-fast[ray]'" in capsys.readouterr().err


def test_cli_refuses_a_checkpoint_with_workers(snippets_onnx, tmp_path, capsys):
    checkpoint = snippets_onnx.parent / "checkpoint"
    assert main(["evaluate", "--model", str(checkpoint), "--out", str(tmp_path), "--workers", "2"]) == 2
    assert "fmm-fast export" in capsys.readouterr().err


def test_a_worker_engine_has_the_drivers_token_and_cache_budgets(snippets_onnx):
    """`--token-budget` and `--cache-mb` reach the workers: each actor's engine is built with them."""
    from fmm_fast.distributed.worker import ModelFile, ModelWorker

    model = ModelFile(str(snippets_onnx), hashlib.sha256(snippets_onnx.read_bytes()).hexdigest(), [])
    for options in [EngineOptions(token_budget=300, cache_mb=0), EngineOptions(cache_mb=2)]:
        engine = ModelWorker("cpu", 1, options)._engine_for(model)
        assert (engine.token_budget, engine.cache_mb) == (options.token_budget, options.cache_mb)
