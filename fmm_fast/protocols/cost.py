"""A run's cost before it starts: the model passes it will ask for, and their time from a short timed probe.

The passes are counted from the split's units and each measure's `planned_passes`, step by step as the
erasure protocol (docs/method.md §4) masks: at step j an example with n units, p of them masked from the
start, has n − max(floor(r_{j−1}·n), p) units still visible. They are the passes the run asks the engine for;
its cache (an erasure step's scoring pass is the next step's LOO reference) and its de-duplication can only
make the number of passes that run smaller. The time is the probe's seconds per forward row, scaled by
length; a backward pass is taken as three forward passes (forward, and a backward pass about twice as long).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from fmm_fast.backends.base import Backend
from fmm_fast.core.datatypes import EncodedSplit, pad_batch
from fmm_fast.data.masking import masked_count
from fmm_fast.measures.base import Measure, PassCount
from fmm_fast.protocols.curve_stats import RATIOS

BACKWARD_IN_FORWARDS = 3  # a gradient pass ≈ a forward pass and a backward pass of twice its cost
LONG_EXAMPLE = 256  # tokens above which --max-length is named as a way to a cheaper run


def masked_from_start(split: EncodedSplit, mask_id: int) -> np.ndarray:
    """(N,) int64 the units of each example whose every token is the mask id before any erasure."""
    counts = []
    for i, (ids, explained) in enumerate(zip(split.input_ids, split.explained, strict=True)):
        units = split.example_units(i)
        if units is None:
            counts.append(int(np.count_nonzero(explained & (ids == mask_id))))
            continue
        inside = units >= 0
        visible = np.bincount(units[inside], weights=ids[inside] != mask_id, minlength=int(units.max()) + 1)
        counts.append(int(np.count_nonzero(visible == 0)))
    return np.asarray(counts, dtype=np.int64)


def visible_units(split: EncodedSplit, ratio: float, mask_id: int) -> np.ndarray:
    """(N,) int64 the units of each example still visible once erasure has masked it at `ratio`."""
    totals = split.unit_counts()
    return totals - np.maximum(masked_count(float(ratio), totals), masked_from_start(split, mask_id))


def explain_passes(measure: Measure, visible: np.ndarray) -> PassCount | None:
    """The passes of one explain() over examples with `visible` ((N,)) units not masked; None: uncounted."""
    total = PassCount()
    for units in visible.tolist():
        passes = measure.planned_passes(int(units))
        if passes is None:
            return None
        total = total + passes
    return total


def erasure_passes(
    measures: Sequence[Measure],
    split: EncodedSplit,
    ratios: Sequence[float],
    mask_id: int,
    scoring: bool = True,
    recursive: bool = True,
) -> dict[str, PassCount | None]:
    """Per measure, the passes of its recursive erasure of `split` over `ratios` (docs/method.md §4): its
    explanations at every step (once, at r = 0, for a measure that is not recursive or when `recursive` is
    False) and, with `scoring`, the scoring pass of every step between 0 and 1. None for a measure whose
    passes cannot be counted ahead."""
    plan: dict[str, PassCount | None] = {}
    scoring_passes = PassCount(forward=len(split) if scoring else 0)
    for measure in measures:
        total: PassCount | None = PassCount()
        for step in range(1, len(ratios) - 1):
            passes: PassCount | None = PassCount()
            if (recursive and measure.recursive) or step == 1:
                passes = explain_passes(measure, visible_units(split, ratios[step - 1], mask_id))
            total = None if passes is None or total is None else total + passes + scoring_passes
        plan[measure.name] = total
    return plan


def seconds_per_row(backend: Backend, split: EncodedSplit, token_budget: int) -> tuple[float, float]:
    """(seconds per forward row, the probe rows' mean length): the split's first examples, repeated to fill
    one batch under the token budget as the engine fills its batches, run once to warm the backend up, then
    timed whole and at half its rows (a run's batches have many shapes, and a backend pays for each)."""
    examples = split.input_ids[:64]
    longest, rows = 0, []
    while len(rows) < 512:
        candidate = examples[len(rows) % len(examples)]
        longest = max(longest, len(candidate))
        if rows and (len(rows) + 1) * longest > token_budget:
            break
        rows.append(candidate)
    backend.forward(*pad_batch(rows, backend.info.pad_id))
    sizes = sorted({len(rows), max(1, len(rows) // 2)})
    started = time.perf_counter()
    for size in sizes:
        backend.forward(*pad_batch(rows[:size], backend.info.pad_id))
    seconds = time.perf_counter() - started
    return seconds / sum(sizes), float(np.mean([len(r) for r in rows]))


def duration_text(seconds: float) -> str:
    """'40 s', '12 min', '3.5 h', '2.1 days'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def cost_line(
    command: str,
    measures: Sequence[Measure],
    plan: dict[str, PassCount | None],
    split: EncodedSplit,
    probe: tuple[float, float],
    extra: PassCount = PassCount(),
) -> str:
    """The one line a command prints before its long part: passes per measure (`plan`, of `measures`) and in
    all, the estimated time from `probe` (seconds_per_row), and the options that make the run cheaper.
    extra: passes outside the measures (shared scoring passes)."""
    total = plan_total(plan) + extra
    line = (
        f"{command}: {passes_text(total)}{bracketed(measures_text(plan))}, about "
        f"{duration_text(probed_seconds(total, split, probe))} here{uncounted_text(plan)}"
    )
    return f"{line}; {cheaper(split, measures)}"


def plan_total(plan: dict[str, PassCount | None]) -> PassCount:
    """The passes of every counted measure of `plan` together."""
    total = PassCount()
    for passes in plan.values():
        total = total if passes is None else total + passes
    return total


def passes_text(total: PassCount) -> str:
    """'at most 1,234 forward passes and 56 backward' ('at most' unless exact)."""
    backward = f" and {total.backward:,} backward" if total.backward else ""
    return f"{'' if total.exact else 'at most '}{total.forward:,} forward passes{backward}"


def measures_text(plan: dict[str, PassCount | None]) -> str:
    """'loo-abs 1,234, grad-l2 0 + 40 backward': the counted measures of `plan`."""
    return ", ".join(
        f"{name} {passes.forward:,}{'' if passes.exact else ' at most'}"
        + (f" + {passes.backward:,} backward" if passes.backward else "")
        for name, passes in plan.items()
        if passes is not None
    )


def bracketed(details: str) -> str:
    return f" ({details})" if details else ""


def uncounted_text(plan: dict[str, PassCount | None]) -> str:
    uncounted = [name for name, passes in plan.items() if passes is None]
    return f" plus {', '.join(uncounted)} (not counted ahead)" if uncounted else ""


def probed_seconds(total: PassCount, split: EncodedSplit, probe: tuple[float, float]) -> float:
    """The seconds of `total` passes on rows as long as `split`'s, from `probe` (seconds_per_row)."""
    seconds_per, probe_length = probe
    mean_length = float(np.mean([len(ids) for ids in split.input_ids])) if len(split) else probe_length
    rows = total.forward + BACKWARD_IN_FORWARDS * total.backward
    return rows * seconds_per * mean_length / max(probe_length, 1.0)


def cheaper(split: EncodedSplit, measures: Sequence[Measure], more: Sequence[str] = ()) -> str:
    """The options that cut the passes of a run of `measures` on `split`; `more`: the command's own."""
    options = []
    if split.unit != "sentence":
        options.append("--unit sentence" if split.unit == "word" else "--unit word or sentence")
    longest = max((len(ids) for ids in split.input_ids), default=0)
    if longest > LONG_EXAMPLE and (split.max_length is None or split.max_length > LONG_EXAMPLE):
        options.append(f"--max-length {LONG_EXAMPLE}")
    if any("sample" in option for measure in measures for option in vars(measure)):
        options.append("fewer samples (--measure-option)")
    options += [*more, "--limit N"]
    return f"cheaper: {', '.join(options)}"


def peer_passes(
    measure: Measure, split: EncodedSplit, ratios: Sequence[float], mask_id: int
) -> PassCount | None:
    """The passes of the peer metrics (docs/method.md §8) of `measure` on `split`: its explanation at r = 0,
    and per example the input, 10 + 10 threshold maskings, one per curve ratio and one per unit (the engine
    drops the repeats among them: an upper bound)."""
    visible = visible_units(split, 0.0, mask_id)
    explaining = explain_passes(measure, visible)
    rows = int(np.sum(1 + 20 + len(ratios) + split.unit_counts()))
    return None if explaining is None else explaining + PassCount(forward=rows, exact=False)


def run_plan(
    command: str, measures: Sequence[Measure], split: EncodedSplit, ratios: Sequence[float], mask_id: int
) -> tuple[dict[str, PassCount | None], PassCount]:
    """(passes per measure, passes outside the measures) of one run (one seed) of `command`: evaluate
    (recursive erasure and its shared passes at r = 0 and 1), aopc (the peer metrics) or explain (one
    explanation per example, and the prediction of each: often the LOO measures' own row, then cached, so
    an upper bound)."""
    if command == "evaluate":
        return erasure_passes(measures, split, ratios, mask_id), PassCount(forward=2 * len(split))
    if command == "aopc":
        return {m.name: peer_passes(m, split, ratios, mask_id) for m in measures}, PassCount()
    visible = visible_units(split, 0.0, mask_id)
    return {m.name: explain_passes(m, visible) for m in measures}, PassCount(forward=len(split), exact=False)


def announce_cost(
    command: str,
    measures: Sequence[Measure],
    split: EncodedSplit,
    ratios: Sequence[float],
    backend: Backend,
    token_budget: int,
    runs: int = 1,
) -> str:
    """Print (stdout) and return the cost line of `runs` runs (seeds) of `command` (run_plan) on `split`."""
    plan, extra = run_plan(command, measures, split, ratios, backend.info.mask_id)
    if runs > 1:
        plan = {name: None if p is None else _times(p, runs) for name, p in plan.items()}
        extra = _times(extra, runs)
        command = f"{command} ({runs} seeds)"
    line = cost_line(command, measures, plan, split, seconds_per_row(backend, split, token_budget), extra)
    print(line)
    return line


def _times(passes: PassCount, runs: int) -> PassCount:
    return PassCount(passes.forward * runs, passes.backward * runs, passes.exact)


def roar_cost(
    measures: Sequence[Measure],
    encoded: Mapping[str, EncodedSplit],
    roar_ratios: Sequence[float],
    recursive: bool,
    erasure: bool,
    seeds: int,
    training: tuple[PassCount, float, int],
    backend: Backend,
    token_budget: int,
) -> str:
    """Print (stdout) and return the cost line of a Recursive ROAR run of `seeds` seeds: per measure its
    chain's explanations of every split of `encoded` at the steps 1..K−1 of `roar_ratios` (once, at step 1,
    unless `recursive` and the measure is), the no-retraining erasure of the test split (`erasure`, as
    evaluate counts it) and `training`: (passes of one training, its seconds, trainings in all). Identical
    datasets reuse their model: an upper bound. The time is the probe's, on the train split, plus the
    trainings at the seconds of the one given."""
    mask_id = backend.info.mask_id
    plan: dict[str, PassCount | None] = {}
    for split in encoded.values():
        part = erasure_passes(measures, split, roar_ratios, mask_id, scoring=False, recursive=recursive)
        for name, passes in part.items():
            before = plan.get(name, PassCount())
            plan[name] = None if passes is None or before is None else before + passes
    erased = PassCount()
    if erasure:
        erasure_plan, shared = run_plan("evaluate", measures, encoded["test"], RATIOS, mask_id)
        erased = plan_total(erasure_plan) + shared
    per_training, training_seconds, trainings = training
    trained = _times(replace(per_training, exact=False), trainings)
    plan = {name: None if passes is None else _times(passes, seeds) for name, passes in plan.items()}
    erased = _times(erased, seeds)
    total = plan_total(plan) + erased + trained
    probe = seconds_per_row(backend, encoded["train"], token_budget)
    seconds = probed_seconds(plan_total(plan) + erased, encoded["train"], probe)
    seconds += trainings * training_seconds
    parts = [measures_text(plan)]
    if erasure:
        parts.append(measures_text({"erasure": erased}))
    parts.append(
        f"{trainings} trainings of {per_training.forward:,} + {per_training.backward:,} backward, "
        f"{duration_text(training_seconds)} each as step 0's"
    )
    line = (
        f"roar{f' ({seeds} seeds)' if seeds > 1 else ''}: {passes_text(total)} ({'; '.join(parts)}), about "
        f"{duration_text(seconds)} here{uncounted_text(plan)}; "
        f"{cheaper(encoded['train'], measures, ('fewer --steps', '--size N', '--epochs N'))}"
    )
    print(line)
    return line
