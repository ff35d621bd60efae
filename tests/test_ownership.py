"""One ownership rule for every output: only what a marker says fmm-fast wrote is ever replaced or removed
(--overwrite included), containers carry the fields their seeds share, `report` and the export scripts
(export/make_tables.py, make_figures.py) claim their --out like the other commands, and the output lock is
taken before any model or data loads.

Every case hashes the files it sets up before and after the command (tests/test_bad_inputs.py's check).
"""

from __future__ import annotations

import fcntl
import os
import resource
import runpy
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_bad_inputs import _assert_one_line_and_nothing_changed, _snapshot

from fmm_fast.cli import main
from fmm_fast.core.outputs import LOCK_NAME, RUN_MARKER
from fmm_fast.core.records import read_record, write_record
from fmm_fast.report.write import TABLES

ROOT = Path(__file__).resolve().parents[1]
EXPORT = ROOT / "export"


@pytest.fixture(scope="module")
def done(tiny_babi, tmp_path_factory):
    """(root, {name: path or flags}): a finished recursive evaluation and a finished aopc one."""
    checkpoint, onnx_path, data = tiny_babi
    root = tmp_path_factory.mktemp("ownership")
    babi = f"--dataset babi-1 --size {data['size']} --test-size {data['test_size']}"
    paths = {"ckpt": str(checkpoint), "onnx": str(onnx_path), "babi": babi}
    for name, command in (("eval", "evaluate --measure loo-abs"), ("aopc", "aopc --measure rand")):
        out = root / f"{name}-done"
        argv = f"{command} --model {onnx_path} {babi} --limit 3 --quiet --out {out}"
        assert main(argv.split()) == 0
        paths[name] = str(out)
    return root, paths


# Every command that writes an output: (command, its line with {out}, a file it writes there, whether it
# has --overwrite). Directory commands write into {out}; export and explain write the file {out}. The export
# scripts' lines start with the script's name (run as `python export/SCRIPT ...`).
COMMANDS = [
    ("train", "train {babi} --max-steps 1 --quiet --out {out}", "run.json", True),
    ("export", "export --model {ckpt} --out {out}", None, True),
    ("explain", "explain --model {onnx} -m rand {babi} --limit 2 --quiet --out {out}", None, True),
    ("evaluate", "evaluate --model {onnx} {babi} --limit 2 --measure rand --quiet --out {out}", "curves.png",
     True),
    ("aopc", "aopc --model {onnx} {babi} --limit 2 --measure rand --quiet --out {out}", "seed-0", True),
    ("masf", "masf --model {onnx} {babi} --quiet --out {out}", "masf.json", True),
    ("check", "check --model {onnx} {babi} --limit 2 --ratios 0.5 --split-components 8 --quiet --out {out}",
     "check.json", True),
    ("report", "report {eval} --out {out}", "table.md", True),
    ("demo", "demo --out {out} --eval-limit 1 --beam-limit 1", "demo.json", False),
    ("roar", "roar {babi} --steps 1 --epochs 1 --quiet --out {out}", "result.json", True),
    ("make_tables.py", "make_tables.py --results {eval} --out {out}", "table.md", True),
    ("make_figures.py", "make_figures.py --results {eval} --out {out}", "curves-babi-1-masked.png", True),
]  # fmt: skip
SUFFIXES = {"export": ".onnx", "explain": ".jsonl"}


@pytest.fixture
def script(monkeypatch):
    """Run an export script as `python export/SCRIPT ARGS` does (argv[0] names the script); its exit code."""
    monkeypatch.syspath_prepend(str(EXPORT))  # the script's folder first, as python puts it

    def run(argv: list[str]) -> int:
        monkeypatch.setattr(sys, "argv", argv)
        with pytest.raises(SystemExit) as exit_:
            runpy.run_path(str(EXPORT / argv[0]), run_name="__main__")
        return exit_.value.code

    return run


def test_every_output_writing_command_is_in_the_table():
    from fmm_fast.cli import COMMAND_MODULES

    scripts = {path.name for path in EXPORT.glob("make_*.py")}
    assert {name for name, *_ in COMMANDS} == set(COMMAND_MODULES) | scripts


