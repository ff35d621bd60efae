"""The captum:ClassName measures against captum called directly on the same model, example by example."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

pytest.importorskip("captum")

import captum.attr
import torch
from doubles import MASK_ID, LookupBackend, TinyBertBackend, interaction_model, random_batch

from fmm_fast.backends.engine import MaskBatchEngine
from fmm_fast.backends.loading import load_model
from fmm_fast.backends.options import BackendOptions
from fmm_fast.cli import main
from fmm_fast.core.datatypes import pad_batch, unpad
from fmm_fast.core.errors import UserError
from fmm_fast.measures import ExplainBatch, get_measure
from fmm_fast.measures.registry import parse_measure_options
from fmm_fast.measures.spec import resolve_measures

SEED = 5
# (name, options): each class with options that are not all its defaults
GRADIENT_CASES = [
    ("IntegratedGradients", {"n_steps": 6, "method": "riemann_trapezoid"}),
    ("DeepLift", {}),
    ("GradientShap", {"n_samples": 4, "stdevs": 0.05}),
    ("Saliency", {}),
    ("InputXGradient", {}),
    ("NoiseTunnel-Saliency", {"nt_samples": 3, "stdevs": 0.1, "nt_type": "smoothgrad_sq"}),
    ("NoiseTunnel-IntegratedGradients", {"nt_samples": 2, "stdevs": 0.1, "n_steps": 4}),
]
PERTURBATION_IDS = ["Occlusion", "FeatureAblation", "ShapleyValueSampling", "KernelShap", "Lime"]
PERTURBATION_CASES = [
    ("Occlusion", {"sliding_window_shapes": 2}),
    ("FeatureAblation", {}),
    ("ShapleyValueSampling", {"n_samples": 3}),
    ("KernelShap", {"n_samples": 12}),
    ("Lime", {"n_samples": 12}),
]


def seed_globals(example_id: int) -> None:
    """The rule the measures promise: torch's and numpy's generators seeded per (seed, example), whatever
    the batch (captum draws from both)."""
    seed = int(np.random.SeedSequence([SEED, example_id]).generate_state(1)[0])
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)


def with_ids(batch: ExplainBatch) -> ExplainBatch:
    batch.example_ids = np.arange(10, 10 + len(batch.input_ids))
    return batch


class BertOnEmbeddings(torch.nn.Module):
    """How a captum user wraps a classifier to attribute over its input embeddings."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, embeddings: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(inputs_embeds=embeddings, attention_mask=attention_mask).logits


def captum_gradients(backend: TinyBertBackend, batch: ExplainBatch, name: str, options: dict) -> np.ndarray:
    """captum directly, per example: IntegratedGradients as LayerIntegratedGradients on the word-embedding
    layer (token ids in, the explained tokens masked as baseline), the others over the embeddings."""
    model = backend.model
    weights = model.get_input_embeddings().weight.detach()
    out = np.zeros(batch.input_ids.shape)
    for row, x in enumerate(unpad(batch.input_ids, batch.attention_mask)):
        explained = batch.explained[row, : len(x)]
        ids = torch.from_numpy(x)[None]
        baseline_ids = torch.from_numpy(np.where(explained, MASK_ID, x))[None]
        ones = torch.ones_like(ids)
        target = int(batch.labels[row])
        seed_globals(int(batch.example_ids[row]))
        if name == "IntegratedGradients":
            explainer = captum.attr.LayerIntegratedGradients(
                lambda i, m: model(input_ids=i, attention_mask=m).logits, model.get_input_embeddings()
            )
            attributions = explainer.attribute(
                ids, baselines=baseline_ids, target=target, additional_forward_args=(ones,), **options
            )
        else:
            tunnel = name.startswith("NoiseTunnel-")
            explainer = getattr(captum.attr, name.removeprefix("NoiseTunnel-"))(BertOnEmbeddings(model))
            explainer = captum.attr.NoiseTunnel(explainer) if tunnel else explainer
            given = {} if "Saliency" in name or "InputX" in name else {"baselines": weights[baseline_ids]}
            attributions = explainer.attribute(
                weights[ids], target=target, additional_forward_args=(ones,), **given, **options
            )
        out[row, : len(x)] = np.where(explained, attributions[0].sum(-1).detach().double().numpy(), 0)
    return out


def keep_forward(score_rows, x: np.ndarray, positions: list[list[int]], mask_id: int = MASK_ID):
    """captum's forward over one keep-feature per entry of `positions` (0 = its tokens masked)."""

    def forward(keep: torch.Tensor) -> torch.Tensor:
        rows = np.repeat(x[None], len(keep), axis=0)
        for feature, tokens in enumerate(positions):
            rows[:, tokens] = np.where(keep[:, feature, None].numpy() == 0, mask_id, rows[:, tokens])
        return score_rows(rows)

    return forward


