"""Benchmark the perturbation measures: fmm-fast's kernel-shap, lime and shapley-sampling against Captum's
KernelShap, Lime and ShapleyValueSampling at the same number of model evaluations per example.

    .venv/bin/python bench/bench_perturbation.py [--quick] [--sentences N] [--exact-sentences N]
                                                 [--repeat N] [--json PATH] [--cache DIR]
                                                 [--agreement-only]

Budget per example (BUDGET): kernel-shap and lime 100 model evaluations (fmm-fast's kernel-shap: 98 sampled
coalitions (49 drawn and their complements) plus ∅ and M, as Captum's KernelShap's 100 include them; lime:
100 coalitions, the first the input), shapley-sampling 10 permutations (5 drawn and their reverses;
Captum's n_samples = 10). Both sides explain the target logit of the gold label, the mask token standing
in for a removed token, over the sentence's explained tokens.

Captum is called directly on the PyTorch model (the straightforward one, as every baseline): its input is a
sentence's explained tokens (1, n), its feature mask puts each in a feature of its own, its baseline is the
mask id, and its forward puts the (perturbed) tokens back into the sentence; perturbations_per_eval =
CAPTUM_ROWS rows per forward pass. Its defaults otherwise, except Lime's surrogate: lime's Ridge(alpha=1)
(fmm-fast's too) instead of Captum's Lasso(alpha=0.01), which zeroes every coefficient where removing a
token moves the logit by less than about 0.01 (constant estimates, no ranking). fmm-fast runs as
`fmm-fast evaluate` does: ONNX Runtime fp32 through a MaskBatchEngine, 32 sentences per explain call,
per-example seeds.

Speed: explanations/s of each on the first N movie-snippets test sentences with at least 2 explained tokens
(best of --repeat interleaved rounds), and the CPU seconds of that round (all threads; a busy machine
disturbs them less than wall time). Goal: fmm-fast ≥ 10× Captum.
Agreement: on sentences of 8–10 explained tokens (so that 2ⁿ − 2 > 98: neither side can enumerate every
coalition), exact Shapley values by brute force (all 2ⁿ coalitions through the engine,
fmm_fast.measures.perturbation_reference.exact_shapley) against each estimate: mean Pearson r, Spearman ρ
and normalised error ‖φ̂ − φ‖ / ‖φ‖ over sentences and 3 seeds (--quick 1). Goal: fmm-fast's at least
Captum's. On the bench's MiniLM (bench/common.py): the masked fine-tuned one when trained, else a random
head, whose logit still depends on the tokens, which is all that agreement with exact Shapley needs.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from common import (
    BenchModel,
    bench_parser,
    best_of_rounds,
    explained_counts,
    machine_line,
    model_for,
    print_table,
    ratio_text,
    rounds,
    test_sentences,
    write_record,
)
from scipy.stats import pearsonr, spearmanr

from fmm_fast.backends.base import Backend
from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.settings import DEFAULT_EXPLAIN_BATCH_ROWS
from fmm_fast.measures import get_measure
from fmm_fast.measures.perturbation import coalition_rows
from fmm_fast.measures.perturbation_reference import exact_shapley
from fmm_fast.protocols.erasure import explain_split
from fmm_fast.training.models import SequenceClassifier

EVALUATIONS = 100  # model evaluations per example of kernel-shap and lime
PERMUTATIONS = 10  # of shapley-sampling
EVALUATIONS_TEXT = f"{EVALUATIONS} evaluations"
CAPTUM_ROWS = 64  # Captum's perturbations_per_eval
AGREEMENT_SEEDS = {True: 1, False: 3}  # by --quick
AGREEMENT_TOKENS = (8, 10)  # explained tokens of an agreement sentence, inclusive
GOALS = {"speedup": 10.0}
SIZES = {True: (2, 1), False: (40, 20)}  # by --quick: (speed sentences, agreement sentences)

Scores = list[np.ndarray]  # per sentence (T_i,) float64


@dataclass(frozen=True)
class Method:
    """One estimator on both sides: fmm-fast's measure (name and options) and Captum's class (n_samples)."""

    measure: str
    options: dict[str, int]
    captum_class: str
    captum_samples: int
    budget: str  # the equal budget, in words
    captum_options: Callable[[], dict] = dict  # keyword arguments of the Captum class, made per explainer


METHODS = (
    # fmm-fast's kernel-shap adds ∅ and M to its samples; Captum's KernelShap counts them among n_samples
    Method("kernel-shap", {"samples": EVALUATIONS - 2}, "KernelShap", EVALUATIONS, EVALUATIONS_TEXT),
    Method(
        "lime",
        {"samples": EVALUATIONS},
        "Lime",
        EVALUATIONS,
        EVALUATIONS_TEXT,
        lambda: {"interpretable_model": ridge()},
    ),
    Method(
        "shapley-sampling",
        {"permutations": PERMUTATIONS},
        "ShapleyValueSampling",
        PERMUTATIONS,
        f"{PERMUTATIONS} permutations",
    ),
)


# ------------------------------------------------------------------------------------------- explainers
def ridge() -> object:
    """Captum's wrapper of scikit-learn's Ridge(alpha=1), lime's default surrogate."""
    from captum._utils.models.linear_model import SkLearnRidge

    return SkLearnRidge(alpha=1.0)


