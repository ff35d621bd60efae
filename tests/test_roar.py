"""Recursive ROAR on a tiny model: the masking rule of every step, reuse of identical datasets' models,
ranking once (non-recursive), chains on Ray workers (one killed mid-chain) and the CLI's user errors. A
killed `fmm-fast roar` and a chain killed beyond its retries: test_roar_kills.py."""

from __future__ import annotations

import os
import re
import shutil
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from test_kills import keyword_csv, stable

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import load_model
from fmm_fast.backends.options import BackendOptions
from fmm_fast.cli import main
from fmm_fast.core.errors import UserError
from fmm_fast.core.records import read_record
from fmm_fast.core.settings import RoarSettings
from fmm_fast.data.base import SPLIT_NAMES
from fmm_fast.data.options import DataOptions
from fmm_fast.measures.spec import resolve_measure
from fmm_fast.protocols import erasure
from fmm_fast.protocols.roar import chain as chain_module
from fmm_fast.protocols.roar.explaining import example_ids
from fmm_fast.protocols.roar.masking import load_arrays
from fmm_fast.protocols.roar.run import RoarRun, load_data, seed_data
from fmm_fast.training.train import train

TINY = {"epochs": 4, "lr": 5e-3, "batch_size": 8, "layers": 1, "width": 32, "backend": BackendOptions("cpu")}
STEPS = 3


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def keyword_data(root: Path, rows: int = 120) -> DataOptions:
    path = keyword_csv(root / "keywords.csv", rows)
    return DataOptions(str(path), text_field="text", label_field="label")


@pytest.fixture(scope="module")
def recursive_run(tmp_path_factory):
    """A finished recursive run of grad-l2 and loo-abs (and rand) in 3 steps: (settings, out, result)."""
    root = tmp_path_factory.mktemp("roar")
    settings = RoarSettings(
        keyword_data(root), measures=("grad-l2", "loo-abs"), steps=STEPS, erasure=False, **TINY
    )
    out = root / "out"
    return settings, out, RoarRun(settings, out, progress=False).run()


def masks(dataset: dict[str, list[np.ndarray]], mask_id: int) -> dict[str, list[np.ndarray]]:
    return {name: [ids == mask_id for ids in dataset[name]] for name in SPLIT_NAMES}


def test_each_step_masks_the_previous_mask_plus_the_top_ranked_remaining_tokens(recursive_run) -> None:
    settings, out, result = recursive_run
    data = seed_data(settings, out, 0, load_data(settings))
    unmasked = {name: data.encoded[name].input_ids for name in SPLIT_NAMES}
    ids = example_ids(data.encoded)
    for name in ("grad-l2", "loo-abs", "rand"):
        before, model = unmasked, data.step0
        for step in range(1, STEPS):
            ratio = step / STEPS
            folder = out / "seed-0" / name / f"step-{round(100 * ratio):03d}"
            after = load_arrays(folder / "dataset.npz")
            loaded = load_model(model, settings.backend)
            engine = MaskBatchEngine(loaded.backend)
            measure = resolve_measure(name).build(0, step)
            for split in SPLIT_NAMES:
                encoded = data.encoded[split]
                scores = erasure.explain_split(measure, engine, before[split], encoded, 8, None, ids[split])
                for i, explained in enumerate(encoded.explained):
                    old, new = before[split][i] == data.mask_id, after[split][i] == data.mask_id
                    n = int(explained.sum())
                    assert new.sum() == np.floor(np.float32(ratio) * np.float32(n))  # floor(r·n)
                    assert not (new & ~explained).any()  # specials never
                    assert (new >= old).all()  # masks only grow
                    # the added tokens: the top-ranked still visible ones (score descending, earlier first)
                    visible = np.flatnonzero(explained & ~old)
                    ranked = visible[np.lexsort((visible, -scores[i][visible]))]
                    added = int(new.sum() - old.sum())
                    assert set(np.flatnonzero(new & ~old)) == set(ranked[:added].tolist())
            record = read_record(folder / "record.json")
            assert record["masked_tokens"]["test"] == sum(
                int(m.sum()) for m in masks(after, data.mask_id)["test"]
            )
            before, model = after, out / record["model"]["path"]
    curves = result["seeds"]["0"]["curves"]
    assert result["complete"] and set(curves) == {"rand", "grad-l2", "loo-abs"}
    assert curves["rand"][0] > 0.8  # the step-0 model learnt: rankings that mean something
    assert all(len(c) == STEPS + 1 and None not in c for c in curves.values())


