"""Bad inputs, as a new user makes them: each exits 2 with exactly one line on stderr and changes no
existing file (every file of the workspace and the models is hashed before and after)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from fmm_fast.cli import main
from fmm_fast.core.outputs import LOCK_NAME, RUN_MARKER


def _csv(path: Path, rows: list[str], header: str = "text,label") -> str:
    path.write_text("\n".join([header, *rows]) + "\n")
    return str(path)


def _non_fmm_onnx(path: Path) -> str:
    """A valid ONNX file without fmm-fast's metadata."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    onnx.save(helper.make_model(graph), str(path))
    return str(path)


@pytest.fixture(scope="module")
def workspace(tiny_babi, tmp_path_factory):
    """Files for the cases: models, data files, finished runs. Returns (root, {name: path or flags})."""
    checkpoint, onnx_path, data = tiny_babi
    root = tmp_path_factory.mktemp("bad-inputs")
    babi = f"--dataset babi-1 --size {data['size']} --test-size {data['test_size']}"
    words = [f"w{i} w{i + 1} word" for i in range(40)]
    evaluation = root / "eval-done"
    assert main(EVALUATE.format(onnx=onnx_path, babi=babi, new=evaluation).split()) == 0
    (root / "model-dir.onnx").mkdir()
    shutil.copytree(checkpoint, root / "model-dir.onnx" / "model")
    (root / "explained.jsonl").write_text('{"kept": true}\n')
    truncated = root / "truncated.onnx"
    truncated.write_bytes(onnx_path.read_bytes()[:5000])
    binary = root / "binary.csv"
    binary.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    (root / "broken.jsonl").write_text('{"text": "a", "label": "x"}\n{"text": "b", "label": \n')
    (root / "empty-dir").mkdir()
    damaged = {}  # files fmm-fast reads back, each damaged in one way
    for name in ("pointer", "marker"):
        damaged[name] = root / f"{name}-eval"
        shutil.copytree(evaluation, damaged[name])
    result = damaged["pointer"] / "seed-0" / "result.json"  # a non-finite pointer naming no field
    pointer = '"non_finite": {"/measures/nope": "nan", '
    result.write_text(result.read_text().replace('"non_finite": {', pointer))
    (damaged["marker"] / RUN_MARKER).write_text('{"kind": "evaluate", "fields": ["not", "an", "object"]}')
    damaged["checkpoint"] = root / "bad-checkpoint"
    shutil.copytree(checkpoint, damaged["checkpoint"])
    (damaged["checkpoint"] / "fmm_info.json").write_text('{"info": {"label_names": 3}}')
    damaged["huge"] = root / "huge.jsonl"
    damaged["huge"].write_text('{"index": 0, "word_scores": [1, 1e400]}\n')
    paths = {
        **{name: str(path) for name, path in damaged.items()},
        "ckpt": str(checkpoint),
        "onnx": str(onnx_path),
        "babi": babi,
        "eval": str(evaluation),
        "train": str(checkpoint.parent),
        "ab_csv": _csv(root / "ab.csv", [f"{w},{'a' if i % 2 else 'b'}" for i, w in enumerate(words)]),
        "one_class": _csv(root / "one-class.csv", [f"{w},a" for w in words]),
        "ragged": _csv(root / "ragged.csv", ["x y,a", "z,b,extra", "w,a"]),
        "twice": _csv(root / "twice.csv", ["x,a,y", "z,b,w"], header="text,label,text"),
        "few": _csv(root / "few.csv", ["x,a", "y,b"]),
        # your own splits (--dataset TRAIN,VALIDATION,TEST)
        "own_train": _csv(
            root / "own-train.csv", [f"{w},{'a' if i % 2 else 'b'}" for i, w in enumerate(words)]
        ),
        "own_validation": _csv(root / "own-validation.csv", ["x y,a", "z w,b"]),
        "own_test_new_label": _csv(root / "own-test-c.csv", ["x y,a", "z w,c"]),
        "own_test_empty": _csv(root / "own-test-empty.csv", []),
        "own_test_other_columns": _csv(root / "own-test-id.csv", ["x y,a,1"], header="text,label,id"),
        "non_fmm": _non_fmm_onnx(root / "plain.onnx"),
        "truncated": str(truncated),
        "dir_onnx": str(root / "model-dir.onnx"),
        "binary": str(binary),
        "broken": str(root / "broken.jsonl"),
        "explained": str(root / "explained.jsonl"),
        "empty_dir": str(root / "empty-dir"),
        "missing": str(root / "missing"),
        "new": str(root / "new-out"),
    }
    return root, paths