def visible_positions(ids: np.ndarray, explained: np.ndarray, mask_id: int) -> np.ndarray:
    """(n,) int64 the explained positions not already masked: the features of both sides."""
    return np.flatnonzero(explained & (ids != mask_id))


def fmm_fast_runner(method: Method, backend: Backend, split: EncodedSplit, seed: int) -> Callable[[], Scores]:
    """fmm-fast's measure as `fmm-fast evaluate` runs it; a fresh engine per call (no cached rows)."""

    def run() -> Scores:
        measure = get_measure(method.measure, seed=seed, **method.options)
        engine = MaskBatchEngine(backend)
        return explain_split(measure, engine, split.input_ids, split, DEFAULT_EXPLAIN_BATCH_ROWS)

    return run


def captum_runner(
    method: Method, model: SequenceClassifier, split: EncodedSplit, mask_id: int, seed: int
) -> Callable[[], Scores]:
    """Captum's class called directly, per sentence (see the module docstring)."""
    import captum.attr

    device = next(model.parameters()).device

    def sentence_scores(ids: np.ndarray, explained: np.ndarray, label: int) -> np.ndarray:
        positions = visible_positions(ids, explained, mask_id)
        template = torch.from_numpy(ids).to(device)
        index = torch.from_numpy(positions).to(device)

        def forward(visible: torch.Tensor) -> torch.Tensor:
            """visible: (B, n) ids at the explained positions (floats from Lime's mixing) -> (B, C) logits."""
            batch = template.repeat(len(visible), 1)
            batch[:, index] = visible.round().long()
            with torch.inference_mode():
                return model(batch, torch.ones_like(batch))[0]

        explainer = getattr(captum.attr, method.captum_class)(forward, **method.captum_options())
        attribution = explainer.attribute(
            template[index][None, :],
            baselines=mask_id,
            target=label,
            feature_mask=torch.arange(len(positions), device=device)[None, :],
            n_samples=method.captum_samples,
            perturbations_per_eval=CAPTUM_ROWS,
        )
        scores = np.zeros(len(ids), dtype=np.float64)
        scores[positions] = attribution[0].double().cpu().numpy()
        return scores

    def run() -> Scores:
        torch.manual_seed(seed)
        return [
            sentence_scores(ids, explained, int(label))
            for ids, explained, label in zip(split.input_ids, split.explained, split.labels, strict=True)
        ]

    return run


# -------------------------------------------------------------------------------------------- speed
def cpu_timed(run: Callable[[], Scores]) -> Callable[[], float]:
    """run, returning the CPU seconds (user + system, every thread of this process) it took."""

    def timed() -> float:
        start = time.process_time()
        run()
        return time.process_time() - start

    return timed


