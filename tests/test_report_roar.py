"""`fmm-fast report` on ROAR runs: the ROAR table beside no-retraining erasure, the cost table, figures,
report.json, incomplete runs and bad input. The ROAR result.json files follow the run's file contract;
their curves are chosen so that ACU and RACU can be worked out by hand."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from test_report import cell, write_result

from fmm_fast.api.roar import print_summary
from fmm_fast.cli import main
from fmm_fast.core.records import read_record, write_record
from fmm_fast.protocols.curve_stats import RATIOS, acu_racu
from fmm_fast.report.load import read_results

# rand falls linearly from 0.9 to 0.5: ∫ (b − b(1)) dr = ½ · 0.4 · 1 = 0.2, exact under the trapezoid rule.
RAND = 0.9 - 0.4 * RATIOS
BASELINE_AREA = 0.2
# A measure's curve sits `depth` below rand at the nine inner ratios and meets it at 0 and 1. Each of the
# ten trapezoids of width 0.1 has mean gap depth, except the two at the ends (depth / 2):
# ACU = 0.1 · (8 · depth + 2 · depth / 2) = 0.9 · depth, RACU = ACU / 0.2 = 4.5 · depth.
DEPTHS = {
    "rand": [0.0, 0.0, 0.0],
    "grad-l2": [0.04, 0.06, 0.08],
    "loo-sign": [0.02, 0.04, 0.06],  # signed: its ACU is read
    "loo-abs": [0.3, 0.25, 0.3],  # RACU above 1: clipped to 1 in every seed
}
ACU = {
    "rand": [0.0] * 3,
    "grad-l2": [0.036, 0.054, 0.072],
    "loo-sign": [0.018, 0.036, 0.054],
    "loo-abs": [0.27, 0.225, 0.27],
}
RACU = {
    "rand": [0.0] * 3,
    "grad-l2": [0.18, 0.27, 0.36],
    "loo-sign": [0.09, 0.18, 0.27],
    "loo-abs": [1.35, 1.125, 1.35],
}
# The no-retraining RACU/ACU of the same measures: the ROAR run's own step-0 (plain) model and a masked model.
STEP0_SCORES = {
    "rand": [0.0] * 3,
    "grad-l2": [0.30, 0.32, 0.34],
    "loo-sign": [0.1, 0.2, 0.3],
    "loo-abs": [0.5] * 3,
}
MASKED_SCORES = {"rand": [0.0] * 3, "grad-l2": [0.40, 0.41, 0.45], "loo-sign": [0.3, 0.3, 0.4]}
MASKED_SCORES_0 = {name: (values[0], values[0]) for name, values in MASKED_SCORES.items()}
COST = {
    "trainings": 28,
    "forward_passes": 123456,
    "backward_passes": 7890,
    "seconds": {"train": 300.0, "explain": 40.0, "mask": 2.0, "evaluate": 8.0, "total": 350.0},
}


def roar_curve(depth: float) -> np.ndarray:
    curve = RAND - depth
    curve[[0, -1]] = RAND[[0, -1]]
    return curve


def write_roar(
    root: Path,
    seeds: tuple[int, ...] = (0, 1, 2),
    measures: tuple[str, ...] = ("rand", "grad-l2", "loo-sign", "loo-abs"),
    dataset: str = "movie-snippets",
    strategy: str = "plain",
    recursive: bool = True,
    missing: dict[tuple[int, str], int] | None = None,
    erasure: bool = True,
    step0: float = 0.9,
) -> Path:
    """A ROAR run directory as `fmm-fast roar` writes it; missing: (seed, measure) -> trailing steps not
    run (null). With erasure, each seed's seed-S/erasure/result.json holds STEP0_SCORES (strategy plain)."""
    missing = missing or {}
    entries = {}
    for seed in seeds:
        curves, acu, racu, clipped = {}, {}, {}, {}
        for name in measures:
            curve = roar_curve(DEPTHS[name][seed]) + (step0 - 0.9)
            values: list = curve.tolist()
            if missing.get((seed, name)):
                values[-missing[(seed, name)] :] = [None] * missing[(seed, name)]
            curves[name] = values
            if (seed, name) not in missing and (seed, "rand") not in missing:
                acu[name] = ACU[name][seed]
                racu[name] = RACU[name][seed]
                clipped[name] = min(1.0, racu[name])
        relative = None
        if erasure:
            scores = {name: (STEP0_SCORES[name][seed], STEP0_SCORES[name][seed]) for name in measures}
            written = write_result(root, dataset, strategy, seed, scores, unmasked=step0)
            relative = f"seed-{seed}/erasure/result.json"
            (root / relative).parent.mkdir(parents=True)
            written.rename(root / relative)
            written.parent.rmdir()
        entries[str(seed)] = {
            "curves": curves,
            "acu": acu,
            "racu": racu,
            "racu_clipped": clipped,
            "erasure": relative,
        }
    record = {
        "protocol": "roar",
        "arguments": {"dataset": dataset, "strategy": strategy, "recursive": recursive},
        "dataset": dataset,
        "metric": "accuracy",
        "majority_baseline": 0.51,
        "strategy": strategy,
        "recursive": recursive,
        "ratios": RATIOS.tolist(),
        "complete": not missing,
        "seeds": entries,
        "cost": COST,
        "versions": {},
    }
    root.mkdir(parents=True, exist_ok=True)
    write_record(root / "result.json", record)
    return root