def captum_perturbations(
    score_rows, batch: ExplainBatch, name: str, options: dict, mask_id: int
) -> np.ndarray:
    """captum directly, per example, one call per perturbation: an input feature per explained token not
    yet masked (1 as it is, baseline 0 masked). score_rows: (K, T) ids -> (K, C) logits tensor."""
    out = np.zeros(batch.input_ids.shape)
    for row, x in enumerate(unpad(batch.input_ids, batch.attention_mask)):
        visible = np.flatnonzero(batch.explained[row, : len(x)] & (x != mask_id))
        if len(visible) == 0:
            continue
        explainer = getattr(captum.attr, name)(keep_forward(score_rows, x, [[t] for t in visible], mask_id))
        given = dict(options)
        if name == "Occlusion":
            given["sliding_window_shapes"] = (min(given.pop("sliding_window_shapes"), len(visible)),)
        seed_globals(int(batch.example_ids[row]))
        attributions = explainer.attribute(
            torch.ones(1, len(visible)), baselines=0.0, target=int(batch.labels[row]), **given
        )
        out[row, visible] = attributions[0].double().numpy()
    return out


@pytest.fixture(autouse=True)
def one_thread(one_torch_thread):
    """Tiny models, one example per captum call: one torch thread is fastest."""


@pytest.fixture(scope="module")
def bert() -> TinyBertBackend:
    return TinyBertBackend(seed=1)


@pytest.fixture(scope="module")
def babi(tiny_babi):
    """The tiny bAbI model on PyTorch and on ONNX, and a batch of its first test examples, some explained
    tokens masked already."""
    from fmm_fast.data.options import DataOptions, open_split

    checkpoint, onnx_path, data = tiny_babi
    on_torch = load_model(checkpoint, BackendOptions(device="cpu"))
    on_onnx = load_model(onnx_path, BackendOptions())
    _, encoded = open_split(on_torch, DataOptions("babi-1", split="test", **data))
    rows = [ids[:12].copy() for ids in encoded.input_ids[:3]]  # short rows: captum calls per example
    explained = [flags[:12] for flags in encoded.explained[:3]]
    rows[1][np.flatnonzero(explained[1])[:2]] = on_torch.info.mask_id
    input_ids, attention_mask = pad_batch(rows, on_torch.info.pad_id)
    flags = np.zeros(input_ids.shape, dtype=bool)
    for row, flag in enumerate(explained):
        flags[row, : len(flag)] = flag
    batch = ExplainBatch(input_ids, attention_mask, encoded.labels[:3], flags, np.array([4, 0, 7]))
    return on_torch.backend, on_onnx.backend, batch


@pytest.mark.parametrize(("name", "options"), GRADIENT_CASES, ids=[name for name, _ in GRADIENT_CASES])
def test_gradient_methods_equal_captum_called_directly(bert, name: str, options: dict) -> None:
    batch = with_ids(random_batch(4, [5, 0, 7, 3], premasked=1))
    measure = get_measure(f"captum:{name}", seed=SEED, **options)
    engine = MaskBatchEngine(bert)
    scores = measure.explain(batch, engine)
    expected = captum_gradients(bert, batch, name, options)
    np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-6 * np.abs(expected).max())
    assert (scores[~batch.explained] == 0).all() and (scores[batch.explained] != 0).mean() > 0.7
    assert measure.needs_gradients and measure.signed == ("Saliency" not in name)
    absolute = get_measure(f"captum:{name}-abs", seed=SEED, **options) if measure.signed else measure
    np.testing.assert_allclose(absolute.explain(batch, engine), np.abs(scores), rtol=1e-6)


def test_random_gradient_methods_draw_per_example(bert) -> None:
    batch = with_ids(random_batch(4, [5, 6, 7], premasked=0))
    measure = get_measure("captum:GradientShap", seed=SEED, n_samples=3, stdevs=0.1)
    together = measure.explain(batch, MaskBatchEngine(bert))
    alone = ExplainBatch(*(a[1:2] for a in (batch.input_ids, batch.attention_mask, batch.labels)),
                         batch.explained[1:2], batch.example_ids[1:2])  # fmt: skip
    np.testing.assert_allclose(measure.explain(alone, MaskBatchEngine(bert))[0], together[1], rtol=1e-6)
    other_seed = get_measure("captum:GradientShap", seed=SEED + 1, n_samples=3, stdevs=0.1)
    assert not np.allclose(other_seed.explain(batch, MaskBatchEngine(bert)), together)