def run_speed(bench_model: BenchModel, split: EncodedSplit, repeat: int) -> list[dict]:
    """Per method: both sides' best wall seconds over `split` (and the CPU seconds of that round, which
    a busy machine disturbs less), explanations/s and the ratios."""
    backend = bench_model.ort_backend("fp32")
    model = bench_model.torch_model("cpu", straightforward=True)
    mask_id = bench_model.info.mask_id
    rows = []
    for method in METHODS:
        timed = best_of_rounds(
            {
                "fmm-fast": cpu_timed(fmm_fast_runner(method, backend, split, seed=0)),
                "captum": cpu_timed(captum_runner(method, model, split, mask_id, seed=0)),
            },
            repeat,
        )
        (fast, fast_cpu), (captum, captum_cpu) = timed["fmm-fast"], timed["captum"]
        rows.append(
            {
                "method": method.measure,
                "captum_class": method.captum_class,
                "budget": method.budget,
                "fmm_fast_seconds": fast,
                "captum_seconds": captum,
                "fmm_fast_cpu_seconds": fast_cpu,
                "captum_cpu_seconds": captum_cpu,
                "fmm_fast_explanations_per_s": len(split) / fast,
                "captum_explanations_per_s": len(split) / captum,
                "speedup": captum / fast,
                "cpu_speedup": captum_cpu / fast_cpu,
                "goal_speedup": GOALS["speedup"],
            }
        )
    return rows


# ---------------------------------------------------------------------------------------- agreement
def exact_values(backend: Backend, split: EncodedSplit, mask_id: int) -> list[np.ndarray]:
    """Per sentence (n,) exact Shapley values over its visible explained tokens: every one of the 2ⁿ
    coalitions of every sentence through one engine call, then the brute-force formula."""
    engine = MaskBatchEngine(backend)
    plans, requests = [], []
    for ids, explained in zip(split.input_ids, split.explained, strict=True):
        positions = visible_positions(ids, explained, mask_id)
        n = len(positions)
        keep = np.array(list(itertools.product([False, True], repeat=n)), dtype=bool).reshape(-1, n)
        requests.extend(coalition_rows(ids, [np.array([p]) for p in positions], keep, mask_id))
        plans.append(keep)
    logits = engine.logits(requests)
    exact, start = [], 0
    for keep, label in zip(plans, split.labels, strict=True):
        values = logits[start : start + len(keep), label].astype(np.float64)
        start += len(keep)
        table = {
            frozenset(np.flatnonzero(row).tolist()): value for row, value in zip(keep, values, strict=True)
        }
        exact.append(exact_shapley(table.__getitem__, keep.shape[1]))
    return exact


def agreement(estimates: Scores, exact: list[np.ndarray], split: EncodedSplit, mask_id: int) -> dict:
    """Mean Pearson r, Spearman ρ and normalised error of per-sentence estimates against exact values (a
    constant estimate counts as correlation 0)."""
    pearson, spearman, error = [], [], []
    for scores, truth, ids, explained in zip(estimates, exact, split.input_ids, split.explained, strict=True):
        estimate = scores[visible_positions(ids, explained, mask_id)]
        ranks = np.ptp(estimate) > 0  # a constant estimate ranks nothing: correlation 0, not undefined
        pearson.append(pearsonr(estimate, truth).statistic if ranks else 0.0)
        spearman.append(spearmanr(estimate, truth).statistic if ranks else 0.0)
        error.append(np.linalg.norm(estimate - truth) / np.linalg.norm(truth))
    return {
        "pearson": float(np.mean(pearson)),
        "spearman": float(np.mean(spearman)),
        "normalised_error": float(np.mean(error)),
    }


def run_agreement(bench_model: BenchModel, split: EncodedSplit, seeds: int) -> list[dict]:
    """Per method and side: agreement with exact Shapley, averaged over `seeds` seeds."""
    backend = bench_model.ort_backend("fp32")
    model = bench_model.torch_model("cpu", straightforward=True)
    mask_id = bench_model.info.mask_id
    exact = exact_values(backend, split, mask_id)
    rows = []
    for method in METHODS:
        row: dict = {"method": method.measure, "captum_class": method.captum_class, "budget": method.budget}
        runners = {
            "fmm_fast": lambda seed: fmm_fast_runner(method, backend, split, seed),  # noqa: B023 (called now)
            "captum": lambda seed: captum_runner(method, model, split, mask_id, seed),  # noqa: B023
        }
        for side, runner in runners.items():
            found = [agreement(runner(seed)(), exact, split, mask_id) for seed in range(seeds)]
            row[side] = {key: float(np.mean([seeded[key] for seeded in found])) for key in found[0]}
        rows.append(row)
    return rows


# ------------------------------------------------------------------------------------------------ run
def agreement_sentences(split: EncodedSplit, count: int) -> EncodedSplit:
    """The first `count` sentences with AGREEMENT_TOKENS explained tokens."""
    counts = explained_counts(split)
    low, high = AGREEMENT_TOKENS
    return split.subset(np.flatnonzero((counts >= low) & (counts <= high))[:count])