def write_masked_evaluations(root: Path, dataset: str = "movie-snippets") -> Path:
    for seed in range(3):
        scores = {name: (values[seed], values[seed]) for name, values in MASKED_SCORES.items()}
        write_result(root, dataset, "masked", seed, scores, unmasked=0.88)
    return root


def rows(markdown: str, heading: str) -> dict[str, list[str]]:
    """measure -> cells of the table under the heading that starts with `heading` (header row: "Measure")."""
    section = markdown.split(f"### {heading}")[1].split("###")[0]
    lines = [line.strip("|").split(" | ") for line in section.splitlines() if line.startswith("| ")]
    return {line[0].strip(): [c.strip() for c in line[1:]] for line in lines}


def report(tmp_path: Path, capsys, *dirs: Path, out: str = "report") -> tuple[int, str, str]:
    code = main(["report", *map(str, dirs), "--out", str(tmp_path / out)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_fixture_curves_give_the_hand_worked_scores():
    names = list(DEPTHS)
    for seed in range(3):
        curves = np.stack([roar_curve(DEPTHS[name][seed]) for name in names])
        acu, racu = acu_racu(curves, np.repeat(RAND[None], len(names), axis=0), RATIOS)
        assert acu == pytest.approx([ACU[name][seed] for name in names])
        assert racu == pytest.approx([RACU[name][seed] for name in names])
        assert racu == pytest.approx(acu / BASELINE_AREA)


def test_roar_beside_no_retraining(tmp_path: Path, capsys):
    roar = write_roar(tmp_path / "roar")
    masked = write_masked_evaluations(tmp_path / "evaluate")
    write_masked_evaluations(tmp_path / "evaluate", dataset="sst2")  # another dataset: not paired
    code, out, _ = report(tmp_path, capsys, roar, masked)
    assert code == 0
    written = tmp_path / "report"
    table = (written / "roar.md").read_text()
    assert table in out + "\n"
    section = rows(table, "movie-snippets: Recursive ROAR, plain retraining (seeds 0, 1, 2)\n")
    assert section["Measure"] == [
        "Score",
        "Recursive ROAR: plain model retrained at every step (3 seeds)",
        "Clipped RACU",
        "No retraining: plain step-0 model (3 seeds)",
        "No retraining: masked model (evaluate) (3 seeds)",
    ]
    assert list(section)[1:] == ["rand", "grad-l2", "loo-sign", "loo-abs"]
    # The paper's pair: ROAR RACU (18, 27, 36 → 27.0) beside the masked model's RACU without retraining.
    assert section["grad-l2"] == [
        "RACU",
        cell(RACU["grad-l2"]),
        cell(RACU["grad-l2"]),
        cell(STEP0_SCORES["grad-l2"]),
        cell(MASKED_SCORES["grad-l2"]),
    ]
    assert cell(RACU["grad-l2"]).startswith("27.0 (")
    assert section["loo-sign"] == [
        "ACU",
        cell(ACU["loo-sign"]),
        "",  # a signed measure: its ACU is read, so no clipped RACU
        cell(STEP0_SCORES["loo-sign"]),
        cell(MASKED_SCORES["loo-sign"]),
    ]
    # Unclipped RACU above 1, clipped to exactly 1 in every seed; the masked run has no loo-abs.
    assert section["loo-abs"] == ["RACU", cell(RACU["loo-abs"]), "100.0 (−0.0/+0.0)", "50.0 (−0.0/+0.0)", ""]
    assert "Left out" not in table and "incomplete" not in table

    # The ROAR run's own erasures hang on it: the erasure table holds the masked runs only.
    erasure_table = (written / "table.md").read_text()
    assert "### Strategy: masked" in erasure_table and "### Strategy: plain" not in erasure_table

    cost = (written / "roar-cost.md").read_text()
    assert cost in out + "\n"
    assert (
        "| movie-snippets | Recursive ROAR | plain, a new model at every step | 3 | 4 | 28 | 123,456 | 7,890 "
        "| 300.0 | 40.0 | 2.0 | 8.0 | 350.0 |" in cost
    )
    # write_result: 18,000 forward passes and 10 + 2·seed seconds per measure and seed.
    step0 = f"| 3 | 4 | 3 | {3 * 4 * 18000:,} | n/a | n/a | n/a | n/a | n/a | {4 * (10 + 12 + 14):.1f} |"
    assert f"| movie-snippets | No-retraining erasure | plain step-0 model {step0}" in cost
    assert (
        "| movie-snippets | No-retraining erasure | masked model (evaluate) | 3 | 3 | 3 | 162,000 | n/a"
        in cost
    )
    assert "sst2" not in cost

    pngs = sorted(p.name for p in written.glob("roar-*.png"))
    assert pngs == [
        f"roar-movie-snippets-plain-recursive-{name}.png" for name in ("grad-l2", "loo-abs", "loo-sign")
    ]
    assert all(
        (written / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (written / name).stat().st_size > 10_000
        for name in pngs
    )

    data = read_record(written / "report.json")
    [group] = data["roar"]
    assert (group["protocol"], group["strategy"], group["recursive"], group["complete"]) == (
        "Recursive ROAR",
        "plain",
        True,
        True,
    )
    grad = group["measures"]["grad-l2"]
    assert grad["racu"]["values"] == pytest.approx(RACU["grad-l2"]) and grad["reported"] == "racu"
    assert grad["curve"]["per_seed"][1] == pytest.approx(roar_curve(0.06))
    assert group["measures"]["loo-abs"]["racu_clipped"]["values"] == [1.0, 1.0, 1.0]
    own, evaluate = group["no_retraining"]
    assert own["own_step0_model"] and own["strategy"] == "plain"
    assert own["measures"]["grad-l2"]["racu"]["values"] == STEP0_SCORES["grad-l2"]
    assert not evaluate["own_step0_model"] and evaluate["strategy"] == "masked"
    # nan (not recorded) goes through the records writer: null in the file, nan when read back.
    assert math.isnan(data["cost"][1]["backward_passes"]) and data["cost"][0]["backward_passes"] == 7890
    raw = json.loads((written / "report.json").read_text())
    assert raw["cost"][1]["backward_passes"] is None
    assert raw["non_finite"]["/cost/1/backward_passes"] == "nan"


# Below rand by ZIGZAG_DEPTH at 10, 30, …, 90% only: between the ratios of a 5-step ROAR run.
ZIGZAG_DEPTH = 0.04
ZIGZAG = RAND - ZIGZAG_DEPTH * (np.arange(len(RATIOS)) % 2)


def zigzag_erasures(paths: list[Path]) -> None:
    """Give every measure of these evaluate results the ZIGZAG curve (rand: RAND)."""
    for path in paths:
        data = read_record(path)
        for name, curves in data["curves"].items():
            curves["accuracy"] = (RAND if name == "rand" else ZIGZAG).tolist()
        write_record(path, data)


def test_evaluation_read_at_a_subset_of_its_ratios(tmp_path: Path):
    zigzag_erasures([write_result(tmp_path, "movie-snippets", "masked", 0, MASKED_SCORES_0, unmasked=0.9)])
    [result] = read_results([tmp_path]).evaluations
    assert result.at_ratios(RATIOS) is result
    assert result.at_ratios(np.arange(4) / 3) is None  # thirds are not on the 10% grid
    # Trapezoids 0–0.1–0.2–1: the gap d at 0.1 counts in two of width 0.1, rand's area stays 0.2 (linear).
    sparse = result.at_ratios(np.array([0.0, 0.1, 0.2, 1.0]))
    grad = sparse.measures["grad-l2"]
    assert (
        sparse.ratios.tolist() == [0.0, 0.1, 0.2, 1.0]
        and grad.curve.tolist() == ZIGZAG[[0, 1, 2, 10]].tolist()
    )
    assert (grad.acu, grad.racu) == pytest.approx((0.1 * ZIGZAG_DEPTH, 0.5 * ZIGZAG_DEPTH))
    assert sparse.measures["rand"].racu == 0.0 and grad.racu_undefined is None
    # On ROAR's 20% grid the zigzag never leaves rand.
    coarse = result.at_ratios(RATIOS[::2])
    assert coarse.measures["grad-l2"].acu == pytest.approx(0.0) and coarse.measures["grad-l2"].racu == 0.0


def coarse_roar_beside_zigzags(tmp_path: Path) -> tuple[Path, Path]:
    """A 5-step ROAR run of seed 0 and masked evaluations, every no-retraining curve a ZIGZAG."""
    roar = write_roar(tmp_path / "roar", seeds=(0,))
    record = read_record(roar / "result.json")
    record["ratios"] = RATIOS[::2].tolist()
    record["seeds"]["0"]["curves"] = {name: c[::2] for name, c in record["seeds"]["0"]["curves"].items()}
    write_record(roar / "result.json", record)
    masked = write_masked_evaluations(tmp_path / "evaluate")
    zigzag_erasures([roar / "seed-0" / "erasure" / "result.json", *masked.glob("*/result.json")])
    return roar, masked


def test_the_roar_summary_reads_the_step0_erasure_at_roar_ratios(tmp_path: Path, capsys):
    for run, expected in (
        (write_roar(tmp_path / "fine", seeds=(0,)), "30.0"),
        (coarse_roar_beside_zigzags(tmp_path)[0], "0.0"),
    ):
        print_summary(read_record(run / "result.json"), run)
        [grad] = [
            line.split() for line in capsys.readouterr().out.splitlines() if line.split()[:1] == ["grad-l2"]
        ]
        assert (
            grad[-1] == expected
        )  # on the same ratios: the file's RACU (STEP0_SCORES); on 20%: the zigzag's 0


def test_no_retraining_scored_at_roar_ratios(tmp_path: Path, capsys):
    """A 5-step ROAR run reads every no-retraining curve at its own ratios, so that a finer grid does not
    decide the comparison; the full-grid scores stay in report.json and in the erasure table."""
    roar, masked = coarse_roar_beside_zigzags(tmp_path)
    assert report(tmp_path, capsys, roar, masked)[0] == 0
    table = (tmp_path / "report" / "roar.md").read_text()
    section = rows(table, "movie-snippets: Recursive ROAR, plain retraining (seed 0)\n")
    assert section["Measure"][3:] == [
        "No retraining: plain step-0 model, at ROAR's ratios (1 seed)",
        "No retraining: masked model (evaluate), at ROAR's ratios (3 seeds)",
    ]
    assert section["grad-l2"] == [
        "RACU",
        cell(RACU["grad-l2"][:1]),
        cell(RACU["grad-l2"][:1]),
        "0.0",
        "0.0 (−0.0/+0.0)",
    ]
    cost = (tmp_path / "report" / "roar-cost.md").read_text()  # the whole run's cost, on its own ratios
    assert "| No-retraining erasure | plain step-0 model |" in cost and "ROAR's ratios" not in cost
    # The erasure table keeps the masked runs' own scores on their own ratios.
    assert cell(MASKED_SCORES["grad-l2"]) in (tmp_path / "report" / "table.md").read_text()
    [group] = read_record(tmp_path / "report" / "report.json")["roar"]
    own, evaluate = group["no_retraining"]
    assert own["ratios"] == pytest.approx(RATIOS[::2].tolist()) and own["own_ratios"] == pytest.approx(
        RATIOS.tolist()
    )
    assert own["measures"]["grad-l2"]["racu"]["values"] == [0.0]
    assert own["measures_at_own_ratios"]["grad-l2"]["racu"]["values"] == STEP0_SCORES["grad-l2"][:1]
    assert evaluate["measures"]["loo-sign"]["acu"]["values"] == pytest.approx([0.0] * 3)


def thirds_roar(tmp_path: Path) -> Path:
    """A 3-step ROAR run of seed 0 (ratios 0, 1/3, 2/3, 1: not on evaluate's 10% grid)."""
    roar = write_roar(tmp_path / "roar", seeds=(0,))
    record = read_record(roar / "result.json")
    record["ratios"] = [0.0, 1 / 3, 2 / 3, 1.0]
    curves = record["seeds"]["0"]["curves"]
    record["seeds"]["0"]["curves"] = {name: c[::3][:3] + c[-1:] for name, c in curves.items()}
    write_record(roar / "result.json", record)
    return roar


def test_no_retraining_off_roar_ratios_is_marked_and_noted(tmp_path: Path, capsys):
    """Where the no-retraining curves cannot be read at ROAR's ratios, their areas stay on their own grid:
    the column says so and Left out says why and which --steps would do."""
    roar = thirds_roar(tmp_path)
    masked = write_masked_evaluations(tmp_path / "evaluate")
    assert report(tmp_path, capsys, roar, masked)[0] == 0
    table = (tmp_path / "report" / "roar.md").read_text()
    section = rows(table, "movie-snippets: Recursive ROAR, plain retraining (seed 0)\n")
    assert section["Measure"][3:] == [
        "No retraining: plain step-0 model, on its own ratios (see Left out) (1 seed)",
        "No retraining: masked model (evaluate), on its own ratios (see Left out) (3 seeds)",
    ]
    assert section["grad-l2"][3:] == [cell(STEP0_SCORES["grad-l2"][:1]), cell(MASKED_SCORES["grad-l2"])]
    notes = [line for line in table.splitlines() if "compare with ROAR's only roughly" in line]
    assert len(notes) == 2 and all("ROAR's (0%, 33.3%, 66.7%, 100%)" in n for n in notes)
    assert all("`fmm-fast roar --steps 1, 2, 5 or 10`" in n for n in notes)
    print_summary(read_record(roar / "result.json"), roar)
    assert "no-retrain: on the erasure's own ratios, not ROAR's" in capsys.readouterr().out


def test_the_roar_summary_names_no_grid_when_on_roar_ratios(tmp_path: Path, capsys):
    run = write_roar(tmp_path / "fine", seeds=(0,))
    print_summary(read_record(run / "result.json"), run)
    assert "own ratios" not in capsys.readouterr().out


def test_recursive_and_non_recursive_are_separate_groups(tmp_path: Path, capsys):
    recursive = write_roar(tmp_path / "r", seeds=(0,), erasure=False)
    plain_roar = write_roar(tmp_path / "n", seeds=(0,), recursive=False, erasure=False)
    code, out, err = report(tmp_path, capsys, recursive, plain_roar)
    assert code == 0 and "0 results and 2 ROAR runs" in err
    table = (tmp_path / "report" / "roar.md").read_text()
    assert table.index("Recursive ROAR, plain") < table.index("ROAR (non-recursive), plain")
    single = rows(table, "movie-snippets: ROAR (non-recursive)")
    assert single["Measure"] == [
        "Score",
        "ROAR (non-recursive): plain model retrained at every step (1 seed)",
        "Clipped RACU",
    ]
    assert single["grad-l2"] == ["RACU", "18.0", "18.0"]  # one seed: no interval
    # Only ROAR runs: no erasure tables, the ROAR ones and a figure per measure.
    written = sorted(p.name for p in (tmp_path / "report").iterdir())
    assert "table.md" not in written and "roar-cost.md" in written
    assert "roar-movie-snippets-plain-non-recursive-grad-l2.png" in written
    assert "| movie-snippets | ROAR (non-recursive) | plain, a new model at every step | 1 | 4 | 28" in out


def test_incomplete_run_is_reported_as_such(tmp_path: Path, capsys):
    # Seed 2 has grad-l2 up to 70% only; loo-abs has not finished anywhere; seed 1's erasure is not written.
    missing = {(2, "grad-l2"): 3, **{(seed, "loo-abs"): 1 for seed in range(3)}}
    roar = write_roar(tmp_path / "roar", missing=missing)
    (roar / "seed-1" / "erasure" / "result.json").unlink()
    code, _, _ = report(tmp_path, capsys, roar)
    assert code == 0
    table = (tmp_path / "report" / "roar.md").read_text()
    section = rows(table, "movie-snippets: Recursive ROAR, plain retraining (seeds 0, 1, 2) (incomplete)")
    assert section["grad-l2"][:3] == [
        "RACU",
        cell(RACU["grad-l2"][:2]) + " [2 seeds]",
        cell(RACU["grad-l2"][:2]) + " [2 seeds]",
    ]
    assert section["loo-abs"][:3] == ["RACU", "not finished", ""]
    assert section["loo-sign"][1] == cell(ACU["loo-sign"])
    assert section["Measure"][3] == "No retraining: plain step-0 model (2 seeds)"  # seeds 0 and 2
    assert section["grad-l2"][3] == cell([0.30, 0.34])
    assert f"- {roar / 'result.json'} is not finished: rerun its `fmm-fast roar` to finish it\n" in table
    assert (
        f"- seed 2: steps not run yet: grad-l2 at 80, 90, 100%; loo-abs at 100% ({roar / 'result.json'})\n"
        in table
    )
    assert (
        f"- seed 1: its no-retraining erasure {roar / 'seed-1/erasure/result.json'} is not written yet"
        in table
    )
    data = read_record(tmp_path / "report" / "report.json")
    assert data["roar"][0]["complete"] is False and data["roar"][0]["not_finished"] == ["loo-abs"]
    assert data["roar"][0]["measures"]["grad-l2"]["seeds"] == [0, 1]


def test_non_converged_babi_seed_is_dropped(tmp_path: Path, capsys):
    kept = write_roar(tmp_path / "a", seeds=(0,), dataset="babi-1", erasure=False)
    dropped = write_roar(tmp_path / "b", seeds=(1,), dataset="babi-1", erasure=False, step0=0.45)
    assert report(tmp_path, capsys, kept, dropped)[0] == 0
    table = (tmp_path / "report" / "roar.md").read_text()
    assert "babi-1: Recursive ROAR, plain retraining (seed 0)" in table
    assert "seed 1 dropped: the step-0 model's accuracy 45.0 ≤ 50.0 did not converge" in table


def _add_measure(seed: dict, name: str) -> None:
    seed["curves"][name] = RAND.tolist()
    for key in ("acu", "racu", "racu_clipped"):
        seed[key][name] = 0.0


def _edit(path: Path, change) -> None:
    record = read_record(path)
    change(record)
    write_record(path, record)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda r: r.pop("cost"), "missing field cost"),
        (lambda r: r["seeds"].update({"zero": r["seeds"].pop("0")}), "seeds must be keyed by seed numbers"),
        (lambda r: _add_measure(r["seeds"]["0"], "no-such"), "unknown measure 'no-such'"),
        (lambda r: r["seeds"]["0"]["curves"]["grad-l2"].pop(), "seeds.0.curves.grad-l2 must be a list of 11"),
        (lambda r: r["seeds"]["0"]["racu"].pop("grad-l2"), "missing field seeds.0.racu.grad-l2"),
        (lambda r: r["seeds"]["1"]["curves"]["rand"].__setitem__(10, None), "complete is true but seeds.1"),
        (lambda r: r.update(recursive="yes"), "recursive must be true or false"),
    ],
)
def test_malformed_roar_result_names_the_file(tmp_path: Path, capsys, change, problem):
    roar = write_roar(tmp_path / "roar", seeds=(0, 1), erasure=False)
    _edit(roar / "result.json", change)
    code, _, err = report(tmp_path, capsys, roar)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith(f"fmm-fast: error: malformed result file {roar / 'result.json'}: ")
    assert problem in err
    assert not (tmp_path / "report" / "report.json").exists()


