"""Measure names as file and folder names (fmm_fast/measures/path_names.py): Captum's `captum:Name` gets no
':' in any path a run writes (a ROAR chain folder, an evaluation's state file), names of safe characters keep
theirs, and a run begun before path names (its folders named `captum:Name`) resumes where it wrote."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_kills import stable
from test_roar import TINY, keyword_data

from fmm_fast.core.records import read_record
from fmm_fast.core.settings import RoarSettings
from fmm_fast.measures.path_names import SAFE_CHARACTERS, measure_entry, path_name
from fmm_fast.measures.registry import measure_names
from fmm_fast.protocols.roar.run import RoarRun

pytest.importorskip("captum")

COLON_MEASURE = "captum:FeatureAblation"  # a perturbation method: runs on any backend, no gradients
SAFE_FOLDER = "captum@FeatureAblation"
MARKER = ".fmm-fast-run.json"


def test_safe_names_are_their_own_path_names_and_every_path_name_is_safe() -> None:
    names = [*measure_names(), "occlusion-4-abs", "beam-sign-10", "my.plug+in_2"]
    assert all(path_name(name) == name for name in names)
    spelled = {
        "captum:IntegratedGradients": "captum@IntegratedGradients",
        "captum:NoiseTunnel-Saliency-abs": "captum@NoiseTunnel-Saliency-abs",
        "my expl@2": "my%20expl%402",
        "a/b\\c:d?é": "a%2Fb%5Cc@d%3F%C3%A9",
    }
    for name, expected in spelled.items():
        assert path_name(name) == expected
        assert set(expected) <= SAFE_CHARACTERS | {"@", "%"}


def test_path_names_are_one_to_one() -> None:
    """Names a naive spelling would merge ('_' or '-' for ':', or '@' left as it is) stay apart."""
    names = ["captum:Lime", "captum_Lime", "captum-Lime", "captum@Lime", "captum%40Lime", "captum.Lime"]
    assert len({path_name(name) for name in names}) == len(names)


def test_an_entry_written_under_the_name_as_it_is_is_found_until_a_safe_one_exists(tmp_path) -> None:
    assert measure_entry(tmp_path, COLON_MEASURE, ".json") == tmp_path / f"{SAFE_FOLDER}.json"
    (tmp_path / f"{COLON_MEASURE}.json").write_text("{}")  # as an earlier version wrote it (POSIX)
    assert measure_entry(tmp_path, COLON_MEASURE, ".json") == tmp_path / f"{COLON_MEASURE}.json"
    (tmp_path / f"{SAFE_FOLDER}.json").write_text("{}")
    assert measure_entry(tmp_path, COLON_MEASURE, ".json") == tmp_path / f"{SAFE_FOLDER}.json"


def colons(root: Path) -> list[str]:
    """Every path under `root` with a ':' in it."""
    return [str(path) for path in root.rglob("*") if ":" in path.name]


@pytest.fixture(scope="module")
def colon_run(tmp_path_factory):
    """A finished 2-step ROAR run of captum:FeatureAblation with its erasure run: (settings, out, result)."""
    root = tmp_path_factory.mktemp("colon")
    tiny = {**TINY, "epochs": 1}
    settings = RoarSettings(keyword_data(root, rows=60), measures=(COLON_MEASURE,), steps=2, **tiny)
    out = root / "out"
    return settings, out, RoarRun(settings, out, progress=False).run()


def test_a_colon_measure_writes_no_colon_anywhere(colon_run) -> None:
    _, out, result = colon_run
    assert colons(out) == []
    assert (out / "seed-0" / SAFE_FOLDER / "step-050" / "record.json").is_file()
    assert (out / "seed-0" / "erasure" / "state" / f"{SAFE_FOLDER}.json").is_file()
    assert SAFE_FOLDER in read_record(out / "seed-0" / MARKER)["files"]
    assert COLON_MEASURE in result["seeds"]["0"]["curves"]  # results still name the measure as it is


def as_an_earlier_version_wrote(out: Path) -> None:
    """Rename every entry named captum@FeatureAblation (a chain folder, a state file) as the name as it is,
    and write that name in every record that gives a path (a step's model, the seed folder's marker)."""
    for path in sorted(out.rglob(f"{SAFE_FOLDER}*"), key=lambda p: -len(p.parts)):
        path.rename(path.with_name(path.name.replace(SAFE_FOLDER, COLON_MEASURE)))
    for path in out.rglob("*.json"):
        text = path.read_text()
        if SAFE_FOLDER in text:
            path.write_text(text.replace(SAFE_FOLDER, COLON_MEASURE))


def test_a_run_begun_with_colon_folders_resumes_in_them(colon_run, tmp_path) -> None:
    """The run as an earlier version left it, its result.json files gone: the rerun reads the finished
    chain and state where they are (no new folder, nothing recomputed) and ends with the same result."""
    settings, reference, expected = colon_run
    out = tmp_path / "out"
    shutil.copytree(reference, out)
    as_an_earlier_version_wrote(out)
    seed, state = out / "seed-0", out / "seed-0" / "erasure" / "state"
    assert (seed / COLON_MEASURE).is_dir() and (state / f"{COLON_MEASURE}.json").is_file()
    (out / "result.json").unlink()
    (seed / "erasure" / "result.json").unlink()
    written = {path: path.stat().st_mtime_ns for path in seed.rglob("*") if COLON_MEASURE in str(path)}

    result = RoarRun(settings, out, progress=False).run()

    earlier = json.dumps(stable(expected), sort_keys=True).replace(SAFE_FOLDER, COLON_MEASURE)
    assert json.dumps(stable(result), sort_keys=True) == earlier  # as text: a flat curve's RACU is NaN
    assert not list(out.rglob(f"{SAFE_FOLDER}*"))
    assert {path: path.stat().st_mtime_ns for path in written} == written  # read, not rewritten