@pytest.mark.parametrize(("name", "options"), PERTURBATION_CASES, ids=PERTURBATION_IDS)
def test_perturbation_methods_equal_captum_on_torch_and_onnx(babi, name: str, options: dict) -> None:
    on_torch, on_onnx, batch = babi

    def on_the_torch_model(rows: np.ndarray) -> torch.Tensor:
        ids = torch.from_numpy(rows)
        with torch.no_grad():
            return on_torch.model(ids, torch.ones_like(ids))[0]

    def on_the_onnx_model(rows: np.ndarray) -> torch.Tensor:  # the session itself, no engine
        return torch.from_numpy(on_onnx.forward(rows, np.ones_like(rows)).logits)

    measure = get_measure(f"captum:{name}", seed=SEED, **options)
    assert not measure.needs_gradients and measure.signed
    for backend, score_rows in [(on_torch, on_the_torch_model), (on_onnx, on_the_onnx_model)]:
        expected = captum_perturbations(score_rows, batch, name, options, backend.info.mask_id)
        engine = MaskBatchEngine(backend)
        scores = measure.explain(batch, engine)
        # float32 logits batched otherwise: a difference of two logits is off by a few of their ulps
        np.testing.assert_allclose(scores, expected, rtol=1e-3, atol=1e-6)
        visible = batch.explained & (batch.input_ids != backend.info.mask_id)
        assert (scores[~visible] == 0).all()
        if name != "Lime":  # its Lasso (alpha 0.01) zeroes the tiny model's 1e-4 effects: see the test below
            assert (scores[visible] != 0).mean() > 0.5
    absolute = get_measure(f"captum:{name}-abs", seed=SEED, **options)
    np.testing.assert_allclose(absolute.explain(batch, engine), np.abs(scores), rtol=1e-6)


@pytest.mark.parametrize("units", [False, True], ids=["tokens", "units"])
@pytest.mark.parametrize(("name", "options"), PERTURBATION_CASES, ids=PERTURBATION_IDS)
def test_perturbation_methods_mask_tokens_or_whole_units(name: str, options: dict, units: bool) -> None:
    """On a model with large effects; erasure units (e.g. words) are one feature each, as captum's
    feature_mask over the tokens makes them (Occlusion's windows and Lime's distances are over units, which
    a feature_mask over tokens does not reproduce)."""
    if units and name in ("Occlusion", "Lime"):
        pytest.skip("a token-level feature_mask is not the same input space")
    backend = LookupBackend(interaction_model(3))
    batch = with_ids(random_batch(6, [6, 5], premasked=0))
    features = np.full(batch.input_ids.shape, -1)
    features[0, 1:7] = [0, 0, 1, 2, 2, 2] if units else range(6)
    features[1, 1:6] = [0, 1, 1, 2, 3] if units else range(5)
    batch.units = features if units else None
    scores = get_measure(f"captum:{name}", seed=SEED, **options).explain(batch, MaskBatchEngine(backend))
    for row, x in enumerate(unpad(batch.input_ids, batch.attention_mask)):
        tokens = np.flatnonzero(batch.explained[row, : len(x)])
        forward = keep_forward(
            lambda rows: torch.from_numpy(np.stack([backend.score(r) for r in rows])),
            x, [[t] for t in tokens],
        )  # fmt: skip
        given = dict(options)
        if name == "Occlusion":
            given["sliding_window_shapes"] = (given["sliding_window_shapes"],)
        else:
            given["feature_mask"] = torch.from_numpy(features[row, tokens])[None]
        seed_globals(int(batch.example_ids[row]))
        expected = getattr(captum.attr, name)(forward).attribute(
            torch.ones(1, len(tokens)), baselines=0.0, target=int(batch.labels[row]), **given
        )
        np.testing.assert_allclose(scores[row, tokens], expected[0].double().numpy(), rtol=1e-5, atol=1e-6)
    assert (scores[batch.explained] != 0).mean() > 0.8
    if units:
        assert len(np.unique(scores[0, 4:7])) == 1 and scores[0, 4] != scores[0, 3]


@pytest.mark.parametrize("name", PERTURBATION_IDS)
def test_rows_with_no_one_or_two_units_left(name: str) -> None:
    """Late erasure steps: no visible unit scores nothing; one unit scores v(M) − v(∅) (captum's KernelShap
    itself fails on one feature); Occlusion's window shrinks to the units left."""
    backend = LookupBackend(interaction_model(5))
    batch = with_ids(random_batch(3, [1, 2, 3, 0], premasked=1))  # 0, 1, 2 and 0 visible tokens
    samples = {"n_samples": 5} if name in ("ShapleyValueSampling", "KernelShap", "Lime") else {}
    scores = get_measure(f"captum:{name}", seed=SEED, **samples).explain(batch, MaskBatchEngine(backend))
    rows = unpad(batch.input_ids, batch.attention_mask)
    assert (scores[[0, 3]] == 0).all()
    (alone,) = np.flatnonzero(batch.explained[1] & (batch.input_ids[1] != MASK_ID))
    masked = rows[1].copy()
    masked[alone] = MASK_ID
    label = batch.labels[1]
    if name != "Lime":  # Lime's Lasso shrinks it
        assert scores[1, alone] == pytest.approx(backend.score(rows[1])[label] - backend.score(masked)[label])
    assert (scores[1] != 0).sum() == 1
    if name == "Occlusion":  # the 3-wide window covers both units left
        pair = np.flatnonzero(batch.explained[2] & (batch.input_ids[2] != MASK_ID))
        assert scores[2, pair[0]] == scores[2, pair[1]] != 0


