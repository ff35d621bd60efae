"""`fmm-fast check`'s verdict from its per-ratio points: does the model handle masks (docs/method.md,
"Does the model handle masks?")? Decided from what the weights do on the check's data, nothing else: no
argument here can carry what a model's folder says about its training.

The deciding statistic is the excess NLL at 100% masked (masked fine-tuning drives a fully masked input's
prediction to the label prior; plain fine-tuning can leave it confidently wrong), and "handles masks" also
needs the model's unmasked answers to beat the prior by more than the limit. Both, and the limit, come from
the separation study (bench/check_separation.py, docs/results/check-separation.md): the excess NLL separated
plain from masked models on one data set of three, no other candidate on any, and only with the condition
on the unmasked answers did some limits give no wrong verdict on its 18 models. MaSF's first
out-of-distribution ratio is shown, not used: under either calibration it separated plain from masked
models on no data set.
"""

from __future__ import annotations

from fmm_fast.protocols.masf.statistic import IN_DISTRIBUTION_LEVEL

HANDLES = "handles masks"
DOES_NOT = "does not handle masks"
CANNOT_TELL = "cannot tell on this data"
VERDICTS = (HANDLES, DOES_NOT, CANNOT_TELL)
# Nats of mean excess NLL at 100% masked above which a model answers fully masked inputs more confidently
# wrongly than the label prior does. Measured (docs/results/check-separation.md): the limits at which no model
# of the study got a wrong verdict and the most got a right one ran from 0.08 to 0.265 nats, and a plainly
# fine-tuned MiniLM at 0.093 (95% up to 0.153) narrows that to 0.08-0.15
EXCESS_NLL_LIMIT = 0.1
CONFIDENCE_Z = 1.96  # the two-sided 95% normal interval of the mean excess NLL


def verdict_rule(limit: float) -> str:
    """The verdict rule in words, with `limit` nats of excess NLL."""
    return (
        "does not handle masks when the 95% interval of the mean excess NLL at 100% masked (the gold "
        f"labels' NLL minus the label prior's) lies above {limit} nats; handles masks when it lies at or "
        "below it and the model's unmasked answers beat the label prior by more than that (else an answer "
        "near the prior when masked shows nothing); cannot tell otherwise: the interval straddles the "
        "limit, the model barely beats the prior unmasked, it is no better than the majority baseline "
        "unmasked, or MaSF finds the unmasked test split out of distribution (Holm-corrected p ≤ "
        f"{IN_DISTRIBUTION_LEVEL}); MaSF's first out-of-distribution ratio (Holm across ratios) is shown, "
        "not used"
    )


VERDICT_RULE = verdict_rule(EXCESS_NLL_LIMIT)


def judge(
    points: list[dict],
    metric: str,
    majority: float,
    fix: str,
    limit: float = EXCESS_NLL_LIMIT,
    narrower: str = "give more test examples (--limit)",
) -> dict:
    """The verdict of a check's per-ratio points (each {"ratio", "metrics", "excess_nll", "excess_nll_se",
    "simes_holm"}, rising ratios, 0 and 1 among them) under verdict_rule(limit), in words; majority: the
    class-majority baseline of `metric`; fix: the command that masked-fine-tunes the model; limit: nats of
    excess NLL (another value than the measured EXCESS_NLL_LIMIT only to study the rule,
    bench/check_separation.py); narrower: how to narrow an interval that straddles the limit."""
    out_ratios = [p["ratio"] for p in points if p["simes_holm"] <= IN_DISTRIBUTION_LEVEL]
    first_out = out_ratios[0] if out_ratios else None
    full = points[-1]
    low = full["excess_nll"] - CONFIDENCE_Z * full["excess_nll_se"]
    high = full["excess_nll"] + CONFIDENCE_Z * full["excess_nll_se"]
    found = {
        "rule": verdict_rule(limit),
        "out_ratios": out_ratios,
        "first_out_ratio": first_out,
        "excess_nll_interval": [low, high],
        "fix": None,
    }
    unmasked = points[0]["metrics"][metric]
    loss = f"excess NLL at 100% masked {full['excess_nll']:.3f} nats (95% {low:.3f} to {high:.3f})"
    if not unmasked > majority:
        reason = (
            f"the model is no better than the majority baseline unmasked ({metric} {unmasked:.3f} ≤ "
            f"{majority:.3f}), so masking has no evidence to remove; train it to learn the task first"
        )
        return {**found, "verdict": CANNOT_TELL, "text": f"{CANNOT_TELL}: {reason}"}
    if first_out == 0:
        reason = (
            "MaSF finds the unmasked test split out of distribution against the validation split it "
            "calibrates on, so the two splits differ; check both hold the same kind of data (--dataset and "
            "its options)"
        )
        return {**found, "verdict": CANNOT_TELL, "text": f"{CANNOT_TELL}: {reason}"}
    if low > limit:
        text = (
            f"{DOES_NOT}: fully masked, it answers more confidently wrongly than the label prior ({loss}, "
            f"above {limit}); erasure on it measures its reaction to masks, not the explanation; "
            f"masked fine-tuning fixes it (if it is masked-fine-tuned already, train it longer): {fix}"
        )
        return {**found, "verdict": DOES_NOT, "text": text, "fix": fix}
    gain = -points[0]["excess_nll"]  # nats by which its unmasked answers beat the label prior
    if gain <= limit:
        reason = (
            f"unmasked, its answers beat the label prior by only {gain:.3f} nats (at most {limit}), so a "
            f"fully masked answer near the prior ({loss}) does not show that it learned to fall back to it; "
            "train it to learn the task first, or check it on data it has learned"
        )
        return {**found, "verdict": CANNOT_TELL, "text": f"{CANNOT_TELL}: {reason}"}
    if high <= limit:
        text = (
            f"{HANDLES}: fully masked, it falls back to the label prior ({loss}); erasure measures the "
            "explanation"
        )
        return {**found, "verdict": HANDLES, "text": text}
    reason = f"{loss} straddles {limit}; {narrower}"
    return {**found, "verdict": CANNOT_TELL, "text": f"{CANNOT_TELL}: {reason}"}
