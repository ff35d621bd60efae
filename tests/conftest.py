"""Tests run offline: nothing may reach a model or dataset hub."""

import os

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# OpenMP threads (Numba's parallel kernels, PyTorch) sleep when they wait instead of spinning: beside the
# other test worker, a kernel's second thread waits for a core while the first spins, at each of the tens of
# thousands of small kernel calls some tests make (test_masf.py's split-calibration validity check: 115 CPU s
# spinning, 2.6 s passive, on a busy 2-core machine). Set here, before either library starts its threads;
# the subprocesses the tests start inherit it. Only how a waiting thread waits changes, no result.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The files that take longest (docs/results/tests.md), slowest first. `make test` hands whole files to its
# workers in collection order (--dist loadfile --no-loadscope-reorder): started first, they run beside the
# many short files instead of keeping one worker busy alone at the end.
SLOWEST_FILES = (
    "test_bench_quick.py",
    "test_kills.py",
    "test_reproduce_ray.py",
    "test_roar.py",
    "test_roar_kills.py",
    "test_masf.py",
    "test_injection.py",
    "test_demo.py",
    "test_notebook.py",
    "test_distributed.py",
    "test_erasure_units.py",
    "test_evaluation_install.py",
    "test_plugins.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """SLOWEST_FILES' tests first, in that order; the other files after them as collected (a stable sort
    keeps the order of the tests within each file)."""
    rank = {name: position for position, name in enumerate(SLOWEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture
def fake_hub(monkeypatch):
    """Replace datasets.load_dataset by in-memory tables ({official split: {column: values}}, filled by
    the test); records the calls. No network: the hub's own loader never runs."""
    datasets = pytest.importorskip("datasets")
    tables: dict[str, dict[str, list]] = {}
    calls = []

    def load(path, name=None, split=None):
        calls.append((path, name, split))
        return [datasets.Dataset.from_dict(tables[s]) for s in split]

    monkeypatch.setattr(datasets, "load_dataset", load)
    return tables, calls


@pytest.fixture
def one_torch_thread():
    """Tiny models on a small shared machine: one intra-op thread is fastest."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_babi(tmp_path_factory):
    """A tiny-roberta masked-fine-tuned for a few steps on a small bAbI-1 set, and its ONNX export.

    Returns (checkpoint_dir, onnx_path, data_kwargs); data_kwargs reproduce the dataset it was trained on.
    """
    import torch

    from fmm_fast.core.settings import TrainSettings
    from fmm_fast.data.options import DataOptions
    from fmm_fast.export.onnx_export import export_onnx
    from fmm_fast.training.train import train

    root = tmp_path_factory.mktemp("tiny-babi")
    data = {"size": 300, "test_size": 40}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(TrainSettings(DataOptions("babi-1", **data), epochs=1, lr=1e-3), root / "train", progress=False)
    finally:
        torch.set_num_threads(threads)
    export_onnx(root / "train" / "model", root / "model.onnx")
    return root / "train" / "model", root / "model.onnx", data
