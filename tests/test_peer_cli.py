"""`fmm-fast aopc` end to end on the tiny bAbI model, with an external file."""

from __future__ import annotations

import json

from test_cli import data_flags
from test_user_texts import assert_self_contained

from fmm_fast.cli import main


def test_aopc_protocol_scores_builtin_and_external_explanations(tiny_babi, tmp_path, capsys):
    checkpoint, onnx_path, data = tiny_babi
    explained = tmp_path / "explain.jsonl"
    common = [*data_flags(data), "--limit", "4"]
    assert (
        main(
            [
                "explain",
                "--model",
                str(checkpoint),
                *common,
                "--measure",
                "int-grad-abs",
                "--out",
                str(explained),
            ]
        )
        == 0
    )
    # the same int-grad-abs scores, handed back as an explanation made elsewhere
    external = tmp_path / "outside.jsonl"
    lines = [json.loads(line) for line in explained.read_text().splitlines()]
    external.write_text(
        "".join(json.dumps({"index": x["index"], "token_scores": x["scores"]}) + "\n" for x in lines)
    )
    out = tmp_path / "peer"
    argv = ["aopc", "--model", str(onnx_path), *common, "--measure", "loo-abs"]
    argv += ["--measure", "int-grad-abs", "--explanations", str(external), "--out", str(out), "--quiet"]
    assert main(argv) == 0
    record = json.loads((out / "seed-0" / "result.json").read_text())
    assert record["kind"] == "peer-metrics" and record["n_examples"] == 4
    assert list(record["measures"]) == ["rand", "loo-abs", "int-grad-abs", "outside"]
    assert record["measures"]["outside"]["source"] == str(external)
    for key in ("aopc_comprehensiveness", "aopc_sufficiency", "tau_loo"):
        assert record["measures"]["outside"][key] == record["measures"]["int-grad-abs"][key]
    assert record["curves"]["outside"] == record["curves"]["int-grad-abs"]
    assert record["measures"]["rand"]["acu"] == 0.0
    per_example = [json.loads(line) for line in (out / "seed-0" / "peer.jsonl").read_text().splitlines()]
    assert len(per_example) == 4 * 4 and {"measure", "index", "comprehensiveness", "tau_loo"} <= set(
        per_example[0]
    )
    printed = capsys.readouterr().out
    assert "AOPC comp" in printed and "outside" in printed
    assert_self_contained(printed, "aopc's printed lines")
    # the same command again resumes a finished run: nothing is recomputed, the record is the same
    assert main(argv) == 0
    again = json.loads((out / "seed-0" / "result.json").read_text())
    assert again["measures"] == record["measures"] and again["curves"] == record["curves"]
    capsys.readouterr()
    # another run into the same directory is refused, naming what differs
    limit = argv.index("--limit") + 1
    assert main([*argv[:limit], "3", *argv[limit + 1 :]]) == 2  # an option is given once
    err = capsys.readouterr().err
    assert "holds another aopc run" in err and "limit (4 → 3)" in err
    # the report gives the peer metrics their own table (and needs no recursive result for it)
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0
    table = (tmp_path / "report" / "peer-metrics.md").read_text()
    assert "| outside |" in table and "AOPC comp" in table and "AOPC comp" in capsys.readouterr().out
    assert_self_contained(table, "peer-metrics.md")


def test_evaluate_names_the_aopc_command(tiny_babi, tmp_path, capsys):
    _, onnx_path, data = tiny_babi
    argv = ["evaluate", "--model", str(onnx_path), *data_flags(data), "--protocol", "aopc"]
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fmm-fast aopc" in err[0]
    assert not (tmp_path / "o").exists()


def test_a_bad_explanations_file_exits_2_naming_the_example(tiny_babi, tmp_path, capsys):
    _, onnx_path, data = tiny_babi
    external = tmp_path / "outside.jsonl"
    external.write_text('{"index": 0, "token_scores": [1, 2]}\n')
    argv = ["aopc", "--model", str(onnx_path), *data_flags(data), "--limit", "2"]
    assert main([*argv, "--explanations", str(external), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "(example 0)" in err[0] and "token_scores" in err[0]