def run(
    bench_model: BenchModel,
    quick: bool,
    sentences: int | None = None,
    exact_sentences: int | None = None,
    repeat: int | None = None,
    speed: bool = True,
) -> dict:
    """Speed (unless not `speed`: then no speed_* keys, no "speed") and agreement results; sizes not given
    come from SIZES[quick]."""
    speed_count, agreement_count = SIZES[quick]
    everything = test_sentences(bench_model.tokenizer, short=quick)
    agreement_split = agreement_sentences(everything, exact_sentences or agreement_count)
    result = {
        "model": bench_model.description,
        "agreement_sentences": len(agreement_split),
        "agreement_seeds": AGREEMENT_SEEDS[quick],
        "agreement": run_agreement(bench_model, agreement_split, AGREEMENT_SEEDS[quick]),
    }
    if not speed:
        return result
    repeat = repeat or (1 if quick else 3)
    speed_split = everything.subset(
        np.flatnonzero(explained_counts(everything) >= 2)[: sentences or speed_count]
    )
    counts = explained_counts(speed_split)
    return {
        **result,
        "speed_sentences": len(speed_split),
        "speed_explained_tokens": {"mean": float(counts.mean()), "max": int(counts.max())},
        "captum_rows_per_eval": CAPTUM_ROWS,
        "repeat": repeat,
        "speed": run_speed(bench_model, speed_split, repeat),
    }


def print_result(result: dict) -> None:
    if "speed" in result:
        print_speed(result)
    print_agreement(result)


def print_speed(result: dict) -> None:
    tokens = result["speed_explained_tokens"]
    print(
        f"\nspeed: {result['speed_sentences']} sentences ({tokens['mean']:.1f} explained tokens on average, "
        f"at most {tokens['max']}); best of {result['repeat']}; fmm-fast on ORT fp32, Captum on PyTorch with "
        f"perturbations_per_eval {result['captum_rows_per_eval']}; goal ≥ {GOALS['speedup']:.0f}×"
    )
    print_table(
        ["method", "budget per example", "fmm-fast expl/s", "Captum expl/s", "speed-up", "CPU-seconds ratio"],
        [
            [
                f"{item['method']} vs {item['captum_class']}",
                item["budget"],
                f"{item['fmm_fast_explanations_per_s']:.2f}",
                f"{item['captum_explanations_per_s']:.2f}",
                ratio_text(item["speedup"]),
                ratio_text(item["cpu_speedup"]),
            ]
            for item in result["speed"]
        ],
    )


def print_agreement(result: dict) -> None:
    low, high = AGREEMENT_TOKENS
    print(
        f"\nagreement with exact Shapley values: {result['agreement_sentences']} sentences of {low}–{high} "
        f"explained tokens, mean over sentences and {result['agreement_seeds']} seeds (higher r and ρ, lower "
        "error are better; goal: fmm-fast's at least Captum's)"
    )
    print_table(
        ["method", "budget", "side", "Pearson r", "Spearman ρ", "‖φ̂−φ‖/‖φ‖"],
        [
            [item["method"], item["budget"], label, *(f"{item[side][key]:.3f}" for key in AGREEMENT_KEYS)]
            for item in result["agreement"]
            for side, label in (("fmm_fast", "fmm-fast"), ("captum", f"Captum {item['captum_class']}"))
        ],
    )


AGREEMENT_KEYS = ("pearson", "spearman", "normalised_error")


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("--sentences", type=int, help="speed sentences (default 40, --quick 2)")
    parser.add_argument("--exact-sentences", type=int, help="agreement sentences (default 20, --quick 1)")
    parser.add_argument(
        "--agreement-only",
        action="store_true",
        help="skip the speed part (agreement figures do not depend on load)",
    )
    args = parser.parse_args()
    if args.device != "cpu":
        parser.error("bench_perturbation.py runs on the CPU only (--device cpu)")
    print(machine_line())
    sizes = (args.sentences, args.exact_sentences, rounds(args))
    result = run(model_for(args), args.quick, *sizes, speed=not args.agreement_only)
    print(f"model: {result['model']}")
    print_result(result)
    if args.json:
        write_record(args.json, result)


if __name__ == "__main__":
    main()
