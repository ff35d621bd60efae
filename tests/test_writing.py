"""The one write helper (core.writing): atomic replacement, a link at the path replaced and never written
through, a folder that leads out of the output refused, and every fmm-fast writer routed through it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from fmm_fast.core.datatypes import load_ragged, save_ragged
from fmm_fast.core.errors import UserError
from fmm_fast.core.outputs import RUN_MARKER, claim_directory, output_lock, remove_owned
from fmm_fast.core.records import read_record, write_record
from fmm_fast.core.writing import replacing, write_text

PACKAGE = Path(__file__).resolve().parents[1] / "fmm_fast"


def test_a_link_at_the_path_is_replaced_and_its_target_kept(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("years of work")
    out = tmp_path / "out"
    out.mkdir()
    for index, write in enumerate(
        (
            lambda path: write_record(path, {"a": 1}),
            lambda path: write_text(path, "a table"),
            lambda path: save_ragged(path, [np.arange(3)]),
        )
    ):
        link = out / f"file-{index}"
        link.symlink_to(target)
        write(link)
        assert not link.is_symlink() and link.is_file()
        assert target.read_text() == "years of work"
    assert read_record(out / "file-0") == {"a": 1}
    assert (out / "file-1").read_text() == "a table"
    assert [a.tolist() for a in load_ragged(out / "file-2")[0]] == [[0, 1, 2]]


def test_a_failed_write_leaves_the_old_file_and_no_staging_file(tmp_path):
    path = tmp_path / "result.json"
    write_record(path, {"old": True})
    with pytest.raises(RuntimeError), replacing(path) as staged:
        staged.write_text("half")
        raise RuntimeError("killed mid-write")
    assert read_record(path) == {"old": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]


def test_a_folder_that_leads_out_of_the_output_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "seed-0").symlink_to(elsewhere, target_is_directory=True)
    with output_lock(out), pytest.raises(UserError, match="symbolic link out of the output"):
        write_record(out / "seed-0" / "result.json", {"a": 1})
    assert list(elsewhere.iterdir()) == []
    # an --out that is itself a link (to a scratch disk) is the user's choice, and is written
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (tmp_path / "linked-out").symlink_to(scratch, target_is_directory=True)
    with output_lock(tmp_path / "linked-out"):
        write_record(tmp_path / "linked-out" / "result.json", {"a": 1})
    assert read_record(scratch / "result.json") == {"a": 1}


def test_remove_owned_clears_the_staging_files_a_killed_write_left(tmp_path):
    out = tmp_path / "out"
    claim_directory(out, "test", {}, files=["result.json"])
    (out / f".result.json.{os.getpid() + 1}.tmp").write_text("half")
    (out / ".notes.txt.1.tmp").write_text("the user's")  # named like staging, but of an unlisted name
    remove_owned(out)
    assert sorted(p.name for p in out.iterdir()) == [".notes.txt.1.tmp"]
    assert not (out / RUN_MARKER).exists()


def test_every_writer_of_the_package_goes_through_core_writing():
    """No module but core/writing.py opens a file for writing or saves one by its own path (appending to a
    lock or a log is not replacing a file)."""
    writers = re.compile(
        r"""open\([^)]*["'][wx]b?["']|\.write_(text|bytes)\(|os\.replace\(|shutil\.copy|"""
        r"""savefig\(|np\.savez|torch\.save\(|onnx\.save\(|save_pretrained\(|\.save\(str"""
    )
    found = [
        f"{path.relative_to(PACKAGE)}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "writing.py"
        for line in path.read_text().splitlines()
        if writers.search(line)
        and not re.search(r"staged|staging|copy_function=_copy_file", line)
        and not line.strip().startswith(('"', "'"))  # advice in a message names a user's own call
        and "savefig(buffer" not in line  # an inline PNG drawn into memory, no file
    ]
    assert found == []
