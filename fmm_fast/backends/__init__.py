"""Backends: PyTorch and ONNX Runtime behind one protocol (see base.py)."""

from fmm_fast.backends.base import Backend, ForwardOutput, GradientBackend

__all__ = ["Backend", "ForwardOutput", "GradientBackend"]