def test_ratio_one_is_trained_once_and_every_step_counts(recursive_run) -> None:
    _, out, result = recursive_run
    shared = read_record(out / "seed-0" / "step-100" / "record.json")
    assert shared["trained"] and shared["masked_tokens"] == shared["explained_tokens"]
    for name in ("rand", "grad-l2", "loo-abs"):
        last = read_record(out / "seed-0" / name / "step-100" / "record.json")
        assert not last["trained"] and last["reused_from"] == "seed-0/step-100"
        assert last["model"] == shared["model"] and last["test_metric"] == shared["test_metric"]
    assert result["cost"]["trainings"] == 2 + 3 * (STEPS - 1)  # step 0, ratio 1, each measure's middle steps
    assert result["cost"]["backward_passes"] > 0


def test_an_identical_dataset_reuses_its_model(tmp_path) -> None:
    """Texts of at most 3 explained tokens: at ratio 1/4 no token is masked, so step 1 is step 0's data."""
    path = tmp_path / "short.csv"
    rng = np.random.default_rng(0)
    lines = ["text,label"] + [
        f"{' '.join(rng.choice(['a', 'b', 'c'], size=rng.integers(1, 3)))} {w},{label}"
        for w, label in (("great", "positive"), ("awful", "negative"))
        for _ in range(20)
    ]
    path.write_text("\n".join(lines) + "\n")
    settings = RoarSettings(
        DataOptions(str(path), text_field="text", label_field="label"),
        measures=("rand",),
        steps=4,
        erasure=False,
        **{**TINY, "epochs": 1},
    )
    result = RoarRun(settings, tmp_path / "out", progress=False).run()
    first = read_record(tmp_path / "out" / "seed-0" / "rand" / "step-025" / "record.json")
    step0 = read_record(tmp_path / "out" / "seed-0" / "step-000" / "record.json")
    assert first["dataset_digest"] == step0["dataset_digest"] and first["masked_tokens"]["train"] == 0
    assert not first["trained"] and first["reused_from"] == "seed-0/step-000"
    assert result["seeds"]["0"]["curves"]["rand"][1] == result["seeds"]["0"]["curves"]["rand"][0]
    assert result["cost"]["trainings"] == 2 + 2  # step 0, ratio 1, ratios 1/2 and 3/4


def test_a_finished_training_with_the_same_recipe_is_taken_as_step_0(tmp_path) -> None:
    settings = RoarSettings(keyword_data(tmp_path), measures=("rand",), steps=2, erasure=False, **TINY)
    training = tmp_path / "train"
    train(settings.training(0), training, progress=False)
    own = RoarRun(settings, tmp_path / "own", progress=False).run()
    given = replace(settings, step0_trainings=(str(training),))
    taken = RoarRun(given, tmp_path / "taken", progress=False).run()
    records = [
        read_record(tmp_path / out / "seed-0" / "step-000" / "record.json") for out in ("own", "taken")
    ]
    assert records[0]["trained"] and records[0]["reused_from"] is None
    assert not records[1]["trained"] and records[1]["reused_from"] == str(training.resolve())
    assert records[1]["seconds"]["train"] == 0.0 and records[1]["passes"] == {"forward": 0, "backward": 0}
    assert records[0]["model"]["sha256"] == records[1]["model"]["sha256"]  # the model it would have trained
    curves = [run["seeds"]["0"]["curves"]["rand"] for run in (own, taken)]
    assert curves[0] == curves[1] and curves[0][0] > curves[0][-1]  # a model that learned, the same curve
    assert taken["cost"]["trainings"] == own["cost"]["trainings"] - 1

    other = replace(settings, lr=1e-3, step0_trainings=(str(training),))
    with pytest.raises(UserError, match=r"was not trained as this run's step 0 \(lr \(0\.005 → 0\.001\)"):
        RoarRun(other, tmp_path / "other", progress=False).run()
    with pytest.raises(UserError, match="trained with seed 0: give one training per --seed of this run"):
        RoarRun(replace(given, seeds=(1,)), tmp_path / "other", progress=False).run()
    with pytest.raises(UserError, match="is not a finished `fmm-fast train` output"):
        RoarRun(replace(settings, step0_trainings=(str(tmp_path),)), tmp_path / "other").run()
    assert not (tmp_path / "other").exists()  # refused before any work


