"""End-to-end CLI runs on a tiny model, and the one-line errors users see."""

from __future__ import annotations

import csv
import json

import pytest
from test_user_texts import assert_self_contained

from fmm_fast.cli import main
from fmm_fast.core.records import read_record


def data_flags(data: dict) -> list[str]:
    return ["--dataset", "babi-1", "--size", str(data["size"]), "--test-size", str(data["test_size"])]


def test_evaluate_writes_record_csv_and_plot(tiny_babi, tmp_path, capsys):
    _, onnx_path, data = tiny_babi
    out = tmp_path / "eval"
    code = main(
        [
            "evaluate",
            "--model",
            str(onnx_path),
            *data_flags(data),
            "--measure",
            "loo-sign",
            "--measure",
            "grad-l2",
            "--limit",
            "6",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    record = json.loads((out / "seed-0" / "result.json").read_text())
    assert record["kind"] == "evaluate" and record["n_examples"] == 6
    assert set(record["curves"]) == {"rand", "loo-sign", "grad-l2"}
    assert all(len(c["micro_f1"]) == 11 for c in record["curves"].values())
    assert record["measures"]["loo-sign"]["signed"] and not record["measures"]["grad-l2"]["signed"]
    assert record["model"]["backend"].startswith("onnxruntime")
    header = (out / "curves.csv").read_text().splitlines()[0]
    assert header.startswith("seed,measure,ratio")
    assert (out / "curves.png").stat().st_size > 1000
    printed = capsys.readouterr().out
    assert "RACU" in printed
    assert_self_contained(printed, "evaluate's printed lines")


def test_explain_writes_jsonl_and_html(tiny_babi, tmp_path):
    checkpoint, _, data = tiny_babi
    out = tmp_path / "explanations.jsonl"
    argv = ["explain", "--model", str(checkpoint), *data_flags(data), "--limit", "3", "--out", str(out)]
    assert main([*argv, "--measure", "int-grad-abs", "--measure", "loo-sign", "--html"]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    # one line per example and measure, in example order, the measures in the order given
    assert [(line["index"], line["measure"]) for line in lines] == [
        (i, m) for i in range(3) for m in ("int-grad-abs", "loo-sign")
    ]
    for line in lines:
        count = len(line["tokens"])
        assert len(line["scores"]) == len(line["explained"]) == len(line["offsets"]) == count
        assert all(s == 0 for s, e in zip(line["scores"], line["explained"], strict=True) if not e)
        assert line["text"] and line["pair"]  # story and question
        assert 0.0 < line["probability"] <= 1.0
        spans = zip(line["offsets"], line["segments"], line["explained"], strict=True)
        for (start, end), segment, explained in spans:
            assert explained == (segment == 0)  # bAbI: every story token is explained
            if explained:  # the token's characters are in the story
                assert line["text"][start:end].strip()
    assert all(s >= 0 for line in lines if line["measure"] == "int-grad-abs" for s in line["scores"])
    page = out.with_suffix(".html").read_text()
    assert page.count('<section class="example"') == 3 and page.count('class="legend"') == 2
    assert "https://" not in page and "http://" not in page  # nothing is fetched
    record = read_record(out.with_suffix(".run.json"))  # a run record, like every command's
    assert (record["kind"], record["n_examples"], record["seed"]) == ("explain", 3, 0)
    assert record["measures"] == ["int-grad-abs", "loo-sign"] and record["arguments"]["data"]["limit"] == 3
    assert record["model"]["path"] == str(checkpoint) and record["model"]["backend"] == "torch:cpu"
    assert record["files"] == [out.name, out.with_suffix(".html").name]
    assert set(record["durations"]["measures_seconds"]) == {"int-grad-abs", "loo-sign"}


def test_explain_record_keeps_the_measures_given_and_replaces_only_its_own(tiny_babi, tmp_path, capsys):
    _, onnx_path, data = tiny_babi
    out = tmp_path / "e.jsonl"
    argv = ["explain", "--model", str(onnx_path), *data_flags(data), "--limit", "2", "--out", str(out), "-q"]
    assert main([*argv, "-m", "beam", "-m", "rand", "--measure-option", "beam_size=2"]) == 0
    record = read_record(out.with_suffix(".run.json"))
    assert record["arguments"]["measures"] == ["beam", "rand"]  # what the user gave
    assert record["measures"] == ["beam-sign-2", "rand"] and "workers" not in record  # what ran
    assert main([*argv, "-m", "rand", "--overwrite"]) == 0  # its own record is replaced
    assert read_record(out.with_suffix(".run.json"))["measures"] == ["rand"]
    mine = tmp_path / "mine.run.json"
    mine.write_text('{"kind": "notes"}\n')  # a user's file where the record would go
    capsys.readouterr()
    assert main([*argv[:-3], "--out", str(tmp_path / "mine.jsonl"), "-m", "rand", "--overwrite"]) == 2
    assert "is not an explanations file fmm-fast wrote" in capsys.readouterr().err
    assert mine.read_text() == '{"kind": "notes"}\n' and not (tmp_path / "mine.jsonl").exists()


@pytest.mark.parametrize("given", ["flag", "environment"])
def test_threads_limit_every_engine_for_the_command_only(tiny_babi, tmp_path, monkeypatch, given):
    import numba
    import torch

    from fmm_fast.backends import onnx_backend
    from fmm_fast.core import threads

    _, onnx_path, data = tiny_babi
    before = (threads.compute_threads(), torch.get_num_threads(), numba.get_num_threads())
    if 1 in before:
        pytest.skip("a limit of 1 thread looks like the default here")
    seen = []

    def counts() -> int:  # what a model opened in the command runs on
        seen.append((threads.compute_threads(), torch.get_num_threads(), numba.get_num_threads()))
        return seen[-1][0]

    monkeypatch.setattr(onnx_backend, "compute_threads", counts)
    flags = ["--threads", "1"] if given == "flag" else []
    if given == "environment":
        monkeypatch.setenv("FMM_FAST_THREADS", "1")
    argv = ["explain", "--model", str(onnx_path), *data_flags(data), "--limit", "2", "-m", "rand", "-q"]
    assert main([*flags, *argv, "--out", str(tmp_path / "e.jsonl")]) == 0
    assert seen and all(count == (1, 1, 1) for count in seen)
    machine = read_record(tmp_path / "e.run.json")["machine"]  # the record says where and on what it ran
    assert machine["threads"] == 1 and machine["cores"] == before[0] and machine["cpu"]
    assert (threads.compute_threads(), torch.get_num_threads(), numba.get_num_threads()) == before


def test_masf_on_the_onnx_model(tiny_babi, tmp_path, capsys):
    _, onnx_path, data = tiny_babi
    out = tmp_path / "masf"
    argv = ["masf", "--model", str(onnx_path), *data_flags(data), "--limit", "12", "--out", str(out), "-q"]
    argv += ["--calibration", "in-sample", "--calibration", "split", "--calibration-seed", "3"]
    argv += ["--split-components", "8"]  # below half A's 30 examples (the default 32 is not)
    assert main(argv) == 0
    record = json.loads((out / "masf.json").read_text())
    arguments = record["arguments"]  # MasfSettings.to_dict(): every data option is recorded
    assert {key: arguments["data"][key] for key in ("size", "test_size", "limit")} == {
        "size": data["size"],
        "test_size": data["test_size"],
        "limit": 12,
    }
    assert (arguments["calibrations"], arguments["calibration_seed"]) == (["in-sample", "split"], 3)
    assert arguments["split_components"] == 8
    assert {"text_field", "pair_field", "label_field"} <= set(arguments["data"])
    by_method = {summary["calibration"]["method"]: summary for summary in record["models"].values()}
    assert set(by_method) == {"in-sample", "split"}
    assert (
        by_method["split"]["calibration"]["seed"] == 3
        and by_method["in-sample"]["calibration"]["seed"] is None
    )
    assert by_method["split"]["calibration"]["components"] == 8
    assert by_method["split"]["calibration"]["variant"].startswith("PCA 8 per layer fitted on half A; ")
    assert by_method["in-sample"]["calibration"]["components"] == 0
    # 60 validation examples of the 300: all of them in-sample, halves of 30 for split.
    assert by_method["in-sample"]["calibration"]["n"] == 60
    assert (by_method["split"]["calibration"]["n_level_1"], by_method["split"]["calibration"]["n"]) == (
        30,
        30,
    )
    p_values = _p_values_csv(out / "p_values.csv")
    captured = capsys.readouterr()
    err = captured.err
    assert_self_contained(captured.out + err, "masf's printed lines")
    for label, summary in record["models"].items():
        assert [round(s["ratio"], 1) for s in summary["per_ratio"]] == [round(0.1 * j, 1) for j in range(11)]
        assert summary["calibration"]["strategy"] == "masked"
        floor = summary["calibration"]["p_value_floor"]
        assert 0 <= floor <= 1
        assert min(min(p) for p in p_values[label].values()) >= floor - 1e-12
        assert (f"{label}: the {summary['calibration']['method']} calibration saturates" in err) == (
            floor > 0.05
        )
    # --size capped the validation split: the advice names both remedies.
    if by_method["in-sample"]["calibration"]["p_value_floor"] > 0.05:
        assert "use --calibration split (valid, and its lowest p-value here is 0.032)" in err
        assert "leave out --size (it capped the validation split at 60)" in err
    assert "split calibration saturates" not in err  # its floor is 1/31
    assert by_method["split"]["calibration"]["p_value_floor"] >= 1 / 31
    assert "set/s" not in err  # --quiet: no progress bar
    assert (out / "masf.png").is_file()


def test_masf_saturation_advice_without_size_names_what_can_help(capsys):
    from fmm_fast.api.masf import _warn_saturated_calibrations

    saturated = {"calibration": {"method": "in-sample", "n": 917, "p_value_floor": 0.2}}
    fine = {"calibration": {"method": "split", "n": 459, "p_value_floor": 1 / 460}}
    _warn_saturated_calibrations({"plain": saturated, "plain split": fine}, size=None)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "fmm-fast: warning: plain: the in-sample calibration saturates"
    )
    assert "no p-value can fall below 0.20" in err[0]
    assert "use --calibration split (valid, and its lowest p-value here is 0.0022)" in err[0]
    assert "--size cannot help: the whole validation split (917 examples) already calibrates" in err[0]
    assert "leave out --size" not in err[0]


def test_masf_split_calibration_needs_forty_examples(tiny_babi, tmp_path, capsys):
    _, onnx_path, _ = tiny_babi
    argv = ["masf", "--model", str(onnx_path), "--dataset", "babi-1", "--size", "150", "--test-size", "5"]
    assert main([*argv, "--calibration", "split", "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and "split calibration needs at least 40 calibration examples (20 per half), got 30" in err[0]
    )


def test_masf_unknown_calibration_is_one_line(tmp_path, capsys):
    argv = [
        "masf",
        "--model",
        str(tmp_path / "none.onnx"),
        "--calibration",
        "conformal",
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown MaSF calibration method 'conformal'" in err[0]


@pytest.mark.parametrize(
    ("measure", "dataset", "message"),
    [
        ("lo-abs", "babi-1", "unknown measure"),
        ("beam-sign-0", "babi-1", "beam"),
        ("loo-abs", "no-such-set", "no-such-set"),
        ("loo-abs", "movie-snippets", "labels"),  # the bAbI model has 6 labels, movie-snippets 2
    ],
)
def test_evaluate_user_errors_are_one_line(tiny_babi, tmp_path, capsys, measure, dataset, message):
    _, onnx_path, _ = tiny_babi
    argv = [
        "evaluate",
        "--model",
        str(onnx_path),
        "--dataset",
        dataset,
        "--measure",
        measure,
        "--limit",
        "3",
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0].lower()


def test_unwritable_out_is_a_user_error(tiny_babi, tmp_path, capsys):
    _, onnx_path, data = tiny_babi
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    code = main(["evaluate", "--model", str(onnx_path), *data_flags(data), "--out", str(blocker / "sub")])
    assert code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_masf_needs_twenty_calibration_examples(tiny_babi, tmp_path, capsys):
    _, onnx_path, _ = tiny_babi
    code = main(
        [
            "masf",
            "--model",
            str(onnx_path),
            "--dataset",
            "babi-1",
            "--size",
            "20",
            "--test-size",
            "5",
            "--out",
            str(tmp_path / "m"),
        ]
    )
    assert code == 2
    assert "at least 20 calibration examples" in capsys.readouterr().err


def test_usage_mistakes_exit_2_without_traceback(capsys):
    assert main(["train", "babi-1"]) == 2  # the dataset given without --dataset
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--dataset" in err


def _p_values_csv(path) -> dict[str, dict[str, list[float]]]:
    """{model label: {ratio: p-values}} from masf's p_values.csv."""
    by_label: dict[str, dict[str, list[float]]] = {}
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            by_label.setdefault(row["model"], {}).setdefault(row["ratio"], []).append(float(row["p_value"]))
    return by_label


def _explain_scores(checkpoint, data, tmp_path, name: str, *extra: str) -> list[list[float]]:
    out = tmp_path / f"{name}{'-'.join(extra)}.jsonl"
    flags = [*data_flags(data), "--limit", "3", "--out", str(out)]
    assert main(["explain", "--model", str(checkpoint), "-m", name, *flags, *extra]) == 0
    return [json.loads(line)["scores"] for line in out.read_text().splitlines()]


def test_explain_measure_option_reaches_the_measure(tiny_babi, tmp_path):
    checkpoint, _, data = tiny_babi
    one_step = _explain_scores(checkpoint, data, tmp_path, "int-grad-sign", "--measure-option", "ig_steps=1")
    # with one step, integrated gradients is input × gradient exactly (alpha = weight = 1)
    assert one_step == _explain_scores(checkpoint, data, tmp_path, "inp-grad-sign")
    assert one_step != _explain_scores(checkpoint, data, tmp_path, "int-grad-sign")  # default: 20 steps


def test_evaluate_measure_option_reaches_every_step(tiny_babi, tmp_path, monkeypatch):
    import fmm_fast.measures.spec

    checkpoint, _, data = tiny_babi
    calls = []
    real = fmm_fast.measures.spec.get_measure

    def recording(name, **options):
        calls.append((name, options))
        return real(name, **options)

    monkeypatch.setattr(fmm_fast.measures.spec, "get_measure", recording)
    arguments = ["--model", str(checkpoint), *data_flags(data), "--limit", "2", "--quiet"]
    options = ["--measure-option", "ig_steps=3", "--measure-option", "beam_size=2"]
    out = tmp_path / "eval"
    assert (
        main(["evaluate", *arguments, "-m", "int-grad-abs", "-m", "beam", *options, "--out", str(out)]) == 0
    )
    record = json.loads((out / "seed-0" / "result.json").read_text())
    assert set(record["curves"]) == {"rand", "int-grad-abs", "beam-sign-2"}  # beam_size named the beam
    assert record["arguments"]["measure_options"] == {"ig_steps": 3, "beam_size": 2}
    steps = [options for name, options in calls if name == "int-grad-abs" and "seed" in options]
    # ratios 0.1 ... 0.9, and once for the cost line printed before the run
    assert len(steps) == 10 and all(o["ig_steps"] == 3 for o in steps)
