"""Output ownership (run markers, --overwrite, locks), model digests and label matching."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fmm_fast.cli import main
from fmm_fast.core.digest import cache_bucket, content_sha256
from fmm_fast.core.errors import UserError
from fmm_fast.core.outputs import (
    RUN_MARKER,
    check_directory,
    claim_directory,
    differences,
    finish_run,
    finished_run,
    output_lock,
)
from fmm_fast.data.labels import model_label_indices, parse_label_map

FIELDS = {"model_sha256": "abc", "data": {"dataset": "babi-1", "limit": 3}, "seed": 0}


def test_a_directory_takes_only_its_own_run(tmp_path):
    out = tmp_path / "run"
    assert check_directory(out, "evaluate", FIELDS)  # new
    claim_directory(out, "evaluate", FIELDS, files=["result.json"])
    (out / "result.json").write_text("{}")
    (out / "notes.txt").write_text("the user's")  # put there by the user, after the claim
    assert check_directory(out, "evaluate", FIELDS)  # the same run: resumes
    other = FIELDS | {"data": {"dataset": "babi-1", "limit": 4}}
    with pytest.raises(UserError, match=r"differs in data\.limit \(3 → 4\)"):
        check_directory(out, "evaluate", other)
    with pytest.raises(UserError, match="differs in kind"):
        check_directory(out, "masf", FIELDS)
    claim_directory(out, "evaluate", other, overwrite=True)  # replaces the earlier run
    assert not (out / "result.json").exists()
    assert (out / "notes.txt").read_text() == "the user's"  # never listed: never removed
    assert json.loads((out / RUN_MARKER).read_text())["fields"] == other


def test_a_run_is_finished_once_marked_and_until_claimed_again(tmp_path):
    out = tmp_path / "run"
    assert not finished_run(out, "evaluate", FIELDS)  # nothing there
    claim_directory(out, "evaluate", FIELDS, files=["result.json"])
    assert not finished_run(out, "evaluate", FIELDS)  # claimed, still running (or killed)
    finish_run(out)
    assert finished_run(out, "evaluate", FIELDS)
    assert not finished_run(out, "masf", FIELDS)  # another kind
    other = FIELDS | {"data": {"dataset": "babi-1", "limit": 4}}
    assert not finished_run(out, "evaluate", other)  # another setting: the step runs again
    claim_directory(out, "evaluate", FIELDS)  # the same run again (resumed): not finished until it ends
    assert not finished_run(out, "evaluate", FIELDS)
    assert json.loads((out / RUN_MARKER).read_text())["files"] == ["result.json"]


def test_overwrite_never_removes_files_fmm_fast_did_not_write(tmp_path):
    (tmp_path / "thesis.tex").write_text("years of work")
    with pytest.raises(UserError, match="replaces only what an fmm-fast run wrote: move them"):
        check_directory(tmp_path, "train", FIELDS, overwrite=True)
    assert (tmp_path / "thesis.tex").read_text() == "years of work"


def test_differences_name_nested_keys():
    assert differences({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 3}, "d": None}) == ["b.c (2 → 3)"]
    assert differences({"a": 1}, {"a": 1, "d": 5}) == ["d (null → 5)"]


def test_a_failed_run_releases_its_claim(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(UserError), output_lock(out):
        claim_directory(out, "masf", FIELDS)
        raise UserError("too few calibration examples")
    assert not (out / RUN_MARKER).exists()
    claim_directory(out, "masf", FIELDS | {"seed": 1})  # a corrected rerun may take it


def test_the_lock_is_released_when_its_holder_is_killed(tmp_path):
    out = tmp_path / "out"
    holder = (
        "import sys, time; from pathlib import Path; from fmm_fast.core.outputs import output_lock\n"
        "with output_lock(Path(sys.argv[1])):\n    print('locked', flush=True); time.sleep(600)"
    )
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    process = subprocess.Popen([sys.executable, "-c", holder, str(out)], env=env, stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"locked\n"
    with pytest.raises(UserError, match="another fmm-fast process is writing"), output_lock(out):
        pass
    process.send_signal(signal.SIGKILL)
    process.wait()
    with output_lock(out):  # the OS released the dead process's lock
        pass


def test_content_digest_follows_content_and_uses_its_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    model = tmp_path / "m.onnx"
    model.write_bytes(b"first model")
    cache_file = cache_bucket(model)
    assert cache_file.parent == tmp_path / "cache" / "fmm-fast" / "sha256"
    first = content_sha256(model)
    cache = json.loads(cache_file.read_text())
    assert cache[str(model.resolve())][-1] == first
    cache[str(model.resolve())][-1] = "cached"  # an untouched file is answered from the cache
    cache_file.write_text(json.dumps(cache))
    assert content_sha256(model) == "cached"
    stat = model.stat()
    model.write_bytes(b"other model")  # same size and, set back as `cp -p` does, the same mtime
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert model.stat().st_mtime_ns == stat.st_mtime_ns and content_sha256(model) not in (first, "cached")
    replacement = tmp_path / "new.onnx"
    replacement.write_bytes(b"third model")
    os.utime(replacement, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(replacement, model)  # `mv`: same size, same mtime, another inode
    assert content_sha256(model) == hashlib.sha256(b"third model").hexdigest()
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "model.safetensors").write_bytes(b"weights")
    before = content_sha256(checkpoint)
    (checkpoint / "model.safetensors").write_bytes(b"weights, retrained")
    assert content_sha256(checkpoint) != before


def test_the_digest_cache_forgets_files_that_are_gone(tmp_path, monkeypatch):
    """A bucket of the cache keeps the entries of existing files only, so it does not grow with every
    file ever hashed (temporary files, deleted runs)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    gone = tmp_path / "gone.onnx"
    gone.write_bytes(b"gone")
    content_sha256(gone)
    bucket = cache_bucket(gone)
    for number in itertools.count():  # another file of the same bucket
        other = tmp_path / f"other-{number}.onnx"
        if cache_bucket(other) == bucket:
            break
    other.write_bytes(b"other")
    assert str(gone.resolve()) in json.loads(bucket.read_text())
    gone.unlink()
    content_sha256(other)
    entries = json.loads(bucket.read_text())
    assert str(gone.resolve()) not in entries and str(other.resolve()) in entries


