"""The state of training's epoch loop, and the file that lets an interrupted `fmm-fast train` resume.

After every epoch the loop saves RESUME_FILE in the output directory: the model's and optimizer's state, the
learning-rate schedule, fp16's loss scale, the random generators (dropout, batch order, masking), the best
score so far and run.json as written. A rerun of the same settings then continues from the next epoch, and
ends with the weights an uninterrupted run would have had, bit for bit on the same machine. The file holds
a digest of the tokenized splits and the run's arguments: a run on other data (an edited data file,
Recursive ROAR's next masked copy) starts afresh instead. The file goes once the run finishes.
"""

from __future__ import annotations

import io
import json
import math
import pickle
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fmm_fast.core.datatypes import EncodedSplit
from fmm_fast.core.digest import stream_sha256
from fmm_fast.core.outputs import as_recorded
from fmm_fast.core.writing import write_bytes

RESUME_FILE = "resume.pt"


def splits_digest(encoded: dict[str, EncodedSplit]) -> str:
    """sha256 of every split's token ids and labels: what a resumed run must train and validate on."""

    def chunks() -> Iterator[bytes]:
        for name in sorted(encoded):
            split = encoded[name]
            yield f"{name}:{len(split)}".encode()
            for ids in split.input_ids:
                yield np.asarray(ids, dtype=np.int64).tobytes() + b";"
            yield np.asarray(split.labels, dtype=np.int64).tobytes()

    return stream_sha256(chunks())


@dataclass
class LoopState:
    """What the epoch loop carries from one epoch to the next.

    order_rng, mask_rng: the batch order's and the training masks' generators; torch's global generator
    draws dropout. best_predictions: (N,) int64 unmasked validation predictions of the best epoch so far.
    durations: "training" and "validation" seconds so far, and "total": wall seconds up to the last saved
    epoch (of every invocation).
    """

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    schedule: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler
    order_rng: np.random.Generator
    mask_rng: np.random.Generator
    steps_left: int
    epoch: int = 0  # the last finished epoch
    best_score: float = -math.inf
    best_predictions: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    durations: dict[str, float] = field(default_factory=lambda: {"training": 0.0, "validation": 0.0})

    def save(self, path: Path, record: dict[str, Any], digest: str) -> None:
        """Write the resume file atomically (a kill mid-write leaves the previous epoch's)."""
        saved = {
            "digest": digest,
            "record": json.dumps(record),  # its arguments say which run this is
            "epoch": self.epoch,
            "steps_left": self.steps_left,
            "best_score": self.best_score,
            "best_predictions": torch.from_numpy(self.best_predictions),
            "durations": json.dumps(self.durations),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "schedule": self.schedule.state_dict(),
            "scaler": self.scaler.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "numpy_rngs": json.dumps([self.order_rng.bit_generator.state, self.mask_rng.bit_generator.state]),
        }
        staged = io.BytesIO()  # staged in memory: torch.save's file writer hides a full disk's OS error
        torch.save(saved, staged)
        write_bytes(path, staged.getvalue())

    def restore(self, saved: dict[str, Any]) -> dict[str, Any]:
        """Continue from a resume file's state (read_resume_file); returns run.json as it was written."""
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.schedule.load_state_dict(saved["schedule"])
        self.scaler.load_state_dict(saved["scaler"])
        torch.set_rng_state(saved["torch_rng"])
        if saved["cuda_rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(saved["cuda_rng"])
        self.order_rng.bit_generator.state, self.mask_rng.bit_generator.state = json.loads(
            saved["numpy_rngs"]
        )
        self.epoch = int(saved["epoch"])
        self.steps_left = int(saved["steps_left"])
        self.best_score = float(saved["best_score"])
        self.best_predictions = saved["best_predictions"].numpy()
        self.durations = json.loads(saved["durations"])
        return json.loads(saved["record"])


def read_resume_file(path: Path, digest: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The saved state of an interrupted run on these splits (splits_digest) and arguments, else None: no
    file, one that cannot be read (then the run starts afresh), or one of other data or settings."""
    if not path.is_file():
        return None
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError):  # truncated or foreign: start afresh
        return None
    if not isinstance(saved, dict) or saved.get("digest") != digest:
        return None
    return saved if json.loads(saved["record"]).get("arguments") == as_recorded(arguments) else None