def test_a_step0_training_that_cannot_be_step_0_leaves_nothing_behind(tmp_path) -> None:
    """--step0 given twice (here once through a link), a training without its run.json, and one whose
    model is damaged: one UserError each, and no copy of the training stays in OUT."""
    settings = RoarSettings(
        keyword_data(tmp_path), measures=("rand",), steps=2, erasure=False, **{**TINY, "epochs": 1}
    )
    training = tmp_path / "train"
    train(settings.training(0), training, progress=False)
    (tmp_path / "link").symlink_to(training)
    without_run, damaged = tmp_path / "without-run", tmp_path / "damaged"
    for copy in (without_run, damaged):
        shutil.copytree(training, copy)
    (without_run / "run.json").unlink()
    (damaged / "model" / "model.safetensors").write_bytes(b"not a model")
    cases = [
        ((training, tmp_path / "link"), "was given more than once; give each training once"),
        ((without_run,), f"{without_run / 'run.json'} is damaged or not what fmm-fast wrote"),
        ((damaged,), "model"),
    ]
    for number, (given, expected) in enumerate(cases):
        out = tmp_path / f"out-{number}"
        with pytest.raises(UserError, match=expected):
            RoarRun(replace(settings, step0_trainings=tuple(map(str, given))), out, progress=False).run()
        left = sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) if out.exists() else []
        assert not [name for name in left if name.startswith("seed-0/step-000/")], left


def test_non_recursive_ranks_once_with_the_step0_model(tmp_path, monkeypatch) -> None:
    calls = []
    explain = chain_module.explain_dataset

    def counted(settings, measure, seed, step, model, *rest, **options):
        calls.append((measure.name, step, Path(model).parent.name))
        return explain(settings, measure, seed, step, model, *rest, **options)

    monkeypatch.setattr(chain_module, "explain_dataset", counted)
    settings = RoarSettings(
        keyword_data(tmp_path, 60), measures=("loo-abs",), recursive=False, steps=STEPS, erasure=False, **TINY
    )
    RoarRun(settings, tmp_path / "out", progress=False).run()
    assert sorted(calls) == [("loo-abs", 1, "step-000"), ("rand", 1, "step-000")]
    data = seed_data(settings, tmp_path / "out", 0, load_data(settings))
    scores = load_arrays(tmp_path / "out" / "seed-0" / "loo-abs" / "scores.npz")
    for step in range(1, STEPS):
        masked = load_arrays(
            tmp_path / "out" / "seed-0" / "loo-abs" / f"step-{round(100 * step / STEPS):03d}" / "dataset.npz"
        )
        for split in SPLIT_NAMES:
            for i, explained in enumerate(data.encoded[split].explained):
                positions = np.flatnonzero(explained)
                k = int(np.floor(np.float32(step / STEPS) * np.float32(len(positions))))
                top = positions[np.lexsort((positions, -scores[split][i][positions]))][:k]
                assert set(np.flatnonzero(masked[split][i] == data.mask_id)) == set(top.tolist())


def test_rand_draws_are_seeded_per_example_and_step(recursive_run) -> None:
    settings, out, _ = recursive_run
    data = seed_data(settings, out, 0, load_data(settings))
    current = {name: data.encoded[name].input_ids for name in SPLIT_NAMES}

    def draw(seed: int, step: int) -> list[np.ndarray]:
        scores, _ = chain_module.explain_dataset(
            settings, resolve_measure("rand"), seed, step, data.step0, data.encoded, current
        )
        return scores["test"]

    same, again, other_step, other_seed = draw(0, 1), draw(0, 1), draw(0, 2), draw(1, 1)
    assert all(np.array_equal(a, b) for a, b in zip(same, again, strict=True))
    assert not any(np.array_equal(a, b) for a, b in zip(same, other_step, strict=True))
    assert not any(np.array_equal(a, b) for a, b in zip(same, other_seed, strict=True))