def test_labels_match_by_name_or_by_the_users_map():
    model = ["negative", "positive"]
    assert model_label_indices(["positive", "negative"], model).tolist() == [1, 0]  # by name, not position
    mapping = parse_label_map("a=negative, b=positive")
    assert mapping == (("a", "negative"), ("b", "positive"))
    assert model_label_indices(["a", "b"], model, mapping).tolist() == [0, 1]
    assert model_label_indices(["negative"], model).tolist() == [0]  # a subset of the model's labels
    with pytest.raises(UserError, match=r"\['a', 'b'\] are not the model's labels"):
        model_label_indices(["a", "b"], model)
    with pytest.raises(UserError, match="to one model label"):
        model_label_indices(["a", "b"], model, parse_label_map("a=negative,b=negative"))
    with pytest.raises(UserError, match="maps a dataset label twice"):
        parse_label_map("a=negative,a=positive")


def test_a_label_map_evaluates_as_the_models_own_names(tiny_babi, tmp_path, capsys):
    """A CSV whose labels are renamed bAbI locations, mapped back, scores like the CSV with the real names."""
    _, onnx_path, _ = tiny_babi
    from fmm_fast.backends.loading import load_model

    names = load_model(onnx_path).info.label_names
    rows = [(f"Mary went to the {names[i % 6]}. Where is Mary?", names[i % 6]) for i in range(60)]
    letters = {name: chr(ord("a") + i) for i, name in enumerate(names)}
    files = {}
    for kind, rename in (("names", lambda n: n), ("letters", letters.get)):
        files[kind] = tmp_path / f"{kind}.csv"
        files[kind].write_text("text,label\n" + "".join(f"{t},{rename(n)}\n" for t, n in rows))
    label_map = ",".join(f"{letter}={name}" for name, letter in letters.items())
    results = {}
    for kind, extra in (("names", []), ("letters", ["--label-map", label_map])):
        out = tmp_path / f"out-{kind}"
        argv = ["evaluate", "--model", str(onnx_path), "--dataset", str(files[kind]), "--text-field", "text",
                "--label-field", "label", "--quiet", "--out", str(out), *extra]  # fmt: skip
        assert main(argv) == 0, capsys.readouterr().err
        results[kind] = json.loads((out / "seed-0" / "result.json").read_text())["curves"]
    assert results["letters"] == results["names"]


