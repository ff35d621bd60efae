"""The reproduction study: does masked fine-tuning make faithfulness measurable, as the FMM paper claims?

    bench/reproduce --scale tiny|small|medium|paper [--datasets NAME ...] [--seeds SEED ...] [--out DIR]
                    [--dry-run] [--masf-only] [--no-roar] [--train-precision fp32|bf16|auto]
                    [--workers N | --ray-address ADDR] [--worker-cpus K]

On movie-snippets and bAbI-1/-2 (the pretrained MiniLM; bAbI at the tiny scale: a small RoBERTa trained
from scratch, which checks the script but does not learn bAbI), for every seed of the scale, it runs the
`fmm-fast` commands in-process (exactly as listed in the output):
  1. train with `plain`, `masked` and `only-masked` fine-tuning (run.json: test metrics at 0/50/100%
     masking and the class-majority baseline), and export the plain and masked checkpoints to ONNX;
  2. `fmm-fast evaluate` of the masked model: recursive-erasure curves of the nine measures besides beam
     on `eval_limit` test examples, and of beam-sign-10 on the first `beam_limit` of them;
  3. `fmm-fast masf --model plain.onnx --model masked.onnx --calibration in-sample --calibration split`:
     MaSF p-values versus masking ratio, both calibrations (docs/method.md §6) on the same signals;
  4. bAbI: supporting-fact overlap of every measure's top-k on the masked model (protocols.supporting_facts);
  5. `fmm-fast roar`: Recursive ROAR of the scale's ROAR plan (grad-l2, `rand` as the baseline; the
     reference's 10% steps, tiny 2) with plain retraining on the same data, recipe and training precision;
     its own step-0 model and its no-retraining erasure on the test split. Last in the chain, so a study
     run before it resumes and appends it; it resumes step by step and adds measures the plan gained;
  6. `fmm-fast report` over all evaluations and ROAR runs, then README-tables.md: (a) performance,
     (b) RACU/ACU, (c) MaSF, (d) supporting-fact overlap, (e) command, settings and the wall time of every
     step, (f) Recursive ROAR's RACU and clipped RACU beside each measure's no-retraining RACU (of ROAR's
     step-0 model and of the masked model of step 2), over seeds, and its cost; the report's curve and
     ROAR plots and the MaSF plots are copied next to it.
Everything goes to bench/results/reproduce-<scale>[-<datasets>][-seeds-<seeds>]/ (or --out). A step
whose run marker says it finished with the same fingerprint (its settings and the content of its inputs)
is skipped, so an interrupted study resumes where it stopped (evaluations and the overlap resume
mid-step), and a changed setting, or a retrained model, redoes the steps it changes; an export (a file) is
removed by its training step when that runs again. A MaSF result that lacks a calibration of
MASF_CALIBRATIONS, or has an older variant of one (calibration_variant: e.g. a split without its
reduction), is redone.

--masf-only trains and exports only the plain and masked models and runs MaSF: README-masf.md holds
tables (c) and (e). A later run without it, into the same folder, reuses all of that.

--no-roar leaves out step 5 (its cost dominates every scale but tiny: 2K trainings per chain at K steps,
ESTIMATED at about 25 min to 2 h per chain at the small scale; at medium, K = 5, MEASURED 89 min for a
bAbI-1 chain and ESTIMATED about 18 h for a bAbI-2 chain, on one core; see reproduce_plan.py): table (f)
then says how to run it. --masf-only leaves it out too.

--train-precision bf16 (or auto) trains every model with `fmm-fast train --precision`, resolved here once
(bf16 where the CPU or GPU runs it natively); the folder gets a -train-bf16 suffix, so the study never
mixes models trained in different precisions. ROAR's trainings run in it too (`fmm-fast roar
--precision`). Evaluation, MaSF, the overlap and ROAR's explanations run as before (fp32).

Steps 1-5 of one dataset × seed form a chain that depends on no other. --workers N runs up to N chains at once
on a local Ray runtime (the `ray` extra), --ray-address ADDR on a running Ray cluster; each chain reserves
--worker-cpus K CPUs and computes on K threads (PyTorch, ONNX Runtime, Numba), its output in
OUT/logs/DATASET-seed-S.log (the chain's ROAR runs inside its task, without Ray of its own); step 6 runs here
once every chain has finished. On a cluster the --out folder must be on storage every node sees (each chain
reads and writes it on its node), and every node needs this repository at the same path. A failed chain does
not stop the others; the command then exits 1 naming it, and a rerun resumes. Without these flags everything
runs in this process, in order.

Scales (without ROAR): tiny checks the script itself in a few minutes; small takes about 30 minutes per
dataset and 3 seeds on a quiet 2-core CPU (movie-snippets: 28 min; bAbI's longer passages take longer) and
learns bAbI only partly; medium trains bAbI-1/-2 on the paper's 10,000 questions, bAbI-1 for 2 epochs, where
MiniLM learns it (training about 13 min per model on one core in fp32, half that with --train-precision bf16),
bAbI-2 for the paper's 20 (6 epochs reached 71%: about 2 hours per model on one core in bf16, a GPU job);
paper uses the paper's data sizes and epochs with the whole test split (hours; beam on a GPU).

This file holds the flags; reproduce_plan.py the scales and their steps, reproduce_steps.py the resumable
step runner, reproduce_ray.py the chains on Ray, reproduce_tables.py README-tables.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

from reproduce_plan import SCALES, Study
from reproduce_ray import run_chains
from reproduce_steps import StepFailed, Timings, run_steps
from reproduce_tables import write_readme

from fmm_fast.backends.precision import PRECISIONS, resolve_training_precision
from fmm_fast.core.errors import UserError
from fmm_fast.core.records import Stopwatch
from fmm_fast.distributed.runtime import ScaleOptions, check_runtime
from fmm_fast.measures.plugins import absolute_locator

REPO = Path(__file__).resolve().parents[1]
TIMINGS_FILE = "steps.json"


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return reproduce(argv)
    except UserError as error:  # a bad --workers/--ray-address, Ray missing or unreachable, bf16 not native
        print(f"reproduce: {error}", file=sys.stderr)
        return 2


def reproduce(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=sorted(SCALES), required=True, help=" | ".join(SCALES))
    parser.add_argument("--out", type=Path, help="default: bench/results/reproduce-SCALE")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the steps and their state (done; started: an interrupted run the step resumes; todo), "
        "run nothing",
    )
    parser.add_argument(
        "--datasets", nargs="+", metavar="NAME", help="only these of the scale's datasets (default: all)"
    )
    parser.add_argument(
        "--seeds", nargs="+", type=int, metavar="SEED", help="only these of the scale's seeds (default: all)"
    )
    parser.add_argument(
        "--masf-only",
        action="store_true",
        help="train and export only plain and masked, run MaSF (both calibrations); write README-masf.md",
    )
    parser.add_argument(
        "--no-roar",
        action="store_true",
        help="leave out the chains' last step, Recursive ROAR (20 trainings per chain at 10 steps); the "
        "tables say how to run it",
    )
    parser.add_argument(
        "--train-precision",
        choices=PRECISIONS,
        default="fp32",
        help="the precision of every training's forward passes (`fmm-fast train --precision`; default fp32)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="run up to N chains (one dataset × seed: train, export, evaluate, masf, overlap, roar) at "
        "once on a local Ray runtime of N × --worker-cpus CPUs (needs the `ray` extra: pip install "
        "'fmm-fast[ray]')",
    )
    parser.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="run the chains on a running Ray cluster (auto, or HEAD:6379); --out must then be on storage "
        "every node sees, and this repository at the same path on every node",
    )
    parser.add_argument(
        "--worker-cpus",
        type=int,
        default=1,
        metavar="K",
        help="CPUs each chain reserves = its PyTorch, ONNX Runtime and Numba threads (default: 1)",
    )
    parser.add_argument(
        "--measure",
        action="append",
        default=[],
        metavar="SPEC",
        help="your own measure (package.module:Name, ./file.py:Name or an installed plug-in's name), "
        "erased beside the built-in ones in every chain's curves; repeat for several",
    )
    args = parser.parse_args(argv)
    ray_options = ScaleOptions.from_flags(args.workers, args.ray_address, args.worker_cpus, None)
    if ray_options is not None:
        check_runtime(ray_options)
    scale = SCALES[args.scale]
    folder = f"reproduce-{scale.name}"
    if args.train_precision != "fp32":
        import torch  # only for a reduced precision: the device decides what runs

        chosen = resolve_training_precision(args.train_precision, torch.cuda.is_available())
        if chosen.note:
            print(f"reproduce: note: {chosen.note}", file=sys.stderr)
        scale = replace(scale, train_precision=chosen.used)
    if args.datasets:
        known = [plan.dataset for plan in scale.datasets]
        if unknown := sorted(set(args.datasets) - set(known)):
            parser.error(f"unknown dataset(s) {', '.join(unknown)}; the scale has {', '.join(known)}")
        scale = replace(scale, datasets=tuple(p for p in scale.datasets if p.dataset in args.datasets))
        folder += "-" + "-".join(plan.dataset for plan in scale.datasets)
    if args.seeds:
        if unknown_seeds := sorted(set(args.seeds) - set(scale.seeds)):
            parser.error(f"unknown seed(s) {unknown_seeds}; the scale has {list(scale.seeds)}")
        scale = replace(scale, seeds=tuple(seed for seed in scale.seeds if seed in args.seeds))
        folder += "-seeds-" + "-".join(str(seed) for seed in scale.seeds)
    if scale.train_precision != "fp32":
        folder += f"-train-{scale.train_precision}"
    if args.measure:  # absolute file paths: every chain (and Ray task) finds the file wherever it runs
        scale = replace(scale, measures=tuple(absolute_locator(spec) for spec in args.measure))
    study = Study(scale, args.out or REPO / "bench" / "results" / folder)
    fields = asdict(scale)
    if not fields["measures"]:  # as studies wrote it before --measure: they stay valid
        del fields["measures"]
    if fields["train_precision"] == "fp32":  # as studies wrote it before --train-precision: they stay valid
        del fields["train_precision"]
    # The ROAR steps' settings are in their own run markers (a changed plan redoes or extends them), so a
    # study from before them, or with another ROAR plan, stays this study.
    del fields["roar"]
    settings = json.dumps(fields, indent=2) + "\n"
    settings_file = study.root / "settings.json"
    if settings_file.is_file() and settings_file.read_text() != settings:
        print(
            f"reproduce: {study.root} holds a study with other settings; delete it or pass another --out",
            file=sys.stderr,
        )
        return 2
    roar = not (args.no_roar or args.masf_only)
    chains = study.chains(args.masf_only, roar)
    last = [] if args.masf_only else [study.report_step(roar)]
    steps = [step for chain in chains for step in chain.steps] + last
    if args.dry_run:
        for step in steps:
            print(f"[{step.state()}] {step.name}\n  $ {step.command}")
        return 0
    study.root.mkdir(parents=True, exist_ok=True)
    settings_file.write_text(settings)
    timings = Timings(study.root / TIMINGS_FILE)
    command = "bench/reproduce " + " ".join(sys.argv[1:] if argv is None else argv)
    with Stopwatch() as clock:
        try:
            if ray_options is None:
                run_steps(steps, timings)
            else:
                run_chains(study, chains, args.masf_only, roar, timings, ray_options)
                run_steps(last, timings)
        except StepFailed as error:
            print(f"reproduce: {error}; fix the cause and rerun `{command}` to resume", file=sys.stderr)
            return 1
    path = write_readme(study, command, timings, steps, clock.seconds, args.masf_only)
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