@pytest.mark.parametrize(
    ("command", "line", "alike", "has_overwrite"), COMMANDS, ids=[c[0] for c in COMMANDS]
)
@pytest.mark.parametrize("overwrite", [False, True], ids=["plain", "overwrite"])
def test_no_command_touches_what_fmm_fast_did_not_write(
    done, tmp_path, capfd, script, command, line, alike, has_overwrite, overwrite
):
    """A user's files where --out points: refused with one line, each file unchanged, --overwrite too."""
    if overwrite and not has_overwrite:
        pytest.skip(f"{command} has no --overwrite")
    _, paths = done
    if command in SUFFIXES:  # a file output: the user's own file at that path
        out = tmp_path / f"mine{SUFFIXES[command]}"
        out.write_text('{"a user\'s": "file"}\n')
    else:  # a directory output: the user's notes, and a file named like the command's own
        out = tmp_path / "mine"
        out.mkdir()
        (out / "notes.txt").write_text("years of work")
        (out / alike).write_text("the user's, named like fmm-fast's")
    argv = line.format(**paths, out=out).split() + (["--overwrite"] if overwrite else [])
    expected = "not this run"
    if command in SUFFIXES:
        expected = "fmm-fast wrote; --overwrite replaces only those" if overwrite else "already exists"
    run, prog = (script, command) if command.endswith(".py") else (main, "fmm-fast")
    _assert_one_line_and_nothing_changed(argv, [tmp_path], capfd, expected, run, prog)
    assert not (out / RUN_MARKER).exists()


def test_evaluate_overwrite_removes_only_its_own_files(done, tmp_path, capfd):
    _, paths = done
    out = tmp_path / "e"
    shutil.copytree(paths["eval"], out)
    (out / "seed-bank.csv").write_text("the user's, named like a seed")
    (out / "seed-0" / "notes.txt").write_text("the user's, inside a seed")
    argv = f"evaluate --model {paths['onnx']} {paths['babi']} --limit 2 --measure rand --quiet --out {out}"
    argv += " --overwrite"
    _assert_one_line_and_nothing_changed(argv.split(), [tmp_path], capfd, "seed-0/notes.txt); move them")
    (out / "seed-0" / "notes.txt").unlink()
    assert main(argv.split()) == 0, capfd.readouterr().err
    assert (out / "seed-bank.csv").read_text() == "the user's, named like a seed"
    assert read_record(out / "seed-0" / "result.json")["n_examples"] == 2
    assert read_record(out / RUN_MARKER)["fields"]["data"]["limit"] == 2


def test_a_container_refuses_a_seed_of_another_run(done, tmp_path, capfd):
    """A second run with another limit, model or measure options never joins a finished OUT as a seed."""
    _, paths = done
    out = tmp_path / "e"
    shutil.copytree(paths["eval"], out)
    base = f"evaluate {paths['babi']} --measure rand --quiet --seed 1 --out {out}"
    for changed, expected in (
        (f"--model {paths['onnx']} --limit 4", "differs in data.limit (3 → 4)"),
        (f"--model {paths['ckpt']} --limit 3", "differs in model ("),
        (f"--model {paths['onnx']} --limit 3 --measure-option ig_steps=5", "measure_options.ig_steps"),
    ):
        _assert_one_line_and_nothing_changed(f"{base} {changed}".split(), [tmp_path], capfd, expected)
    assert not (out / "seed-1").exists()


def test_report_claims_its_out_and_writes_nothing_before_its_inputs_are_checked(done, tmp_path, capfd):
    _, paths = done
    broken = tmp_path / "broken"  # an evaluation result without its ratios: read after the peer results
    shutil.copytree(paths["eval"], broken)
    record = read_record(broken / "seed-0" / "result.json")
    del record["ratios"]
    write_record(broken / "seed-0" / "result.json", record)
    out = tmp_path / "report"
    argv = ["report", paths["aopc"], str(broken), "--out", str(out)]
    _assert_one_line_and_nothing_changed(argv, [tmp_path], capfd, "missing field ratios")
    assert not out.exists()  # no partial peer-metrics.md
    assert main(["report", paths["aopc"], paths["eval"], "--out", str(out)]) == 0
    assert {"peer-metrics.md", "table.md", "report.json"} <= {p.name for p in out.iterdir()}
    assert main(["report", paths["aopc"], paths["eval"], "--out", str(out)]) == 0  # the same report
    (out / "notes.txt").write_text("the user's")
    capfd.readouterr()
    _assert_one_line_and_nothing_changed(
        ["report", paths["eval"], "--out", str(out)], [tmp_path], capfd, "differs in inputs"
    )
    assert main(["report", paths["eval"], "--out", str(out), "--overwrite"]) == 0
    assert not (out / "peer-metrics.md").exists() and (out / "notes.txt").read_text() == "the user's"
    capfd.readouterr()
    for into in (paths["eval"], str(Path(paths["eval"]) / "seed-0")):  # an evaluation's --out, a seed
        argv = ["report", paths["eval"], "--out", into, "--overwrite"]
        _assert_one_line_and_nothing_changed(argv, [Path(paths["eval"])], capfd, "of `fmm-fast evaluate`")


