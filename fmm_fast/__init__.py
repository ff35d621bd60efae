"""fmm-fast: fast faithfulness evaluation of NLP explanations (see README.md)."""

__version__ = "0.1.0"
