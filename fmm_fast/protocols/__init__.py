"""Evaluation protocols: recursive erasure, peer metrics (AOPC), MaSF and plausibility."""