def test_conflicting_roar_runs_are_user_errors(tmp_path: Path, capsys):
    first = write_roar(tmp_path / "first", seeds=(0, 1), erasure=False)
    second = write_roar(tmp_path / "second", seeds=(1, 2), measures=("rand", "loo-abs"), erasure=False)
    code, _, err = report(tmp_path, capsys, first, second)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"ROAR runs {first / 'result.json'} and {second / 'result.json'} both hold seed 1 of rand" in err

    # Other seeds of the same measures add up; another metric does not.
    third = write_roar(tmp_path / "third", seeds=(2,), erasure=False)
    assert report(tmp_path, capsys, first, third, out="together")[0] == 0
    table = (tmp_path / "together" / "roar.md").read_text()
    assert rows(table, "movie-snippets")["grad-l2"][1] == cell(RACU["grad-l2"])
    _edit(third / "result.json", lambda r: r.update(metric="macro_f1"))
    code, _, err = report(tmp_path, capsys, first, third, out="other-metric")
    assert code == 2 and "differ in metric; report results of one metric at a time" in err


def test_html_report_holds_the_roar_tables_and_figures(tmp_path: Path):
    roar = write_roar(tmp_path / "roar")
    masked = write_masked_evaluations(tmp_path / "evaluate")
    out = tmp_path / "report"
    assert main(["report", str(roar), str(masked), "--out", str(out), "--html"]) == 0
    page = (out / "report.html").read_text()
    for heading in ("ROAR beside erasure without retraining", "ROAR and erasure: cost"):
        assert f">{heading}</h2>" in page
    figures = list(out.glob("*.png"))
    assert any(p.name.startswith("roar-") for p in figures)
    assert page.count('<img src="data:image/png;base64,') == len(figures)