def test_the_export_scripts_claim_their_out_as_a_report_of_their_results(done, tmp_path, capfd, script):
    """make_tables.py, make_figures.py and `fmm-fast report` with the same results write parts of one
    report; other results are refused, and with --overwrite replace only what the marker lists; a run of
    another command is never replaced."""
    _, paths = done
    out, again = tmp_path / "docs", tmp_path / "again"
    shutil.copytree(paths["eval"], again)  # the same results in another directory: other inputs
    tables = ["make_tables.py", "--results", paths["eval"], "--out", str(out)]
    assert script(tables) == 0, capfd.readouterr().err
    assert script(["make_figures.py", *tables[1:]]) == 2  # its one seed did not converge: it says so
    assert "not converged" in capfd.readouterr().err
    assert set(read_record(out / RUN_MARKER)["files"]) == set(TABLES)  # the tables' claim is kept
    assert main(["report", paths["eval"], "--out", str(out)]) == 0  # the same report: completed
    assert script(tables) == 0 and (out / "report.json").exists()  # and its tables rewritten
    (out / "notes.txt").write_text("the user's")
    capfd.readouterr()
    other = ["make_tables.py", "--results", str(again), "--out", str(out)]
    _assert_one_line_and_nothing_changed(other, [tmp_path], capfd, "differs in inputs", script, other[0])
    assert script([*other, "--overwrite"]) == 0
    assert not (out / "report.json").exists() and (out / "notes.txt").read_text() == "the user's"
    assert read_record(out / RUN_MARKER)["fields"]["inputs"] == [str(again.resolve())]
    assert set(read_record(out / RUN_MARKER)["files"]) == set(TABLES)
    capfd.readouterr()
    into = ["make_figures.py", "--results", paths["eval"], "--out", str(again), "--overwrite"]
    _assert_one_line_and_nothing_changed(into, [again], capfd, "of `fmm-fast evaluate`", script, into[0])


@pytest.mark.parametrize("command", ["evaluate", "explain", "masf", "report"])
def test_a_second_process_on_a_locked_out_exits_before_loading_anything(done, tmp_path, command):
    """A real second process: the lock is the first thing it takes, before the (here damaged) model and
    the data would load, so it exits 2 naming the lock."""
    _, paths = done
    damaged = tmp_path / "damaged.onnx"
    damaged.write_bytes(Path(paths["onnx"]).read_bytes()[:4000])
    out = tmp_path / ("out.jsonl" if command == "explain" else "out")
    lines = {
        "evaluate": f"evaluate --model {damaged} --dataset missing.csv --out {out}",
        "explain": f"explain --model {damaged} -m rand --dataset missing.csv --out {out}",
        "masf": f"masf --model {damaged} --dataset missing.csv --out {out}",
        "report": f"report {paths['eval']} --out {out}",
    }
    lock = out.with_name(f".{out.name}.lock") if command == "explain" else out / LOCK_NAME
    lock.parent.mkdir(exist_ok=True)
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        started, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        argv = [sys.executable, "-m", "fmm_fast", *lines[command].split()]
        ended = subprocess.run(argv, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_seconds = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
    assert ended.returncode == 2 and "another fmm-fast process is writing" in ended.stderr, ended.stderr
    assert len(ended.stderr.splitlines()) == 1
    print(f"{command}: the second process exited after {seconds:.2f} s, {cpu_seconds:.2f} s of CPU")
    if command != "explain":
        assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]  # it wrote nothing


def test_a_failed_run_into_a_new_directory_leaves_nothing(done, tmp_path, capfd):
    _, paths = done
    out = tmp_path / "new"
    argv = f"evaluate --model {paths['onnx']} --dataset babi-1 --test-size 2 --limit 9 --out {out} --size 1"
    _assert_one_line_and_nothing_changed(argv.split(), [tmp_path], capfd, "--size")
    argv = f"evaluate --model {tmp_path / 'missing.onnx'} {paths['babi']} --out {out}"
    _assert_one_line_and_nothing_changed(argv.split(), [tmp_path], capfd, "does not exist")
    assert not out.exists()
    assert _snapshot(tmp_path) == {}


def test_evaluate_replaces_a_link_at_its_output_and_keeps_the_target(done, tmp_path, capfd):
    """A symbolic link planted where evaluate writes curves.csv/curves.png: the rerun replaces the link
    itself; the file it pointed to is never written."""
    _, paths = done
    out = tmp_path / "e"
    shutil.copytree(paths["eval"], out)
    for name in ("curves.csv", "curves.png"):
        (tmp_path / f"precious-{name}").write_text("years of work")
        (out / name).unlink()
        (out / name).symlink_to(tmp_path / f"precious-{name}")
    argv = f"evaluate --model {paths['onnx']} {paths['babi']} --limit 3 --measure loo-abs --quiet --out {out}"
    assert main(argv.split()) == 0, capfd.readouterr().err
    for name in ("curves.csv", "curves.png"):
        assert (tmp_path / f"precious-{name}").read_text() == "years of work"
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 0
    # a seed folder that leads out of OUT through a link: refused with one line, the target untouched
    (tmp_path / "elsewhere").mkdir()
    shutil.move(out / "seed-0", tmp_path / "elsewhere" / "seed-0")
    (out / "seed-0").symlink_to(tmp_path / "elsewhere" / "seed-0", target_is_directory=True)
    (out / "curves.csv").unlink()  # so that the rerun writes again
    expected = "is a symbolic link out of the output"
    _assert_one_line_and_nothing_changed(argv.split(), [tmp_path], capfd, expected)