def test_a_reused_step_file_is_checked_against_its_record(recursive_run, tmp_path, capfd) -> None:
    """A swapped, truncated, empty or missing dataset.npz of a finished step is recomputed with one warning
    line each, to the dataset its record names; a changed step model is refused with one line."""
    settings, reference, expected = recursive_run
    out = tmp_path / "out"
    shutil.copytree(reference, out)
    seed = out / "seed-0"
    damaged = {
        "grad-l2/step-033": lambda path: shutil.copy(seed / "loo-abs/step-033/dataset.npz", path),  # swapped
        "loo-abs/step-033": lambda path: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2]),
        "rand/step-067": lambda path: path.write_bytes(b""),
        "rand/step-033": lambda path: path.unlink(),
    }
    for step, damage in damaged.items():
        damage(seed / step / "dataset.npz")
    capfd.readouterr()
    result = RoarRun(settings, out, progress=False).run()
    assert stable(result) == stable(expected)
    warnings = capfd.readouterr().err.splitlines()
    assert len(warnings) == len(damaged) and all("; recomputing it" in line for line in warnings), warnings
    for step in damaged:
        restored, original = (load_arrays(d / "seed-0" / step / "dataset.npz") for d in (out, reference))
        for name in SPLIT_NAMES:
            assert [ids.tolist() for ids in restored[name]] == [ids.tolist() for ids in original[name]]
    record = read_record(seed / "rand/step-033/record.json")
    config = out / record["model"]["path"] / "config.json"
    config.write_text(config.read_text().replace("{", '{"swapped": 1, ', 1))
    with pytest.raises(UserError, match="is not the model its step trained"):
        RoarRun(settings, out, progress=False).run()


def test_a_rerun_without_erasure_records_the_erasure_the_folder_holds(recursive_run, tmp_path) -> None:
    settings, reference, _ = recursive_run
    out = tmp_path / "out"
    shutil.copytree(reference, out)
    RoarRun(replace(settings, erasure=True), out, progress=False).run()
    result = RoarRun(settings, out, progress=False).run()  # --no-erasure, into the finished run
    assert result["arguments"]["erasure"] is True and result["complete"] is True
    assert result["seeds"]["0"]["erasure"] == "seed-0/erasure/result.json"
    assert read_record(out / "result.json")["arguments"]["erasure"] is True


def test_the_cost_line_is_printed_and_bounds_the_passes_made(recursive_run, tmp_path, capsys) -> None:
    """The line comes after the first step 0; its passes bound the chains' (a gradient row counted once
    forward and once backward, as the result counts it) and the erasure's, its trainings the result's."""
    settings, reference, result = recursive_run
    out = tmp_path / "out"
    shutil.copytree(reference, out)
    capsys.readouterr()
    run = RoarRun(replace(settings, erasure=True), out, progress=False)
    erased = run.run()
    line = capsys.readouterr().out.splitlines()[0]
    assert line == run.planned
    pattern = r"roar: at most ([\d,]+) forward passes and ([\d,]+) backward \(.*; (\d+) trainings "
    found = re.match(pattern, line)
    assert found is not None, line
    forward, backward, trainings = (int(group.replace(",", "")) for group in found.groups())
    assert "grad-l2 0 + " in line and "loo-abs " in line and "erasure " in line and "cheaper: " in line
    assert trainings == result["cost"]["trainings"]
    erasure = read_record(out / erased["seeds"]["0"]["erasure"])
    made = result["cost"]["forward_passes"] + sum(m["forward_passes"] for m in erasure["measures"].values())
    assert result["cost"]["backward_passes"] <= backward and made <= forward + backward