EVALUATE = "evaluate --model {onnx} {babi} --limit 3 --quiet --out {new}"
# A case's own option replaces the template's (`_argv`): the CLI refuses a repeated option, which the
# cases that say "given more than once" test.
LOCAL = "evaluate --model {onnx} --text-field text --label-field label --out {new} --dataset"

# (case, command line: {name} stands for a workspace path or flags, a word the one line must contain)
CASES = [
    ("missing ONNX", EVALUATE + " --model {missing}.onnx", "does not exist"),
    ("truncated ONNX", EVALUATE + " --model {truncated}", "truncated.onnx"),
    ("ONNX without fmm-fast metadata", EVALUATE + " --model {non_fmm}", "plain.onnx"),
    ("directory given as ONNX", EVALUATE + " --model {dir_onnx}", "model-dir.onnx"),
    ("ONNX given to export", "export --model {onnx} --out {new}.onnx", "model"),
    ("missing model", EVALUATE + " --model {missing}", "does not exist"),
    ("unknown dataset", "evaluate --model {onnx} --dataset sst3 --out {new}", "unknown dataset"),
    ("unknown measure", EVALUATE + " --measure loo-abz", "unknown measure"),
    ("beam-sign-0", EVALUATE + " --measure beam-sign-0", "beam size"),
    ("limit 0", EVALUATE + " --limit 0", "--limit"),
    ("limit -3", EVALUATE + " --limit -3", "--limit"),
    ("token budget 0", EVALUATE + " --token-budget 0", "--token-budget"),
    ("explain batch rows 0", EVALUATE + " --explain-batch-rows 0", "--explain-batch-rows"),
    ("negative seed", EVALUATE + " --seed -1", "--seed"),
    ("size 1", EVALUATE + " --size 1", "--size"),
    ("test size 0", EVALUATE + " --test-size 0", "--test-size"),
    ("train batch size 0", "train {babi} --batch-size 0 --out {new}", "--batch-size"),
    ("train epochs 0", "train {babi} --epochs 0 --out {new}", "--epochs"),
    ("train lr 0", "train {babi} --lr 0 --out {new}", "--lr"),
    ("masf seed -2", "masf --model {onnx} {babi} --seed -2 --out {new}", "--seed"),
    ("explain limit 0", "explain --model {onnx} -m loo-abs {babi} --limit 0 --out {new}.jsonl", "--limit"),
    ("CSV without field options", "evaluate --model {onnx} --dataset {ab_csv} --out {new}", "--text-field"),
    ("CSV with a bad field", LOCAL + " {ab_csv} --text-field txt", "'txt'"),
    ("ragged CSV", LOCAL + " {ragged}", "ragged.csv"),
    ("CSV of one class", LOCAL + " {one_class}", "only the label"),
    ("binary file as CSV", LOCAL + " {binary}", "binary.csv"),
    ("broken JSON Lines", LOCAL + " {broken}", "broken.jsonl"),
    ("too few rows", LOCAL + " {few}", "at least 3"),
    ("own splits: two files", LOCAL + " {own_train},{own_validation}", "names 2 files"),
    ("own splits: a missing file", LOCAL + " {own_train},{own_validation},{missing}.csv", "no such file"),
    ("own splits: an empty test file", LOCAL + " {own_train},{own_validation},{own_test_empty}", "test file"),
    (
        "own splits: other columns",
        LOCAL + " {own_train},{own_validation},{own_test_other_columns}",
        "same columns",
    ),
    (
        "own splits: a test label train lacks",
        LOCAL + " {own_train},{own_validation},{own_test_new_label}",
        "'c'",
    ),
    ("label names differ", LOCAL + " {ab_csv}", "--label-map"),
    ("label map of an unknown label", LOCAL + " {ab_csv} --label-map c=garden", "--label-map"),
    ("malformed label map", EVALUATE + " --label-map a:garden", "--label-map"),
    (
        "unknown metric",
        "train --dataset {ab_csv} --text-field text --label-field label --metric f2 --out {new}",
        "--metric",
    ),
    ("metric for a registry dataset", "train {babi} --metric macro-f1 --out {new}", "--metric"),
    ("export to a non-.onnx path", "export --model {ckpt} --out {new}.bin", ".onnx"),
    ("export over an existing file", "export --model {ckpt} --out {onnx}", "--overwrite"),
    (
        "explain over an existing file",
        "explain --model {onnx} -m loo-abs {babi} --out {explained}",
        "--overwrite",
    ),
    (
        "masf with too few calibration examples",
        "masf --model {onnx} --dataset babi-1 --size 20 --test-size 5 --out {new}",
        "calibration",
    ),
    (
        "masf split components -1",
        "masf --model {onnx} {babi} --calibration split --split-components -1 --out {new}",
        "--split-components",
    ),
    (
        "masf split components beyond the width",
        "masf --model {onnx} {babi} --calibration split --split-components 4096 --out {new}",
        "hidden size",
    ),
    (
        "masf --measure without --evaluation",
        "masf --model {onnx} {babi} --measure loo-abs --out {new}",
        "--evaluation",
    ),
    ("report on an empty directory", "report {empty_dir} --out {new}", "result.json"),
    ("report on a missing directory", "report {missing} --out {new}", "missing"),
    ("evaluate into a training run", EVALUATE + " --out {train}", "another run"),
    ("train into an evaluation", "train {babi} --out {eval}", "another run, of `fmm-fast evaluate`"),
    ("masf into an evaluation", "masf --model {onnx} {babi} --out {eval}", "of `fmm-fast evaluate`"),
    ("check into an evaluation", "check --model {onnx} {babi} --out {eval}", "of `fmm-fast evaluate`"),
    ("check ratios above 1", "check --model {onnx} {babi} --ratios 0.5,2 --out {new}", "--ratios"),
    (
        "evaluate into an evaluation with another --limit",
        EVALUATE + " --limit 4 --out {eval}",
        "limit (3 → 4)",
    ),
    (
        "evaluate into an evaluation of another model",
        EVALUATE + " --model {ckpt} --out {eval}",
        "differs in model (",
    ),
    ("unknown option", "masf --model {onnx} --quite --out {new}", "--quite"),
    ("repeated --model", EVALUATE + " --model {ckpt}", "--model was given more than once"),
    (
        "repeated --out",
        "explain --model {onnx} -m loo-abs --out {new}.jsonl --out {explained}",
        "--out was given more than once",
    ),
    ("repeated flag", "train {babi} --quiet --quiet --out {new}", "--quiet was given more than once"),
    ("repeated --threads", "--threads 1 --threads 2 " + EVALUATE, "--threads was given more than once"),
    ("--threads 0", "--threads 0 " + EVALUATE, "'--threads'"),
    (
        "repeated --metric",
        LOCAL + " {ab_csv} --metric macro-f1 --metric accuracy",
        "--metric was given more than once",
    ),
    (
        "repeated --measure-option key",
        EVALUATE + " --measure-option ig_steps=5 --measure-option ig_steps=7",
        "--measure-option ig_steps was given more than once",
    ),
    (
        "repeated --step0",
        "roar {babi} --step0 {train} --step0 {train} --quiet --out {new}",
        "was given more than once; give each training once",
    ),
    ("CSV naming a column twice", LOCAL + " {twice}", "'text' twice"),
    (
        "report of a result whose non-finite map names no field",
        "report {pointer} --out {new}",
        "'/measures/nope': no such field",
    ),
    ("a run marker of the wrong shape", EVALUATE + " --out {marker}", "fields must be a JSON object"),
    ("a checkpoint with damaged metadata", EVALUATE + " --model {checkpoint}", "info.label_names must be"),
    (
        "explanation scores beyond float range",
        "aopc --model {onnx} {babi} --limit 3 --quiet --out {new} --measure rand --explanations {huge}",
        "is inf",
    ),
    ("report --out under a regular file", "report {eval} --out {explained}/report", "explained.jsonl"),
    ("a generated test split of 10**12", EVALUATE + " --test-size 1000000000000", "generates at most"),
    (
        "a generated train split of 10**12",
        "train --dataset babi-1 --size 1000000000000 --out {new}",
        "generates at most",
    ),
    (
        "explain --overwrite over a user's file",
        "explain --model {onnx} -m rand {babi} --out {explained} --overwrite",
        "is not an explanations file fmm-fast wrote",
    ),
]


