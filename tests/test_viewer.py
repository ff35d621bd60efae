"""The explanations page: words from sub-word pieces, shared scales, one example per page entry."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from doubles import TEXT, explanation

from fmm_fast.api import load_explanations, save_explanations
from fmm_fast.core.errors import UserError
from fmm_fast.report.pages.examples import group_examples, measure_scales
from fmm_fast.report.pages.explain_page import explanations_page
from fmm_fast.report.pages.scale import render_units, share
from fmm_fast.report.pages.units import Unit, token_units, word_units


def scored(units: list[Unit]) -> list[tuple[str, float]]:
    return [(u.text, round(u.score, 6)) for u in units if u.score is not None]


def test_pieces_merge_into_the_texts_words_with_summed_scores():
    words = word_units(explanation([0.1, 0.2, 0.05, -0.3, 0.0, 0.4]))
    assert "".join(u.text for u in words) == TEXT  # the text as written, whitespace kept
    assert scored(words) == [("ok", 0.1), ("lor,", -0.05), ("see", 0.0), ("you", 0.4)]
    lor = next(u for u in words if u.text == "lor,")
    assert lor.detail == "lor,: -0.05 = lo +0.2 + ##r +0.05 + , -0.3"


def test_token_view_hides_special_tokens_and_leaves_the_second_segment_unscored():
    tokens = token_units(explanation([0.1, 0.2, 0.05, -0.3, 0.0, 0.4]))
    assert [u.text for u in tokens] == ["ok", "lo", "##r", ",", "see", "you", "why", "?"]
    assert [u.score is None for u in tokens[-2:]] == [True, True]


def test_a_word_cut_off_by_truncation_is_shown_unscored():
    cut = explanation([0.1, 0.2, 0.05, -0.3, 0.0, 0.0])
    cut = replace(cut, segments=[*cut.segments[:6], -1, *cut.segments[7:]])  # "you" lost its token
    you = word_units(cut)[-1]
    assert (you.text, you.score) == ("you", None) and "maximum length" in you.detail


def test_without_offsets_the_word_view_falls_back_to_tokens():
    old = explanation([0.1, 0.2, 0.05, -0.3, 0.0, 0.4], offsets=[], segments=[])
    assert [u.text for u in word_units(old)][:3] == ["[CLS]", "ok", "lo"]


def test_scales_are_shared_across_examples_per_measure():
    small = explanation([0.001, 0.0, 0.0, 0.0, 0.0, 0.002])
    large = explanation([0.5, 0.0, 0.0, 0.0, 0.0, -1.0], index=1)
    other = explanation([3.0, 0.0, 0.0, 0.0, 0.0, 6.0], measure="grad-l2", signed=False)
    examples = group_examples([small, large, other])
    scales = measure_scales(examples)
    # the 99th percentile of |word score|: of 0 0 0 0 .001 .002 .5 1 and of 0 0 3 6
    assert scales["loo-sign"].words == pytest.approx(0.965) and scales["grad-l2"].words == pytest.approx(5.91)
    beyond = render_units(examples[1].rows["loo-sign"].words, True, scales["loo-sign"].words, 1.0)
    assert 'class="s n" style="--g:1.000;--x:1.000" title="you: -1"' in beyond  # the outlier: full colour
    assert [e.index for e in examples] == [0, 1] and list(examples[0].rows) == ["loo-sign", "grad-l2"]
    # a message whose words all score about 0.002 stays pale on the page scale, full on its own
    html = render_units(examples[0].rows["loo-sign"].words, True, scales["loo-sign"].words, 0.002)
    assert '--g:0.002;--x:1.000" title="you: +0.002"' in html
    assert share(-0.5, 1.0) == 0.5 and share(1.0, 0.0) == 0.0
    unsigned = render_units(examples[0].rows["grad-l2"].words, False, 6.0, 6.0)
    assert re.findall(r'class="s (\w)"', unsigned) == ["u"] * 4  # unsigned: the sequential palette only


def test_one_page_shows_each_example_once_with_a_row_per_measure():
    explanations = [
        explanation(
            [0.1, 0.2, 0.05, -0.3, 0.0, 0.4], index=i, prediction="spam" if i == 2 else "ham", measure=m
        )
        for i in range(3)
        for m in ("loo-sign", "int-grad-sign")
    ]
    page = explanations_page(explanations, ["model m; sms, test split"])
    assert page.count('<section class="example"') == 3 and page.count('<tr><th scope="row">') == 6
    assert page.count('class="legend"') == 2 and "1 predicted wrongly" in page
    assert "[CLS]" not in page and "model m; sms, test split" in page
    with pytest.raises(UserError, match="explains example 0 twice"):
        group_examples(explanations[:2] * 2)
    with pytest.raises(UserError, match="different texts"):
        group_examples([explanations[0], replace(explanations[1], text="other")])


def test_explanations_round_trip_through_jsonl(tmp_path):
    explanations = [explanation([0.1, 0.2, 0.05, -0.3, 0.0, 0.4], index=i) for i in (1, 0)]
    path = tmp_path / "e.jsonl"
    save_explanations(path, explanations)
    assert load_explanations(path) == sorted(explanations, key=lambda e: e.index)
    path.write_text('{"tokens": []}\n')
    with pytest.raises(UserError, match="line 1 is not an `fmm-fast explain` line"):
        load_explanations(path)