def copy_driver_part(reference: Path, out: Path) -> None:
    """The run marker and the steps the driver trains (ratios 0 and 1) of the finished run `reference`,
    into `out`."""
    for shared in (".fmm-fast-run.json", "seed-0/step-000", "seed-0/step-100"):
        copy = shutil.copytree if (reference / shared).is_dir() else shutil.copy
        (out / shared).parent.mkdir(parents=True, exist_ok=True)
        copy(reference / shared, out / shared)


def assert_same_chains(reference: Path, out: Path, expected: dict, result: dict) -> None:
    """`out`'s result and every chain step's record are those of the one-process run `reference`."""
    assert stable(result) == stable(expected)  # curves, ACU/RACU, trainings and backward passes
    for name in ("rand", "grad-l2", "loo-abs"):
        for step in ("step-033", "step-067", "step-100"):
            records = [
                stable(read_record(d / "seed-0" / name / step / "record.json")) for d in (reference, out)
            ]
            assert records[1] == records[0]  # the same masked datasets, models and test metrics


def holders(path: Path) -> set[int]:
    """The ids of the processes that hold `path` open (Linux's /proc)."""
    target, found = str(path.resolve()), set()
    for descriptors in Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) == target for fd in descriptors.iterdir()):
                found.add(int(descriptors.parent.name))
        except OSError:  # the process ended, or is not ours to read
            continue
    return found


@contextmanager
def killing_workers(log: Path, times: int, ready: Callable[[], bool] = lambda: True) -> Iterator[list[int]]:
    """For the block, SIGKILL each process that runs the chain writing `log` (a Ray task holds its chain's
    log open) once `ready()`, up to `times` of them; yields the ids killed so far."""
    killed: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while len(killed) < times and not stop.wait(0.02):
            if ready():
                for pid in holders(log) - set(killed):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield killed
    finally:
        stop.set()
        watcher.join()


def test_chains_on_two_ray_workers_equal_the_one_process_run(recursive_run, tmp_path) -> None:
    pytest.importorskip("ray")
    from fmm_fast.distributed.roar_chains import ray_chain_runner
    from fmm_fast.distributed.runtime import ScaleOptions

    settings, reference, expected = recursive_run
    out = tmp_path / "ray"
    copy_driver_part(reference, out)
    result = RoarRun(settings, out, progress=False).run(
        chain_runner=ray_chain_runner(ScaleOptions(workers=2))
    )
    assert_same_chains(reference, out, expected, result)
    assert sorted(p.name for p in (out / "logs").iterdir()) == [
        "seed-0-grad-l2.log",
        "seed-0-loo-abs.log",
        "seed-0-rand.log",
    ]


def test_a_worker_killed_mid_chain_is_retried_to_the_uninterrupted_result(recursive_run, tmp_path) -> None:
    """SIGKILL the Ray worker running loo-abs's chain while it trains its first step: Ray reruns the chain
    (max_retries), which resumes, and the run ends as the one-process run did."""
    pytest.importorskip("ray")
    from fmm_fast.distributed.roar_chains import ray_chain_runner
    from fmm_fast.distributed.runtime import ScaleOptions

    settings, reference, expected = recursive_run
    out = tmp_path / "ray"
    copy_driver_part(reference, out)
    training = out / "seed-0" / "loo-abs" / "step-033" / "dataset.npz"  # written before its model trains
    with killing_workers(out / "logs" / "seed-0-loo-abs.log", 1, training.is_file) as killed:
        result = RoarRun(settings, out, progress=False).run(
            chain_runner=ray_chain_runner(ScaleOptions(workers=2))
        )
    assert len(killed) == 1  # the kill happened: the run finished through the retry
    assert_same_chains(reference, out, expected, result)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--steps", "0"], "--steps 0: give an integer ≥ 1"),
        (["--steps", "11"], "--steps must be between 1 and 10"),
        (["--measure", "grad-l3"], "unknown measure 'grad-l3'"),
        (["--model", "model.onnx"], "an .onnx file cannot be; the gradient measures (grad-l2) need PyTorch"),
        (["--strategy", "half"], "unknown masking strategy 'half'"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, tmp_path, arguments, message) -> None:
    code = main(["roar", "--dataset", "movie-snippets", *arguments, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("fmm-fast: error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()