def _argv(command: str, paths: dict, keep_repeats: bool = False) -> list[str]:
    """The command line, an option given again replacing its earlier value unless keep_repeats."""
    argv = command.format(**paths).split()
    if keep_repeats:
        return argv
    kept: list[str] = []
    for position, word in enumerate(argv):
        value_of = argv[position - 1] if position else ""
        later = argv[position + 1 :]
        if word.startswith("--") and word in later:
            continue
        if value_of.startswith("--") and value_of in later and not word.startswith("-"):
            continue
        kept.append(word)
    return kept


def _snapshot(*roots: Path) -> dict[str, tuple[int, str]]:
    """mtime and sha256 of every file under the roots."""
    return {
        str(path): (path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
        for root in roots
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _assert_one_line_and_nothing_changed(
    argv, roots, capfd, expected: str, run=main, prog="fmm-fast"
) -> None:
    """`run(argv)` (fmm-fast's main, or another front door named `prog`) exits 2 with one line saying
    `expected`, and no file under `roots` changed or went."""
    before = _snapshot(*roots)
    assert run(argv) == 2
    err = capfd.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(f"{prog}: error: "), err
    assert expected in err, err
    after = _snapshot(*roots)
    assert {path: after.get(path) for path in before} == before  # no existing file changed or removed


@pytest.mark.parametrize(("case", "command", "expected"), CASES, ids=[case for case, _, _ in CASES])
def test_bad_input_exits_2_with_one_line_and_changes_nothing(
    workspace, tiny_babi, capfd, case, command, expected
):
    root, paths = workspace
    argv = _argv(command, paths, keep_repeats="more than once" in expected)
    _assert_one_line_and_nothing_changed(argv, [root, tiny_babi[0].parent.parent], capfd, expected)
    new = Path(paths["new"])
    if new.is_dir():  # a run refused after its checks leaves no claim behind
        assert not (new / RUN_MARKER).exists()
        shutil.rmtree(new)


def test_a_second_process_on_the_same_out_exits_2_at_once(workspace, tiny_babi, capfd):
    root, paths = workspace
    evaluation = Path(paths["eval"])
    with (evaluation / LOCK_NAME).open("a") as held:  # what a running `fmm-fast evaluate` holds
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        argv = _argv(EVALUATE + " --out {eval}", paths)
        models = tiny_babi[0].parent.parent
        _assert_one_line_and_nothing_changed(argv, [root, models], capfd, "another fmm-fast")


def test_a_damaged_run_marker_is_named(workspace, tiny_babi, tmp_path, capfd):
    _, paths = workspace
    out = tmp_path / "damaged"
    shutil.copytree(paths["eval"], out)
    (out / "seed-0" / RUN_MARKER).write_text('{"kind": "evalu')
    argv = _argv(EVALUATE + " --out {out}", {**paths, "out": out})
    _assert_one_line_and_nothing_changed(argv, [tmp_path], capfd, str(out / "seed-0" / RUN_MARKER))


def test_damaged_state_files_are_recomputed_with_a_warning(workspace, tmp_path, capfd):
    """State of the wrong shape, or not of this run's examples: a warning each, then the same result."""
    _, paths = workspace
    out = tmp_path / "resumed"
    shutil.copytree(paths["eval"], out)
    state = out / "seed-0" / "state"
    (state / "shared.json").write_text("[1, 2]")  # valid JSON, wrong shape
    (state / "rand.json").write_text('{"curve": 5, "masked": "x", "fixed_scores": null}')
    loo = json.loads((state / "loo-abs.json").read_text())
    loo["masked"] = loo["masked"][:-1]  # one example short
    (state / "loo-abs.json").write_text(json.dumps(loo))
    assert main(_argv(EVALUATE + " --out {out}", {**paths, "out": out})) == 0
    err = capfd.readouterr().err
    for name in ("shared", "rand", "loo-abs"):
        assert f"{state / name}.json is damaged" in err and "recomputing it" in err
    before, after = (
        json.loads((d / "seed-0" / "result.json").read_text()) for d in (Path(paths["eval"]), out)
    )
    assert after["curves"] == before["curves"] and after["measures"].keys() == before["measures"].keys()
