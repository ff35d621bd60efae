"""A full disk and a read-only one, under every command that writes a folder or file (train, export,
explain, evaluate, aopc, masf, roar, report): exit 2, one line that names a path on that disk (no
traceback), every file a finished run left still there and whole (records a run rewrites still read
back; everything else byte for byte), and, once there is space again, the same command resumes and
finishes without computing a finished step again. The disk fills twice: with room for a quarter of what
the first run wrote (the second run stops midway, in whichever writer meets the full disk) and with none.
Also: an .onnx model in a read-only folder runs (without its optimised-graph cache), and an OSError that
is not the disk's still raises.

The disks are real tmpfs mounts (`mount -t tmpfs -o size=...`, then `mount -o remount,ro`): the tests
need root (or a user allowed to mount) and are skipped, saying so, where mounting is not allowed.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import fmm_fast.cli as cli
from fmm_fast.cli import main
from fmm_fast.core.disk_errors import naming
from fmm_fast.core.records import read_record

SIZE = "64m"


def _mount(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *arguments], capture_output=True, text=True, check=False)


@pytest.fixture
def disk(tmp_path) -> Iterator[Path]:
    """An empty tmpfs of SIZE at tmp_path/disk, unmounted afterwards; skip where mounting is refused."""
    point = tmp_path / "disk"
    point.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no `mount` command here: the full and read-only disk tests need one")
    mounted = _mount("-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(point))
    if mounted.returncode != 0:
        pytest.skip(f"this user may not mount a tmpfs ({mounted.stderr.strip()}): run as root to test disks")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def _fill(disk: Path, leave: int = 0) -> Path:
    """Fill `disk` with one file to the last byte, then give `leave` bytes back; returns the file
    (removing it frees the disk again)."""
    filler = disk / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (1 << 20, 1 << 12, 1):
            block = b"\0" * size
            try:
                while True:
                    os.write(descriptor, block)
            except OSError as error:
                assert error.errno == errno.ENOSPC
        os.ftruncate(descriptor, max(0, os.fstat(descriptor).st_size - leave))
    finally:
        os.close(descriptor)
    return filler


def _read_only(disk: Path) -> None:
    remounted = _mount("-o", "remount,ro", str(disk))
    assert remounted.returncode == 0, remounted.stderr


def _snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file under `root` but the filler."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != "filler"
    }


def _lost(finished: dict[str, str], disk: Path) -> list[str]:
    """The files of `finished` (a _snapshot) that went or changed, but for records a run rewrites (its
    cost so far, the files its marker lists) that still read back whole."""
    lost = []
    for name, digest in finished.items():
        path = disk / name
        if not path.is_file():
            lost.append(f"{name} went")
        elif path.suffix == ".json":
            try:
                read_record(path)
            except ValueError as error:
                lost.append(f"{name} is damaged ({error})")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            lost.append(f"{name} changed")
    return lost


def _refused_in_one_line(argv: list[str], disk: Path, capfd) -> str:
    """main(argv) exits 2 with one line naming a path on `disk`; returns that line."""
    capfd.readouterr()
    assert main(argv) == 2
    err = capfd.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("fmm-fast: error: "), err
    assert str(disk) in err and "Traceback" not in err, err
    return err


TRAIN = "--dataset babi-1 --size 60 --test-size 10 --epochs 1 --max-steps 2 --layers 1 --width 32 --quiet"

# (command, what finishes first, what needs more of the disk after it: {d} the disk, {onnx} {ckpt} the
# tiny models, {babi} their data flags). The second run resumes the first's folder where the command can
# (evaluate and aopc add a seed, roar a measure); elsewhere it writes a new one beside it.
CASES = [
    ("train", f"train {TRAIN} --out {{d}}/a", f"train {TRAIN} --out {{d}}/b"),
    ("export", "export --model {ckpt} --out {d}/a.onnx", "export --model {ckpt} --out {d}/b.onnx"),
    (
        "explain",
        "explain --model {onnx} -m rand {babi} --limit 3 --quiet --out {d}/a.jsonl",
        "explain --model {onnx} -m rand {babi} --limit 3 --quiet --html --out {d}/b.jsonl",
    ),
    (
        "evaluate",
        "evaluate --model {onnx} -m loo-abs {babi} --limit 3 --quiet --out {d}/eval",
        "evaluate --model {onnx} -m loo-abs {babi} --limit 3 --quiet --seed 0 --seed 1 --out {d}/eval",
    ),
    (
        "aopc",
        "aopc --model {onnx} -m loo-abs {babi} --limit 3 --quiet --out {d}/aopc",
        "aopc --model {onnx} -m loo-abs {babi} --limit 3 --quiet --seed 0 --seed 1 --out {d}/aopc",
    ),
    (
        "masf",
        "masf --model {onnx} {babi} --limit 3 --quiet --out {d}/a",
        "masf --model {onnx} {babi} --limit 3 --quiet --out {d}/b",
    ),
    (
        "roar",
        f"roar {TRAIN} --strategy plain --steps 2 -m rand --no-erasure --out {{d}}/roar",
        f"roar {TRAIN} --strategy plain --steps 2 -m rand -m loo-abs --no-erasure --out {{d}}/roar",
    ),
    ("report", "report {eval} --out {d}/a", "report {eval} --html --out {d}/b"),
]


@pytest.fixture(scope="module")
def evaluation(tiny_babi, tmp_path_factory) -> Path:
    """A finished evaluation of the tiny model: what report reads."""
    _, onnx, data = tiny_babi
    out = tmp_path_factory.mktemp("disk-report") / "eval"
    babi = f"--dataset babi-1 --size {data['size']} --test-size {data['test_size']}"
    assert main(f"evaluate --model {onnx} -m loo-abs {babi} --limit 3 --quiet --out {out}".split()) == 0
    return out


@pytest.mark.parametrize(("command", "first", "second"), CASES, ids=[case[0] for case in CASES])
def test_a_full_then_read_only_disk_ends_in_one_line_and_keeps_what_finished(
    disk, tiny_babi, evaluation, capfd, command, first, second
):
    checkpoint, onnx, data = tiny_babi
    names = {
        "d": disk,
        "onnx": onnx,
        "ckpt": checkpoint,
        "eval": evaluation,
        "babi": f"--dataset babi-1 --size {data['size']} --test-size {data['test_size']}",
    }
    first_argv, second_argv = (line.format(**names).split() for line in (first, second))
    assert main(first_argv) == 0
    finished = _snapshot(disk)
    written = sum(path.stat().st_size for path in disk.rglob("*") if path.is_file())

    for leave in (written // 4, 0):  # room for a part of what the second run writes (it stops midway), none
        filler = _fill(disk, leave)
        _refused_in_one_line(second_argv, disk, capfd)
        assert not _lost(finished, disk)
        filler.unlink()

    # space again: the same command resumes and finishes
    assert main(second_argv) == 0
    out = Path(second_argv[second_argv.index("--out") + 1])
    steps = {name: digest for name, digest in finished.items() if (disk / name).parent != out}
    assert not _lost(steps, disk)  # taken as they were, not computed again (the summaries in --out grow)
    resumed = _snapshot(disk)

    _read_only(disk)
    _refused_in_one_line(second_argv, disk, capfd)
    assert _snapshot(disk) == resumed


def test_an_onnx_model_in_a_read_only_folder_runs_without_its_cache(disk, tiny_babi, tmp_path, capfd):
    _, onnx, data = tiny_babi
    shutil.copy2(onnx, disk / "model.onnx")
    _read_only(disk)
    babi = f"--dataset babi-1 --size {data['size']} --test-size {data['test_size']}"
    argv = (
        f"evaluate --model {disk / 'model.onnx'} -m loo-abs {babi} --limit 3 --quiet --out {tmp_path / 'e'}"
    )
    assert main(argv.split()) == 0
    assert sorted(path.name for path in disk.iterdir()) == ["model.onnx"]  # no cache, no staging file


def test_only_the_disks_errors_become_one_line(tmp_path, capfd, monkeypatch):
    """`naming` names the path a write that names none (or a saver's own error type) failed on; main ends
    a disk's error that names its path in one line, and lets an OSError of another kind (a bug) raise."""
    target = tmp_path / "out.txt"
    with pytest.raises(OSError) as raised, naming(target):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert raised.value.filename == str(target)
    with pytest.raises(OSError) as raised, naming(target):
        raise RuntimeError("Error while serializing: I/O error: Read-only file system (os error 30)")
    assert (raised.value.errno, raised.value.filename) == (errno.EROFS, str(target))

    def failing(error: OSError):
        """In place of cli._command: the command it gives raises `error`."""

        def command(**_: object) -> None:
            raise error

        return lambda: command

    monkeypatch.setattr(cli, "_command", failing(OSError(errno.EDQUOT, "Disk quota exceeded", str(target))))
    assert main(["evaluate"]) == 2
    err = capfd.readouterr().err
    assert len(err.splitlines()) == 1 and f"{target}: Disk quota exceeded; your disk quota" in err, err
    for bug in (FileNotFoundError(errno.ENOENT, "No such file", str(target)), OSError(errno.ENOSPC, "full")):
        monkeypatch.setattr(cli, "_command", failing(bug))
        with pytest.raises(OSError):
            main(["evaluate"])