def test_options_are_typed_and_checked() -> None:
    # the text of --measure-option becomes each option's type when a measure that takes it is made
    given = parse_measure_options(["stdevs=0.25", "nt_type=vargrad", "n_steps=8"])
    assert given == {"stdevs": "0.25", "nt_type": "vargrad", "n_steps": "8"}
    specs = resolve_measures(["captum:NoiseTunnel-Saliency", "captum:IntegratedGradients"], given)
    assert specs[1].options == {"stdevs": 0.25, "nt_type": "vargrad"}  # n_steps is not Saliency's
    assert specs[2].options == {"n_steps": 8}
    for name, pair, named in [
        ("captum:NoiseTunnel-Saliency", "stdevs=-1", "stdevs must be a number >= 0"),
        ("captum:IntegratedGradients", "n_steps=0", "n_steps must be an integer >= 1"),
        ("captum:IntegratedGradients", "method=simpson", "method must be one of gausslegendre"),
    ]:
        with pytest.raises(UserError, match=named):
            resolve_measures([name], parse_measure_options([pair]))
    with pytest.raises(UserError, match=r"n_samples: none of the measures chosen \(rand, captum:Saliency\)"):
        resolve_measures(["captum:Saliency"], {"n_samples": 3})
    # an option one measure of the run takes is fine for the run
    resolve_measures(["captum:Saliency", "captum:KernelShap"], {"n_samples": 3})
    for name, named in [
        ("captum:Nope", "unknown Captum measure 'captum:Nope'; valid: captum:IntegratedGradients"),
        ("captum:NoiseTunnel-Lime", "unknown Captum measure"),
        ("captum:Saliency-abs", "already takes the gradient's absolute value; write captum:Saliency"),
    ]:
        with pytest.raises(UserError, match=named):
            get_measure(name)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--measure", "captum:Nope"], "unknown Captum measure 'captum:Nope'"),
        (["--measure", "captum:Lime", "--measure-option", "n_steps=5"], "n_steps: none of the measures"),
        (["--measure", "captum:Lime", "--measure-option", "n_samples=x"], "n_samples of captum:Lime must be"),
    ],
)
def test_bad_names_and_options_exit_2_with_one_line(tiny_babi, tmp_path, capfd, flags, expected) -> None:
    _, onnx_path, data = tiny_babi
    argv = ["evaluate", "--model", str(onnx_path), "--dataset", "babi-1", "--size", str(data["size"])]
    assert main([*argv, *flags, "--out", str(tmp_path / "out")]) == 2
    err = capfd.readouterr().err
    assert len(err.splitlines()) == 1 and expected in err, err
    assert not (tmp_path / "out").exists()


def test_missing_captum_is_one_line_naming_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "captum", None)  # what an install without captum imports
    with pytest.raises(UserError, match=r"""no module 'captum'\); pip install "fmm-fast\[captum\]\""""):
        get_measure("captum:KernelShap")


def test_evaluate_erases_recursively_with_a_captum_measure(
    tiny_babi, tmp_path, one_torch_thread, monkeypatch
) -> None:
    import fmm_fast
    from fmm_fast.measures.captum_methods import CaptumMeasure

    masks_per_call = []  # the mask tokens of every batch the measure explains: one per erasure step
    explain = CaptumMeasure.explain

    def counting(self, batch, engine):
        masks_per_call.append((batch.input_ids == engine.info.mask_id).sum())
        return explain(self, batch, engine)

    monkeypatch.setattr(CaptumMeasure, "explain", counting)
    _, onnx_path, data = tiny_babi
    result = fmm_fast.evaluate(
        onnx_path, dataset="babi-1", **data, measure="captum:KernelShap", measure_option={"n_samples": 20},
        limit=2, quiet=True, out=tmp_path,
    )  # fmt: skip
    record = json.loads((tmp_path / "seed-0" / "result.json").read_text())
    assert list(record["measures"]) == ["rand", "captum:KernelShap"] and result.path == tmp_path
    assert record["measures"]["captum:KernelShap"]["signed"] is True
    assert record["arguments"]["measure_options"] == {"n_samples": 20}
    # re-explained on the masked input at every step: ever more mask tokens
    assert len(masks_per_call) >= 9
    assert masks_per_call == sorted(masks_per_call) and masks_per_call[-1] > masks_per_call[0]