def test_overwrite_replaces_an_earlier_evaluation(tiny_babi, tmp_path, capsys):
    _, onnx_path, data = tiny_babi
    argv = ["evaluate", "--model", str(onnx_path), "--dataset", "babi-1", "--size", str(data["size"]),
            "--test-size", str(data["test_size"]), "--quiet", "--out", str(tmp_path)]  # fmt: skip
    assert main([*argv, "--limit", "3"]) == 0
    assert main([*argv, "--limit", "4"]) == 2  # another run
    assert main([*argv, "--limit", "4", "--overwrite"]) == 0
    record = json.loads((tmp_path / "seed-0" / "result.json").read_text())
    assert record["n_examples"] == 4
    capsys.readouterr()


def test_resume_refuses_a_re_exported_model_at_the_same_path(tiny_babi, tmp_path, capsys):
    """The fingerprint holds the model's content: another model written to the same path does not resume."""
    import onnx

    _, onnx_path, data = tiny_babi
    model = tmp_path / "model.onnx"
    model.write_bytes(onnx_path.read_bytes())
    argv = ["evaluate", "--model", str(model), "--dataset", "babi-1", "--size", str(data["size"]),
            "--test-size", str(data["test_size"]), "--limit", "3", "--quiet",
            "--out", str(tmp_path / "e")]  # fmt: skip
    assert main(argv) == 0
    proto = onnx.load(str(model))
    proto.doc_string = "re-exported"
    onnx.save(proto, str(model))
    capsys.readouterr()
    assert main(argv) == 2
    assert 'differs in model ("sha256:' in capsys.readouterr().err


def test_resume_refuses_a_hub_split_changed_between_runs(tiny_babi, fake_hub, tmp_path, capsys):
    """A hub dataset is fingerprinted by the splits it loads: the same copy resumes, a changed one (here one
    edited sentence in the hub's test split) does not."""
    _, onnx_path, _ = tiny_babi
    tables, calls = fake_hub
    places, labels = ("garden", "kitchen") * 10, [0, 1] * 10
    story = "{} went to the {}. Where is {}?"
    tables["train"] = {"sentence": [story.format("Mary", p, "Mary") for p in places], "label": labels}
    tables["validation"] = {"sentence": [story.format("John", p, "John") for p in places], "label": labels}
    argv = ["evaluate", "--model", str(onnx_path), "--dataset", "sst2", "--label-map",
            "negative=garden,positive=kitchen", "--limit", "3", "--quiet",
            "--out", str(tmp_path / "e")]  # fmt: skip
    assert main(argv) == 0 and main(argv) == 0, capsys.readouterr().err  # the same copy: resumed
    assert calls[0] == ("nyu-mll/glue", "sst2", ["train", "validation"])
    marker = json.loads((tmp_path / "e" / RUN_MARKER).read_text())
    assert marker["fields"]["data"]["content"]["sst2"].startswith("sha256:")
    tables["validation"]["sentence"][1] = "John went to the garden. Where is John?"
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "differs in data.content.sst2" in err, err


def test_train_warns_when_the_selected_model_predicts_one_class():
    from fmm_fast.training.train import one_class_warning

    assert one_class_warning(np.array([0, 1, 1]), ["ham", "spam"], 2) is None
    warning = one_class_warning(np.array([0, 0, 0]), ["ham", "spam"], 2)
    assert warning is not None and "predicts one class ('ham') for all 3 validation examples" in warning


def test_resume_refuses_a_data_file_edited_between_runs(tiny_babi, tmp_path, capsys):
    """The fingerprint holds a local data file's content: the edited file is named, nothing resumes."""
    _, onnx_path, _ = tiny_babi
    data = tmp_path / "places.csv"
    rows = [f"Mary went to the {place}. Where is Mary?,{place}" for place in ("garden", "kitchen") * 15]
    data.write_text("text,label\n" + "\n".join(rows) + "\n")
    argv = ["evaluate", "--model", str(onnx_path), "--dataset", str(data), "--text-field", "text",
            "--label-field", "label", "--limit", "3", "--quiet", "--out", str(tmp_path / "e")]  # fmt: skip
    assert main(argv) == 0
    stat = data.stat()
    data.write_text(data.read_text().replace("Mary", "Anna"))  # same size, mtime set back
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "differs in data.content." in err and str(data) in err, err