def test_a_report_never_overwrites_a_file_it_did_not_write(done, tmp_path, capfd):
    """A report into a folder holding a report of the same inputs (or, with --overwrite, of others) and a
    user's files named like the ones this report writes: refused with one line, every file unchanged."""
    _, paths = done
    out = tmp_path / "report"
    assert main(["report", paths["aopc"], "--out", str(out)]) == 0  # peer-metrics.md only
    for name in ("report.html", "report.json"):
        (out / name).write_text("the user's")
    capfd.readouterr()
    for argv, expected in (
        (["report", paths["aopc"], "--out", str(out), "--html"], "report.html"),  # the same inputs
        (["report", paths["eval"], "--out", str(out), "--overwrite"], "report.json"),
    ):
        _assert_one_line_and_nothing_changed(argv, [tmp_path], capfd, expected)


def test_roar_overwrite_removes_only_its_own_files_at_every_level(done, tmp_path, capfd):
    """roar --overwrite with other settings: a user's file in OUT/seed-S/ or OUT/seed-S/MEASURE/ stops it
    (one line, nothing removed); without them only what the run wrote goes."""
    _, paths = done
    out = tmp_path / "r"
    line = f"roar {paths['babi']} --steps 1 --no-erasure --layers 1 --width 32 --quiet --out {out}"
    assert main(f"{line} --max-steps 1".split()) == 0, capfd.readouterr().err
    capfd.readouterr()
    argv = f"{line} --max-steps 2 --overwrite".split()
    for inside in ("seed-0/notes.txt", "seed-0/rand/notes.txt", "seed-0/rand/step-100/notes.txt"):
        (out / inside).write_text("the user's")
        _assert_one_line_and_nothing_changed(argv, [tmp_path], capfd, f"{inside}")
        (out / inside).unlink()
    (out / "notes.txt").write_text("the user's, beside the run")
    assert main(argv) == 0, capfd.readouterr().err
    assert (out / "notes.txt").read_text() == "the user's, beside the run"
    assert read_record(out / RUN_MARKER)["fields"]["max_steps"] == 2


def test_a_copied_or_linked_run_is_counted_once_in_every_protocol(done, tmp_path, capfd):
    """The same run given twice (a copied folder, a symbolic link to it) is one seed, with one warning line;
    a run of another seed is still a second one."""
    _, paths = done
    root = tmp_path / "runs"
    root.mkdir()
    masf = root / "masf"
    assert main(f"masf --model {paths['onnx']} {paths['babi']} --quiet --out {masf}".split()) == 0
    for name in ("eval", "aopc"):
        shutil.copytree(paths[name], root / f"{name}-copy")
        (root / f"{name}-link").symlink_to(paths[name], target_is_directory=True)
    shutil.copytree(masf, root / "masf-copy")
    capfd.readouterr()
    out = tmp_path / "report"
    assert main(["report", paths["eval"], paths["aopc"], str(root), "--out", str(out)]) == 0
    err = capfd.readouterr().err
    warnings = [line for line in err.splitlines() if "counted once" in line]
    assert len(warnings) == 3, err  # one per protocol: evaluations, peer metrics, MaSF
    assert "; 1 seed(s)," in (out / "peer-metrics.md").read_text()
    assert len(read_record(out / "report.json")["files"]) == 1  # the evaluation, not its copy
    masf_rows = [line for line in (out / "masf.md").read_text().splitlines() if line.startswith("| ")]
    assert len(masf_rows) == 2  # the header and the one model (not one per copy)
    aopc_seed_1 = tmp_path / "aopc-seed-1"
    argv = f"aopc --model {paths['onnx']} {paths['babi']} --limit 3 --measure rand --seed 1 --quiet"
    assert main([*argv.split(), "--out", str(aopc_seed_1)]) == 0
    out = tmp_path / "report-2"
    assert main(["report", paths["aopc"], str(root / "aopc-copy"), str(aopc_seed_1), "--out", str(out)]) == 0
    assert "; 2 seed(s)," in (out / "peer-metrics.md").read_text()
